#!/usr/bin/python3
"""Integration tests of operating inferd: metrics, security, limits and
lifecycle, against the real `inferd` binary on loopback.

Each test class starts its own inferd with the flags it checks, then calls
it with the Debian python3-grpcio client (stubs generated at build time),
scrapes /metrics over HTTP with urllib, makes certificates with the openssl
CLI, and signals the process. Pass a class name (MetricsTest, SecurityTest,
LimitsTest, LifecycleTest) to run one class. Exit code 77 (ctest skip) only
when no model at all is available.
"""
import argparse
import json
import os
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

ARGS = None
STARTED = []  # every Inferd, killed at exit if a test left one running
GEN_MODELS = ("llama-tiny", "qwen2-tiny")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--inferd", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--shared", required=True)
    p.add_argument("--test-models", required=True)
    p.add_argument("--docs", required=True, help="docs/metrics.md")
    p.add_argument("--buf", default="")
    args, rest = p.parse_known_args()
    return args, rest


def model_path(name):
    """Path of a generated test model (or stories260K), or None."""
    if name == "stories":
        path = lib.stories_dir()
    else:
        path = os.path.join(ARGS.test_models, name)
    return path if os.path.isfile(os.path.join(path, "config.json")) else None


def generate_model():
    """(name, path) of the tiny generative model the tests drive."""
    for name in GEN_MODELS + ("stories",):
        path = model_path(name)
        if path:
            return name, path
    return None


def load_health_pb2():
    return lib.load_health_pb2(ARGS.stubs)


def stubs():
    return lib.import_stubs(ARGS.stubs)


class Inferd(lib.InferdProcess):
    """An inferd child process on ephemeral loopback ports."""

    def __init__(self, models, extra=()):
        super().__init__(ARGS.inferd, models, extra, log_prefix="inferd-ops-")
        STARTED.append(self)

    def stop(self, sig=signal.SIGTERM, timeout=120):
        return super().stop(sig, timeout)


def wait_serving(channel, timeout=120):
    lib.HealthClient(channel, load_health_pb2()).wait_serving(timeout)


def health_check(channel, timeout=5):
    hpb = load_health_pb2()
    return lib.HealthClient(channel, hpb).Check(
        hpb.HealthCheckRequest(service=""), timeout=timeout).status


# ------------------------------------------------------ Prometheus parsing

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text format -> ({(name, frozenset(labels)): value},
    {name: type})."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError(f"not a Prometheus sample line: {line!r}")
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples, types


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before, after, name, **labels):
    return value(after, name, **labels) - value(before, name, **labels)


# ----------------------------------------------------------------- metrics

