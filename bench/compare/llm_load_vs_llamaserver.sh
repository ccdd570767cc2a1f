#!/usr/bin/env bash
# inferd vs llama-server under a 16-stream closed-loop generation load on the
# same GGUF (see llm_load_vs_llamaserver.py). Usage:
#   bench/compare/llm_load_vs_llamaserver.sh [BUILD_DIR] [-- llm_load_vs_llamaserver.py options]
# Builds (once) llama-server and the bench venv (gguf, numpy; the TinyLlama-
# shape GGUFs are written by gguf_vs_llamacpp.py --make-models-only).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=bench/compare/venv_lib.sh
source "$root/bench/compare/venv_lib.sh"
bench_args "$root" "$@"
server="$(BUILD_DIR="$build" "$root/bench/compare/llamaserver_setup.sh" | tail -n1)"
py="$(BUILD_DIR="$build" "$root/bench/compare/llamacpp_setup.sh" | tail -n1)"
if [[ ! -f "$build/bench-compare/tinyllama-shape-f16.gguf" ]]; then
  "$py" "$root/bench/compare/gguf_vs_llamacpp.py" --make-models-only --models f16 \
    --model-dir "$build/bench-compare" --inferd "$build/service/inferd" \
    --stubs "$build/python"
fi
for t in service/inferd bench/inferd-bench bench/inferd_kernels_bench; do
  [[ -x "$build/$t" ]] || { echo "missing $build/$t: build it first" >&2; exit 1; }
done
exec "$py" "$root/bench/compare/llm_load_vs_llamaserver.py" --build "$build" \
  --llama-server "$server" "${bench_opts[@]}"
