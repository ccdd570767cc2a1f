#!/usr/bin/env python3
"""Quantize-at-load (`--model NAME=DIR,dtype=q8_0|q4_0|q4_1`) of the
generated safetensors decoders llama-tiny (untied LM head, llama3 RoPE
scaling) and qwen2-tiny (tied embedding table, which doubles as the LM head),
served by the real inferd binary: greedy tokens over gRPC equal the float64
NumPy reference run on the same weights quantized and dequantized by gguf-py
(gguf.quants, its ports of ggml's reference quantizers;
tests/gguf/gguf_reference.py --hf-dir). inferd quantizes with its own
device/quant.cc, so equal tokens mean the two quantizers agree (ggml's
rounding: roundf for Q8_0, trunc(x + 8.5) / trunc(x + 0.5) for Q4_0 / Q4_1).

Each model runs under both activation policies: `activations=exact` equal
to the plain float64 reference; `activations=int8` (the default) teacher-forced
against the reference with inferd's int8 activation quantization emulated
(tests/gguf/int8_check.py: the reference's argmax up to a first departure
that is a near-tie).

The test also reports how many sequences the float reference decodes
differently, and requires at least one such sequence for the 4-bit types:
it shows the comparison can tell quantized weights from float ones.

usage: quantize_at_load_test.py --inferd BIN --stubs DIR --test-models DIR
       --venv-python PY
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "service"))
import inferd_testlib as lib  # noqa: E402
from int8_check import Tally, check_int8_into  # noqa: E402

TOKENS = 16
SOURCES = ["llama-tiny", "qwen2-tiny"]
DTYPES = ["q8_0", "q4_0", "q4_1"]


def reference(args, src_dir, dtype, prompts):
    cmd = [args.venv_python, os.path.join(HERE, "gguf_reference.py"),
           "--prompts", json.dumps(prompts), "--tokens", str(TOKENS)]
    if dtype is None:
        # Float weights: --quantize F32 is a round trip that changes nothing.
        cmd += ["--hf-dir", src_dir, "--quantize", "F32"]
    else:
        cmd += ["--hf-dir", src_dir, "--quantize", dtype]
    ref = subprocess.run(cmd, capture_output=True, timeout=300)
    if ref.returncode != 0:
        raise SystemExit("reference failed: " + ref.stderr.decode()[-3000:])
    return json.loads(ref.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--venv-python", required=True)
    args = ap.parse_args()
    if not lib.models_present(args.test_models, SOURCES):
        return 1
    grpc, pb, rpc, _, _ = lib.import_stubs(args.stubs)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    rng = random.Random(11)
    prompts = [[rng.randrange(3, 11000) for _ in range(n)]
               for n in (1, 3, 8, 21)]
    expected, float_ref, models = {}, {}, []
    for src in SOURCES:
        src_dir = os.path.join(args.test_models, src)
        float_ref[src] = reference(args, src_dir, None, prompts)["greedy"]
        for dtype in DTYPES:
            name = f"{src}-{dtype}"
            ref = reference(args, src_dir, dtype, prompts)
            check(any(n.endswith(("lm_head.weight", "embed_tokens.weight"))
                      for n in ref["quantized"]),
                  f"{name}: reference quantized no LM head: {ref['quantized']}")
            expected[name] = (src, dtype, ref["greedy"])
            models.append((name, f"{src_dir},dtype={dtype},activations=exact"))
            models.append((name + "-int8", f"{src_dir},dtype={dtype},activations=int8"))

    compared = 0
    differs = {d: 0 for d in DTYPES}
    with lib.InferdProcess(args.inferd, models) as server:
        server.wait_ready(args.stubs, [n for n, _ in models])
        stub = rpc.InferenceStub(grpc.insecure_channel(server.address))
        for name, (src, dtype, greedy) in sorted(expected.items()):
            for i, ids in enumerate(prompts):
                got = []
                for chunk in stub.Generate(pb.GenerateRequest(
                        model=name, prompt_token_ids=pb.TokenIds(ids=ids),
                        sampling=pb.SamplingParams(max_tokens=TOKENS,
                                                   temperature=0))):
                    got += list(chunk.token_ids)
                check(got == greedy[i],
                      f"{name} prompt {i}: inferd {got} != reference "
                      f"{greedy[i]} (float weights: {float_ref[src][i]})")
                compared += len(greedy[i])
                differs[dtype] += greedy[i] != float_ref[src][i]
        # The same models under the int8 policy, teacher-forced.
        tally = Tally()
        for name, (src, dtype, _) in sorted(expected.items()):
            outs = [lib.generate(stub, pb.GenerateRequest(
                model=name + "-int8", prompt_token_ids=pb.TokenIds(ids=ids),
                sampling=pb.SamplingParams(max_tokens=TOKENS, temperature=0)))[0]
                for ids in prompts]
            check_int8_into(
                check, tally, args.venv_python,
                ["--hf-dir", os.path.join(args.test_models, src), "--quantize", dtype],
                prompts, outs, name + "-int8")
    print(tally.line())
    print(f"compared {compared} greedy tokens of {len(expected)} "
          f"quantized-at-load models with the NumPy reference on "
          f"gguf-py-quantized weights")
    print("sequences where the float-weight reference differs: " +
          ", ".join(f"{d} {n}/{len(prompts) * len(SOURCES)}"
                    for d, n in differs.items()))
    for d in ("q4_0", "q4_1"):
        check(differs[d] > 0,
              f"{d}: quantized and float references agree everywhere; the "
              "test cannot tell quantized weights from float ones")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
