#!/bin/bash
# Embedding throughput with tokenization on the gRPC threads
# (--tokenization-workers 0) against the engine's own worker (auto), with
# real texts (bench/load/english_texts.txt, 90 to 170 words each) so the
# server tokenizes every input. Usage:
#   bench/load/tokenization_workers.sh BUILD_DIR MODEL_DIR [SECONDS]
set -euo pipefail
build=${1:?build dir}; model=${2:?model dir}; secs=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
for workers in 0 auto 0 auto; do
  log=$(mktemp)
  "$build/service/inferd" --listen 127.0.0.1:0 --model "m=$model" \
      --tokenization-workers "$workers" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -q "serving" "$log" && break; sleep 0.1; done
  port=$(grep -o "(port [0-9]*)" "$log" | grep -o "[0-9]*")
  echo "--tokenization-workers $workers"
  "$build/bench/inferd-bench" --address "127.0.0.1:$port" --rpc embed-batch \
      --model m --concurrency 8 --batch-size 16 --duration "$secs" \
      --warmup 8 --prompts-file "$here/english_texts.txt" | sed -n 2,6p
  kill -TERM "$pid"; wait "$pid" || true; rm -f "$log"
done
