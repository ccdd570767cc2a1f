#!/usr/bin/env python3
"""Faults (issue 17, item 3): model files that are missing, truncated,
corrupted or lying (safetensors and GGUF; a missing, unparsable or
mismatched tokenizer; NaN weights; a GGUF tensor of an unknown ggml type)
each fail their model alone, with an error naming the file and the problem
in the log, in ListModels and in the status of every request to that model
(UNAVAILABLE), while the other models serve and health says SERVING
(with --allow-partial-start; without it health stays NOT_SERVING, tested by
ops_integration_test.py). Only
a path that names no model (no such GGUF file; a directory without
config.json, tested by server_integration_test.py) stops the server at
startup. A weights file truncated on disk after the server loaded it does
not take the server down (and, as the control, does kill it with SIGBUS
under --mmap-weights). The address-in-use refusal is tested by
server_integration_test.py.

Usage: faults_test.py --inferd BIN --stubs DIR --shared DIR --test-models DIR
"""
import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

ARGS = None
GREEDY_PROMPT = "Once upon a time"
GREEDY_TOKENS = 12


def stubs():
    return lib.import_stubs(ARGS.stubs)


def test_model(name):
    path = os.path.join(ARGS.test_models, name)
    return path if os.path.isfile(os.path.join(path, "config.json")) else None


# ------------------------------------------------------ safetensors surgery

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return header, raw[8 + n:]


