"""Starts an inferd child process on an ephemeral loopback port for the
client and load-generator tests, and waits until every model is ready."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "service"))
import inferd_testlib as lib  # noqa: E402


class InferdServer(lib.InferdProcess):
    """inferd with the given (name, path) models; use as a context manager."""

    def __init__(self, inferd, models, stubs, extra=()):
        super().__init__(inferd, models, extra, log_prefix="inferd-clients-")
        try:
            self.wait_ready(stubs, [n for n, _ in models])
        except Exception:
            self.stop()
            raise

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """SIGTERM, then SIGKILL if it does not exit in `timeout` seconds."""
        try:
            return super().stop(sig, timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode
