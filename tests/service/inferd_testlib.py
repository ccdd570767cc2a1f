"""Shared helpers of inferd's Python integration tests: start the real
`inferd` binary on an ephemeral loopback port, load the generated stubs, and
reach the health service."""
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


class Paths:
    """Command-line paths every integration test takes."""

    def __init__(self, args):
        self.inferd = args.inferd
        self.stubs = args.stubs
        # CI's second pass hides ../shared through the environment.
        self.shared = os.environ.get("INFERD_SHARED_DIR") or args.shared
        self.test_models = args.test_models
        self.source = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))


SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def stories_dir():
    """The real stories260K model shipped in the repository."""
    return os.path.join(SOURCE_DIR, "examples", "models", "stories260K")


def add_common_args(parser):
    parser.add_argument("--inferd", required=True)
    parser.add_argument("--stubs", required=True)
    parser.add_argument("--shared", required=True)
    parser.add_argument("--test-models", required=True)


def models_present(test_models, names):
    """True when every named generated model is in `test_models`; else
    prints the ctest skip line."""
    if all(os.path.isfile(os.path.join(test_models, n, "config.json"))
           for n in names):
        return True
    print("SKIP: generated test models missing in " + test_models)
    return False


def import_reference():
    """tests/reference/reference.py, the NumPy reference forward pass."""
    path = os.path.join(SOURCE_DIR, "tests", "reference")
    if path not in sys.path:
        sys.path.insert(0, path)
    import reference
    return reference


def import_stubs(stubs_dir):
    """Puts the generated inferd.v1 stubs on sys.path and returns
    (grpc, inference_pb2, inference_pb2_grpc, models_pb2, models_pb2_grpc)."""
    if stubs_dir not in sys.path:
        sys.path.insert(0, stubs_dir)
    import grpc
    from inferd.v1 import inference_pb2, inference_pb2_grpc
    from inferd.v1 import models_pb2, models_pb2_grpc
    return grpc, inference_pb2, inference_pb2_grpc, models_pb2, models_pb2_grpc


def load_health_pb2(stubs_dir):
    """The generated grpc/health/v1/health_pb2.py, loaded by path: the
    system `grpc` package would shadow a `grpc.health` namespace."""
    path = os.path.join(stubs_dir, "grpc", "health", "v1", "health_pb2.py")
    spec = importlib.util.spec_from_file_location("inferd_health_pb2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HealthClient:
    """grpc.health.v1.Health client over generic method handles."""

    def __init__(self, channel, pb):
        self.pb = pb
        self.Check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=pb.HealthCheckRequest.SerializeToString,
            response_deserializer=pb.HealthCheckResponse.FromString)
        self.Watch = channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=pb.HealthCheckRequest.SerializeToString,
            response_deserializer=pb.HealthCheckResponse.FromString)

    def wait_serving(self, timeout=120):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                last = self.Check(self.pb.HealthCheckRequest(service=""),
                                  timeout=5).status
                if last == self.pb.HealthCheckResponse.SERVING:
                    return
            except Exception as e:  # not up yet
                last = e
            time.sleep(0.1)
        raise RuntimeError(f"health never went SERVING (last: {last})")


