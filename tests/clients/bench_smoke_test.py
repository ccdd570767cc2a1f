#!/usr/bin/python3
"""Smoke test of inferd-bench: short runs of every RPC against a real inferd
with tiny models, checking that each JSON report is consistent with the
requested load (counts, token totals, ordered percentiles). Timing values
are only checked for consistency (p50 <= p90 <= p99 <= max), never against
a threshold.
usage: bench_smoke_test.py --bench BIN --inferd BIN --stubs DIR
       --test-models DIR --shared DIR
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from inferd_server import InferdServer  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)


def run_bench(args, address, tmp, name, flags):
    path = os.path.join(tmp, name + ".json")
    cmd = [args.bench, "--address", address, "--json", path] + flags
    print("$", " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    print(r.stdout + r.stderr)
    check(r.returncode == 0, f"{name}: exit 0 (got {r.returncode})")
    if r.returncode != 0 or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def check_summary(name, metric, s, count):
    check(s["count"] == count, f"{name}: {metric} count {s['count']} == {count}")
    check(0 < s["min"] <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"],
          f"{name}: {metric} 0 < min <= p50 <= p90 <= p99 <= max {s}")
    check(s["min"] <= s["mean"] <= s["max"], f"{name}: {metric} mean in range")


def check_common(name, rep, requests):
    req = rep["requests"]
    check(req["completed"] == requests,
          f"{name}: {req['completed']} of {requests} requests completed")
    check(req["failed"] == 0, f"{name}: no failure ({req['errors_by_code']}, "
          f"{req['first_error']})")
    t = rep["throughput"]
    check(rep["wall_s"] > 0 and t["requests_per_s"] > 0,
          f"{name}: wall time and request rate > 0")
    check(abs(t["requests_per_s"] * rep["wall_s"] - requests) < 1e-6 * requests,
          f"{name}: requests/s x wall time == requests")
    check_summary(name, "e2e", rep["latency_ms"]["e2e"], requests)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bench", required=True)
    p.add_argument("--inferd", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--test-models", required=True)
    p.add_argument("--shared", required=True)
    args = p.parse_args()

    names = ["qwen2-tiny", "bert-embed", "xlmr-reranker", "bert-classifier"]
    models = [(n, os.path.join(args.test_models, n)) for n in names]
    with InferdServer(args.inferd, models, args.stubs) as server, \
            tempfile.TemporaryDirectory() as tmp:
        a = server.address

        # Generate: 6 requests x 8 output tokens (EOS ignored), 2 streams.
        rep = run_bench(args, a, tmp, "generate", [
            "--rpc", "generate", "--model", "qwen2-tiny", "--concurrency", "2",
            "--requests", "6", "--input-len", "uniform:8:16",
            "--output-len", "fixed:8"])
        if rep:
            check_common("generate", rep, 6)
            check(rep["tokens"]["output"] == 6 * 8,
                  f"generate: {rep['tokens']['output']} output tokens == 48")
            check(6 * 8 <= rep["tokens"]["input"] <= 6 * 16,
                  f"generate: input tokens {rep['tokens']['input']} in [48, 96]")
            lat = rep["latency_ms"]
            check_summary("generate", "ttft", lat["ttft"], 6)
            check_summary("generate", "tpot", lat["tpot"], 6)
            check(lat["itl"]["count"] > 0, "generate: ITL samples recorded")
            check_summary("generate", "itl_max", lat["itl_max"], 6)
            check(lat["itl_max"]["max"] == lat["itl"]["max"],
                  "generate: the longest per-request gap is the longest gap")
            check(lat["ttft"]["p50"] <= lat["e2e"]["p50"],
                  "generate: TTFT p50 <= e2e p50")
            check(rep["throughput"]["output_tokens_per_s"] > 0,
                  "generate: output tokens/s > 0")

        # Shared prefix: every prompt starts with the same 64 tokens, one
        # stream, so requests after the first can reuse the cached prefix.
        rep = run_bench(args, a, tmp, "prefix", [
            "--rpc", "generate", "--model", "qwen2-tiny", "--requests", "3",
            "--shared-prefix", "64", "--input-len", "fixed:8",
            "--output-len", "fixed:2"])
        if rep:
            check_common("prefix", rep, 3)
            check(rep["tokens"]["input"] == 3 * 72,
                  f"prefix: input tokens {rep['tokens']['input']} == 3 x 72")
            check(rep["tokens"]["cached_input"] > 0,
                  "prefix: the report counts prefix-cache hits "
                  f"({rep['tokens']['cached_input']} cached tokens)")
            check(rep["config"]["shared_prefix_tokens"] == 64,
                  "prefix: config records the shared prefix")

        # Embed stream: 20 requests of 3 inputs, 2 streams x 2 in flight.
        rep = run_bench(args, a, tmp, "embed-stream", [
            "--rpc", "embed-stream", "--model", "bert-embed",
            "--concurrency", "2", "--pipeline", "2", "--requests", "20",
            "--batch-size", "3", "--input-len", "normal:12:4"])
        if rep:
            check_common("embed-stream", rep, 20)
            check(rep["tokens"]["items"] == 60,
                  f"embed-stream: {rep['tokens']['items']} embeddings == 60")
            check(rep["throughput"]["embeddings_per_s"] > 0,
                  "embed-stream: embeddings/s > 0")
            check(rep["tokens"]["input"] >= 60, "embed-stream: input tokens")

        rep = run_bench(args, a, tmp, "embed-batch", [
            "--rpc", "embed-batch", "--model", "bert-embed",
            "--concurrency", "3", "--requests", "9", "--batch-size", "4",
            "--input-len", "fixed:16", "--warmup", "2"])
        if rep:
            check_common("embed-batch", rep, 9)
            check(rep["tokens"]["items"] == 36,
                  f"embed-batch: {rep['tokens']['items']} embeddings == 36")
            check(rep["tokens"]["input"] >= 36 * 16,
                  f"embed-batch: input tokens {rep['tokens']['input']} >= 576")

        rep = run_bench(args, a, tmp, "rerank", [
            "--rpc", "rerank", "--model", "xlmr-reranker", "--requests", "5",
            "--batch-size", "4", "--input-len", "fixed:20"])
        if rep:
            check_common("rerank", rep, 5)
            check(rep["tokens"]["items"] == 20, "rerank: 20 documents scored")

        rep = run_bench(args, a, tmp, "classify", [
            "--rpc", "classify", "--model", "bert-classifier", "--requests",
            "5", "--batch-size", "2", "--input-len", "fixed:10"])
        if rep:
            check_common("classify", rep, 5)
            check(rep["tokens"]["items"] == 10, "classify: 10 texts classified")

        # A prompts file instead of synthetic inputs, for a fixed duration.
        prompts = os.path.join(tmp, "prompts.txt")
        with open(prompts, "w") as f:
            f.write("hello world\n\nthe quick brown fox\nanother line\n")
        rep = run_bench(args, a, tmp, "tokenize", [
            "--rpc", "tokenize", "--model", "bert-embed", "--duration", "0.5",
            "--prompts-file", prompts])
        if rep:
            n = rep["requests"]["completed"]
            check(n > 0 and rep["requests"]["failed"] == 0,
                  f"tokenize: {n} requests completed, none failed")
            check_summary("tokenize", "e2e", rep["latency_ms"]["e2e"], n)
            check(rep["tokens"]["input"] >= 2 * n,
                  "tokenize: >= 2 tokens per prompt line")

        # Errors are reported, not hidden: an unknown model fails at start.
        r = subprocess.run([args.bench, "--address", a, "--rpc", "embed-batch",
                            "--model", "nope", "--requests", "1"],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and "nope" in r.stderr,
              f"unknown model: non-zero exit naming it ({r.stderr.strip()})")
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
