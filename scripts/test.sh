#!/usr/bin/env bash
# Command 2: install deps, build, fetch the real models, set up the
# reference-library venv, and run every test tier (unit, integration, model,
# the ASan+UBSan and TSan sanitizer tiers) through ctest; then the suite runs once
# more with ../shared hidden, so it is proven to pass on a machine without
# it (every test but the slow fuzz smoke run and the sanitizer tier, which
# do not read it). Exits non-zero on any failure.
#
#   scripts/test.sh                 everything (what CI runs)
#   scripts/test.sh --sanitize      only the sanitizer tiers: ASan+UBSan
#                                   (tests/sanitize) and TSan (tests/tsan,
#                                   with its cancel storm against an
#                                   instrumented server)
#   scripts/test.sh --tsan          only the TSan tier, with the storm
#   scripts/test.sh ARGS...         ctest ARGS (e.g. -R service_faults)
set -euo pipefail
tsan=0
case "${1:-}" in
  --sanitize) shift; tsan=1; set -- -L sanitize "$@" ;;
  --tsan) shift; tsan=1; set -- -L tsan "$@" ;;
esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
export BUILD_DIR="$build"
"$root/scripts/install-deps.sh"
if ((tsan)); then
  # The TSan tier and its cancel storm (both on by default), also in a
  # build tree configured without them.
  cmake -S "$root" -B "$build" -G Ninja -DINFERD_TSAN_TIER=ON \
    -DINFERD_TSAN_STRESS=ON >/dev/null
fi
"$root/scripts/build.sh"
"$root/scripts/fetch-models.sh"
"$root/scripts/python-deps.sh" >/dev/null
cd "$build"
ctest --output-on-failure -j"${CTEST_JOBS:-2}" --timeout 900 "$@"
if [[ $# -eq 0 ]]; then
  empty="$(mktemp -d)"
  trap 'rm -rf "$empty"' EXIT
  echo "test.sh: every test again without ../shared" \
       "(INFERD_SHARED_DIR=$empty), but the fuzz smoke run and the sanitizer" \
       "tier, which do not read it"
  INFERD_SHARED_DIR="$empty" ctest --output-on-failure -j"${CTEST_JOBS:-2}" \
    --timeout 900 -LE sanitize -E '^fuzz_smoke$' 
fi
