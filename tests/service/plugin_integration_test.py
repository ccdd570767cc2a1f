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
- --list-components shows the plug-in's component and where it came from;
- the example config-parser plug-in (model_type "my_bert", whose LayerNorm
  epsilon is read from its own key "norm_epsilon"): a model of that
  model_type fails at startup without it (naming the model_type and
  --plugin) and, with it, serves embeddings equal to the NumPy reference of
  the same weights with that epsilon (and unequal to the reference with
  BERT's default, so the hook's value is the one used).
Exit 77 (ctest skip) only when the generated models are missing.
"""
import argparse
import os
import json
import shutil
import subprocess
import sys
import tempfile
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


def copy_model(src, dst, edit):
    """Copies model directory `src` to `dst` and applies `edit` to the
    copy's config.json (a dict)."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    edit(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return dst


# "my_bert" reads its LayerNorm epsilon from "norm_epsilon"; 0.5 is far from
# BERT's 1e-12, so a parser that ignored the key would give other numbers.
MY_EPS = 0.5


def make_my_bert(cfg):
    cfg["model_type"] = "my_bert"
    cfg.pop("layer_norm_eps", None)
    cfg.pop("hidden_act", None)  # the family's default (gelu)
    cfg["norm_epsilon"] = MY_EPS


def make_reference(cfg):
    cfg["layer_norm_eps"] = MY_EPS


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
            # F32: the reference comparison (dtype=auto would serve these
            # encoders in bfloat16 on AVX512_BF16 CPUs).
            ["--plugin", ARGS.plugin, "--dtype", "float32"])
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
        self.assertIn("plug-in API version 1", r.stderr)
        # The version this inferd provides, as its header defines it.
        header = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                              "..", "..", "runtime", "engine", "plugin_api.h")
        with open(header) as f:
            version = next(line.split()[2] for line in f
                           if line.startswith("#define INFERD_PLUGIN_API_VERSION"))
        self.assertIn(f"provides version {version}", r.stderr)
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

    def test_sampler_plugin_picks_the_runner_up_at_every_step(self):
        """A model run with sampler=sample_runner_up (the test plug-in's
        TokenSampler): each generated token is the second most likely one
        after the tokens before it, as the built-in sampler's top_logprobs
        on the same model (another name, same weights) say."""
        name = "llama-tiny"
        server = lib.InferdProcess(
            P.inferd, [("greedy", model_dir(name)),
                       ("runner_up", model_dir(name) + ",sampler=sample_runner_up")],
            ["--plugin", ARGS.sampler_plugin])
        try:
            channel = GRPC.insecure_channel(server.address)
            lib.HealthClient(channel, lib.load_health_pb2(P.stubs)).wait_serving()
            stub = IRPC.InferenceStub(channel)
            models = MRPC.ModelsStub(channel)
            info = {m.name: m for m in
                    models.ListModels(MPB.ListModelsRequest()).models}
            self.assertEqual(info["runner_up"].components["output_processor"],
                             "sample_runner_up")
            self.assertEqual(info["greedy"].components["output_processor"],
                             "sample_detokenize")
            prompt = [int(x) for x in
                      np.random.RandomState(3).randint(3, 500, size=12)]

            def generate(model, ids, n, logprobs=0):
                req = IPB.GenerateRequest(model=model)
                req.prompt_token_ids.ids.extend(ids)
                req.sampling.temperature = 0.0
                req.sampling.max_tokens = n
                req.sampling.ignore_eos = True
                req.sampling.logprobs = logprobs
                chunks = list(stub.Generate(req, timeout=120))
                tokens = [t for c in chunks for t in c.token_ids]
                lps = [lp for c in chunks for lp in c.logprobs]
                return tokens, lps

            got, got_lps = generate("runner_up", prompt, 6, logprobs=1)
            self.assertEqual(len(got), 6)
            greedy, _ = generate("greedy", prompt, 6)
            self.assertNotEqual(got, greedy)
            for k, token in enumerate(got):
                _, lps = generate("greedy", prompt + got[:k], 1, logprobs=2)
                top = lps[0].top
                self.assertEqual(len(top), 2)
                self.assertEqual(token, top[1].token_id, f"step {k}")
                # The plug-in's logprob is the same log-softmax.
                self.assertAlmostEqual(got_lps[k].sampled.logprob,
                                       top[1].logprob, delta=1e-4)
            channel.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_unknown_or_misplaced_sampler_is_a_startup_error(self):
        r = run_inferd("--model",
                       f"gen={model_dir('llama-tiny')},sampler=sample_nothing")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("sample_nothing", r.stderr)
        r = run_inferd("--plugin", ARGS.sampler_plugin, "--model",
                       f"cls={model_dir('bert-embed')},sampler=sample_runner_up")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("only applies to generation", r.stderr)

    def test_list_components_shows_builtins_and_the_plugin(self):
        r = subprocess.run([P.inferd, "--list-components"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        # One section per registry kind ("kind: what it is"), its entries
        # indented under it.
        sections = {}
        kind = None
        for line in r.stdout.splitlines():
            if line and not line.startswith(" "):
                kind = line.split(":", 1)[0]
                self.assertNotIn(kind, sections, r.stdout)
                self.assertTrue(line.split(":", 1)[1].strip(), line)
                sections[kind] = []
            elif line.startswith("  "):
                self.assertIsNotNone(kind, line)
                sections[kind].append(line.split()[0])
        expected = {
            "architecture": ["BertModel", "LlamaForCausalLM"],
            "workflow": ["encoder_embed", "causal_generate"],
            "input_processor": ["prompt_tokenizer"],
            "prefill_scheduler": ["prefill_only"],
            "batching_scheduler": ["continuous_batching"],
            "attention_backend": ["causal_prefill", "causal_paged"],
            "output_processor": ["pooling_mean", "relevance_scores"],
            "sampler": ["sample_detokenize"],
            "executor": ["prefill_loop", "continuous_batching_loop"],
            "model": ["BertModel"],
            "output_stage": ["dense", "normalize", "scores"],
            "token_head": ["bge_m3_sparse", "bge_m3_colbert"],
            "tool_parser": ["generic", "hermes", "llama3_json", "mistral", "pythonic"],
            "reasoning_parser": ["think", "none"],
            "rerank_format": ["qwen3"],
            "config_parser": ["bert", "llama"],
            "model_runner": ["cpu"],
            "device": ["cpu"],
        }
        self.assertEqual(sorted(sections), sorted(expected), r.stdout)
        for kind, names in expected.items():
            for name in names:
                self.assertIn(name, sections[kind], kind)
        # The sampler is no output processor, the schedulers are two kinds.
        self.assertNotIn("sample_detokenize", sections["output_processor"])
        self.assertNotIn("continuous_batching",
                         sections["prefill_scheduler"])
        self.assertNotIn("pooling_max", r.stdout)
        r = subprocess.run([P.inferd, "--list-components", "--plugin",
                            ARGS.plugin], capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        line = [l for l in r.stdout.splitlines() if "pooling_max" in l]
        self.assertEqual(len(line), 1, r.stdout)
        self.assertIn(ARGS.plugin, line[0])
        # The built-in config parsers are components too; a plug-in's is
        # listed with its origin.
        r = subprocess.run([P.inferd, "--list-components", "--plugin",
                            ARGS.config_plugin], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("config_parser:", r.stdout)
        for model_type in ("bert", "roberta", "xlm-roberta", "llama",
                           "mistral", "qwen2", "qwen3"):
            self.assertIn(f"\n  {model_type} - ", r.stdout)
        line = [l for l in r.stdout.splitlines() if "my_bert" in l]
        self.assertEqual(len(line), 1, r.stdout)
        self.assertIn(ARGS.config_plugin, line[0])
        help_text = subprocess.run([P.inferd, "--help"], capture_output=True,
                                   text=True, timeout=60).stdout
        self.assertIn("--plugin", help_text)
        self.assertIn("--list-components", help_text)



class ConfigParserPluginTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        src = model_dir("bert-embed")
        cls.my_bert = copy_model(src, os.path.join(cls.tmp.name, "my-bert"),
                                 make_my_bert)
        cls.reference = copy_model(src, os.path.join(cls.tmp.name, "ref"),
                                   make_reference)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_unknown_model_type_needs_the_plugin(self):
        r = run_inferd("--model", f"mine={self.my_bert}")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("model_type 'my_bert'", r.stderr)
        self.assertIn("--plugin", r.stderr)
        self.assertIn("xlm-roberta", r.stderr)  # the registered ones

    def test_plugin_parser_serves_the_model_like_the_reference(self):
        server = lib.InferdProcess(P.inferd, [("mine", self.my_bert)],
                                   ["--plugin", ARGS.config_plugin, "--dtype", "float32"])
        try:
            channel = GRPC.insecure_channel(server.address)
            lib.HealthClient(channel, lib.load_health_pb2(P.stubs)).wait_serving()
            stub = IRPC.InferenceStub(channel)
            models = MRPC.ModelsStub(channel)
            info = {m.name: m for m in
                    models.ListModels(MPB.ListModelsRequest()).models}
            self.assertEqual(info["mine"].state, MPB.MODEL_STATE_READY,
                             info["mine"].error)
            self.assertEqual(info["mine"].workflow, "encoder_embed")
            r = stub.EmbedBatch(IPB.EmbedRequest(model="mine", texts=TEXTS))
            self.assertEqual(len(r.embeddings), len(TEXTS))
            ref_model = REF.Model(self.reference)
            bert_default = REF.Model(model_dir("bert-embed"))
            for text, e in zip(TEXTS, r.embeddings):
                ids = list(stub.Tokenize(IPB.TokenizeRequest(
                    model="mine", text=text, add_special_tokens=True)).token_ids)
                hidden, _ = ref_model.forward(ids)
                want = REF.normalize(REF.pool(hidden, "cls"))
                got = np.asarray(e.values, np.float64)
                self.assertEqual(got.shape, want.shape)
                cos = float(got @ want /
                            (np.linalg.norm(got) * np.linalg.norm(want)))
                self.assertGreaterEqual(cos, 0.99999, text)
                self.assertLessEqual(np.max(np.abs(got - want)),
                                     1e-4 * np.max(np.abs(want)), text)
                # BERT's default epsilon would give a visibly different
                # embedding.
                hidden_default, _ = bert_default.forward(ids)
                other = REF.normalize(REF.pool(hidden_default, "cls"))
                self.assertGreater(np.max(np.abs(got - other)),
                                   100 * 1e-4 * np.max(np.abs(want)), text)
            channel.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())
        self.assertIn("loaded plug-in", server.output())

    def test_hook_errors_are_startup_errors_naming_the_key(self):
        bad = copy_model(self.my_bert, os.path.join(self.tmp.name, "bad"),
                         lambda cfg: cfg.update(norm_epsilon=-1))
        r = run_inferd("--plugin", ARGS.config_plugin, "--model",
                       f"bad={bad}")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("norm_epsilon", r.stderr)
        self.assertIn(os.path.join(bad, "config.json"), r.stderr)


def main():
    global P, ARGS, REF, GRPC, IPB, IRPC, MPB, MRPC
    parser = argparse.ArgumentParser()
    lib.add_common_args(parser)
    parser.add_argument("--plugin", required=True)
    parser.add_argument("--bad-plugin", required=True)
    parser.add_argument("--config-plugin", required=True)
    parser.add_argument("--sampler-plugin", required=True)
    ARGS, rest = parser.parse_known_args()
    P = lib.Paths(ARGS)
    if not lib.models_present(P.test_models, ("bert-maxpool", "bert-embed")):
        return 77
    REF = lib.import_reference()
    GRPC, IPB, IRPC, MPB, MRPC = lib.import_stubs(P.stubs)
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
