#!/bin/bash
# Embedding throughput with tokenization on the gRPC threads
# (--tokenization-workers 0) against the engine's own worker (auto), with
# real texts (bench/load/english_texts.txt, 90 to 170 words each) so the
# server tokenizes every input. Usage:
#   bench/load/tokenization_workers.sh BUILD_DIR MODEL_DIR [SECONDS]
set -euo pipefail
build=${1:?build dir}; model=${2:?model dir}; secs=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/load/inferd_server.sh
source "$here/inferd_server.sh"
trap inferd_stop EXIT
for workers in 0 auto 0 auto; do
  log=$(mktemp)
  inferd_start "$log" --listen 127.0.0.1:0 --model "m=$model" \
      --tokenization-workers "$workers"
  port="$INFERD_PORT"
  echo "--tokenization-workers $workers"
  "$build/bench/inferd-bench" --address "127.0.0.1:$port" --rpc embed-batch \
      --model m --concurrency 8 --batch-size 16 --duration "$secs" \
      --warmup 8 --prompts-file "$here/english_texts.txt" | sed -n 2,6p
  inferd_stop; rm -f "$log"
done
