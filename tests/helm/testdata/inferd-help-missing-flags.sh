#!/bin/sh
# Stands in for an inferd that predates --config and whose --help also lacks
# --tls-client-ca, so validate.mjs must name exactly those two flags and
# report that `--config FILE --print-config` fails (negative test of both
# checks).
if [ "$1" != "--help" ]; then
  echo "unknown flag $1 (see --help)" >&2
  exit 2
fi
cat <<'HELP'
Usage: inferd [flags]
  --listen HOST:PORT
  --model NAME=PATH
  --plugin PATH.so
  --metrics-listen HOST:PORT
  --threads N
  --replicas-per-model N
  --max-batched-tokens N
  --max-seqs N
  --max-queue-requests N
  --max-queue-tokens N
  --max-inputs-per-request N
  --max-input-tokens N
  --max-concurrent-streams N
  --max-receive-message-bytes N
  --kv-cache-memory SIZE
  --block-size N
  --dtype float32|bfloat16
  --log-format text|json
  --log-level LEVEL
  --drain-timeout SECONDS
  --tls-cert PATH
  --tls-key PATH
  --health-listen HOST:PORT
      Plaintext health.
  --api-key-file PATH
  --reuse-port
HELP
exit 1
