#!/usr/bin/python3
"""The example plug-in (examples/plugin: max pooling as the output processor
pooling_max) over real gRPC, and how inferd refuses what it cannot use:
- a model whose 1_Pooling/config.json asks for max pooling fails at startup
  without the plug-in, naming pooling_max and --plugin;
- with it, the model serves embeddings equal to the NumPy reference's max
  pooling (cosine >= 0.99999, max abs error <= 1e-4 x max|ref|), and any
  embedder takes POOLING_MAX requests; ModelInfo reports the running
  components;
- a plug-in built against another API version, a file that is not a plug-in
  and a missing file are startup errors that say what to do;
- --list-components shows the plug-in's component and where it came from.
Exit 77 (ctest skip) only when the generated models are missing.
"""
import argparse
import os
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

P = None
ARGS = None
REF = None
GRPC = IPB = IRPC = MPB = MRPC = None

TEXTS = ["hello world", "The quick brown fox jumps over the lazy dog.",
         "a", "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich."]


def model_dir(name):
    return os.path.join(P.test_models, name)


def run_inferd(*args):
    return subprocess.run([P.inferd, "--listen", "127.0.0.1:0", *args],
                          capture_output=True, text=True, timeout=120)


class PluginTest(unittest.TestCase):

    def assert_close(self, got, ref, what):
        got = np.asarray(got, np.float64)
        self.assertEqual(got.shape, ref.shape, what)
        cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref)))
        self.assertGreaterEqual(cos, 0.99999, what)
        self.assertLessEqual(np.max(np.abs(got - ref)),
                             1e-4 * np.max(np.abs(ref)), what)

    def ref_max_embedding(self, stub, name, directory, text):
        ids = list(stub.Tokenize(IPB.TokenizeRequest(
            model=name, text=text, add_special_tokens=True)).token_ids)
        hidden, _ = REF.Model(model_dir(directory)).forward(ids)
        return REF.normalize(REF.pool(hidden, "max"))

    def test_max_pooling_model_needs_the_plugin(self):
        r = run_inferd("--model", f"maxpool={model_dir('bert-maxpool')}")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("pooling_max", r.stderr)
        self.assertIn("--plugin", r.stderr)
        self.assertIn("1_Pooling/config.json", r.stderr)

    def test_plugin_serves_max_pooling_like_the_reference(self):
        server = lib.InferdProcess(
            P.inferd, [("maxpool", model_dir("bert-maxpool")),
                       ("cls", model_dir("bert-embed"))],
            ["--plugin", ARGS.plugin])
        try:
            channel = GRPC.insecure_channel(server.address)
            lib.HealthClient(channel, lib.load_health_pb2(P.stubs)).wait_serving()
            stub = IRPC.InferenceStub(channel)
            models = MRPC.ModelsStub(channel)
            info = {m.name: m for m in
                    models.ListModels(MPB.ListModelsRequest()).models}
            self.assertEqual(info["maxpool"].state, MPB.MODEL_STATE_READY,
                             info["maxpool"].error)
            self.assertEqual(info["maxpool"].pooling, "max")
            self.assertEqual(dict(info["maxpool"].components), {
                "input_processor": "embed_tokenizer",
                "scheduler": "prefill_only",
                "attention_backend": "bidirectional_prefill",
                "output_processor": "pooling_max",
                "executor": "prefill_loop"})
            self.assertEqual(info["cls"].components["output_processor"],
                             "pooling_cls")
            # The model's own pooling (from 1_Pooling), batched.
            r = stub.EmbedBatch(IPB.EmbedRequest(model="maxpool", texts=TEXTS))
            self.assertEqual(len(r.embeddings), len(TEXTS))
            for text, e in zip(TEXTS, r.embeddings):
                self.assert_close(e.values,
                                  self.ref_max_embedding(stub, "maxpool", "bert-maxpool",
                                                         text),
                                  f"maxpool/{text[:16]}")
            # Another embedder asked for max pooling per request.
            r = stub.EmbedBatch(IPB.EmbedRequest(
                model="cls", texts=TEXTS, pooling=IPB.POOLING_MAX,
                normalize=True))
            for text, e in zip(TEXTS, r.embeddings):
                self.assert_close(e.values,
                                  self.ref_max_embedding(stub, "cls", "bert-embed", text),
                                  f"cls as max/{text[:16]}")
            # The plug-in's pooling differs from the built-in ones.
            cls = stub.EmbedBatch(IPB.EmbedRequest(model="cls", texts=TEXTS[:1]))
            self.assertLess(np.dot(cls.embeddings[0].values,
                                   r.embeddings[0].values), 0.9999)
            channel.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())
        self.assertIn("loaded plug-in", server.output())

    def test_max_pooling_request_without_the_plugin_is_invalid(self):
        server = lib.InferdProcess(P.inferd, [("cls", model_dir("bert-embed"))])
        try:
            channel = GRPC.insecure_channel(server.address)
            lib.HealthClient(channel, lib.load_health_pb2(P.stubs)).wait_serving()
            stub = IRPC.InferenceStub(channel)
            with self.assertRaises(GRPC.RpcError) as cm:
                stub.EmbedBatch(IPB.EmbedRequest(model="cls", texts=["x"],
                                                 pooling=IPB.POOLING_MAX))
            self.assertEqual(cm.exception.code(),
                             GRPC.StatusCode.INVALID_ARGUMENT)
            self.assertIn("pooling_max", cm.exception.details())
            self.assertIn("--plugin", cm.exception.details())
            # The server still answers.
            ok = stub.EmbedBatch(IPB.EmbedRequest(model="cls", texts=["x"]))
            self.assertEqual(len(ok.embeddings), 1)
            channel.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_bad_plugins_are_startup_errors(self):
        model = ["--model", f"cls={model_dir('bert-embed')}"]
        r = run_inferd("--plugin", ARGS.bad_plugin, *model)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("plug-in API version 2", r.stderr)
        self.assertIn("provides version 1", r.stderr)
        self.assertIn("Rebuild", r.stderr)
        # A shared library that is not a plug-in (no inferd symbols).
        not_plugin = "/lib/x86_64-linux-gnu/libz.so.1"
        if not os.path.exists(not_plugin):
            not_plugin = "/usr/lib/x86_64-linux-gnu/libz.so.1"
        if os.path.exists(not_plugin):
            r = run_inferd("--plugin", not_plugin, *model)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("not an inferd plug-in", r.stderr)
        r = run_inferd("--plugin", "/nonexistent/libnothing.so", *model)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("cannot load", r.stderr)
        # Loading the same registrations twice (two copies of one plug-in)
        # is refused by name.
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "copy.so")
            shutil.copy(ARGS.plugin, copy)
            r = run_inferd("--plugin", ARGS.plugin, "--plugin", copy, *model)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("already registered", r.stderr)

    def test_list_components_shows_builtins_and_the_plugin(self):
        r = subprocess.run([P.inferd, "--list-components"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        for kind in ("architecture:", "workflow:", "input_processor:",
                     "scheduler:", "attention_backend:", "output_processor:",
                     "executor:", "model:"):
            self.assertIn(kind, r.stdout)
        for name in ("causal_prefill", "prefill_loop", "pooling_mean",
                     "continuous_batching", "BertModel"):
            self.assertIn(name, r.stdout)
        self.assertNotIn("pooling_max", r.stdout)
        r = subprocess.run([P.inferd, "--list-components", "--plugin",
                            ARGS.plugin], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [l for l in r.stdout.splitlines() if "pooling_max" in l]
        self.assertEqual(len(line), 1, r.stdout)
        self.assertIn(ARGS.plugin, line[0])
        help_text = subprocess.run([P.inferd, "--help"], capture_output=True,
                                   text=True, timeout=60).stdout
        self.assertIn("--plugin", help_text)
        self.assertIn("--list-components", help_text)


def main():
    global P, ARGS, REF, GRPC, IPB, IRPC, MPB, MRPC
    parser = argparse.ArgumentParser()
    lib.add_common_args(parser)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--bad-plugin", required=True)
    ARGS, rest = parser.parse_known_args()
    P = lib.Paths(ARGS)
    if not lib.models_present(P.test_models, ("bert-maxpool", "bert-embed")):
        return 77
    REF = lib.import_reference()
    GRPC, IPB, IRPC, MPB, MRPC = lib.import_stubs(P.stubs)
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
