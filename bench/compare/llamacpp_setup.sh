#!/usr/bin/env bash
# Creates $BUILD_DIR/bench-venv (default build/bench-venv) with llama.cpp's
# Python bindings (llama-cpp-python, which builds llama.cpp from source with
# cmake) plus gguf and numpy, for bench/compare/gguf_vs_llamacpp.py. For
# benchmarks only: never used by inferd, its tests or CI.
#
# llama.cpp is compiled for this machine's CPU (GGML_NATIVE=ON) with 2 build
# jobs; it takes 10-20 minutes on 2 cores. The built wheel and every
# dependency wheel are kept in build/bench-wheels/<cpu key>, so later runs
# install offline in seconds. The cpu key is a hash of the CPU model and
# flags: a wheel built with -march=native is not reused on another CPU.
# Idempotent. Prints the venv's python path on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
# shellcheck source=bench/compare/venv_lib.sh
source "$root/bench/compare/venv_lib.sh"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
# gguf and numpy pinned as in the test venv.
constraints="$root/scripts/python-requirements.txt"
venv="$build/bench-venv"
cpu_key="$(bench_cpu_key)"
wheels="$build/bench-wheels/$cpu_key"
want="llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION gguf numpy"
stamp_val="$LLAMA_CPP_PYTHON_VERSION $cpu_key $(sha256sum "$constraints" | cut -c1-16)"
stamp="$venv/.inferd-bench-stamp"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$stamp_val" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

command -v cmake >/dev/null || { echo "llamacpp_setup: cmake is needed" >&2; exit 1; }
CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release}" \
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  bench_make_venv llamacpp_setup "$venv" "$wheels" "$constraints" build $want
"$venv/bin/python" -c "import llama_cpp, gguf, numpy" >&2
echo "$stamp_val" > "$stamp"
echo "$venv/bin/python"
