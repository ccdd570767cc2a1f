# Shared by the bench/compare setup scripts (source it; bash). For benchmarks
# only: never used by inferd, its tests or CI.

# A short hash of this machine's CPU model and flags: artifacts compiled with
# -march=native are kept per CPU and never reused on another one.
bench_cpu_key() {
  (grep -m1 'model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo) |
    sha256sum | cut -c1-12
}

# bench_make_venv TOOL VENV WHEELS CONSTRAINTS MODE WANT...
# (Re)creates VENV and installs the WANT requirements (under CONSTRAINTS)
# offline from the wheel directory WHEELS; when that fails, fills WHEELS
# first: MODE "download" fetches the wheels from PyPI, MODE "build" builds
# them from source (pip wheel; CMAKE_ARGS / CMAKE_BUILD_PARALLEL_LEVEL pass
# through). Messages go to stderr, prefixed with TOOL.
bench_make_venv() {
  local tool="$1" venv="$2" wheels="$3" constraints="$4" mode="$5"
  shift 5
  local py="" cand
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 &&
       "$cand" -c "import venv, ensurepip" >/dev/null 2>&1; then
      py="$(command -v "$cand")"
      break
    fi
  done
  [[ -n "$py" ]] || { echo "$tool: no python3 with venv" >&2; return 1; }
  rm -rf "$venv"
  "$py" -m venv "$venv" >&2
  mkdir -p "$wheels"
  if ! "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" \
       -c "$constraints" "$@" >&2 2>/dev/null; then
    if [[ "$mode" == build ]]; then
      echo "$tool: building $* into $wheels" >&2
      "$venv/bin/python" -m pip wheel --wheel-dir "$wheels" -c "$constraints" \
        --no-cache-dir "$@" >&2
    else
      echo "$tool: downloading $* into $wheels" >&2
      "$venv/bin/python" -m pip download --quiet --dest "$wheels" -c "$constraints" "$@" >&2
    fi
    "$venv/bin/python" -m pip install --quiet --no-index --find-links "$wheels" \
      -c "$constraints" "$@" >&2
  fi
}
