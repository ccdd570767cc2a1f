#!/usr/bin/env bash
# Creates $BUILD_DIR/venv (default build/venv) with the pinned reference
# libraries of scripts/python-requirements.txt, for tests that compare inferd
# with the Hugging Face libraries. Wheels are downloaded once into
# build/pip-cache; later runs install from there without the network.
# Idempotent. Prints the venv's python path on its last line.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
req="$root/scripts/python-requirements.txt"
venv="$build/venv"
cache="$build/pip-cache"
stamp="$venv/.inferd-stamp"
# shellcheck source=scripts/python-lib.sh
source "$root/scripts/python-lib.sh"

py="$(venv_python python-deps)" || exit 1

if [[ -f "$stamp" && "$(cat "$stamp")" == "$(sha256sum "$req" | cut -d' ' -f1)" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
rm -rf "$venv"
"$py" -m venv "$venv" >&2
mkdir -p "$cache"
# Download (no-op when cached), then install from the cache only.
if ! "$venv/bin/python" -m pip download --quiet --dest "$cache" -r "$req" >&2; then
  echo "python-deps: could not download the pinned packages of $req from PyPI" \
       "(offline?); the cache $cache has:" >&2
  ls "$cache" >&2 || true
fi
"$venv/bin/python" -m pip install --quiet --no-index --find-links "$cache" \
  -r "$req" >&2
sha256sum "$req" | cut -d' ' -f1 > "$stamp"
echo "$venv/bin/python"
