#!/usr/bin/env python3
"""inferd's GGUF reader against the PyPI `gguf` package (an independent
implementation) on the real SmolLM2-135M-Instruct GGUF: the same metadata
keys with the same types and values (arrays: element type, length and
first 16 elements), the same tensors in the same order with the same ggml
type, dims, byte size, data offset and first bytes; and a truncated copy of
the file is refused with a message, not a crash.
Dequantization (runtime/loader/gguf_quant.h) against gguf.quants.dequantize:
the first rows of one tensor of each type in the file (F32, Q8_0, Q4_1), and
random blocks of every type inferd decodes (F16, BF16, Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, Q4_K, Q6_K), within 1e-6 x max|ref| (both compute in float32).

usage: gguf_reader_test.py --dump inferd_gguf_dump --models BUILD/models
Skips (exit 77) with a message when the model was not fetched.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import gguf
import numpy as np
from gguf import quants

MODEL = "smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"


def reader_value(field):
    types = field.types
    if types[0] != gguf.GGUFValueType.ARRAY:
        return types[0].name.lower(), field.contents()
    return "array", (types[1].name.lower() if len(types) > 1 else None,
                     len(field.data), field.contents()[:16]
                     if types[1] != gguf.GGUFValueType.ARRAY else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    path = os.path.join(args.models, MODEL)
    if not os.path.isfile(path):
        print(f"SKIP: {path} missing (scripts/fetch-models.sh fetches it)")
        return 77
    out = subprocess.run([args.dump, path], capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        print("FAIL: inferd could not read the file:", out.stderr)
        return 1
    ours = json.loads(out.stdout)
    ref = gguf.GGUFReader(path)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    check(ours["version"] == int(ref.fields["GGUF.version"].contents()),
          "version")
    check(ours["alignment"] == ref.alignment, "alignment")
    ref_keys = [k for k in ref.fields if not k.startswith("GGUF.")]
    check(sorted(ours["metadata"]) == sorted(ref_keys),
          f"metadata keys differ: {set(ours['metadata']) ^ set(ref_keys)}")
    checked_values = 0
    for key in ref_keys:
        if key not in ours["metadata"]:
            continue
        kind, value = reader_value(ref.fields[key])
        mine = ours["metadata"][key]
        check(mine["type"] == kind, f"{key}: type {mine['type']} vs {kind}")
        if kind != "array":
            if isinstance(value, float):
                check(abs(mine["value"] - value) <= 1e-6 * max(1, abs(value)),
                      f"{key}: {mine['value']} vs {value}")
            else:
                check(mine["value"] == value, f"{key}: {mine['value']!r} vs {value!r}")
        else:
            etype, length, head = value
            check(mine["element_type"] == etype, f"{key}: element type")
            check(mine["length"] == length, f"{key}: length {mine['length']} vs {length}")
            if head is not None:
                got = mine["head"]
                want = list(head)
                if want and isinstance(want[0], float):
                    ok = all(abs(a - b) <= 1e-6 * max(1, abs(b)) for a, b in zip(got, want))
                else:
                    ok = got == want
                check(ok and len(got) == len(want), f"{key}: first elements differ")
        checked_values += 1

    check(len(ours["tensors"]) == len(ref.tensors),
          f"tensor count {len(ours['tensors'])} vs {len(ref.tensors)}")
    data_start = None
    for mine, t in zip(ours["tensors"], ref.tensors):
        name = t.name
        check(mine["name"] == name, f"tensor name {mine['name']} vs {name}")
        check(mine["type"] == t.tensor_type.name, f"{name}: type")
        check(mine["dims"] == [int(d) for d in t.shape], f"{name}: dims")
        check(mine["nbytes"] == int(t.n_bytes), f"{name}: nbytes")
        start = int(t.data_offset) - mine["offset"]
        if data_start is None:
            data_start = start
        check(start == data_start, f"{name}: data offset")
        first = [int(b) for b in t.data.view("uint8").reshape(-1)[:8]]
        check(mine["first_bytes"] == first, f"{name}: first bytes")
    check(ours["data_bytes"] == sum(int(t.n_bytes) for t in ref.tensors),
          "data bytes")

    # A truncated copy: refused, with the file named.
    with tempfile.TemporaryDirectory() as d:
        cut = os.path.join(d, "cut.gguf")
        with open(path, "rb") as src, open(cut, "wb") as dst:
            dst.write(src.read(os.path.getsize(path) - 1000))
        r = subprocess.run([args.dump, cut], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 1 and "truncated" in r.stderr and "cut.gguf" in r.stderr,
              f"truncated file: exit {r.returncode}, {r.stderr!r}")

    def close(got, want, what):
        want = np.asarray(want, np.float32).reshape(-1)
        check(got.shape == want.shape, f"{what}: {got.shape} vs {want.shape}")
        if got.shape == want.shape:
            scale = max(float(np.max(np.abs(want))), 1e-30)
            err = float(np.max(np.abs(got.astype(np.float64) - want)))
            check(err <= 1e-6 * scale, f"{what}: max abs err {err} (max |ref| {scale})")

    with tempfile.TemporaryDirectory() as d:
        out_f32 = os.path.join(d, "out.f32")
        seen = set()
        for t in ref.tensors:
            if t.tensor_type.name in seen:
                continue
            seen.add(t.tensor_type.name)
            rows = 4
            r = subprocess.run([args.dump, "--tensor", path, t.name, str(rows), out_f32],
                               capture_output=True, text=True, timeout=120)
            check(r.returncode == 0, f"{t.name}: {r.stderr}")
            if r.returncode != 0:
                continue
            got = np.fromfile(out_f32, dtype="<f4")
            data = t.data if t.data.ndim > 1 else t.data.reshape(1, -1)
            want = quants.dequantize(data[:rows], t.tensor_type) \
                if t.tensor_type.name not in ("F32",) else data[:rows]
            close(got, want, f"tensor {t.name} ({t.tensor_type.name})")
        rng = np.random.default_rng(7)
        for name, block_bytes, halves in (
                ("F16", 2, [0]), ("BF16", 2, []), ("Q8_0", 34, [0]),
                ("Q4_0", 18, [0]), ("Q4_1", 20, [0, 2]), ("Q5_0", 22, [0]),
                ("Q5_1", 24, [0, 2]), ("Q4_K", 144, [0, 2]), ("Q6_K", 210, [208]),
                # The types rewritten at load (runtime/loader/gguf_transcode.h).
                ("Q2_K", 84, [80, 82]), ("Q3_K", 110, [108]),
                ("Q5_K", 176, [0, 2]), ("IQ4_NL", 18, [0]),
                ("IQ4_XS", 136, [0])):
            blocks = rng.integers(0, 256, (64, block_bytes), dtype=np.uint8)
            # Finite, moderate f16 scales (random bytes could be inf/nan).
            for h in halves:
                v = rng.uniform(-0.05, 0.05, 64).astype(np.float16).view(np.uint8)
                blocks[:, h:h + 2] = v.reshape(64, 2)
            if name == "BF16":
                v = rng.uniform(-2, 2, 64).astype(np.float32).view(np.uint32) >> 16
                blocks[:] = v.astype(np.uint16).view(np.uint8).reshape(64, 2)
            src = os.path.join(d, name + ".bin")
            blocks.tofile(src)
            r = subprocess.run([args.dump, "--blocks", name, src, out_f32],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 0, f"{name} blocks: {r.stderr}")
            if r.returncode != 0:
                continue
            got = np.fromfile(out_f32, dtype="<f4")
            qtype = getattr(gguf.GGMLQuantizationType, name)
            if name == "F16":
                want = blocks.view(np.float16).astype(np.float32)
            elif name == "BF16":
                want = (blocks.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                want = quants.dequantize(blocks, qtype)
            close(got, want, f"random {name} blocks")
        checked_types = sorted(seen) + ["F16", "BF16", "Q8_0", "Q4_0", "Q4_1",
                                        "Q5_0", "Q5_1", "Q4_K", "Q6_K", "Q2_K",
                                        "Q3_K", "Q5_K", "IQ4_NL", "IQ4_XS"]

    print(f"dequantized and compared: {', '.join(checked_types)}")
    print(f"{checked_values} metadata values and {len(ref.tensors)} tensors "
          f"compared with gguf {gguf.__version__ if hasattr(gguf, '__version__') else ''}")
    if failures:
        for f in failures[:40]:
            print("FAIL:", f)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
