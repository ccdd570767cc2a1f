#!/usr/bin/python3
"""Integration tests of the real inferd binary over loopback gRPC.

Starts `inferd` on an ephemeral port with the models at hand (the real
stories260K from ../shared, the generated tiny test models), then calls it
with the Debian python3-grpcio client (stubs generated at build time) and
with `buf curl` (server reflection). Exit code 77 (ctest skip) only when no
model at all is available.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

ARGS = None


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--inferd", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--buf", required=True)
    p.add_argument("--shared", required=True)
    p.add_argument("--test-models", required=True)
    args, rest = p.parse_known_args()
    return args, rest


def load_health_pb2():
    return lib.load_health_pb2(ARGS.stubs)


HealthClient = lib.HealthClient


class InferdProcess(lib.InferdProcess):
    def __init__(self, models, extra=()):
        super().__init__(ARGS.inferd, models, extra)


def available_models():
    models = []
    stories = lib.stories_dir()
    if os.path.isfile(os.path.join(stories, "config.json")):
        models.append(("stories", stories))
    else:
        print("note: ../shared/models/stories260K is absent; its checks are "
              "skipped", file=sys.stderr)
    for name in ("bert-embed", "xlmr-reranker", "bert-classifier"):
        path = os.path.join(ARGS.test_models, name)
        if os.path.isfile(os.path.join(path, "config.json")):
            models.append((name, path))
    return models


class ServerTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        import grpc
        from inferd.v1 import inference_pb2, inference_pb2_grpc
        from inferd.v1 import models_pb2, models_pb2_grpc
        health_pb2 = load_health_pb2()
        cls.grpc = grpc
        cls.ipb = inference_pb2
        cls.mpb = models_pb2
        cls.hpb = health_pb2
        cls.models = available_models()
        cls.server = InferdProcess(cls.models)
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.inference = inference_pb2_grpc.InferenceStub(cls.channel)
        cls.models_stub = models_pb2_grpc.ModelsStub(cls.channel)
        cls.health = HealthClient(cls.channel, health_pb2)
        cls.health.wait_serving()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.channel.close()
            cls.server.stop()

    def model_names(self):
        return [n for n, _ in self.models]

    def test_health_serving_overall_and_per_service(self):
        for svc in ("", "inferd.v1.Inference", "inferd.v1.Models"):
            r = self.health.Check(self.hpb.HealthCheckRequest(service=svc))
            self.assertEqual(r.status, self.hpb.HealthCheckResponse.SERVING, svc)
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.health.Check(self.hpb.HealthCheckRequest(service="nope.Svc"))
        self.assertEqual(cm.exception.code(), self.grpc.StatusCode.NOT_FOUND)

    def test_reflection_lists_every_service_with_buf_curl(self):
        out = subprocess.run(
            [ARGS.buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge",
             "--list-services", f"http://{self.server.address}"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        services = set(out.stdout.split())
        for svc in ("inferd.v1.Inference", "inferd.v1.Models",
                    "grpc.health.v1.Health"):
            self.assertIn(svc, services)
        self.assertTrue(any("reflection" in s for s in services), services)

    def test_reflection_describes_health_and_calls_it_with_buf_curl(self):
        out = subprocess.run(
            [ARGS.buf, "curl", "--protocol", "grpc", "--http2-prior-knowledge",
             "--data", "{}",
             f"http://{self.server.address}/grpc.health.v1.Health/Check"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["status"], "SERVING")

    def test_list_models_matches_config(self):
        r = self.models_stub.ListModels(self.mpb.ListModelsRequest())
        self.assertEqual([m.name for m in r.models], self.model_names())
        for m in r.models:
            self.assertEqual(m.state, self.mpb.MODEL_STATE_READY, m.error)
            with open(os.path.join(dict(self.models)[m.name],
                                   "config.json")) as f:
                cfg = json.load(f)
            self.assertEqual(m.architecture, cfg["architectures"][0])
            self.assertEqual(m.hidden_size, cfg["hidden_size"])
            self.assertGreaterEqual(m.vocab_size, cfg["vocab_size"])
            self.assertGreater(m.max_input_tokens, 0)
            self.assertTrue(m.workflow)

    def test_get_model_stories260k(self):
        if "stories" not in self.model_names():
            self.skipTest("examples/models/stories260K absent")
        m = self.models_stub.GetModel(self.mpb.GetModelRequest(name="stories"))
        self.assertEqual(m.architecture, "LlamaForCausalLM")
        self.assertEqual(m.workflow, "causal_generate")
        self.assertEqual(list(m.tasks), [self.mpb.TASK_GENERATE])
        self.assertEqual(m.max_input_tokens, 512)
        self.assertEqual(m.vocab_size, 512)

    def test_get_unknown_model_is_not_found(self):
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.models_stub.GetModel(self.mpb.GetModelRequest(name="nope"))
        self.assertEqual(cm.exception.code(), self.grpc.StatusCode.NOT_FOUND)
        self.assertIn("nope", cm.exception.details())

    def test_tokenize_and_detokenize_round_trip(self):
        name = self.model_names()[0]
        r = self.inference.Tokenize(self.ipb.TokenizeRequest(
            model=name, text="Once upon a time", return_offsets=True))
        self.assertGreater(len(r.token_ids), 2)
        self.assertEqual(len(r.offsets), len(r.token_ids))
        d = self.inference.Detokenize(self.ipb.DetokenizeRequest(
            model=name, token_ids=r.token_ids))
        self.assertIn("upon a time", d.text.lower())

    def test_detokenize_out_of_range_is_invalid_argument(self):
        name = self.model_names()[0]
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.inference.Detokenize(self.ipb.DetokenizeRequest(
                model=name, token_ids=[10 ** 9]))
        self.assertEqual(cm.exception.code(),
                         self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("vocabulary", cm.exception.details())

    def test_tokenize_unknown_model_is_not_found(self):
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.inference.Tokenize(self.ipb.TokenizeRequest(model="x", text="a"))
        self.assertEqual(cm.exception.code(), self.grpc.StatusCode.NOT_FOUND)

    def test_generate_with_bad_sampling_is_invalid_argument(self):
        if "stories" not in self.model_names():
            self.skipTest("examples/models/stories260K absent")
        req = self.ipb.GenerateRequest(model="stories", prompt="Once")
        req.sampling.top_p = 2.0
        with self.assertRaises(self.grpc.RpcError) as cm:
            list(self.inference.Generate(req))
        self.assertEqual(cm.exception.code(),
                         self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("top_p", cm.exception.details())

    def test_task_the_model_cannot_do_is_failed_precondition(self):
        if "stories" not in self.model_names():
            self.skipTest("examples/models/stories260K absent")
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.inference.EmbedBatch(self.ipb.EmbedRequest(
                model="stories", texts=["hello"]))
        self.assertEqual(cm.exception.code(),
                         self.grpc.StatusCode.FAILED_PRECONDITION)

    def test_empty_embed_request_is_invalid_argument(self):
        embedders = [n for n in self.model_names() if n.endswith("embed")]
        if not embedders:
            self.skipTest("no generated embedding model")
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.inference.EmbedBatch(self.ipb.EmbedRequest(model=embedders[0]))
        self.assertEqual(cm.exception.code(),
                         self.grpc.StatusCode.INVALID_ARGUMENT)


class StartupTest(unittest.TestCase):
    """Config errors exit non-zero with one line saying what to fix."""

    def run_inferd(self, *args):
        return subprocess.run([ARGS.inferd, *args], capture_output=True,
                              text=True, timeout=60)

    def test_help_lists_flags(self):
        r = self.run_inferd("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--model", r.stdout)
        self.assertIn("--listen", r.stdout)

    def test_unknown_architecture_lists_supported_ones(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump({"architectures": ["GPTNeoXForCausalLM"],
                           "model_type": "llama", "vocab_size": 10,
                           "hidden_size": 8, "num_hidden_layers": 1,
                           "num_attention_heads": 2,
                           "intermediate_size": 16}, f)
            with open(os.path.join(d, "tokenizer.json"), "w") as f:
                f.write("{}")
            r = self.run_inferd("--listen", "127.0.0.1:0", "--model", f"x={d}")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("GPTNeoXForCausalLM", r.stderr)
        self.assertIn("LlamaForCausalLM", r.stderr)
        self.assertIn("BertModel", r.stderr)

    def test_missing_config_json_fails_at_startup(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_inferd("--listen", "127.0.0.1:0", "--model", f"x={d}")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("config.json", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_address_in_use_is_a_startup_error(self):
        # gRPC turns SO_REUSEPORT on by default on Linux: without inferd's
        # own refusal a second server would start on the same port and
        # silently take part of the traffic.
        models = available_models()[:1]
        first = InferdProcess(models, ["--metrics-listen", "127.0.0.1:0",
                                       "--health-listen", "127.0.0.1:0"])
        try:
            model_args = []
            for name, path in models:
                model_args += ["--model", f"{name}={path}"]
            cases = [
                ("--listen", f"127.0.0.1:{first.port}", []),
                ("--health-listen", f"127.0.0.1:{first.health_port}",
                 ["--listen", "127.0.0.1:0"]),
                ("--metrics-listen", f"127.0.0.1:{first.metrics_port}",
                 ["--listen", "127.0.0.1:0"]),
            ]
            for flag, address, extra in cases:
                r = self.run_inferd(*extra, flag, address, *model_args)
                self.assertNotEqual(r.returncode, 0, f"{flag} {address}")
                self.assertIn(address.rsplit(":", 1)[1], r.stderr, r.stderr)
                self.assertIn(flag, r.stderr)
            # The first server is unaffected.
            self.assertIsNone(first.proc.poll())
        finally:
            first.stop()

    def test_bad_flag_is_one_line(self):
        r = self.run_inferd("--model", "x=/tmp", "--threads", "many")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertIn("--threads", r.stderr)

    def test_sigterm_exits_cleanly(self):
        models = available_models()
        server = InferdProcess(models)
        try:
            time.sleep(0.5)
        finally:
            code = server.stop(signal.SIGTERM)
        self.assertEqual(code, 0, server.output())
        self.assertIn("inferd stopped", server.output())


def main():
    global ARGS
    ARGS, rest = parse_args()
    sys.path.insert(0, ARGS.stubs)
    if not available_models():
        print("SKIP: no model available (neither ../shared/models/stories260K "
              "nor generated test models)")
        return 77
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
