# Shared by the bench/compare scripts (source it; bash). For benchmarks
# only: never used by inferd, its tests or CI.

# shellcheck source=scripts/python-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/python-lib.sh"

# bench_args ROOT [BUILD_DIR] [--] [OPTIONS...]: the arguments of a
# bench/compare entry script. Sets build (BUILD_DIR made absolute; default
# ROOT/build) and bench_opts (the options for its Python script).
bench_args() {
  local root="$1"
  shift
  build="$(cd "${1:-$root/build}" && pwd)"
  shift || true
  [[ "${1:-}" == "--" ]] && shift
  bench_opts=("$@")
}

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
  local py
  py="$(venv_python "$tool")" || return 1
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
