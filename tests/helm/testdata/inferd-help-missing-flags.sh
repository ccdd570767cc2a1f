#!/bin/sh
# Stands in for an inferd whose --help lacks --max-seqs and --dtype, so the
# flag check in validate.mjs must name exactly those two (negative test).
cat <<'HELP'
Usage: inferd [flags]
  --listen HOST:PORT
  --model NAME=PATH
  --plugin PATH.so
  --metrics-listen HOST:PORT
  --threads N
  --replicas-per-model N
  --max-batched-tokens N
  --max-queue-requests N
  --max-queue-tokens N
  --max-inputs-per-request N
  --max-input-tokens N
  --max-concurrent-streams N
  --max-receive-message-bytes N
  --kv-cache-memory SIZE
  --block-size N
  --log-format text|json
  --log-level LEVEL
  --drain-timeout SECONDS
  --tls-cert PATH
  --tls-key PATH
  --health-listen HOST:PORT
      Plaintext health.
  --tls-client-ca PATH
  --api-key-file PATH
HELP
exit 1
