#!/usr/bin/env bash
# Runs every `buf curl` command of docs/curl.md (and README.md, if it has
# any), and every plain `curl` command of docs/http-api.md (the OpenAI HTTP
# API, with --fail-with-body so an HTTP error fails it), against a fresh
# inferd on ephemeral loopback ports, loaded with the models
# scripts/serve.sh serves. Fails when a command exits non-zero or prints
# nothing. Commands may span lines with trailing backslashes.
#
# usage: scripts/check-readme-curl.sh INFERD_BINARY TEST_MODELS_DIR REAL_MODELS_DIR
#   TEST_MODELS_DIR holds the generated models (tools/make_test_models.py),
#   REAL_MODELS_DIR the fetched ones (scripts/fetch-models.sh);
#   stories260K comes from examples/models.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage="usage: $0 INFERD_BINARY TEST_MODELS_DIR REAL_MODELS_DIR"
inferd="${1:?$usage}"
models="${2:?$usage}"
real="${3:?$usage}"
buf="${BUF:-$root/tools/npm/node_modules/.bin/buf}"
# CURL_DOCS (space-separated paths) replaces the default pages.
if [[ -n "${CURL_DOCS:-}" ]]; then
  read -r -a docs <<< "$CURL_DOCS"
else
  docs=("$root/docs/curl.md")
  [[ -f "$root/README.md" ]] && docs+=("$root/README.md")
fi

[[ -x "$buf" ]] || { echo "buf not found at $buf (npm ci --prefix tools/npm)"; exit 1; }

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# extract_commands PREFIX FILE...: the lines starting with PREFIX ("buf
# curl" or "curl"; after an optional `$ ` prompt, and `$buf curl` counts as
# buf curl), joined with their backslash continuations, one per line.
extract_commands() {
  local prefix="$1"
  shift
  awk -v prefix="$prefix " '
    function flush() { if (cmd != "") print cmd; cmd = ""; cont = 0 }
    {
      line = $0
      if (!cont) {
        sub(/^[ \t]*(\$ )?/, "", line)
        # buf may be spelled through a variable: $buf, ${buf}, "$buf".
        sub(/^("\$buf"|"\$\{buf\}"|\$buf|\$\{buf\}) curl /, "buf curl ", line)
        if (index(line, prefix) != 1) next
        cmd = ""
      } else {
        sub(/^[ \t]+/, "", line)
      }
      if (line ~ /\\$/) { sub(/[ \t]*\\$/, " ", line); cmd = cmd line; cont = 1 }
      else { cmd = cmd line; flush() }
    }
    END { flush() }' "$@"
}

# HTTP_CURL_DOCS (space-separated paths) replaces the default HTTP pages.
if [[ -n "${HTTP_CURL_DOCS:-}" ]]; then
  read -r -a http_docs <<< "$HTTP_CURL_DOCS"
else
  http_docs=("$root/docs/http-api.md")
fi
extract_commands "buf curl" "${docs[@]}" > "$work/commands"
extract_commands "curl" "${http_docs[@]}" > "$work/http_commands"
total=$(wc -l < "$work/commands")
if (( total == 0 )); then
  echo "FAIL: no buf curl command found in ${docs[*]}"
  exit 1
fi
http_total=$(wc -l < "$work/http_commands")
if (( http_total == 0 )); then
  echo "FAIL: no curl command found in ${http_docs[*]}"
  exit 1
fi

# The models scripts/serve.sh serves, under the same names.
args=(--listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0
      --model "stories=$root/examples/models/stories260K")
[[ -f "$real/all-minilm-l6-v2/config.json" ]] ||
  { echo "FAIL: $real/all-minilm-l6-v2 missing (scripts/fetch-models.sh)"; exit 1; }
args+=(--model "minilm=$real/all-minilm-l6-v2")
smollm2="$real/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
[[ -f "$smollm2" ]] || { echo "FAIL: $smollm2 missing (scripts/fetch-models.sh)"; exit 1; }
args+=(--model "smollm2=$smollm2")
for pair in reranker-random:xlmr-reranker classifier-random:bert-classifier \
            m3-random:bge-m3; do
  m="${pair#*:}"
  [[ -f "$models/$m/config.json" ]] || { echo "FAIL: $models/$m missing"; exit 1; }
  args+=(--model "${pair%%:*}=$models/$m")
done

"$inferd" "${args[@]}" > "$work/inferd.log" 2>&1 &
server_pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$work/inferd.log" | head -n1)"
  [[ -n "$port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/inferd.log"; echo "FAIL: inferd exited"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$work/inferd.log"; echo "FAIL: no port"; exit 1; }
address="127.0.0.1:$port"
http_port=""
for _ in $(seq 1 600); do
  http_port="$(sed -n 's/.*(http port \([0-9]*\)).*/\1/p' "$work/inferd.log" | head -n1)"
  [[ -n "$http_port" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/inferd.log"; echo "FAIL: inferd exited"; exit 1; }
  sleep 0.1
done
[[ -n "$http_port" ]] || { cat "$work/inferd.log"; echo "FAIL: no http port"; exit 1; }
http_address="127.0.0.1:$http_port"
serving=0
for _ in $(seq 1 240); do
  if "$buf" curl --protocol grpc --http2-prior-knowledge --data '{}' \
      "http://$address/grpc.health.v1.Health/Check" 2>/dev/null | grep -q '"SERVING"'; then
    serving=1
    break
  fi
  sleep 0.5
done
(( serving )) || { cat "$work/inferd.log"; echo "FAIL: never SERVING"; exit 1; }
echo "inferd serving on $address; running $total command(s)"

failed=0 ran=0 n=0
while IFS= read -r cmd; do
  n=$((n + 1))
  # Point the documented address at the test server and `buf` at the binary.
  run="${cmd//127.0.0.1:50051/$address}"
  run="${run//localhost:50051/$address}"
  run="\"\$BUF_BIN\"${run#buf}"
  ran=$((ran + 1))
  if BUF_BIN="$buf" bash -c "$run" > "$work/out" 2> "$work/err" < /dev/null; then
    if [[ -s "$work/out" ]]; then
      echo "[$n] ok ($(wc -c < "$work/out") bytes): ${cmd:0:100}"
    else
      echo "[$n] FAIL (empty output): $cmd"
      failed=$((failed + 1))
    fi
  else
    echo "[$n] FAIL (exit $?): $cmd"
    sed 's/^/    /' "$work/err"
    failed=$((failed + 1))
  fi
done < "$work/commands"

# The HTTP API: the documented address (scripts/serve.sh's 127.0.0.1:8080)
# becomes the test server's; --fail-with-body makes an HTTP error fail.
while IFS= read -r cmd; do
  n=$((n + 1))
  run="${cmd//127.0.0.1:8080/$http_address}"
  run="${run//localhost:8080/$http_address}"
  run="curl --fail-with-body${run#curl}"
  ran=$((ran + 1))
  if bash -c "$run" > "$work/out" 2> "$work/err" < /dev/null; then
    if [[ -s "$work/out" ]]; then
      echo "[$n] ok ($(wc -c < "$work/out") bytes): ${cmd:0:100}"
    else
      echo "[$n] FAIL (empty output): $cmd"
      failed=$((failed + 1))
    fi
  else
    echo "[$n] FAIL (exit $?): $cmd"
    sed 's/^/    /' "$work/out" "$work/err"
    failed=$((failed + 1))
  fi
done < "$work/http_commands"

echo "$ran run, $failed failed"
(( failed == 0 ))
