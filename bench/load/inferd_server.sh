# Shared by the bench/load scripts (source it; bash): start one inferd in the
# background and wait until it serves.
#
# inferd_start LOG INFERD_ARGS...: runs BUILD's service/inferd (the caller's
# $build) with INFERD_ARGS (which should listen on 127.0.0.1:0, and may add
# --metrics-listen 127.0.0.1:0), output to LOG; waits for every model to be
# ready. Sets INFERD_PID, INFERD_PORT and INFERD_METRICS_PORT (empty without
# a metrics listener). Prints LOG and returns 1 if it exits or does not
# serve within 5 minutes.
inferd_start() {
  local log="$1"
  shift
  "$build/service/inferd" "$@" > "$log" 2>&1 &
  INFERD_PID=$!
  INFERD_PORT=""
  INFERD_METRICS_PORT=""
  local _
  for _ in $(seq 1 3000); do
    if ! kill -0 "$INFERD_PID" 2>/dev/null; then
      cat "$log" >&2
      return 1
    fi
    if grep -q "model(s) ready after" "$log"; then
      INFERD_PORT="$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$log" | head -n1)"
      INFERD_METRICS_PORT="$(sed -n 's/.*(metrics port \([0-9]*\)).*/\1/p' "$log" | head -n1)"
      [[ -n "$INFERD_PORT" ]] && return 0
    fi
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}

# inferd_stop: SIGTERM to the server inferd_start started, then waits.
inferd_stop() {
  [[ -n "${INFERD_PID:-}" ]] || return 0
  kill -TERM "$INFERD_PID" 2>/dev/null || true
  wait "$INFERD_PID" 2>/dev/null || true
  INFERD_PID=""
}
