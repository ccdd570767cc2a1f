#!/usr/bin/env bash
# Builds llama.cpp's HTTP server (llama-server, the C++ one with continuous
# batching over --parallel slots) for bench/compare/llm_load_vs_llamaserver.py,
# and its llama-quantize (the tool GGUF users make Q4_K_M etc. files with;
# bench/compare/make_quantized.sh). For benchmarks only: never used by inferd,
# its tests or CI.
#
# The source is the llama.cpp tree vendored in the llama-cpp-python sdist from
# PyPI (the same pinned version as llamacpp_setup.sh, so both benchmarks run
# the same llama.cpp), downloaded once into $BUILD_DIR/bench-sdist. Compiled
# for this machine's CPU (GGML_NATIVE=ON, OpenMP) with 2 jobs: ~10 minutes on
# 2 cores. The binary lands in $BUILD_DIR/bench-llamaserver/<cpu key>/bin, keyed
# like llamacpp_setup.sh's wheels (a -march=native binary is not reused on
# another CPU). Idempotent; prints the binary's path on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
# shellcheck source=bench/compare/venv_lib.sh
source "$root/bench/compare/venv_lib.sh"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cpu_key="$(bench_cpu_key)"
out="$build/bench-llamaserver/$cpu_key"
bin="$out/bin/llama-server"
if [[ -x "$bin" && -x "$out/bin/llama-quantize" && -x "$out/bin/llama-bench" && -f "$out/.version" &&
      "$(cat "$out/.version")" == "$version" ]]; then
  echo "$bin"
  exit 0
fi
command -v cmake >/dev/null || { echo "llamaserver_setup: cmake is needed" >&2; exit 1; }

sdist_dir="$build/bench-sdist"
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"
if [[ ! -f "$sdist" ]]; then
  mkdir -p "$sdist_dir"
  py=""
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -m pip --version >/dev/null 2>&1; then
      py="$cand"; break
    fi
  done
  [[ -n "$py" ]] || { echo "llamaserver_setup: no python3 with pip" >&2; exit 1; }
  "$py" -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$version" -d "$sdist_dir" >&2
fi

src="$out/src"
rm -rf "$src" "$out/build"
mkdir -p "$src"
tar xzf "$sdist" -C "$src" --strip-components=3 \
  "llama_cpp_python-$version/vendor/llama.cpp"
echo "llamaserver_setup: building llama-server (llama-cpp-python $version's" \
     "llama.cpp, native CPU, 2 jobs)" >&2
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DGGML_OPENMP=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$out/build" --target llama-server llama-quantize llama-bench \
  -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >&2
mkdir -p "$out/bin"
cp "$out/build/bin/llama-server" "$out/build/bin/llama-quantize" "$out/build/bin/llama-bench" "$out/bin/"
for b in llama-server llama-quantize llama-bench; do
  [[ -x "$out/bin/$b" ]] || { echo "llamaserver_setup: $b was not built" >&2; exit 1; }
done
rm -rf "$src" "$out/build"
echo "$version" > "$out/.version"
echo "$bin"
