#!/usr/bin/env bash
# Reproduces the "Load generator" reference runs of bench/README.md: starts
# inferd with a MiniLM-L6-shaped random encoder, stories260K (when present)
# and llama-tiny, runs inferd-bench for each scenario, keeps every JSON
# report in OUT_DIR and prints one Markdown table row per run with the
# machine's load average at its start.
#
# usage: bench/load/reference_runs.sh BUILD_DIR [OUT_DIR] [SECONDS]
#   BUILD_DIR  a build with targets inferd and inferd-bench
#   SECONDS    duration of each timed run (default 15)
#   RUNS=REGEX (environment) runs only the scenarios whose name matches.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:?usage: $0 BUILD_DIR [OUT_DIR] [SECONDS]}"
out="${2:-$build/load_runs}"
secs="${3:-15}"
bench="$build/bench/inferd-bench"
models="$build/bench_models"
tiny="$build/test_models"
stories="$root/../shared/models/stories260K"
mkdir -p "$out"

/usr/bin/python3 "$root/tools/make_test_models.py" --out "$models" \
  --shape minilm-l6 >/dev/null
/usr/bin/python3 "$root/tools/make_test_models.py" --out "$tiny" \
  --only llama-tiny >/dev/null

args=(--listen 127.0.0.1:0 --model "minilm=$models/minilm-l6"
      --model "llama-tiny=$tiny/llama-tiny")
if [[ -f "$stories/config.json" ]]; then
  args+=(--model "stories=$stories")
else
  echo "note: $stories absent; the Generate runs are skipped" >&2
fi
# shellcheck source=bench/load/inferd_server.sh
source "$root/bench/load/inferd_server.sh"
trap inferd_stop EXIT
inferd_start "$out/inferd.log" "${args[@]}"
addr="127.0.0.1:$INFERD_PORT"

# run NAME inferd-bench-flags...: one run, its JSON in $out/NAME.json.
run() {
  local name="$1"; shift
  [[ "$name" =~ ${RUNS:-.} ]] || return 0
  local load
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$bench" --address "$addr" --json "$out/$name.json" --label "load $load" "$@" \
    > "$out/$name.txt"
  echo "$name: $*  [load $load]" >&2
}

for c in 1 8 64; do
  run "embed-batch-c$c" --rpc embed-batch --model minilm --concurrency "$c" \
    --duration "$secs" --warmup "$c" --input-len fixed:128
  run "embed-stream-c$c" --rpc embed-stream --model minilm --concurrency "$c" \
    --duration "$secs" --warmup "$c" --input-len fixed:128
done
run "embed-batch32-c8" --rpc embed-batch --model minilm --concurrency 8 \
  --batch-size 32 --duration "$secs" --warmup 8 --input-len fixed:128
if [[ -f "$stories/config.json" ]]; then
  for c in 1 16; do
    run "generate-stories-c$c" --rpc generate --model stories \
      --concurrency "$c" --duration "$secs" --warmup "$c" \
      --input-len uniform:16:64 --output-len fixed:128
  done
fi
# Prefix caching: a shared 1,000-token system prompt + 64 own tokens, with
# the server's prefix cache and without it (the same prompts), vs 1,064
# tokens with nothing shared (llama-tiny: 2,048-token context).
prefix=(--rpc generate --model llama-tiny --concurrency 4 --requests 200
        --warmup 4 --output-len fixed:16)
run "prefix-shared" "${prefix[@]}" --shared-prefix 1000 --input-len fixed:64
run "prefix-shared-nocache" "${prefix[@]}" --shared-prefix 1000 \
  --input-len fixed:64 --disable-prefix-cache
run "prefix-none" "${prefix[@]}" --input-len fixed:1064

/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, sys
print("| run | conc. | req/s | emb/s | in tok/s | out tok/s | cached in | "
      "e2e p50/p99 ms | TTFT p50/p99 ms | TPOT p50 ms | ITL p50/p99 ms | load |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
paths = sorted(glob.glob(os.path.join(sys.argv[1], "*.json")),
               key=os.path.getmtime)
for path in paths:
    r = json.load(open(path))
    c, t, l = r["config"], r["throughput"], r["latency_ms"]
    gen = c["rpc"] == "generate"

    def pp(m):
        return "%.1f / %.1f" % (l[m]["p50"], l[m]["p99"]) if m in l else "-"

    cells = [os.path.basename(path)[:-5], str(c["concurrency"]),
             "%.1f" % t["requests_per_s"],
             "-" if gen else "%.0f" % t["embeddings_per_s"],
             "%.0f" % t["input_tokens_per_s"],
             "%.0f" % t["output_tokens_per_s"] if gen else "-",
             str(r["tokens"]["cached_input"]) if gen else "-",
             pp("e2e"), pp("ttft"),
             "%.2f" % l["tpot"]["p50"] if gen else "-", pp("itl"),
             c["label"].replace("load ", "")]
    print("| " + " | ".join(cells) + " |")
PY
