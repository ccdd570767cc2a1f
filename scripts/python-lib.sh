# Shared by scripts/python-deps.sh and bench/compare/venv_lib.sh (source it;
# bash).

# venv_python TOOL: prints the first python3 on PATH that can make a venv
# with pip (has venv and ensurepip: the pyenv one on CI machines; Debian's
# needs python3-venv). Without one, says so on stderr, prefixed with TOOL,
# and returns 1.
venv_python() {
  local tool="$1" cand
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c "import venv, ensurepip" >/dev/null 2>&1; then
      command -v "$cand"
      return 0
    fi
  done
  echo "$tool: no python3 with venv and ensurepip on PATH;" \
       "install python3-venv (apt) or a python.org/pyenv Python" >&2
  return 1
}
