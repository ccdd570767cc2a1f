#!/usr/bin/env bash
# Generation under load (issue 15): 16 closed-loop streams, 128 prompt /
# 128 output tokens, on the TinyLlama-1.1B shape in BF16 with 2 threads,
# then batch 1. Starts inferd with the given extra flags, runs inferd-bench,
# keeps the JSON reports and the server's /metrics after the runs, and
# prints one summary line per run (output tok/s, TTFT p50/p99, TPOT p50,
# ITL p99, longest gap per request p99, engine steps) with the load average.
#
# usage: bench/load/decode_stall_runs.sh BUILD_DIR OUT_DIR SECONDS [inferd flags...]
#   e.g. ... build /tmp/after 60
#        ... build /tmp/before 60 --max-prefill-tokens-while-decoding 0 --overlap-output false
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:?usage: $0 BUILD_DIR OUT_DIR SECONDS [inferd flags...]}"
out="${2:?}"
secs="${3:?}"
shift 3
bench="$build/bench/inferd-bench"
model="$build/bench_models/tinyllama"
mkdir -p "$out"
[[ -f "$model/config.json" ]] ||
  /usr/bin/python3 "$root/tools/make_test_models.py" --out "$build/bench_models" \
    --shape tinyllama >/dev/null

# shellcheck source=bench/load/inferd_server.sh
source "$root/bench/load/inferd_server.sh"
trap inferd_stop EXIT
inferd_start "$out/inferd.log" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --threads 2 --kv-cache-memory 2GiB \
  --model "tinyllama=$model,dtype=bfloat16" "$@"
port="$INFERD_PORT"
mport="$INFERD_METRICS_PORT"

run() {
  local name="$1"; shift
  local load
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$bench" --address "127.0.0.1:$port" --rpc generate --model tinyllama \
    --json "$out/$name.json" --label "load $load" "$@" > "$out/$name.txt"
  /usr/bin/python3 - "$out/$name.json" "$load" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_ms"]
print(f"{sys.argv[3]}: out {r['throughput']['output_tokens_per_s']:.1f} tok/s, "
      f"TTFT p50/p99 {l['ttft']['p50']:.0f}/{l['ttft']['p99']:.0f} ms, "
      f"TPOT p50 {l['tpot']['p50']:.0f} ms, ITL p50/p99 {l['itl']['p50']:.0f}/"
      f"{l['itl']['p99']:.0f} ms, longest gap p50/p99/max "
      f"{l['itl_max']['p50']:.0f}/{l['itl_max']['p99']:.0f}/{l['itl_max']['max']:.0f} ms, "
      f"{r['requests']['completed']} requests [load {sys.argv[2]}]")
PY
}

run c16 --concurrency 16 --duration "$secs" --warmup 16 \
  --input-len fixed:128 --output-len fixed:128
run c1 --concurrency 1 --requests 4 --warmup 1 \
  --input-len fixed:128 --output-len fixed:128
if [[ -n "$mport" ]]; then
  curl -s "http://127.0.0.1:$mport/metrics" > "$out/metrics.txt" || true
  grep -E '^inferd_iteration_(duration_seconds|prefill_tokens|decode_tokens)_(sum|count)' \
    "$out/metrics.txt" || true
fi
