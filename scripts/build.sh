#!/usr/bin/env bash
# Configures and builds inferd (Release, Ninja) into build/ (or $BUILD_DIR);
# BUILD_TARGETS picks targets (e.g. "inferd"), else everything.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
# BUILD_TARGETS: space-separated targets (default: all).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
targets=()
for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
