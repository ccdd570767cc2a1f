"""Starts an inferd child process on an ephemeral loopback port for the
client and load-generator tests, and waits until every model is ready."""
import signal
import subprocess
import sys
import tempfile
import time


class InferdServer:
    """inferd with the given (name, path) models; use as a context manager."""

    def __init__(self, inferd, models, stubs, extra=()):
        self.log = tempfile.NamedTemporaryFile(prefix="inferd-clients-",
                                               suffix=".log", delete=False)
        cmd = [inferd, "--listen", "127.0.0.1:0"]
        for name, path in models:
            cmd += ["--model", f"{name}={path}"]
        cmd += list(extra)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        self.stubs = stubs
        try:
            self.port = self._wait_port()
            self.address = f"127.0.0.1:{self.port}"
            self._wait_ready([n for n, _ in models])
        except Exception:
            self.stop()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def output(self):
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()

    def _wait_port(self):
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("inferd exited early:\n" + self.output())
            text = self.output()
            if "(port " in text:
                return int(text.split("(port ", 1)[1].split(")", 1)[0])
            time.sleep(0.05)
        raise RuntimeError("inferd did not report its port:\n" + self.output())

    def _wait_ready(self, names):
        if self.stubs not in sys.path:
            sys.path.insert(0, self.stubs)
        import grpc
        from inferd.v1 import models_pb2, models_pb2_grpc
        deadline = time.time() + 300
        with grpc.insecure_channel(self.address) as channel:
            stub = models_pb2_grpc.ModelsStub(channel)
            while time.time() < deadline:
                try:
                    r = stub.ListModels(models_pb2.ListModelsRequest(), timeout=5)
                    states = {m.name: m.state for m in r.models}
                    failed = [m for m in r.models
                              if m.state == models_pb2.MODEL_STATE_FAILED]
                    if failed:
                        raise RuntimeError(f"model {failed[0].name} failed: "
                                           f"{failed[0].error}")
                    if all(states.get(n) == models_pb2.MODEL_STATE_READY
                           for n in names):
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.2)
        raise RuntimeError("models never became ready:\n" + self.output())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
