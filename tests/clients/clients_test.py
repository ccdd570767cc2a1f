#!/usr/bin/python3
"""Runs the example clients (examples/python, examples/node, examples/cpp)
against a real inferd and checks what they received.

inferd gets the generated tiny models (bert-embed, xlmr-reranker) plus
stories260K from examples/models (in the repository; should it be missing,
the random-weight qwen2-tiny generates). ../shared is not needed. Each client writes what it received to --json; this test checks:
  Generate   streamed in several messages; the text is non-empty and equals
             Detokenize(Tokenize(prompt) + the received token ids) minus the
             prompt, and was printed as it arrived;
  Embed      every bidi request answered once by id, with one unit-norm
             vector of the model's dims per text, equal (cosine) to the
             EmbedBatch vectors of the same texts;
  Rerank     one result per document, indices a permutation, best first.
usage: clients_test.py --client python|node|cpp --inferd BIN --stubs DIR
       --test-models DIR [--shared DIR] [--cpp-client BIN] [--node BIN]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from inferd_server import InferdServer  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        FAILURES.append(what)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) *
                  math.sqrt(sum(y * y for y in b)))


def client_command(args, address, gen_model, json_path):
    models = ["--generate-model", gen_model, "--embed-model", "bert-embed",
              "--rerank-model", "xlmr-reranker", "--max-tokens", "24",
              "--json", json_path, "--address", address]
    if args.client == "python":
        return ["/usr/bin/python3",
                os.path.join(ROOT, "examples", "python", "client.py")] + models
    if args.client == "node":
        return [args.node, os.path.join(ROOT, "examples", "node", "client.mjs")
                ] + models
    return [args.cpp_client] + models


def check_generate(rep, stdout, prompt, stub, pb):
    g = rep["generate"]
    check(len(g["text"]) > 0, "Generate: text is non-empty")
    check(g["messages"] > 1,
          f"Generate: streamed in {g['messages']} messages (> 1)")
    check(g["completion_tokens"] == len(g["token_ids"]),
          f"Generate: usage.completion_tokens {g['completion_tokens']} == "
          f"{len(g['token_ids'])} ids received")
    ids = list(stub.Tokenize(pb.TokenizeRequest(model=g["model"],
                                                text=prompt)).token_ids)
    full = stub.Detokenize(pb.DetokenizeRequest(
        model=g["model"], token_ids=ids + g["token_ids"])).text
    check(full == prompt + g["text"],
          f"Generate: Detokenize(Tokenize(prompt) + ids) == prompt + text "
          f"({full!r} vs {prompt + g['text']!r})")
    check(prompt + g["text"] in stdout, "Generate: the text was printed")


def check_embed(rep, dims):
    e = rep["embed"]
    texts = e["texts"]
    expected = {f"text-{i}" for i in range(len(texts))} | {"all"}
    check(set(e["stream"]) == expected,
          f"Embed stream: every id answered ({sorted(e['stream'])})")
    for rid, vectors in e["stream"].items():
        want = len(texts) if rid == "all" else 1
        check(len(vectors) == want, f"Embed stream {rid}: {want} vector(s)")
        for v in vectors:
            check(len(v) == dims, f"Embed stream {rid}: {len(v)} == {dims} dims")
            n = math.sqrt(sum(x * x for x in v))
            check(abs(n - 1) < 1e-3, f"Embed stream {rid}: unit norm ({n:.5f})")
    check(len(e["batch"]) == len(texts), "EmbedBatch: one vector per text")
    check(all(d == dims for d in e["batch_dims"]), "EmbedBatch: dims field")
    for i, v in enumerate(e["batch"]):
        n = math.sqrt(sum(x * x for x in v))
        check(len(v) == dims and abs(n - 1) < 1e-3,
              f"EmbedBatch {i}: {len(v)} dims, norm {n:.5f}")
        if f"text-{i}" in e["stream"]:
            c = cosine(v, e["stream"][f"text-{i}"][0])
            check(c > 0.999, f"EmbedBatch {i} matches stream text-{i} "
                  f"(cosine {c:.6f})")
        if "all" in e["stream"]:
            c = cosine(v, e["stream"]["all"][i])
            check(c > 0.999, f"EmbedBatch {i} matches stream all[{i}] "
                  f"(cosine {c:.6f})")


def check_rerank(rep):
    r = rep["rerank"]
    results = r["results"]
    n = r["documents"]
    check(len(results) == n, f"Rerank: {len(results)} results for {n} docs")
    check(sorted(x["index"] for x in results) == list(range(n)),
          "Rerank: indices are a permutation of the documents")
    scores = [x["score"] for x in results]
    check(all(a >= b for a, b in zip(scores, scores[1:])),
          f"Rerank: sorted best first {scores}")
    check(all(0 <= s <= 1 for s in scores), "Rerank: sigmoid scores in [0, 1]")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--client", choices=["python", "node", "cpp"], required=True)
    p.add_argument("--inferd", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--test-models", required=True)
    p.add_argument("--shared")  # passed to every client test; not needed
    p.add_argument("--cpp-client")
    p.add_argument("--node", default="node")
    args = p.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc
    from inferd.v1 import models_pb2, models_pb2_grpc

    models = []
    stories = os.path.join(ROOT, "examples", "models", "stories260K")
    if os.path.isfile(os.path.join(stories, "config.json")):
        models.append(("stories", stories))
        gen_model = "stories"
    else:
        print("note: examples/models/stories260K is absent; Generate runs on "
              "the random-weight qwen2-tiny")
        gen_model = "qwen2-tiny"
    for name in ("qwen2-tiny", "bert-embed", "xlmr-reranker"):
        models.append((name, os.path.join(args.test_models, name)))

    with InferdServer(args.inferd, models, args.stubs) as server, \
            tempfile.TemporaryDirectory() as tmp:
        json_path = os.path.join(tmp, "out.json")
        cmd = client_command(args, server.address, gen_model, json_path)
        print("$", " ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        print(r.stdout)
        check(r.returncode == 0, f"client exited 0 (got {r.returncode}; "
              f"stderr: {r.stderr.strip()})")
        if r.returncode != 0:
            print("server log:", server.log.name)
            return 1
        with open(json_path) as f:
            rep = json.load(f)
        with grpc.insecure_channel(server.address) as channel:
            stub = inference_pb2_grpc.InferenceStub(channel)
            mstub = models_pb2_grpc.ModelsStub(channel)
            dims = mstub.GetModel(models_pb2.GetModelRequest(
                name="bert-embed")).embedding_dims
            check(dims > 0, f"bert-embed has embedding dims ({dims})")
            check_generate(rep, r.stdout, "Once upon a time", stub, pb)
            check_embed(rep, dims)
            check_rerank(rep)
    print(f"{len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
