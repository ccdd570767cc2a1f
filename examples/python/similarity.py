#!/usr/bin/python3
"""Embeds a few sentences with inferd's EmbedBatch and prints their cosine
similarities: two sentences that mean the same thing score high, an
unrelated one low.

usage: /usr/bin/python3 examples/python/similarity.py [--address HOST:PORT]
           [--model NAME] [--stubs BUILD/python] [SENTENCE ...]
Needs Debian python3-grpcio; the stubs are the build's (build/python).
"""
import argparse
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_STUBS = os.path.normpath(os.path.join(HERE, "..", "..", "build", "python"))
DEFAULT_SENTENCES = [
    "A man is playing a guitar.",
    "Someone is strumming a guitar.",
    "The stock market fell sharply today.",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--address", default="127.0.0.1:50051")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--stubs", default=DEFAULT_STUBS)
    ap.add_argument("sentences", nargs="*")
    args = ap.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    from inferd.v1 import inference_pb2 as pb, inference_pb2_grpc as rpc

    texts = args.sentences or DEFAULT_SENTENCES
    stub = rpc.InferenceStub(grpc.insecure_channel(args.address))
    resp = stub.EmbedBatch(pb.EmbedRequest(model=args.model, texts=texts),
                           timeout=60)
    vecs = [list(e.values) for e in resp.embeddings]

    def cos(a, b):
        dot = sum(x * y for x, y in zip(a, b))
        return dot / (math.sqrt(sum(x * x for x in a)) *
                      math.sqrt(sum(y * y for y in b)))

    print(f"{args.model}: {len(vecs[0])}-dimensional embeddings, "
          f"{resp.usage.total_tokens} tokens")
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            print(f"  {cos(vecs[i], vecs[j]):.3f}  {texts[i]!r} ~ {texts[j]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