def write_safetensors(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def tensor_names(header):
    return sorted((k for k in header if k != "__metadata__"),
                  key=lambda k: header[k]["data_offsets"][0])


def float_tensor(header):
    """The name of the largest F32 tensor (faults are put into it)."""
    names = [k for k in tensor_names(header) if header[k]["dtype"] == "F32"]
    return max(names, key=lambda k: header[k]["data_offsets"][1] -
               header[k]["data_offsets"][0])


def copy_model(src, dst):
    shutil.copytree(src, dst)
    return os.path.join(dst, "model.safetensors")


def offsets_past_end(d, src):
    w = copy_model(src, d)
    header, data = read_safetensors(w)
    last = tensor_names(header)[-1]
    b, e = header[last]["data_offsets"]
    header[last]["data_offsets"] = [b, e + (1 << 20)]
    write_safetensors(w, header, data)
    return w, [last]


def wrong_dtype_size(d, src):
    w = copy_model(src, d)
    header, data = read_safetensors(w)
    name = float_tensor(header)
    header[name]["dtype"] = "F16"  # half the bytes its offsets span
    write_safetensors(w, header, data)
    return w, [name]


def nan_weights(d, src):
    w = copy_model(src, d)
    header, data = read_safetensors(w)
    name = float_tensor(header)
    b, _ = header[name]["data_offsets"]
    data = bytearray(data)
    data[b + 4 * 3:b + 4 * 4] = struct.pack("<f", float("nan"))
    write_safetensors(w, header, bytes(data))
    return w, [name, "NaN"]


def truncated_header(d, src):
    w = copy_model(src, d)
    with open(w, "r+b") as f:
        f.truncate(100)
    return w, ["truncated"]


def corrupt_header(d, src):
    w = copy_model(src, d)
    with open(w, "r+b") as f:
        f.seek(8)
        f.write(b"{\"oops\": [1, 2,")
    return w, []


def missing_tokenizer(d, src):
    copy_model(src, d)
    tok = os.path.join(d, "tokenizer.json")
    os.remove(tok)
    return tok, ["does not exist"]


def tokenizer_bigger_than_embedding(d, src):
    copy_model(src, d)
    tok = os.path.join(d, "tokenizer.json")
    with open(os.path.join(d, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    with open(tok) as f:
        t = json.load(f)
    t["added_tokens"].append({
        "id": vocab + 7, "content": "<extra_far_token>", "single_word": False,
        "lstrip": False, "rstrip": False, "normalized": False,
        "special": True})
    with open(tok, "w") as f:
        json.dump(t, f)
    return tok, [str(vocab + 7), str(vocab)]


def corrupt_tokenizer(d, src):
    copy_model(src, d)
    tok = os.path.join(d, "tokenizer.json")
    with open(tok, "r+b") as f:
        f.truncate(os.path.getsize(tok) // 2)
    return tok, ["parse error"]


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(d, tensors, data_bytes, first_key="general.architecture"):
    """A llama GGUF header: `tensors` are (name, dims, ggml type, offset);
    `data_bytes` zero bytes follow the header's padding."""
    os.makedirs(d)
    path = os.path.join(d, "model.gguf")
    kv = [gguf_string(first_key) + struct.pack("<I", 8) +
          gguf_string("llama")]
    infos = [gguf_string(name) + struct.pack("<I", len(dims)) +
             struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", t, o)
             for name, dims, t, o in tensors]
    out = struct.pack("<IIQQ", 0x46554747, 3, len(infos), len(kv))
    out += b"".join(kv) + b"".join(infos)
    out += b"\0" * (-len(out) % 32) + bytes(data_bytes)
    with open(path, "wb") as f:
        f.write(out)
    return path


def gguf_unknown_quant(d, _):
    """One tensor of ggml type 99."""
    path = write_gguf(d, [("token_embd.weight", (32, 4), 99, 0)], 4096)
    return path, ["99", "token_embd.weight"]


def gguf_truncated(d, _):
    """An F32 tensor of 512 bytes with 100 bytes left in the file."""
    path = write_gguf(d, [("token_embd.weight", (32, 4), 0, 0)], 100)
    return path, ["truncated", "token_embd.weight"]


def gguf_offset_past_end(d, _):
    """A tensor whose offset lies 1 MiB past the end of the data."""
    path = write_gguf(d, [("token_embd.weight", (32, 4), 0, 1 << 20)], 512)
    return path, ["token_embd.weight", str(1 << 20)]


def gguf_corrupt_header(d, _):
    """A metadata key claiming 2^40 bytes."""
    path = write_gguf(d, [], 0)
    with open(path, "r+b") as f:
        f.seek(24)
        f.write(struct.pack("<Q", 1 << 40))
    return path, ["truncated", str(1 << 40)]


def gguf_missing_hyper_parameter(d, _):
    """A readable llama GGUF without the hyper-parameters of its config."""
    path = write_gguf(d, [], 0)
    return path, ["hyper-parameter"]


def gguf_not_gguf(d, _):
    os.makedirs(d)
    path = os.path.join(d, "model.gguf")
    with open(path, "wb") as f:
        f.write(b"PK\x03\x04 this is a zip file, not a model" + bytes(100))
    return path, ["not a GGUF file"]


# name -> (builder, source model); every builder returns the path the error
# must name and extra words it must contain. Each case makes its model
# FAILED with the error while the others serve.
CASES = {
    "offsets-past-end": (offsets_past_end, "bert-embed"),
    "wrong-dtype-size": (wrong_dtype_size, "bert-embed"),
    "nan-weights": (nan_weights, "bert-classifier"),
    "truncated-header": (truncated_header, "bert-embed"),
    "corrupt-header": (corrupt_header, "bert-embed"),
    "missing-tokenizer": (missing_tokenizer, "bert-embed"),
    "corrupt-tokenizer": (corrupt_tokenizer, "bert-embed"),
    "tokenizer-vocab": (tokenizer_bigger_than_embedding, "bert-embed"),
    "gguf-unknown-quant": (gguf_unknown_quant, None),
    "gguf-truncated": (gguf_truncated, None),
    "gguf-offset-past-end": (gguf_offset_past_end, None),
    "gguf-corrupt-header": (gguf_corrupt_header, None),
    "gguf-not-gguf": (gguf_not_gguf, None),
    "gguf-missing-hyper-parameter": (gguf_missing_hyper_parameter, None),
}


def greedy(inf, ipb, model):
    req = ipb.GenerateRequest(model=model, prompt=GREEDY_PROMPT)
    req.sampling.max_tokens = GREEDY_TOKENS
    req.sampling.temperature = 0.0
    req.sampling.ignore_eos = True
    ids = []
    for chunk in inf.Generate(req, timeout=120):
        ids.extend(chunk.token_ids)
    return ids


class FaultsTest(unittest.TestCase):
    def setUp(self):
        (self.grpc, self.ipb, self.ipb_grpc, self.mpb,
         self.mpb_grpc) = stubs()
        self.tmp = tempfile.mkdtemp(prefix="inferd-faults-")
        if not test_model("bert-embed") or not test_model("bert-classifier"):
            self.skipTest("generated test models missing")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def reference_tokens(self):
        """Greedy tokens of stories260K from a server serving it alone."""
        with lib.InferdProcess(ARGS.inferd,
                               [("stories", lib.stories_dir())]) as s:
            s.wait_ready(ARGS.stubs, ["stories"])
            with self.grpc.insecure_channel(s.address) as ch:
                return greedy(self.ipb_grpc.InferenceStub(ch), self.ipb,
                              "stories")

    def test_each_broken_model_fails_alone_with_a_clear_error(self):
        want = self.reference_tokens()
        self.assertEqual(len(want), GREEDY_TOKENS)
        models = [("stories", lib.stories_dir()),
                  ("embed", test_model("bert-embed"))]
        expect = {}
        for name, (build, src) in CASES.items():
            d = os.path.join(self.tmp, name)
            path, words = build(d, test_model(src) if src else None)
            models.append((name, path if name.startswith("gguf") else d))
            expect[name] = (path, words)
        with lib.InferdProcess(ARGS.inferd, models,
                               ("--metrics-listen", "127.0.0.1:0",
                                "--allow-partial-start"),
                               log_prefix="inferd-faults-") as s:
            with self.grpc.insecure_channel(s.address) as ch:
                ms = self.mpb_grpc.ModelsStub(ch)
                lib.HealthClient(ch, lib.load_health_pb2(ARGS.stubs)) \
                    .wait_serving(timeout=300)
                listed = {m.name: m for m in ms.ListModels(
                    self.mpb.ListModelsRequest()).models}
                inf = self.ipb_grpc.InferenceStub(ch)
                metrics = s.scrape()
                for name, (path, words) in expect.items():
                    with self.subTest(case=name):
                        m = listed.get(name)
                        self.assertIsNotNone(m, f"{name} not listed")
                        self.assertEqual(m.state, self.mpb.MODEL_STATE_FAILED,
                                         f"{name}: {m.error}")
                        self.assertIn(path, m.error, name)
                        for w in words:
                            self.assertIn(w, m.error, name)
                        self.assertIn(f"model '{name}' failed to load",
                                      s.output())
                        self.assertIn(
                            f'inferd_model_state{{model="{name}",'
                            f'state="failed"}} 1', metrics)
                        # Every request to it says why it cannot serve.
                        calls = [lambda: inf.Tokenize(self.ipb.TokenizeRequest(
                            model=name, text="hello"), timeout=30)]
                        if name.startswith("gguf"):
                            calls.append(lambda: greedy(inf, self.ipb, name))
                        elif CASES[name][1] == "bert-classifier":
                            calls.append(lambda: inf.Classify(
                                self.ipb.ClassifyRequest(model=name,
                                                         texts=["hello"]),
                                timeout=30))
                        else:
                            calls.append(lambda: inf.EmbedBatch(
                                self.ipb.EmbedRequest(model=name,
                                                      texts=["hello"]),
                                timeout=30))
                        for call in calls:
                            with self.assertRaises(self.grpc.RpcError) as e:
                                call()
                            self.assertEqual(
                                e.exception.code(),
                                self.grpc.StatusCode.UNAVAILABLE)
                            self.assertIn(path, e.exception.details())
                self.assertEqual(greedy(inf, self.ipb, "stories"), want)
                r = inf.EmbedBatch(self.ipb.EmbedRequest(model="embed",
                                                         texts=["hello"]))
                self.assertEqual(len(r.embeddings), 1)
            self.assertEqual(s.stop(), 0, s.output())

    def truncate_after_load(self, extra):
        """Loads copies of stories and bert-embed, truncates both weight
        files to zero bytes, then runs the same requests again. Returns
        (tokens before, after, embedding before, after, server)."""
        gen = os.path.join(self.tmp, "stories")
        emb = os.path.join(self.tmp, "embed")
        shutil.copytree(lib.stories_dir(), gen)
        shutil.copytree(test_model("bert-embed"), emb)
        s = lib.InferdProcess(ARGS.inferd, [("stories", gen), ("embed", emb)],
                              extra, log_prefix="inferd-trunc-")
        s.wait_ready(ARGS.stubs, ["stories", "embed"])
        ch = self.grpc.insecure_channel(s.address)
        inf = self.ipb_grpc.InferenceStub(ch)
        before = greedy(inf, self.ipb, "stories")
        e_before = list(inf.EmbedBatch(self.ipb.EmbedRequest(
            model="embed", texts=["a truncated file"])).embeddings[0].values)
        for d in (gen, emb):
            with open(os.path.join(d, "model.safetensors"), "r+b") as f:
                f.truncate(0)
        return s, ch, inf, before, e_before

    def test_weights_truncated_after_load_keep_serving(self):
        s, ch, inf, before, e_before = self.truncate_after_load(())
        try:
            for _ in range(3):
                self.assertEqual(greedy(inf, self.ipb, "stories"), before)
                e = list(inf.EmbedBatch(self.ipb.EmbedRequest(
                    model="embed", texts=["a truncated file"]))
                    .embeddings[0].values)
                self.assertEqual(e, e_before)
            ch.close()
            self.assertEqual(s.stop(), 0, s.output())
        finally:
            s.kill()

    def test_mapped_weights_truncated_after_load_are_fatal(self):
        """The control: with --mmap-weights the same truncation kills the
        process with SIGBUS (what the default copy prevents)."""
        s, ch, inf, _, _ = self.truncate_after_load(("--mmap-weights",))
        try:
            with self.assertRaises(self.grpc.RpcError):
                greedy(inf, self.ipb, "stories")
            self.assertEqual(s.proc.wait(timeout=60), -signal.SIGBUS,
                             s.output())
        finally:
            ch.close()
            s.kill()

    def test_a_path_that_names_no_model_is_a_startup_error(self):
        for model in (os.path.join(self.tmp, "nowhere", "model.gguf"),
                      os.path.join(self.tmp, "nowhere")):
            with self.subTest(path=model):
                r = subprocess.run(
                    [ARGS.inferd, "--listen", "127.0.0.1:0",
                     "--model", f"stories={lib.stories_dir()}",
                     "--model", f"gone={model}"],
                    capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("model 'gone'", r.stderr)
                self.assertIn(model, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1,
                                 r.stderr)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    lib.add_common_args(p)
    ARGS, rest = p.parse_known_args()
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
