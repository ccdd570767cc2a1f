"""Shared helpers of inferd's Python integration tests: start the real
`inferd` binary on an ephemeral loopback port, load the generated stubs, and
reach the health service."""
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time


class Paths:
    """Command-line paths every integration test takes."""

    def __init__(self, args):
        self.inferd = args.inferd
        self.stubs = args.stubs
        self.shared = args.shared
        self.test_models = args.test_models
        self.source = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))


def add_common_args(parser):
    parser.add_argument("--inferd", required=True)
    parser.add_argument("--stubs", required=True)
    parser.add_argument("--shared", required=True)
    parser.add_argument("--test-models", required=True)


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
    """An inferd child process on an ephemeral loopback port."""

    def __init__(self, inferd, models, extra=()):
        self.log = tempfile.NamedTemporaryFile(prefix="inferd-", suffix=".log",
                                               delete=False)
        cmd = [inferd, "--listen", "127.0.0.1:0", "--log-level", "info"]
        for name, path in models:
            cmd += ["--model", f"{name}={path}"]
        cmd += list(extra)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        self.port = self._wait_port()
        self.address = f"127.0.0.1:{self.port}"

    def _wait_port(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("inferd exited early: " + self.output())
            text = self.output()
            marker = "(port "
            if marker in text:
                return int(text.split(marker, 1)[1].split(")", 1)[0])
            time.sleep(0.05)
        raise RuntimeError("inferd did not report its port: " + self.output())

    def output(self):
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def run_unittest(argv):
    """Runs the module's unittest cases and prints the plain summary line."""
    import unittest
    prog = unittest.main(argv=argv, exit=False, verbosity=2)
    r = prog.result
    failed = len(r.failures) + len(r.errors)
    print(f"{r.testsRun - failed - len(r.skipped)} passed, {failed} failed, "
          f"{len(r.skipped)} skipped")
    return 0 if r.wasSuccessful() else 1
