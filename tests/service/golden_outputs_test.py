#!/usr/bin/env python3
"""Refactors change no output bit: the real models' outputs over gRPC are
compared, bit for bit, with outputs recorded (tests/service/golden/
outputs.json) before the engine and request-path refactors of issue 26:

- SmolLM2-135M-Instruct (GGUF Q4_1): greedy token ids of chat prompts, one
  with a JSON Schema (structured output's fast-forward path);
- stories260K (in the repo): greedy token ids;
- all-MiniLM-L6-v2: the float32 bits of each embedding.

Kernel dispatch is pinned (INFERD_CPU_ISA=avx2, 2 kernel threads), so
every x86-64 machine of this pool runs the same instructions in the same
order; a machine without AVX2 reports the test skipped, saying so.

usage: golden_outputs_test.py --inferd BIN --stubs DIR --smollm2 GGUF
       --minilm DIR --stories DIR [--record]
"""
import argparse
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402

GOLDEN = os.path.join(HERE, "golden", "outputs.json")
CHATS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers and explain why they are prime.",
]
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 30},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
    "required": ["name", "age", "tags"], "additionalProperties": False}
STORIES = ["Once upon a time", "The little dog"]
TEXTS = ["A man is playing a guitar.", "Someone is strumming a guitar.",
         "The weather is cold today.", "Ein Mann spielt Gitarre."]


def has_avx2():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2" in f.read()
    except OSError:
        return False


def collect(stub, pb):
    out = {"generate": {}, "embed": {}}
    for i, q in enumerate(CHATS + ["Describe a person as JSON."]):
        req = pb.GenerateRequest(model="smollm2")
        req.messages.add(role="user", content=q)
        req.sampling.max_tokens = 48
        req.sampling.temperature = 0
        if i == len(CHATS):
            req.response_format.json_schema = json.dumps(SCHEMA)
        ids = [t for c in stub.Generate(req, timeout=300) for t in c.token_ids]
        out["generate"][f"smollm2: {q}"] = ids
    for p in STORIES:
        req = pb.GenerateRequest(model="stories", prompt=p)
        req.sampling.max_tokens = 64
        req.sampling.temperature = 0
        ids = [t for c in stub.Generate(req, timeout=300) for t in c.token_ids]
        out["generate"][f"stories: {p}"] = ids
    resp = stub.EmbedBatch(pb.EmbedRequest(model="minilm", texts=TEXTS), timeout=300)
    for text, e in zip(TEXTS, resp.embeddings):
        out["embed"][text] = [struct.pack("<f", v).hex() for v in e.values]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--minilm", required=True)
    ap.add_argument("--stories", required=True)
    ap.add_argument("--record", action="store_true")
    a = ap.parse_args()
    if not has_avx2():
        print("SKIPPED: the golden outputs were recorded with AVX2 kernels; "
              "this CPU has no AVX2")
        return 77
    sys.path.insert(0, a.stubs)
    import grpc
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc as rpc
    # One replica of 2 kernel threads each: the same work split everywhere.
    models = [("smollm2", a.smollm2 + ",threads=2,replicas=1"),
              ("minilm", a.minilm + ",threads=2,replicas=1"),
              ("stories", a.stories + ",threads=2,replicas=1")]
    env = dict(os.environ, INFERD_CPU_ISA="avx2")
    with lib.InferdProcess(a.inferd, models, env=env,
                           log_prefix="inferd-golden-") as srv:
        srv.wait_ready(a.stubs, [n for n, _ in models])
        got = collect(rpc.InferenceStub(grpc.insecure_channel(srv.address)), pb)
    if a.record:
        os.makedirs(os.path.dirname(GOLDEN), exist_ok=True)
        with open(GOLDEN, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"recorded {GOLDEN}")
        return 0
    with open(GOLDEN) as f:
        want = json.load(f)
    failures = []
    for kind in ("generate", "embed"):
        for key, w in want[kind].items():
            g = got[kind].get(key)
            if g != w:
                first = next((i for i, (x, y) in enumerate(zip(g or [], w))
                              if x != y), min(len(g or []), len(w)))
                failures.append(f"{kind} {key!r}: differs from the recording at "
                                f"position {first} (got {len(g or [])} values, "
                                f"recorded {len(w)})")
    n = sum(len(v) for v in want.values())
    if failures:
        print(f"{len(failures)} of {n} outputs changed:")
        for f in failures:
            print("  " + f)
        return 1
    print(f"all {n} outputs identical to the recording, bit for bit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
