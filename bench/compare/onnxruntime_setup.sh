#!/usr/bin/env bash
# Creates $BUILD_DIR/ort-venv (default build/ort-venv) with ONNX Runtime,
# the onnx package (graph building for tools/export_onnx.py) and numpy, for
# bench/compare/embed_vs_onnxruntime.py. For benchmarks only: never used by
# inferd, its tests or CI.
#
# Pinned versions; the wheels are kept in build/bench-wheels/ort, so later
# runs install offline in seconds. Idempotent. Prints the venv's python
# path on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
# shellcheck source=bench/compare/venv_lib.sh
source "$root/bench/compare/venv_lib.sh"
ONNXRUNTIME_VERSION="${ONNXRUNTIME_VERSION:-1.32.0}"
ONNX_VERSION="${ONNX_VERSION:-1.23.2}"
# numpy pinned as in the test venv.
constraints="$root/scripts/python-requirements.txt"
venv="$build/ort-venv"
wheels="$build/bench-wheels/ort"
want="onnxruntime==$ONNXRUNTIME_VERSION onnx==$ONNX_VERSION numpy"
stamp_val="$ONNXRUNTIME_VERSION $ONNX_VERSION $(sha256sum "$constraints" | cut -c1-16)"
stamp="$venv/.inferd-bench-stamp"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$stamp_val" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

# shellcheck disable=SC2086
bench_make_venv onnxruntime_setup "$venv" "$wheels" "$constraints" download $want
"$venv/bin/python" -c "import onnxruntime, onnx, numpy" >&2
echo "$stamp_val" > "$stamp"
echo "$venv/bin/python"
