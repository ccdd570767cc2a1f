#!/usr/bin/env bash
# inferd vs ONNX Runtime embeddings/s on the real all-MiniLM-L6-v2 (see
# embed_vs_onnxruntime.py). Usage:
#   bench/compare/embed_vs_onnxruntime.sh [BUILD_DIR] [-- embed_vs_onnxruntime.py options]
# Makes (once) the ONNX Runtime venv and fetches the model if missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=bench/compare/venv_lib.sh
source "$root/bench/compare/venv_lib.sh"
bench_args "$root" "$@"
py="$(BUILD_DIR="$build" "$root/bench/compare/onnxruntime_setup.sh" | tail -n1)"
if [[ ! -f "$build/models/all-minilm-l6-v2/model.safetensors" ]]; then
  BUILD_DIR="$build" "$root/scripts/fetch-models.sh" all-minilm-l6-v2
fi
exec "$py" "$root/bench/compare/embed_vs_onnxruntime.py" --build "$build" "${bench_opts[@]}"
