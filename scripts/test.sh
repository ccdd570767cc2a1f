#!/usr/bin/env bash
# Command 2: install deps, build, run every test tier (unit, integration,
# model) through ctest. Exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j"${CTEST_JOBS:-2}" --timeout 900 "$@"