class MetricsTest(unittest.TestCase):
    """Metrics move as expected after known traffic."""

    @classmethod
    def setUpClass(cls):
        grpc, ipb, ipb_grpc, mpb, mpb_grpc = stubs()
        cls.grpc, cls.ipb, cls.mpb = grpc, ipb, mpb
        cls.models = [(n, model_path(n)) for n in
                      ("bert-embed", "xlmr-reranker", "bert-classifier")
                      if model_path(n)]
        cls.gen = generate_model()
        if cls.gen:
            cls.models.append(cls.gen)
        if not cls.models:
            raise unittest.SkipTest("no model available")
        cls.server = Inferd(cls.models, ["--metrics-listen", "127.0.0.1:0"])
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.inference = ipb_grpc.InferenceStub(cls.channel)
        cls.models_stub = mpb_grpc.ModelsStub(cls.channel)
        wait_serving(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def names(self):
        return [n for n, _ in self.models]

    def scrape(self):
        return parse_metrics(self.server.scrape())

    def settled(self, check, timeout=10):
        """Runs check(samples) on fresh scrapes until it passes or
        `timeout` seconds pass (then its last failure is raised)."""
        deadline = time.time() + timeout
        while True:
            after, _ = self.scrape()
            try:
                check(after)
                return
            except AssertionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    def test_generate_traffic_moves_generation_metrics(self):
        if not self.gen:
            self.skipTest("no generative test model")
        name = self.gen[0]
        before, _ = self.scrape()
        n, max_tokens = 3, 5
        prompt_tokens = 0
        for i in range(n):
            req = self.ipb.GenerateRequest(model=name, prompt=f"Once upon {i}")
            req.sampling.max_tokens = max_tokens
            req.sampling.ignore_eos = True
            final = list(self.inference.Generate(req))[-1]
            self.assertEqual(final.finish_reason, self.ipb.FINISH_REASON_LENGTH)
            prompt_tokens += final.usage.prompt_tokens
        # One bad request: counted under its code, not as a success.
        bad = self.ipb.GenerateRequest(model=name, prompt="x")
        bad.sampling.top_p = 3.0
        with self.assertRaises(self.grpc.RpcError):
            list(self.inference.Generate(bad))

        # Counters move when the server finishes its side of a call,
        # which may be just after the client saw the answer: check
        # until they settle.
        def check(after):
            m = dict(model=name)
            self.assertEqual(delta(before, after, "inferd_rpc_requests_total",
                                   rpc="Generate", code="OK", **m), n)
            self.assertEqual(delta(before, after, "inferd_rpc_requests_total",
                                   rpc="Generate", code="INVALID_ARGUMENT", **m), 1)
            self.assertEqual(delta(before, after, "inferd_request_success_total",
                                   finished_reason="length", **m), n)
            self.assertEqual(delta(before, after, "inferd_generation_tokens_total",
                                   **m), n * max_tokens)
            self.assertEqual(delta(before, after, "inferd_prompt_tokens_total",
                                   **m), prompt_tokens)
            for hist in ("inferd_time_to_first_token_seconds",
                         "inferd_e2e_request_latency_seconds",
                         "inferd_request_queue_time_seconds",
                         "inferd_request_prompt_tokens",
                         "inferd_request_generation_tokens"):
                self.assertEqual(delta(before, after, hist + "_count", **m), n, hist)
            # Every output token after the first has one inter-token time.
            self.assertEqual(delta(before, after,
                                   "inferd_time_per_output_token_seconds_count",
                                   **m), n * (max_tokens - 1))
            self.assertEqual(delta(before, after,
                                   "inferd_request_generation_tokens_sum", **m),
                             n * max_tokens)
            # At least one step per generated token; each step ran >= 1 token.
            steps = delta(before, after, "inferd_iteration_batch_size_count", **m)
            self.assertGreaterEqual(steps, max_tokens)
            self.assertEqual(delta(before, after,
                                   "inferd_model_forward_passes_total", **m), steps)
            self.assertGreaterEqual(
                delta(before, after, "inferd_iteration_tokens_sum", **m),
                prompt_tokens + n * (max_tokens - 1))
            # Every generation step splits its tokens into prefill and
            # decode and reports its wall time.
            for hist in ("inferd_iteration_prefill_tokens",
                         "inferd_iteration_decode_tokens",
                         "inferd_iteration_duration_seconds"):
                self.assertEqual(delta(before, after, hist + "_count", **m),
                                 steps, hist)
            self.assertEqual(
                delta(before, after, "inferd_iteration_prefill_tokens_sum", **m)
                + delta(before, after, "inferd_iteration_decode_tokens_sum", **m),
                delta(before, after, "inferd_iteration_tokens_sum", **m))
            self.assertGreaterEqual(
                delta(before, after, "inferd_iteration_decode_tokens_sum", **m),
                n * (max_tokens - 1))
            self.assertGreater(
                delta(before, after, "inferd_iteration_duration_seconds_sum", **m),
                0)
            # Idle again: nothing running or waiting, no KV block held.
            self.assertEqual(value(after, "inferd_num_requests_running", **m), 0)
            self.assertEqual(value(after, "inferd_num_requests_waiting", **m), 0)
            self.assertEqual(value(after, "inferd_kv_cache_usage_perc", **m), 0)
            self.assertGreater(value(after, "inferd_kv_cache_blocks",
                                     state="free", **m), 0)
            # The inference gateway's names carry the same values.
            g = dict(model_name=name)
            for gie, own in (("vllm:num_requests_running",
                              "inferd_num_requests_running"),
                             ("vllm:num_requests_waiting",
                              "inferd_num_requests_waiting"),
                             ("vllm:kv_cache_usage_perc",
                              "inferd_kv_cache_usage_perc")):
                self.assertIn((gie, frozenset(g.items())), after, gie)
                self.assertEqual(value(after, gie, **g),
                                 value(after, own, **m), gie)

        self.settled(check)

    def test_inference_gateway_cache_config(self):
        """The endpoint picker's prefix-cache scorer reads the KV cache's
        block size and count from vllm:cache_config_info; a model without
        a KV cache reports usage 0 and no cache config."""
        if not self.gen:
            self.skipTest("no generative test model")
        samples, _ = self.scrape()
        name = self.gen[0]
        m = dict(model=name)
        info = [dict(labels) for (n, labels), v in samples.items()
                if n == "vllm:cache_config_info" and v == 1 and
                dict(labels).get("model_name") == name]
        self.assertEqual(len(info), 1, info)
        blocks = (value(samples, "inferd_kv_cache_blocks", state="free", **m) +
                  value(samples, "inferd_kv_cache_blocks", state="used", **m))
        self.assertGreater(blocks, 0)
        self.assertEqual(int(info[0]["num_gpu_blocks"]), blocks)
        self.assertGreater(int(info[0]["block_size"]), 0)
        for other in self.names():
            if other in self.gen:
                continue
            g = frozenset({"model_name": other}.items())
            self.assertEqual(samples.get(("vllm:kv_cache_usage_perc", g)), 0.0,
                             other)
            self.assertFalse([1 for (n, labels) in samples
                              if n == "vllm:cache_config_info" and
                              dict(labels).get("model_name") == other], other)

    def test_repeated_long_prompt_hits_the_prefix_cache(self):
        if not self.gen:
            self.skipTest("no generative test model")
        name = self.gen[0]
        prompt = " ".join(["the cat sat on the mat"] * 12)
        before, _ = self.scrape()
        usages = []
        for _ in range(2):
            req = self.ipb.GenerateRequest(model=name, prompt=prompt)
            req.sampling.max_tokens = 2
            usages.append(list(self.inference.Generate(req))[-1].usage)
        after, _ = self.scrape()
        m = dict(model=name)
        queries = delta(before, after, "inferd_prefix_cache_queries_total", **m)
        hits = delta(before, after, "inferd_prefix_cache_hits_total", **m)
        self.assertGreater(usages[1].cached_prompt_tokens, 0)
        self.assertGreaterEqual(queries, usages[0].prompt_tokens)
        self.assertGreaterEqual(hits, usages[1].cached_prompt_tokens)
        self.assertLessEqual(hits, queries)

    def test_embed_rerank_classify_traffic_moves_prefill_metrics(self):
        names = self.names()
        before, _ = self.scrape()
        expected = []  # (model, task, requests, inputs, tokens)
        if "bert-embed" in names:
            tokens = 0
            for _ in range(2):
                r = self.inference.EmbedBatch(self.ipb.EmbedRequest(
                    model="bert-embed", texts=["hello world", "a b c d"]))
                tokens += r.usage.prompt_tokens or sum(
                    e.tokens for e in r.embeddings)
            # Two requests on one bidi stream count like unary ones.
            stream = self.inference.Embed(iter([
                self.ipb.EmbedRequest(model="bert-embed", id="1",
                                      texts=["one"]),
                self.ipb.EmbedRequest(model="bert-embed", id="2",
                                      texts=["two", "three", "four"])]))
            for r in stream:
                tokens += r.usage.prompt_tokens or sum(
                    e.tokens for e in r.embeddings)
            expected.append(("bert-embed", "embed", 4, 8, tokens))
        if "xlmr-reranker" in names:
            r = self.inference.Rerank(self.ipb.RerankRequest(
                model="xlmr-reranker", query="what is a cat",
                documents=["a cat is an animal", "paris", "cats purr"]))
            expected.append(("xlmr-reranker", "rerank", 1, 3,
                             r.usage.prompt_tokens))
        if "bert-classifier" in names:
            r = self.inference.Classify(self.ipb.ClassifyRequest(
                model="bert-classifier", texts=["great", "awful"]))
            expected.append(("bert-classifier", "classify", 1, 2,
                             r.usage.prompt_tokens))
        if not expected:
            self.skipTest("no embedding, reranking or classification model")

        # Counters move when the server finishes its side of a call,
        # which may be just after the client saw the answer: check
        # until they settle.
        def check(after):
            for model, task, requests, inputs, tokens in expected:
                lab = dict(model=model, task=task)
                self.assertEqual(delta(before, after, "inferd_embed_request_count",
                                       **lab), requests, model)
                self.assertEqual(delta(before, after, "inferd_embed_input_count",
                                       **lab), inputs, model)
                if tokens:
                    self.assertEqual(delta(before, after, "inferd_embed_token_count",
                                           **lab), tokens, model)
                for hist in ("inferd_embed_request_duration_seconds",
                             "inferd_embed_tokenization_duration_seconds",
                             "inferd_embed_inference_duration_seconds"):
                    self.assertEqual(delta(before, after, hist + "_count", **lab),
                                     requests, (model, hist))
                self.assertEqual(delta(before, after,
                                       "inferd_request_queue_time_seconds_count",
                                       model=model), requests, model)
                self.assertGreaterEqual(
                    delta(before, after, "inferd_iteration_batch_size_sum",
                          model=model), inputs, model)
                self.assertEqual(value(after, "inferd_num_requests_waiting",
                                       model=model), 0)
                self.assertEqual(value(after, "inferd_model_state", model=model,
                                       state="ready"), 1)
                self.assertGreater(value(after, "inferd_model_weight_bytes",
                                         model=model), 0)

        self.settled(check)

    def test_errors_are_counted_by_code(self):
        before, _ = self.scrape()
        with self.assertRaises(self.grpc.RpcError) as cm:
            self.inference.Tokenize(self.ipb.TokenizeRequest(model="nope",
                                                             text="a"))
        self.assertEqual(cm.exception.code(), self.grpc.StatusCode.NOT_FOUND)
        self.models_stub.ListModels(self.mpb.ListModelsRequest())

        # Counters move when the server finishes its side of a call,
        # which may be just after the client saw the answer: check
        # until they settle.
        def check(after):
            self.assertEqual(delta(before, after, "inferd_rpc_requests_total",
                                   rpc="Tokenize", model="", code="NOT_FOUND"), 1)
            self.assertEqual(delta(before, after, "inferd_rpc_requests_total",
                                   rpc="ListModels", model="", code="OK"), 1)
            # The scrape happens outside any call.
            self.assertEqual(value(after, "inferd_rpc_in_flight"), 0)

        self.settled(check)

    def test_every_exported_metric_is_documented_and_typed(self):
        # Traffic of every kind first, so labelled families exist.
        self.test_errors_are_counted_by_code()
        if self.gen:
            req = self.ipb.GenerateRequest(model=self.gen[0], prompt="Hi")
            req.sampling.max_tokens = 3
            req.sampling.ignore_eos = True
            list(self.inference.Generate(req))
        self.test_embed_rerank_classify_traffic_moves_prefill_metrics()
        _, types = self.scrape()
        with open(ARGS.docs) as f:
            doc = f.read()
        documented = dict(re.findall(
            r"^\|\s*`((?:inferd_|vllm:)[a-z0-9_]+)`\s*\|\s*"
            r"(counter|gauge|histogram)\s*\|",
            doc, re.M))
        self.assertTrue(documented, "no metric table in docs/metrics.md")
        for name, kind in types.items():
            if name.startswith("exposer_"):
                continue  # the HTTP exposer's own metrics (documented)
            self.assertIn(name, documented, f"{name} is not documented")
            self.assertEqual(documented[name], kind, name)
        present = set(types)
        for name in documented:
            needs_gen = name.startswith(("inferd_kv_", "inferd_prefix_",
                                         "inferd_num_preemptions",
                                         "inferd_time_", "inferd_e2e",
                                         "inferd_request_success",
                                         "inferd_prompt_", "inferd_generation_",
                                         "inferd_request_prompt",
                                         "inferd_request_generation"))
            if needs_gen and not self.gen:
                continue
            # Only after a Hub download / an unload (model_lifecycle_test
            # checks them).
            if name in ("inferd_model_download_bytes",
                        "inferd_model_unloads_total"):
                continue
            if name.startswith("inferd_embed_") and not any(
                    n in self.names() for n in ("bert-embed", "xlmr-reranker",
                                                "bert-classifier")):
                continue
            self.assertIn(name, present, f"{name} is documented, not exported")


# ---------------------------------------------------------------- security

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=120)


