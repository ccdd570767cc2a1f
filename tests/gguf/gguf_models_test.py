#!/usr/bin/env python3
"""Tiny GGUF decoders of every GGUF architecture inferd serves as a
generator (llama with llama.cpp's interleaved q/k rows and, for Llama
3.1-style scaling, a rope_freqs tensor; qwen2 with q/k/v biases, qwen3 with
q/k norms, smollm3 with every 4th layer without RoPE, phi3 with fused
projections, partial rotary and longrope factor tensors, gemma2 with soft
caps and gemma3 with local/global layers, both with norm weights stored as
1 + w) and several weight
types (F32, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, F16, BF16), written by tests/gguf/make_gguf_models.py with the PyPI `gguf`
package, served by the real inferd binary: greedy tokens over gRPC equal
the float64 NumPy reference on the gguf-dequantized weights
(tests/gguf/gguf_reference.py), for several prompts each. Block-quantized
files run twice: under `activations=exact`, equal to the plain reference;
with `activations=int8` (the default), teacher-forced against the
reference with inferd's int8 activation quantization emulated
(tests/gguf/int8_check.py: the reference's argmax up to a first departure
that is a near-tie). Also: a GGUF of an
architecture inferd does not serve is a startup error naming it.

And `bert` encoder GGUFs (bert-embed in F16 with CLS pooling, bert-mean in
Q8_0 with mean pooling; WordPiece vocabulary spelt as llama.cpp writes it):
inferd's Tokenize ids equal the original tokenizer.json's, and EmbedBatch
embeddings of texts match the float64 encoder forward + pooling + L2
normalization on the gguf-dequantized weights (cosine >= 0.99999 for
F32/F16 weights, >= 0.999 for Q8_0). The embedders llama.cpp converts under
their own architectures, nomic-bert (nomic-embed, F16) and jina-bert-v2
(jina-embed, Q8_0), tensors named by gguf-py's table: checked against the
float64 forward pass of the Hugging Face model they came from (cosine >=
0.9999 for F16, >= 0.999 for Q8_0).

usage: gguf_models_test.py --inferd BIN --stubs DIR --test-models DIR
       --venv-python PY
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "service"))
import inferd_testlib as lib  # noqa: E402
from int8_check import Tally, check_int8_into  # noqa: E402

TOKENS = 12
# Weight types (the file name's last part) whose Linear activations the
# int8 policy quantizes.
QUANTIZED = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"}
TEXTS = ["Hello world!", "the quick brown fox jumps over the lazy dog",
         "a", "Café CRÈME, naïve résumé?", "tokens: ##x [MASK] [SEP] 12,345",
         "  spaces\tand\nnewlines  ", "日本語 text", "unknownwordzzqx!"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--venv-python", required=True)
    args = ap.parse_args()
    if not lib.models_present(args.test_models,
                              ["llama-tiny", "llama31-tiny", "qwen2-tiny",
                               "qwen3-tiny", "smollm3-tiny", "phi3-tiny",
                               "gemma2-tiny", "gemma3-tiny", "bert-embed",
                               "bert-mean", "nomic-embed", "jina-embed"]):
        return 1
    grpc, pb, rpc, mpb, mrpc = lib.import_stubs(args.stubs)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    with tempfile.TemporaryDirectory() as out:
        subprocess.run([args.venv_python,
                        os.path.join(HERE, "make_gguf_models.py"),
                        "--test-models", args.test_models, "--out", out],
                       check=True, timeout=600)
        all_names = sorted(f[:-5] for f in os.listdir(out)
                           if f.endswith(".gguf"))
        encoders = [n for n in all_names if n.startswith("bert-")]
        # Embedders under llama.cpp's own architectures (nomic-bert,
        # jina-bert-v2): checked against the Hugging Face model they were
        # converted from, so the GGUF names (gguf-py's table) and inferd's
        # mapping back are checked too.
        hf_encoders = {n: n.rsplit("-", 1)[0] for n in all_names
                       if n.startswith(("nomic-", "jina-"))}
        names = [n for n in all_names
                 if n not in encoders and n not in hf_encoders]
        check(len(names) >= 16, f"expected 16 GGUF decoders, got {names}")
        check(len(encoders) >= 2, f"expected 2 GGUF encoders, got {encoders}")
        rng = random.Random(7)
        # 96 tokens: a prefill above the small-M limit (64 rows), where the
        # quantized / F16 weights are decoded into BF16 GEMM panels.
        prompts = [[rng.randrange(3, 400) for _ in range(n)]
                   for n in (1, 5, 17, 96)]
        # Served name -> (file, activation policy).
        served = {}
        for name in names:
            quantized = name.rsplit("-", 1)[-1] in QUANTIZED
            served[name] = (name, "exact")
            if quantized:
                served[name + "-int8"] = (name, "int8")
        expected = {}
        for served_name, (name, act) in sorted(served.items()):
            if act == "int8":
                continue  # teacher-forced after serving (check_int8)
            ref = subprocess.run(
                [args.venv_python, os.path.join(HERE, "gguf_reference.py"),
                 "--gguf", os.path.join(out, name + ".gguf"),
                 "--prompts", json.dumps(prompts), "--tokens", str(TOKENS)],
                capture_output=True, timeout=600)
            if ref.returncode != 0:
                print("FAIL: reference:", ref.stderr.decode()[-3000:])
                return 1
            expected[served_name] = json.loads(ref.stdout)["greedy"]

        # The embeddings to expect: from each bert GGUF's own weights, and
        # from the Hugging Face model each nomic/jina GGUF was made from.
        embed_ref = {}
        sources = [(n, n.rsplit("-", 1)[0], "--gguf") for n in encoders]
        sources += [(n, src, "--hf-dir") for n, src in hf_encoders.items()]
        for name, src, flag in sources:
            model = (os.path.join(out, name + ".gguf") if flag == "--gguf"
                     else os.path.join(args.test_models, src))
            ref = subprocess.run(
                [args.venv_python, os.path.join(HERE, "gguf_reference.py"),
                 flag, model, "--texts", json.dumps(TEXTS), "--tokenizer-json",
                 os.path.join(args.test_models, src, "tokenizer.json")],
                capture_output=True, timeout=600)
            if ref.returncode != 0:
                print("FAIL: reference:", ref.stderr.decode()[-3000:])
                return 1
            embed_ref[name] = json.loads(ref.stdout)
        check(len(hf_encoders) >= 2,
              f"expected the nomic-bert and jina-bert-v2 GGUFs, got {hf_encoders}")
        models = [(n, os.path.join(out, n + ".gguf"))
                  for n in encoders + sorted(hf_encoders)]
        models += [(n, os.path.join(out, f + ".gguf") + f",activations={act}")
                   for n, (f, act) in sorted(served.items())]
        with lib.InferdProcess(args.inferd, models) as server:
            server.wait_ready(args.stubs, [n for n, _ in models])
            stub = rpc.InferenceStub(grpc.insecure_channel(server.address))
            compared = 0
            tally = Tally()
            for name in sorted(served):
                outs = []
                for i, ids in enumerate(prompts):
                    got = lib.generate(stub, pb.GenerateRequest(
                        model=name, prompt_token_ids=pb.TokenIds(ids=ids),
                        sampling=pb.SamplingParams(max_tokens=TOKENS,
                                                   temperature=0)))[0]
                    outs.append(got)
                    if name in expected:
                        check(got == expected[name][i],
                              f"{name} prompt {i}: inferd {got} != reference "
                              f"{expected[name][i]}")
                        compared += len(expected[name][i])
                if name not in expected:
                    check_int8_into(
                        check, tally, args.venv_python,
                        ["--gguf", os.path.join(out, served[name][0] + ".gguf")],
                        prompts, outs, name)
            print(tally.line())
            print(f"compared {compared} greedy tokens of {len(names)} GGUF "
                  f"models ({len(served)} served: int8 and exact activations "
                  "for the block-quantized ones) with the NumPy reference")
            for name in encoders + sorted(hf_encoders):
                ref = embed_ref[name]
                for text, ids in zip(TEXTS, ref["ids"]):
                    got = list(stub.Tokenize(pb.TokenizeRequest(
                        model=name, text=text)).token_ids)
                    check(got == ids, f"{name} Tokenize({text!r}): inferd "
                          f"{got} != tokenizer.json {ids}")
                resp = stub.EmbedBatch(pb.EmbedRequest(model=name,
                                                       texts=TEXTS))
                # F16 files against their float Hugging Face source: the
                # weights' rounding (2^-11) moves the cosine by ~1e-5.
                floor = (0.999 if name.endswith("q8_0") else
                         0.9999 if name in hf_encoders else 0.99999)
                worst = 1.0
                for text, e, want in zip(TEXTS, resp.embeddings,
                                         ref["embeddings"]):
                    got = list(e.values)
                    dot = sum(a * b for a, b in zip(got, want))
                    norm = (sum(a * a for a in got) ** 0.5 *
                            sum(b * b for b in want) ** 0.5)
                    cos = dot / norm if norm > 0 and len(got) == len(want) \
                        else 0.0
                    worst = min(worst, cos)
                    check(cos >= floor, f"{name} {text!r}: cosine {cos:.7f} "
                          f"< {floor}")
                check(len(resp.embeddings) == len(TEXTS),
                      f"{name}: {len(resp.embeddings)} embeddings for "
                      f"{len(TEXTS)} texts")
                print(f"{name} ({ref['pooling']} pooling): {len(TEXTS)} "
                      f"embeddings, worst cosine 1 - {1 - worst:.1e} "
                      f"(floor {floor})")

        # An architecture inferd does not serve: a startup error naming it.
        bad = os.path.join(out, "mamba.gguf")
        code = ("import gguf, numpy as np, sys\n"
                "w = gguf.GGUFWriter(sys.argv[1], 'mamba')\n"
                "w.add_block_count(1)\n"
                "w.add_tensor('token_embd.weight', np.zeros((4, 32), np.float32))\n"
                "w.write_header_to_file(); w.write_kv_data_to_file()\n"
                "w.write_tensors_to_file(); w.close()\n")
        subprocess.run([args.venv_python, "-c", code, bad], check=True)
        p = subprocess.run([args.inferd, "--listen", "127.0.0.1:0",
                            "--model", f"m={bad}"], capture_output=True,
                           timeout=60)
        err = p.stderr.decode() + p.stdout.decode()
        check(p.returncode != 0 and "mamba" in err and "llama" in err,
              f"unsupported architecture: exit {p.returncode}, {err[-500:]}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
