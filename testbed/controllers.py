"""Controllers started and stopped by the testbed."""

import subprocess
import sys

from .util import ROOT, VENV, free_port, port_open, run_dir, wait_for


class OsKen:
    """An os-ken application (from testbed/apps) listening for switches on 127.0.0.1."""

    def __init__(self, *apps, port=None, log_name=None):
        self.apps = [a if "." in a else f"testbed.apps.{a}" for a in apps]
        self.port = port or free_port()
        self.log_path = run_dir("logs") / f"{log_name or apps[0]}.osken.log"
        self.proc = None

    @property
    def target(self):
        return f"tcp:127.0.0.1:{self.port}"

    def start(self):
        python = VENV / "bin" / "python"
        if not python.exists():
            python = sys.executable
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(python), "-m", "testbed.osken_runner", "--port", str(self.port), *self.apps],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.proc.poll() is not None or port_open(self.port), timeout=30, what="os-ken to listen")
        if self.proc.poll() is not None:
            raise RuntimeError(f"os-ken exited: {self.log_path.read_text()}")
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self._log.close()
        self.proc = None

    def log(self):
        return self.log_path.read_text() if self.log_path.exists() else ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