def make_pki(d):
    """CA, a server cert for localhost/127.0.0.1, a client cert from the CA
    and a client cert from an unrelated CA. Returns {name: pem bytes}."""
    def ca(prefix):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", f"/CN={prefix} test CA", "-keyout", f"{prefix}.key",
                "-out", f"{prefix}.crt", cwd=d)

    def leaf(name, ca_name, ext):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca_name}.crt",
                "-CAkey", f"{ca_name}.key", "-CAcreateserial", "-days", "2",
                "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)

    ca("ca")
    ca("rogue")
    leaf("server", "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
         "extendedKeyUsage=serverAuth\n")
    leaf("client", "ca", "extendedKeyUsage=clientAuth\n")
    leaf("intruder", "rogue", "extendedKeyUsage=clientAuth\n")
    pem = {}
    for n in ("ca", "rogue", "server", "client", "intruder"):
        for ext in ("crt", "key"):
            with open(os.path.join(d, f"{n}.{ext}"), "rb") as f:
                pem[f"{n}.{ext}"] = f.read()
    return pem


class SecurityTest(unittest.TestCase):
    """TLS, mTLS and API keys."""

    @classmethod
    def setUpClass(cls):
        grpc, ipb, ipb_grpc, mpb, mpb_grpc = stubs()
        cls.grpc, cls.ipb, cls.ipb_grpc = grpc, ipb, ipb_grpc
        cls.mpb, cls.mpb_grpc = mpb, mpb_grpc
        cls.model = next(((n, model_path(n)) for n in
                          ("bert-embed", "stories", "bert-classifier")
                          if model_path(n)), None)
        if cls.model is None:
            raise unittest.SkipTest("no model available")
        if shutil.which("openssl") is None:
            raise unittest.SkipTest("the openssl CLI is not installed")
        cls.dir = tempfile.mkdtemp(prefix="inferd-pki-")
        cls.pem = make_pki(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def secure_channel(self, server, root="ca.crt", client=None):
        creds = self.grpc.ssl_channel_credentials(
            root_certificates=self.pem[root],
            private_key=self.pem[f"{client}.key"] if client else None,
            certificate_chain=self.pem[f"{client}.crt"] if client else None)
        return self.grpc.secure_channel(
            server.address, creds,
            options=[("grpc.ssl_target_name_override", "localhost")])

    def tokenize(self, channel, metadata=None):
        stub = self.ipb_grpc.InferenceStub(channel)
        return stub.Tokenize(self.ipb.TokenizeRequest(
            model=self.model[0], text="hello"), timeout=10, metadata=metadata)

    def assert_fails(self, fn, code):
        with self.assertRaises(self.grpc.RpcError) as cm:
            fn()
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception

    def test_tls_accepts_clients_that_trust_the_ca_only(self):
        server = Inferd([self.model], ["--tls-cert", self.path("server.crt"),
                                       "--tls-key", self.path("server.key")])
        try:
            with self.secure_channel(server) as ch:
                wait_serving(ch)
                self.assertGreater(len(self.tokenize(ch).token_ids), 0)
            # A client trusting another CA refuses the handshake.
            with self.secure_channel(server, root="rogue.crt") as ch:
                self.assert_fails(lambda: self.tokenize(ch),
                                  self.grpc.StatusCode.UNAVAILABLE)
            # Plaintext against the TLS port fails.
            with self.grpc.insecure_channel(server.address) as ch:
                self.assert_fails(lambda: self.tokenize(ch),
                                  self.grpc.StatusCode.UNAVAILABLE)
            self.assertIn(", TLS", server.output())
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_mtls_requires_a_client_certificate_from_the_client_ca(self):
        server = Inferd([self.model], [
            "--tls-cert", self.path("server.crt"),
            "--tls-key", self.path("server.key"),
            "--tls-client-ca", self.path("ca.crt"),
            "--health-listen", "127.0.0.1:0"])
        try:
            with self.secure_channel(server, client="client") as ch:
                wait_serving(ch)
                self.assertGreater(len(self.tokenize(ch).token_ids), 0)
            for client in (None, "intruder"):
                with self.secure_channel(server, client=client) as ch:
                    self.assert_fails(lambda: self.tokenize(ch),
                                      self.grpc.StatusCode.UNAVAILABLE)
            # The plaintext health port answers probes without any
            # certificate, and serves nothing else.
            hpb = load_health_pb2()
            with self.grpc.insecure_channel(
                    f"127.0.0.1:{server.health_port}") as ch:
                self.assertEqual(health_check(ch),
                                 hpb.HealthCheckResponse.SERVING)
                self.assert_fails(lambda: self.tokenize(ch),
                                  self.grpc.StatusCode.UNIMPLEMENTED)
            self.assertIn(", mTLS", server.output())
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def https_get(self, server, path, root="ca.crt", client=None):
        """GET over HTTPS on the HTTP API port: (status, body) or raises
        the TLS / URL error."""
        import ssl
        import urllib.request
        ctx = ssl.create_default_context(cafile=self.path(root))
        if client:
            ctx.load_cert_chain(self.path(f"{client}.crt"),
                                self.path(f"{client}.key"))
        url = f"https://localhost:{server.http_port}{path}"
        with urllib.request.urlopen(url, context=ctx, timeout=30) as r:
            return r.status, json.loads(r.read())

    def test_http_api_uses_the_same_tls_and_mtls(self):
        import ssl
        import urllib.error
        import urllib.request
        server = Inferd([self.model], [
            "--tls-cert", self.path("server.crt"),
            "--tls-key", self.path("server.key"),
            "--http-listen", "127.0.0.1:0"])
        try:
            server.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=120)
            st, body = self.https_get(server, "/v1/models")
            self.assertEqual(st, 200)
            self.assertEqual([m["id"] for m in body["data"]], [self.model[0]])
            self.assertIn("https://127.0.0.1:", server.output())
            # A client trusting another CA refuses the handshake; plain
            # HTTP gets no answer.
            with self.assertRaises((ssl.SSLError, urllib.error.URLError)):
                self.https_get(server, "/v1/models", root="rogue.crt")
            with self.assertRaises(Exception):
                urllib.request.urlopen(
                    f"http://127.0.0.1:{server.http_port}/v1/models",
                    timeout=30).read()
        finally:
            self.assertEqual(server.stop(), 0, server.output())
        server = Inferd([self.model], [
            "--tls-cert", self.path("server.crt"),
            "--tls-key", self.path("server.key"),
            "--tls-client-ca", self.path("ca.crt"),
            "--http-listen", "127.0.0.1:0"])
        try:
            server.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=120)
            st, _ = self.https_get(server, "/health", client="client")
            self.assertEqual(st, 200)
            for client in (None, "intruder"):
                with self.assertRaises((ssl.SSLError, urllib.error.URLError,
                                        ConnectionError)):
                    self.https_get(server, "/health", client=client)
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_api_key_guards_every_inferd_rpc_but_not_health(self):
        key = "k3y-" + "x" * 28
        key_file = self.path("api.key")
        with open(key_file, "w") as f:
            f.write(f"\n  {key}  \n")  # trimmed
        server = Inferd([self.model], ["--api-key-file", key_file])
        try:
            with self.grpc.insecure_channel(server.address) as ch:
                wait_serving(ch)  # health needs no key
                unauth = self.grpc.StatusCode.UNAUTHENTICATED
                e = self.assert_fails(lambda: self.tokenize(ch), unauth)
                self.assertIn("missing API key", e.details())
                e = self.assert_fails(lambda: self.tokenize(
                    ch, [("authorization", "Bearer wrong")]), unauth)
                self.assertIn("invalid API key", e.details())
                self.assert_fails(lambda: self.tokenize(
                    ch, [("x-api-key", key + "x")]), unauth)
                self.assert_fails(lambda: self.tokenize(
                    ch, [("authorization", key)]), unauth)  # no scheme
                self.assertGreater(len(self.tokenize(
                    ch, [("authorization", f"Bearer {key}")]).token_ids), 0)
                self.assertGreater(len(self.tokenize(
                    ch, [("authorization", f"bearer {key}")]).token_ids), 0)
                self.assertGreater(len(self.tokenize(
                    ch, [("x-api-key", key)]).token_ids), 0)
                # Every kind of handler: unary, server and bidi streaming,
                # and the Models service.
                inf = self.ipb_grpc.InferenceStub(ch)
                models = self.mpb_grpc.ModelsStub(ch)
                self.assert_fails(lambda: models.ListModels(
                    self.mpb.ListModelsRequest()), unauth)
                self.assert_fails(lambda: models.GetModel(
                    self.mpb.GetModelRequest(name=self.model[0])), unauth)
                self.assert_fails(lambda: list(inf.Generate(
                    self.ipb.GenerateRequest(model=self.model[0],
                                             prompt="x"))), unauth)
                self.assert_fails(lambda: list(inf.Embed(iter([
                    self.ipb.EmbedRequest(model=self.model[0],
                                          texts=["x"])]))), unauth)
                self.assert_fails(lambda: inf.EmbedBatch(
                    self.ipb.EmbedRequest(model=self.model[0], texts=["x"])),
                    unauth)
                listed = models.ListModels(self.mpb.ListModelsRequest(),
                                           metadata=[("x-api-key", key)])
                self.assertEqual([m.name for m in listed.models],
                                 [self.model[0]])
            self.assertIn("API key required", server.output())
            self.assertNotIn(key, server.output())
            if ARGS.buf and os.path.exists(ARGS.buf):
                # Reflection stays open (documented): it only describes the
                # published API.
                out = subprocess.run(
                    [ARGS.buf, "curl", "--protocol", "grpc",
                     "--http2-prior-knowledge", "--list-services",
                     f"http://{server.address}"],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn("inferd.v1.Inference", out.stdout.split())
        finally:
            self.assertEqual(server.stop(), 0, server.output())

    def test_unreadable_api_key_file_fails_at_startup(self):
        r = subprocess.run([ARGS.inferd, "--listen", "127.0.0.1:0", "--model",
                            f"{self.model[0]}={self.model[1]}",
                            "--api-key-file", self.path("absent.key")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--api-key-file", r.stderr)


# ------------------------------------------------------------------ limits

def http2_settings(port):
    """The SETTINGS the server sends first on a plaintext HTTP/2
    connection: {identifier: value}."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                  struct.pack(">I", 0)[1:] + b"\x04\x00" +
                  struct.pack(">I", 0))  # empty SETTINGS frame
        buf = b""
        while True:
            while len(buf) < 9:
                chunk = s.recv(4096)
                if not chunk:
                    raise AssertionError("connection closed before SETTINGS")
                buf += chunk
            length = int.from_bytes(buf[0:3], "big")
            ftype, flags = buf[3], buf[4]
            while len(buf) < 9 + length:
                buf += s.recv(4096)
            payload, buf = buf[9:9 + length], buf[9 + length:]
            if ftype == 4 and not flags & 1:  # SETTINGS, not an ACK
                return {struct.unpack(">H", payload[i:i + 2])[0]:
                        struct.unpack(">I", payload[i + 2:i + 6])[0]
                        for i in range(0, len(payload), 6)}


class LimitsTest(unittest.TestCase):
    """Request limits answer with the documented status."""

    @classmethod
    def setUpClass(cls):
        grpc, ipb, ipb_grpc, mpb, mpb_grpc = stubs()
        cls.grpc, cls.ipb, cls.mpb = grpc, ipb, mpb
        cls.models = [(n, model_path(n)) for n in
                      ("bert-embed", "xlmr-reranker") if model_path(n)]
        if not cls.models:
            raise unittest.SkipTest("no generated embedding/reranking model")
        cls.server = Inferd(cls.models, [
            "--max-receive-message-bytes", "4096",
            "--max-inputs-per-request", "4",
            "--max-input-tokens", "16",
            "--max-concurrent-streams", "7"])
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.inference = ipb_grpc.InferenceStub(cls.channel)
        cls.models_stub = mpb_grpc.ModelsStub(cls.channel)
        wait_serving(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()

    def names(self):
        return [n for n, _ in self.models]

    def fails(self, fn, code):
        with self.assertRaises(self.grpc.RpcError) as cm:
            fn()
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception.details()

    def test_oversize_message_is_resource_exhausted(self):
        name = self.names()[0]
        big = "word " * 2000  # 10 kB > 4096
        details = self.fails(lambda: self.inference.Tokenize(
            self.ipb.TokenizeRequest(model=name, text=big)),
            self.grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("4096", details)
        # Just under the limit passes.
        r = self.inference.Tokenize(self.ipb.TokenizeRequest(
            model=name, text="word " * 700))
        self.assertGreater(len(r.token_ids), 100)

    def test_too_many_inputs_is_invalid_argument(self):
        if "bert-embed" in self.names():
            details = self.fails(lambda: self.inference.EmbedBatch(
                self.ipb.EmbedRequest(model="bert-embed",
                                      texts=["a"] * 5)),
                self.grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("4", details)
            r = self.inference.EmbedBatch(self.ipb.EmbedRequest(
                model="bert-embed", texts=["a"] * 4))
            self.assertEqual(len(r.embeddings), 4)
        if "xlmr-reranker" in self.names():
            details = self.fails(lambda: self.inference.Rerank(
                self.ipb.RerankRequest(model="xlmr-reranker", query="q",
                                       documents=["d"] * 5)),
                self.grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("4", details)

    def test_input_longer_than_max_input_tokens(self):
        if "bert-embed" not in self.names():
            self.skipTest("bert-embed absent")
        m = self.models_stub.GetModel(self.mpb.GetModelRequest(
            name="bert-embed"))
        self.assertEqual(m.max_input_tokens, 16)
        long_text = "one two three four five six seven eight nine ten " * 3
        details = self.fails(lambda: self.inference.EmbedBatch(
            self.ipb.EmbedRequest(model="bert-embed", texts=[long_text])),
            self.grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("16", details)
        r = self.inference.EmbedBatch(self.ipb.EmbedRequest(
            model="bert-embed", texts=[long_text], truncate=True))
        self.assertLessEqual(r.embeddings[0].tokens or r.usage.prompt_tokens,
                             16)

    def test_max_concurrent_streams_is_advertised(self):
        settings = http2_settings(self.server.port)
        self.assertEqual(settings.get(3), 7, settings)  # MAX_CONCURRENT_STREAMS

    def test_help_documents_every_limit_default(self):
        r = subprocess.run([ARGS.inferd, "--help"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        help_text = " ".join(r.stdout.split())
        for flag, default in (
                ("--max-receive-message-bytes", "16777216"),
                ("--max-inputs-per-request", "256"),
                ("--max-input-tokens", "0 (the model's limit)"),
                ("--max-concurrent-streams", "1024"),
                ("--drain-timeout", "30"),
                ("--health-listen", "(off)"),
                ("--metrics-listen", "(off)")):
            m = re.search(re.escape(flag) + r" .*?\(default: ([^)]*\)?)\)",
                          help_text)
            self.assertIsNotNone(m, flag)
            self.assertEqual(m.group(1), default, flag)


# --------------------------------------------------------------- lifecycle

class Streams:
    """N concurrent Generate streams, each collected on its own thread."""

    def __init__(self, stub, ipb, model, n, max_tokens):
        self.first = threading.Barrier(n + 1)
        self.results = [None] * n
        self.threads = []
        for i in range(n):
            req = ipb.GenerateRequest(model=model, prompt=f"Story {i}:")
            req.sampling.max_tokens = max_tokens
            req.sampling.ignore_eos = True
            t = threading.Thread(target=self._run, args=(stub, req, i))
            t.start()
            self.threads.append(t)

    def _run(self, stub, req, i):
        chunks, error, signalled = [], None, False
        try:
            for c in stub.Generate(req, timeout=600):
                chunks.append(c)
                if not signalled:
                    signalled = True
                    self.first.wait(timeout=120)
        except Exception as e:  # grpc.RpcError
            error = e
        if not signalled:
            self.first.abort()
        self.results[i] = (chunks, error)

    def wait_first_tokens(self):
        self.first.wait(timeout=120)

    def join(self):
        for t in self.threads:
            t.join(timeout=600)
        return self.results


class LifecycleTest(unittest.TestCase):
    """Readiness, failed models, SIGTERM drains."""

    @classmethod
    def setUpClass(cls):
        grpc, ipb, ipb_grpc, mpb, mpb_grpc = stubs()
        cls.grpc, cls.ipb, cls.ipb_grpc = grpc, ipb, ipb_grpc
        cls.mpb, cls.mpb_grpc = mpb, mpb_grpc
        cls.gen = generate_model()

    def start_streams(self, server, n, max_tokens):
        channel = self.grpc.insecure_channel(server.address)
        wait_serving(channel)
        stub = self.ipb_grpc.InferenceStub(channel)
        streams = Streams(stub, self.ipb, self.gen[0], n, max_tokens)
        streams.wait_first_tokens()
        return channel, stub, streams

    def test_sigterm_lets_16_streams_finish(self):
        if not self.gen:
            self.skipTest("no generative test model")
        n, max_tokens = 16, 400
        server = Inferd([self.gen], ["--drain-timeout", "300"])
        channel, stub, streams = self.start_streams(server, n, max_tokens)
        server.proc.send_signal(signal.SIGTERM)
        server.wait_log("draining: ")  # admission is closed from here on
        # Whatever the drain's progress, health is no longer SERVING and a
        # new call is refused (UNAVAILABLE from the draining server, or from
        # a closed port once it exited).
        hpb = load_health_pb2()
        try:
            self.assertNotEqual(health_check(channel),
                                hpb.HealthCheckResponse.SERVING)
        except self.grpc.RpcError as e:
            self.assertEqual(e.code(), self.grpc.StatusCode.UNAVAILABLE)
        req = self.ipb.GenerateRequest(model=self.gen[0], prompt="late")
        with self.assertRaises(self.grpc.RpcError) as cm:
            list(stub.Generate(req, timeout=60))
        results = streams.join()
        code = server.stop()
        channel.close()
        log = server.output()
        self.assertEqual(code, 0, log)
        if cm.exception.code() == self.grpc.StatusCode.CANCELLED:
            # Only a call that raced gRPC's own final shutdown, after the
            # drain, may be cancelled by gRPC itself.
            self.assertIn("drained: every call finished", log)
        else:
            self.assertEqual(cm.exception.code(),
                             self.grpc.StatusCode.UNAVAILABLE,
                             cm.exception.details())
        for chunks, error in results:
            self.assertIsNone(error, error)
            self.assertEqual(chunks[-1].finish_reason,
                             self.ipb.FINISH_REASON_LENGTH)
            self.assertEqual(chunks[-1].usage.completion_tokens, max_tokens)
        # The streams were in flight when the signal arrived.
        self.assertIn(f"draining: {n} call(s) in flight", log)
        self.assertIn("drained: every call finished", log)
        self.assertIn("inferd stopped", log)

    def test_drain_timeout_ends_streams_with_unavailable(self):
        if not self.gen:
            self.skipTest("no generative test model")
        n = 16
        server = Inferd([self.gen], ["--drain-timeout", "0.5"])
        channel, stub, streams = self.start_streams(server, n, 0)
        server.proc.send_signal(signal.SIGTERM)
        results = streams.join()
        code = server.stop()
        channel.close()
        log = server.output()
        self.assertEqual(code, 0, log)
        for chunks, error in results:
            self.assertIsNotNone(error, "a stream finished; make it longer")
            self.assertEqual(error.code(), self.grpc.StatusCode.UNAVAILABLE,
                             error.details())
            self.assertGreater(len(chunks), 0)
            self.assertEqual(chunks[-1].finish_reason,
                             self.ipb.FINISH_REASON_UNSPECIFIED)
        self.assertIn(f"drain timeout: cancelling {n} call(s)", log)

    def open_embed_stream(self, extra):
        """A bert-embed server with `extra` flags and an Embed stream on it
        that has one answered request and stays open (put None into the
        returned queue to half-close it)."""
        server = Inferd([("bert-embed", model_path("bert-embed"))], extra)
        channel = self.grpc.insecure_channel(server.address)
        wait_serving(channel)
        stub = self.ipb_grpc.InferenceStub(channel)
        requests = queue.Queue()
        requests.put(self.ipb.EmbedRequest(model="bert-embed", id="a",
                                           texts=["hello"]))

        def request_iter():
            while True:
                r = requests.get()
                if r is None:
                    return
                yield r

        responses = stub.Embed(request_iter(), timeout=120)
        self.assertEqual(next(responses).id, "a")
        return server, channel, requests, responses

    def sigterm_ends_stream_unavailable(self, server, requests, responses):
        """SIGTERM while the client keeps the stream open: the stream must
        end with UNAVAILABLE."""
        server.proc.send_signal(signal.SIGTERM)
        with self.assertRaises(self.grpc.RpcError) as cm:
            for _ in responses:
                pass
        requests.put(None)
        self.assertEqual(cm.exception.code(), self.grpc.StatusCode.UNAVAILABLE,
                         cm.exception.details())

    def test_drain_timeout_ends_an_open_embed_stream(self):
        if not model_path("bert-embed"):
            self.skipTest("bert-embed absent")
        server, channel, requests, responses = self.open_embed_stream(
            ["--drain-timeout", "0.2"])
        self.sigterm_ends_stream_unavailable(server, requests, responses)
        self.assertEqual(server.stop(), 0, server.output())
        channel.close()

    def test_embed_stream_burst_above_the_engine_queue_is_backpressured(self):
        # The engine queue holds 4 requests; one stream sends 150 at once.
        # The stream must slow down (stop reading while the queue is full),
        # not fail: every request is answered exactly once.
        self.check_embed_burst_is_backpressured(
            ["--max-queue-requests", "4"], "burst text", 150)

    def check_embed_burst_is_backpressured(self, flags, text, count):
        # One Embed stream sends `count` requests at once to a server with
        # `flags`; every request must be answered exactly once.
        if not model_path("bert-embed"):
            self.skipTest("bert-embed absent")
        server = Inferd([("bert-embed", model_path("bert-embed"))], flags)
        channel = self.grpc.insecure_channel(server.address)
        wait_serving(channel)
        stub = self.ipb_grpc.InferenceStub(channel)
        reqs = [self.ipb.EmbedRequest(model="bert-embed", id=f"r{i}",
                                      texts=[f"{text} {i}"] * (1 + i % 3))
                for i in range(count)]
        got = [r.id for r in stub.Embed(iter(reqs), timeout=300)]
        self.assertEqual(sorted(got), sorted(q.id for q in reqs))
        self.assertEqual(len(got), len(set(got)))
        self.assertEqual(server.stop(), 0, server.output())
        channel.close()

    def test_embed_stream_burst_above_the_token_budget_is_backpressured(self):
        # The engine queue holds 64 tokens; a refusal for tokens is only
        # known after tokenization, so it reaches the stream through the
        # engine's callback (tokenization workers) rather than at submit.
        # The stream must still slow down, not fail.
        self.check_embed_burst_is_backpressured(
            ["--max-queue-tokens", "64", "--tokenization-workers", "1"],
            "burst text number", 120)

    def test_drain_ends_an_idle_embed_stream_at_once(self):
        # A client that keeps an Embed stream open with nothing in flight
        # must not hold the drain for its whole timeout (300 s here).
        if not model_path("bert-embed"):
            self.skipTest("bert-embed absent")
        server, channel, requests, responses = self.open_embed_stream(
            ["--drain-timeout", "300"])
        self.sigterm_ends_stream_unavailable(server, requests, responses)
        # Far less than the 300 s drain timeout: the drain had nothing to
        # wait for.
        self.assertEqual(server.stop(timeout=60), 0, server.output())
        self.assertIn("drained: every call finished", server.output())
        channel.close()

    def test_model_with_corrupt_weights_fails_alone(self):
        good = [(n, model_path(n)) for n in ("bert-classifier", "stories")
                if model_path(n)]
        src = model_path("bert-embed")
        if not good or not src:
            self.skipTest("needs bert-embed and another model")
        with tempfile.TemporaryDirectory() as d:
            broken = os.path.join(d, "broken")
            shutil.copytree(src, broken)
            weights = os.path.join(broken, "model.safetensors")
            with open(weights, "r+b") as f:
                f.truncate(os.path.getsize(weights) // 2)
            # Without --allow-partial-start: loading ends, the good models'
            # own health services turn SERVING, but the overall status stays
            # NOT_SERVING (Kubernetes must not route to a broken pod) and
            # the log says which model failed and how to go on.
            hpb = load_health_pb2()
            server = Inferd(good + [("broken", broken)])
            try:
                server.wait_log("health stays NOT_SERVING because these "
                                "failed: broken")
                channel = self.grpc.insecure_channel(server.address)
                health = lib.HealthClient(channel, hpb)
                def status(service):
                    return health.Check(hpb.HealthCheckRequest(
                        service=service), timeout=10).status
                for service in ("", "inferd.v1.Inference", "inferd.v1.Models",
                                "inferd.v1.Model/broken"):
                    self.assertEqual(status(service),
                                     hpb.HealthCheckResponse.NOT_SERVING,
                                     service)
                for name, _ in good:
                    self.assertEqual(status("inferd.v1.Model/" + name),
                                     hpb.HealthCheckResponse.SERVING, name)
                with self.assertRaises(self.grpc.RpcError) as cm:
                    status("inferd.v1.Model/no-such-model")
                self.assertEqual(cm.exception.code(),
                                 self.grpc.StatusCode.NOT_FOUND)
                listed = {m.name: m for m in self.mpb_grpc.ModelsStub(channel)
                          .ListModels(self.mpb.ListModelsRequest()).models}
                self.assertEqual(listed["broken"].state,
                                 self.mpb.MODEL_STATE_FAILED)
                self.assertIn("safetensors", listed["broken"].error)
                channel.close()
            finally:
                self.assertEqual(server.stop(), 0, server.output())
            self.assertIn("--allow-partial-start", server.output())

            # With it: SERVING, the broken model listed FAILED.
            server = Inferd(good + [("broken", broken)],
                            ["--metrics-listen", "127.0.0.1:0",
                             "--allow-partial-start"])
            try:
                channel = self.grpc.insecure_channel(server.address)
                wait_serving(channel)  # the others are ready
                models = self.mpb_grpc.ModelsStub(channel)
                listed = {m.name: m for m in
                          models.ListModels(self.mpb.ListModelsRequest()).models}
                self.assertEqual(listed["broken"].state,
                                 self.mpb.MODEL_STATE_FAILED)
                self.assertIn("safetensors", listed["broken"].error)
                for name, _ in good:
                    self.assertEqual(listed[name].state,
                                     self.mpb.MODEL_STATE_READY, name)
                inf = self.ipb_grpc.InferenceStub(channel)
                with self.assertRaises(self.grpc.RpcError) as cm:
                    inf.EmbedBatch(self.ipb.EmbedRequest(model="broken",
                                                         texts=["x"]))
                self.assertEqual(cm.exception.code(),
                                 self.grpc.StatusCode.UNAVAILABLE)
                self.assertIn("failed to load", cm.exception.details())
                r = inf.Tokenize(self.ipb.TokenizeRequest(model=good[0][0],
                                                          text="still here"))
                self.assertGreater(len(r.token_ids), 0)
                samples, _ = parse_metrics(server.scrape())
                self.assertEqual(value(samples, "inferd_model_state",
                                       model="broken", state="failed"), 1)
                self.assertEqual(value(samples, "inferd_model_state",
                                       model=good[0][0], state="ready"), 1)
                channel.close()
            finally:
                self.assertEqual(server.stop(), 0, server.output())
            self.assertIn("model 'broken' failed to load", server.output())

    def test_load_progress_reports_tensors_and_bytes(self):
        name = next((n for n in ("bert-classifier", "bert-embed", "stories")
                     if model_path(n)), None)
        if name is None:
            self.skipTest("no model")
        path = model_path(name)
        with open(os.path.join(path, "model.safetensors"), "rb") as f:
            header_len = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(header_len))
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        nbytes = sum(v["data_offsets"][1] - v["data_offsets"][0]
                     for v in tensors.values())
        server = Inferd([(name, path)])
        try:
            channel = self.grpc.insecure_channel(server.address)
            wait_serving(channel)
            channel.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())
        m = re.search(rf"model '{name}' ready \(1/1\): (\d+) tensors, "
                      r"([0-9.]+) MiB of weights, loaded in ([0-9.]+)s",
                      server.output())
        self.assertIsNotNone(m, server.output())
        self.assertEqual(int(m.group(1)), len(tensors))
        self.assertAlmostEqual(float(m.group(2)), nbytes / 2 ** 20, places=1)


def main():
    global ARGS
    ARGS, rest = parse_args()
    sys.path.insert(0, ARGS.stubs)
    if not any(model_path(n) for n in
               ("stories", "bert-embed", "bert-classifier", "xlmr-reranker")
               + GEN_MODELS):
        print("SKIP: no model available (neither ../shared/models/stories260K "
              "nor generated test models)")
        return 77
    try:
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False,
                             verbosity=2)
    finally:
        for server in STARTED:
            server.kill()
    r = prog.result
    failed = len(r.failures) + len(r.errors)
    print(f"{r.testsRun - failed - len(r.skipped)} passed, {failed} failed, "
          f"{len(r.skipped)} skipped")
    return 0 if r.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
