#!/usr/bin/env python3
"""Tiny GGUF decoders of every GGUF architecture inferd serves as a
generator (llama with llama.cpp's interleaved q/k rows, qwen2 with q/k/v
biases, qwen3 with q/k norms) and several weight types (Q8_0, Q4_0, Q4_1,
F16, BF16), written by tests/gguf/make_gguf_models.py with the PyPI `gguf`
package, served by the real inferd binary: greedy tokens over gRPC equal
the float64 NumPy reference on the gguf-dequantized weights
(tests/gguf/gguf_reference.py), for several prompts each. Also: a GGUF of an
architecture inferd does not serve is a startup error naming it.

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

TOKENS = 12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--venv-python", required=True)
    args = ap.parse_args()
    if not lib.models_present(args.test_models,
                              ["llama-tiny", "qwen2-tiny", "qwen3-tiny"]):
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
        names = sorted(f[:-5] for f in os.listdir(out) if f.endswith(".gguf"))
        check(len(names) >= 5, f"expected 5 GGUF models, got {names}")
        rng = random.Random(7)
        prompts = [[rng.randrange(3, 400) for _ in range(n)] for n in (1, 5, 17)]
        expected = {}
        for name in names:
            ref = subprocess.run(
                [args.venv_python, os.path.join(HERE, "gguf_reference.py"),
                 "--gguf", os.path.join(out, name + ".gguf"),
                 "--prompts", json.dumps(prompts), "--tokens", str(TOKENS)],
                capture_output=True, timeout=600)
            if ref.returncode != 0:
                print("FAIL: reference:", ref.stderr.decode()[-3000:])
                return 1
            expected[name] = json.loads(ref.stdout)["greedy"]

        models = [(n, os.path.join(out, n + ".gguf")) for n in names]
        with lib.InferdProcess(args.inferd, models) as server:
            server.wait_ready(args.stubs, names)
            stub = rpc.InferenceStub(grpc.insecure_channel(server.address))
            compared = 0
            for name in names:
                for i, ids in enumerate(prompts):
                    got = []
                    for chunk in stub.Generate(pb.GenerateRequest(
                            model=name, prompt_token_ids=pb.TokenIds(ids=ids),
                            sampling=pb.SamplingParams(max_tokens=TOKENS,
                                                       temperature=0))):
                        got += list(chunk.token_ids)
                    check(got == expected[name][i],
                          f"{name} prompt {i}: inferd {got} != reference "
                          f"{expected[name][i]}")
                    compared += len(expected[name][i])
            print(f"compared {compared} greedy tokens of {len(names)} GGUF "
                  "models with the NumPy reference")

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