class InferdProcess:
    """An inferd child process on ephemeral loopback ports. `metrics_port`
    and `health_port` are set when --metrics-listen / --health-listen are
    among `extra`. Usable as a context manager (SIGTERM on exit)."""

    def __init__(self, inferd, models, extra=(), log_prefix="inferd-",
                 wrapper=(), env=None):
        """`wrapper`: a command line the server runs under (it must exec
        its arguments); `env`: the server's environment (default: ours)."""
        self.log = tempfile.NamedTemporaryFile(prefix=log_prefix, suffix=".log",
                                               delete=False)
        cmd = [inferd, "--listen", "127.0.0.1:0", "--log-level", "info"]
        for name, path in models:
            cmd += ["--model", f"{name}={path}"]
        cmd += list(extra)
        self.cmd = list(wrapper) + cmd
        self.proc = subprocess.Popen(self.cmd, stdout=self.log,
                                     stderr=self.log, env=env)
        try:
            self.port = self.wait_for(r"\(port (\d+)\)")
            self.address = f"127.0.0.1:{self.port}"
            self.metrics_port = None
            self.health_port = None
            if any(a.startswith("--metrics-listen") for a in extra):
                self.metrics_port = self.wait_for(r"\(metrics port (\d+)\)")
            if any(a.startswith("--health-listen") for a in extra):
                self.health_port = self.wait_for(r"\(health port (\d+)\)")
            self.http_port = None
            if any(a.startswith("--http-listen") for a in extra):
                self.http_port = self.wait_for(r"\(http port (\d+)\)")
        except Exception:
            self.kill()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def wait_for(self, pattern, timeout=60):
        """The integer group 1 of the first log match of `pattern`."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(pattern, self.output())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError("inferd exited early: " + self.output())
            time.sleep(0.05)
        raise RuntimeError(f"inferd never logged {pattern}: " + self.output())

    def wait_log(self, text, timeout=120):
        deadline = time.time() + timeout
        while text not in self.output():
            if time.time() > deadline:
                raise AssertionError(f"inferd never logged {text!r}: " +
                                     self.output())
            time.sleep(0.02)

    def wait_ready(self, stubs_dir, names, timeout=300):
        """Waits until every named model is READY (raises if one FAILED)."""
        grpc, _, _, mpb, mrpc = import_stubs(stubs_dir)
        deadline = time.time() + timeout
        with grpc.insecure_channel(self.address) as channel:
            stub = mrpc.ModelsStub(channel)
            while time.time() < deadline:
                try:
                    r = stub.ListModels(mpb.ListModelsRequest(), timeout=5)
                    failed = [m for m in r.models
                              if m.state == mpb.MODEL_STATE_FAILED]
                    if failed:
                        raise RuntimeError(f"model {failed[0].name} failed: "
                                           f"{failed[0].error}")
                    states = {m.name: m.state for m in r.models}
                    if all(states.get(n) == mpb.MODEL_STATE_READY
                           for n in names):
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.2)
        raise RuntimeError("models never became ready: " + self.output())

    def output(self):
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()

    def scrape(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def serve(cls, paths, models, extra=(), log_prefix="inferd-", ready=True):
    """Starts inferd for a unittest class: sets cls.server (InferdProcess),
    cls.channel and cls.stub (inferd.v1.Inference); with `ready`, waits
    until every model is READY. Pair with unserve(cls) in tearDownClass."""
    grpc, _, irpc, _, _ = import_stubs(paths.stubs)
    cls.server = InferdProcess(paths.inferd, models, extra,
                               log_prefix=log_prefix)
    if ready:
        cls.server.wait_ready(paths.stubs, [n for n, _ in models])
    cls.channel = grpc.insecure_channel(cls.server.address)
    cls.stub = irpc.InferenceStub(cls.channel)


def unserve(cls):
    """Closes cls.channel and stops cls.server (set by serve); asserts a
    clean exit."""
    if getattr(cls, "server", None) is None:
        return
    cls.channel.close()
    code = cls.server.stop()
    assert code == 0, cls.server.output()


def generate_request(ipb, model, prompt=None, ids=None, drafts=None,
                     **sampling):
    """An inferd.v1.GenerateRequest: `prompt` text or token `ids`; `drafts`
    sets speculative.num_draft_tokens; the other keywords are
    SamplingParams fields (stop, stop_token_ids: lists; logit_bias: a
    dict), except `regex`, the response_format."""
    req = ipb.GenerateRequest(model=model)
    if ids is not None:
        req.prompt_token_ids.ids.extend(ids)
    elif prompt is not None:
        req.prompt = prompt
    if drafts is not None:
        req.speculative.num_draft_tokens = drafts
    for k, v in sampling.items():
        if k in ("stop", "stop_token_ids"):
            getattr(req.sampling, k).extend(v)
        elif k == "logit_bias":
            for tid, bias in v.items():
                req.sampling.logit_bias[tid] = bias
        elif k == "regex":
            req.response_format.regex = v
        else:
            setattr(req.sampling, k, v)
    return req


def generate(stub, req, timeout=120):
    """Runs one Generate call: (token ids, text, the messages)."""
    chunks = list(stub.Generate(req, timeout=timeout))
    tokens = [t for c in chunks for t in c.token_ids]
    text = "".join(c.text for c in chunks)
    return tokens, text, chunks


def assert_generate_rejected(test, stub, grpc_mod, req, words):
    """Generate(req) must fail INVALID_ARGUMENT with `words` in its message."""
    with test.assertRaises(grpc_mod.RpcError) as cm:
        list(stub.Generate(req, timeout=60))
    test.assertEqual(cm.exception.code(), grpc_mod.StatusCode.INVALID_ARGUMENT)
    test.assertIn(words, cm.exception.details())


def metric_value(text, name, labels):
    """The value of the sample `name` whose labels include `labels` (a
    dict) in a Prometheus text exposition."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {name}{labels} not found")


def metric_sum(text, name, labels):
    """The sum of the samples `name` whose labels include `labels` (0 when
    none is exported yet): e.g. a counter over every finish reason."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(
                f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run_unittest(argv):
    """Runs the module's unittest cases and prints the plain summary line."""
    import unittest
    prog = unittest.main(argv=argv, exit=False, verbosity=2)
    r = prog.result
    failed = len(r.failures) + len(r.errors)
    print(f"{r.testsRun - failed - len(r.skipped)} passed, {failed} failed, "
          f"{len(r.skipped)} skipped")
    return 0 if r.wasSuccessful() else 1
