#!/usr/bin/python3
"""inferd example client (Python, grpcio).

Calls a running inferd server three ways:
  * Generate: streams a completion and prints each text delta as it arrives;
  * Embed: the bidirectional stream (several requests in flight, answers
    matched by `id`) and the unary EmbedBatch;
  * Rerank: scores documents against a query, best first.

Stubs: generated at start-up from protos/ with protoc and
grpc_python_plugin into a temporary directory (Debian: apt-get install
protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf),
or taken from --stubs DIR (a build tree's <build>/python).

Example (against scripts/serve.sh):
  /usr/bin/python3 examples/python/client.py --address 127.0.0.1:50051 \
      --generate-model stories --embed-model minilm \
      --rerank-model reranker-random
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTOS = os.path.normpath(os.path.join(HERE, "..", "..", "protos"))

EMBED_TEXTS = [
    "inferd serves language models over gRPC.",
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings map text to vectors.",
    "A cat sat on the mat.",
    "Rerankers score a query against documents.",
]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--address", default="127.0.0.1:50051",
                   help="host:port of the inferd server")
    p.add_argument("--generate-model", default="stories",
                   help="model for Generate ('' skips Generate)")
    p.add_argument("--embed-model", default="minilm",
                   help="model for Embed/EmbedBatch ('' skips them)")
    p.add_argument("--rerank-model", default="reranker-random",
                   help="model for Rerank ('' skips Rerank)")
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("--max-tokens", type=int, default=40)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--query", default="What does inferd do?")
    p.add_argument("--documents", nargs="+", default=[
        "inferd is a gRPC inference server for LLMs and embedders.",
        "Bananas are rich in potassium.",
        "The server streams generated tokens to the client.",
        "Paris is the capital of France.",
    ])
    p.add_argument("--stubs", help="directory holding generated inferd/v1/*_pb2*.py "
                   "(default: generate from --protos into a temp dir)")
    p.add_argument("--protos", default=DEFAULT_PROTOS,
                   help="proto root with inferd/v1/*.proto")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="deadline of each call, seconds")
    p.add_argument("--json", dest="json_out",
                   help="also write what was received to this JSON file")
    return p.parse_args(argv)


def generate_stubs(protos, out_dir):
    """Runs protoc + grpc_python_plugin; returns out_dir."""
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    plugin = shutil.which("grpc_python_plugin") or "/usr/bin/grpc_python_plugin"
    cmd = [protoc, f"--proto_path={protos}", f"--python_out={out_dir}",
           f"--grpc_python_out={out_dir}",
           f"--plugin=protoc-gen-grpc_python={plugin}",
           "inferd/v1/inference.proto", "inferd/v1/models.proto"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"protoc failed ({' '.join(cmd)}):\n{r.stderr}")
    return out_dir


def norm(values):
    return math.sqrt(sum(v * v for v in values))


def run_generate(stub, pb, args, report):
    req = pb.GenerateRequest(model=args.generate_model, prompt=args.prompt)
    req.sampling.max_tokens = args.max_tokens
    req.sampling.temperature = args.temperature
    print(f"== Generate ({args.generate_model}) ==")
    print(args.prompt, end="", flush=True)
    text, token_ids, chunks, last = [], [], 0, None
    for resp in stub.Generate(req, timeout=args.timeout):
        chunks += 1
        text.append(resp.text)
        token_ids.extend(resp.token_ids)
        print(resp.text, end="", flush=True)  # each delta as it arrives
        last = resp
    print()
    reason = pb.FinishReason.Name(last.finish_reason)
    print(f"[finish={reason} prompt_tokens={last.usage.prompt_tokens} "
          f"completion_tokens={last.usage.completion_tokens} "
          f"messages={chunks} "
          f"ttft={last.timings.time_to_first_token_seconds * 1e3:.1f}ms]")
    report["generate"] = {
        "model": args.generate_model, "text": "".join(text),
        "token_ids": token_ids, "messages": chunks, "finish_reason": reason,
        "prompt_tokens": last.usage.prompt_tokens,
        "completion_tokens": last.usage.completion_tokens,
    }


def run_embed(stub, pb, args, report):
    print(f"== Embed, bidirectional stream ({args.embed_model}) ==")
    # One request per text plus one with every text: answers may come back
    # in any order, so they are matched by id.
    requests = [pb.EmbedRequest(model=args.embed_model, id=f"text-{i}",
                                texts=[t]) for i, t in enumerate(EMBED_TEXTS)]
    requests.append(pb.EmbedRequest(model=args.embed_model, id="all",
                                    texts=EMBED_TEXTS))
    by_id = {r.id: r for r in requests}
    answers = {}
    for resp in stub.Embed(iter(requests), timeout=args.timeout):
        if resp.id not in by_id:
            sys.exit(f"answer with unknown id {resp.id!r}")
        if resp.id in answers:
            sys.exit(f"two answers for id {resp.id!r}")
        answers[resp.id] = resp
        sent = by_id[resp.id]
        e = resp.embeddings[0]
        print(f"  id={resp.id:<7} inputs={len(resp.embeddings)} dims={e.dims} "
              f"norm={norm(e.values):.4f} first={[round(v, 4) for v in e.values[:4]]}")
        if len(resp.embeddings) != len(sent.texts):
            sys.exit(f"id {resp.id}: {len(resp.embeddings)} embeddings for "
                     f"{len(sent.texts)} texts")
    missing = set(by_id) - set(answers)
    if missing:
        sys.exit(f"no answer for ids {sorted(missing)}")
    stream_report = {
        rid: [list(e.values) for e in resp.embeddings]
        for rid, resp in answers.items()}

    print(f"== EmbedBatch ({args.embed_model}) ==")
    resp = stub.EmbedBatch(pb.EmbedRequest(model=args.embed_model,
                                           texts=EMBED_TEXTS),
                           timeout=args.timeout)
    for text, e in zip(EMBED_TEXTS, resp.embeddings):
        print(f"  dims={e.dims} tokens={e.tokens} norm={norm(e.values):.4f} "
              f"{text!r}")
    print(f"[total_tokens={resp.usage.total_tokens}]")
    report["embed"] = {
        "model": args.embed_model, "texts": EMBED_TEXTS,
        "stream": stream_report,
        "batch": [list(e.values) for e in resp.embeddings],
        "batch_dims": [e.dims for e in resp.embeddings],
    }


def run_rerank(stub, pb, args, report):
    print(f"== Rerank ({args.rerank_model}) ==")
    print(f"  query: {args.query!r}")
    resp = stub.Rerank(pb.RerankRequest(model=args.rerank_model,
                                        query=args.query,
                                        documents=args.documents),
                       timeout=args.timeout)
    for r in resp.results:
        print(f"  {r.score:.4f}  [{r.index}] {args.documents[r.index]!r}")
    report["rerank"] = {
        "model": args.rerank_model, "documents": len(args.documents),
        "results": [{"index": r.index, "score": r.score} for r in resp.results],
    }


def main(argv):
    args = parse_args(argv)
    tmp = None
    stubs = args.stubs
    if not stubs:
        tmp = tempfile.mkdtemp(prefix="inferd-stubs-")
        stubs = generate_stubs(args.protos, tmp)
    sys.path.insert(0, stubs)
    try:
        import grpc
        from inferd.v1 import inference_pb2 as pb
        from inferd.v1 import inference_pb2_grpc as pb_grpc

        report = {"address": args.address}
        with grpc.insecure_channel(args.address) as channel:
            stub = pb_grpc.InferenceStub(channel)
            try:
                if args.generate_model:
                    run_generate(stub, pb, args, report)
                if args.embed_model:
                    run_embed(stub, pb, args, report)
                if args.rerank_model:
                    run_rerank(stub, pb, args, report)
            except grpc.RpcError as e:
                print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
                return 1
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(report, f)
        return 0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
