#!/usr/bin/env python3
"""Greedy agreement of inferd with llama.cpp's llama-server, per activation
policy, on the same GGUF files. For benchmarks only, never in CI.

  /usr/bin/python3 bench/compare/greedy_vs_llamaserver.py \
      --llama-server build/bench-llamaserver/*/bin/llama-server \
      --gguf build/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf \
      [--gguf OTHER.gguf ...] [--tokens 16]

The 10 chat conversations of tests/gguf/smollm2_test.py, rendered and
tokenized once by inferd (Tokenize with messages); the same prompt ids go to
llama-server (POST /completion, n_predict, temperature 0, cache_prompt
false, one slot) and to inferd over gRPC (Generate with prompt_token_ids,
temperature 0) serving the file twice, as `exact` and as `int8`
(activations=). Per file and policy: how many prompts give the same first
--tokens tokens as llama-server. Run with a Python that has grpcio (Debian's
/usr/bin/python3) and the stubs of BUILD/python.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "service"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gguf"))
import inferd_testlib as lib  # noqa: E402
from smollm2_test import CONVERSATIONS  # noqa: E402


def llama_server(binary, gguf, port, threads):
    log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [binary, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
         "--parallel", "1", "-c", "4096"], stdout=log, stderr=log)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited; see {log.name}")
        time.sleep(0.5)
    raise SystemExit(f"llama-server did not start; see {log.name}")


def llama_greedy(port, ids, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/completion", json.dumps({
        "prompt": ids, "n_predict": n, "temperature": 0, "top_k": 1,
        "cache_prompt": False, "return_tokens": True}),
        {"Content-Type": "application/json"})
    out = json.loads(c.getresponse().read())
    return list(out["tokens"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--gguf", action="append", required=True)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=18741)
    args = ap.parse_args()
    stubs = os.path.join(args.build, "python")
    grpc, pb, rpc, _, _ = lib.import_stubs(stubs)
    rows = []
    for gguf in args.gguf:
        models = [("exact", gguf + ",activations=exact"), ("int8", gguf + ",activations=int8")]
        with lib.InferdProcess(os.path.join(args.build, "service/inferd"), models,
                               extra=["--threads", str(args.threads)]) as server:
            server.wait_ready(stubs, ["exact", "int8"])
            stub = rpc.InferenceStub(grpc.insecure_channel(server.address))
            prompts = [list(stub.Tokenize(pb.TokenizeRequest(
                model="exact", messages=[pb.ChatMessage(role=r, content=c) for r, c in conv]
            )).token_ids) for conv in CONVERSATIONS]
            got = {}
            for name, _ in models:
                got[name] = [lib.generate(stub, pb.GenerateRequest(
                    model=name, prompt_token_ids=pb.TokenIds(ids=ids),
                    sampling=pb.SamplingParams(max_tokens=args.tokens, temperature=0)))[0]
                    for ids in prompts]
        proc = llama_server(args.llama_server, gguf, args.port, args.threads)
        try:
            ref = [llama_greedy(args.port, ids, args.tokens) for ids in prompts]
        finally:
            proc.terminate()
            proc.wait()
        same = {n: sum(a[:args.tokens] == b[:args.tokens] for a, b in zip(got[n], ref))
                for n in got}
        rows.append((os.path.basename(gguf), same["exact"], same["int8"], len(prompts)))
        print(f"{os.path.basename(gguf)}: same first {args.tokens} tokens as llama-server: "
              f"exact {same['exact']}/{len(prompts)}, int8 {same['int8']}/{len(prompts)}",
              flush=True)
    print(f"\n| file | exact | int8 |\n|---|---|---|")
    for f, e, i, n in rows:
        print(f"| {f} | {e}/{n} | {i}/{n} |")


if __name__ == "__main__":
    main()
