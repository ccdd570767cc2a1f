#!/usr/bin/env python3
"""Proves that scripts/test.sh's second pass really runs without ../shared.

In that pass (INFERD_NO_SHARED_PASS=1) this opens ../shared the ways a test
could without going through tests/common/shared_data.{h,py}: the path the
build compiled in, the sibling of the source tree, and $INFERD_SHARED_DIR.
It fails if any of them shows shared material, since a test reading it
directly would then pass on CI and fail on a user's fresh clone. Outside
that pass it has nothing to prove and exits 77 (ctest reports it skipped).
"""
import argparse
import os
import sys


def entries(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--default-shared", required=True,
                    help="the ../shared path compiled into the tests")
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    if os.environ.get("INFERD_NO_SHARED_PASS") != "1":
        print("SKIP: this check runs in scripts/test.sh's no-../shared pass")
        return 77
    candidates = {
        "compiled-in default": args.default_shared,
        "sibling of the source tree": os.path.join(args.source_dir, "..", "shared"),
    }
    if os.environ.get("INFERD_SHARED_DIR"):
        candidates["$INFERD_SHARED_DIR"] = os.environ["INFERD_SHARED_DIR"]
    failures = 0
    for what, path in candidates.items():
        found = entries(path)
        # Opening a file the tests read must fail too.
        probe = os.path.join(path, "tokenizers", "llama2", "tokenizer.json")
        readable = os.path.exists(probe)
        if found or readable:
            print(f"FAIL: {what} {path} is visible in the no-shared pass: "
                  f"{found[:5] if found else probe}")
            failures += 1
        else:
            print(f"ok: {what} {path} shows nothing "
                  f"({'empty' if found == [] else 'absent'})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
