#!/usr/bin/env bash
# Command 2: install deps, build, fetch the real models, set up the
# reference-library venv, and run every test tier (unit, integration, model,
# the ASan+UBSan and TSan sanitizer tiers) through ctest; then, when a
# ../shared sits beside the checkout, the suite runs once more with it hidden
# by a private mount namespace, so it is proven to pass on a machine without
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
  # Second pass: every test but the fuzz smoke run and the sanitizer tier
  # (which do not read ../shared) again, with ../shared gone. It runs in a
  # private mount namespace where an empty read-only tmpfs covers ../shared,
  # so no path to it (the one compiled into the tests, the source tree's
  # sibling, $INFERD_SHARED_DIR) shows anything; tests/common/
  # no_shared_pass_check.py fails the pass if one does.
  shared="$(cd "$root/.." && pwd)/shared"
  empty="$(mktemp -d)"
  trap 'rm -rf "$empty"' EXIT
  pass2=(ctest --output-on-failure -j"${CTEST_JOBS:-2}" --timeout 900
         -LE sanitize -E '^fuzz_smoke$')
  if [[ ! -e "$shared" ]]; then
    echo "test.sh: no ../shared beside the checkout: the pass above already" \
         "ran without it"
  else
    hide=()
    if [[ $(id -u) -eq 0 ]] && unshare --mount --propagation private true 2>/dev/null; then
      hide=(unshare --mount --propagation private)
    elif unshare --user --map-root-user --mount --propagation private true 2>/dev/null; then
      hide=(unshare --user --map-root-user --mount --propagation private)
    fi
    if ((${#hide[@]} == 0)); then
      echo "test.sh: cannot make a mount namespace here (root or user" \
           "namespaces needed) to hide $shared; run the suite on a machine" \
           "without ../shared to check that it passes there" >&2
      exit 1
    fi
    echo "test.sh: every test again with $shared hidden (an empty tmpfs in a" \
         "private mount namespace), but the fuzz smoke run and the sanitizer tier"
    "${hide[@]}" /bin/bash -c 'mount -t tmpfs -o ro,size=4k inferd-no-shared "$1" &&
      shift && exec "$@"' _ "$shared" \
      env INFERD_NO_SHARED_PASS=1 INFERD_SHARED_DIR="$empty" "${pass2[@]}"
  fi
fi
