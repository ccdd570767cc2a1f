#!/usr/bin/env python3
"""One-off check of a real embedding model directory: inferd's embeddings
(over HTTP, /v1/embeddings) against the float64 NumPy reference
(tests/reference/reference.py) on the ids of the Hugging Face `tokenizers`
library, plus the cosine-similarity matrix of a few sentences (related
pairs must score above unrelated ones).

  tools/check_real_embedder.py --inferd build/service/inferd \\
      --model DIR [--dtype float32]

Needs the project's venv (numpy, tokenizers): scripts/python-deps.sh.
Prints one line per sentence (cosine and max abs difference to the
reference) and the similarity matrix; exits non-zero when a cosine is below
0.9999 or an unrelated pair outscores its related one.
"""

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

import numpy as np
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "service"))
import reference as ref  # noqa: E402
import inferd_testlib as lib  # noqa: E402

# (a, b) pairs: each a's related sentence is its b; across pairs, unrelated.
PAIRS = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("The new movie is awesome.", "The new film is so great."),
    ("A woman is playing the violin.", "A girl plays a string instrument."),
    ("How do I bake sourdough bread at home?",
     "Recipe for homemade sourdough loaves."),
]


def wait_healthy(server, timeout=600):
    """Polls GET /health until the model is loaded (200)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{server.http_port}/health", timeout=5):
                return
        except urllib.error.HTTPError as e:
            if e.code != 503:
                raise
        if server.proc.poll() is not None:
            raise RuntimeError("inferd exited: " + server.output())
        time.sleep(0.5)
    raise RuntimeError("the model never loaded: " + server.output())


def embed(port, texts):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/embeddings",
        data=json.dumps({"model": "m", "input": texts}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.load(r)
    return [np.asarray(d["embedding"], np.float64) for d in out["data"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args()

    texts = [t for pair in PAIRS for t in pair]
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    # Some tokenizer.json files pad every input (all-mpnet-base-v2: to 128);
    # the reference runs each text alone, unpadded, as inferd does.
    tok.no_padding()
    model = ref.Model(args.model)
    want = []
    for t in texts:
        ids = tok.encode(t).ids
        hidden, _ = model.forward(ids)
        want.append(ref.st_embedding(args.model, hidden))

    spec = f"{args.model},dtype={args.dtype}"
    with lib.InferdProcess(args.inferd, [("m", spec)],
                           extra=["--http-listen", "127.0.0.1:0"],
                           log_prefix="inferd-real-") as server:
        wait_healthy(server)
        got = embed(server.http_port, texts)

    ok = True
    for t, g, w in zip(texts, got, want):
        cos = float(g @ w / (np.linalg.norm(g) * np.linalg.norm(w)))
        diff = float(np.max(np.abs(g - w)))
        print(f"cos {cos:.7f}  max|diff| {diff:.2e}  {t}")
        ok &= cos >= 0.9999
    sims = np.array([[float(a @ b) for b in got] for a in got])
    print("cosine similarities (rows/cols in sentence order):")
    for row in sims:
        print("  " + " ".join(f"{x:6.3f}" for x in row))
    for i in range(len(PAIRS)):
        related = sims[2 * i, 2 * i + 1]
        others = [sims[2 * i, j] for j in range(len(texts))
                  if j // 2 != i]
        if related <= max(others):
            print(f"pair {i}: related {related:.3f} <= an unrelated "
                  f"{max(others):.3f}")
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
