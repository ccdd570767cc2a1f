#!/usr/bin/env python3
"""MaskBench on inferd's structured-output engine: every schema of
JSONSchemaBench's maskbench/data (11,305 real-world schemas with valid and
invalid instances; github.com/guidance-ai/jsonschemabench, read from a local
checkout, e.g. one brought by the tool library's `fetch`) goes through
build/bench/inferd_schema_check (the engine a request gets: compile, then each
instance token by token over SmolLM2's 49,152-token vocabulary). Reported as
MaskBench reports llguidance: pass (compiled, every valid instance accepted,
every invalid one rejected), compile error, validation error (a valid
instance rejected), invalidation error (an invalid instance accepted), and
compile time p50/p99; the refusals by message.

usage: maskbench.py --corpus DIR [--check BIN] [--gguf FILE] [--limit N]
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True,
                    help="a jsonschemabench checkout (its maskbench/data)")
    ap.add_argument("--check", default=os.path.join(ROOT, "build/bench/inferd_schema_check"))
    ap.add_argument("--gguf", default=os.path.join(
        ROOT, "build/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    d = os.path.join(a.corpus, "maskbench", "data")
    names = sorted(os.listdir(d))
    if a.limit:
        names = names[:a.limit]
    cases = []
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for n in names:
            with open(os.path.join(d, n)) as g:
                doc = json.load(g)
            tests = [{"data": t["data"], "valid": t["valid"]}
                     for t in doc.get("tests", [])]
            cases.append((n, tests))
            f.write(json.dumps({"id": n, "schema": doc["schema"],
                                "tests": tests}) + "\n")
        path = f.name
    with open(path) as inp:
        res = subprocess.run([a.check, "--gguf", a.gguf], stdin=inp,
                             capture_output=True, text=True, check=True)
    os.unlink(path)
    outs = [json.loads(line) for line in res.stdout.splitlines()]
    if len(outs) != len(cases):
        sys.exit(f"{len(outs)} results for {len(cases)} schemas")
    counts = collections.Counter()
    refusals = collections.Counter()
    compile_ms = []
    for (name, tests), out in zip(cases, outs):
        compile_ms.append(out["compile_ms"])
        if not out["compiled"]:
            counts["compile error"] += 1
            msg = out["error"].split(": ", 1)[-1]
            refusals[msg[:80]] += 1
            continue
        val = any(t["valid"] and not ok for t, ok in zip(tests, out["accepted"]))
        inval = any(not t["valid"] and ok for t, ok in zip(tests, out["accepted"]))
        counts["validation error"] += val
        counts["invalidation error"] += inval
        counts["pass"] += not val and not inval
    n = len(cases)
    compile_ms.sort()
    print(f"MaskBench, {n} schemas, SmolLM2 vocabulary (49,152 tokens):")
    for k in ("pass", "compile error", "validation error", "invalidation error"):
        print(f"  {k}: {counts[k]} ({100.0 * counts[k] / n:.1f}%)")
    print(f"  compile time p50 {compile_ms[n // 2]:.2f} ms, "
          f"p99 {compile_ms[min(n - 1, n * 99 // 100)]:.1f} ms")
    print("compile errors by message:")
    for r, v in refusals.most_common(12):
        print(f"  {v} x {r}")


if __name__ == "__main__":
    main()
