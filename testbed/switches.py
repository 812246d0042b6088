"""Switches under test, started and stopped by the testbed."""

import os
import signal
import subprocess
import time

from .netns import sh
from .util import ROOT, free_port, port_open, run_dir, wait_for

EDGEFLOW_BIN = os.environ.get("EDGEFLOW_BIN", str(ROOT / "target" / "release" / "edgeflow"))


class Edgeflow:
    """The edgeflow daemon on a set of interfaces, with a management listener for ovs-ofctl."""

    name = "edgeflow"

    def __init__(self, ports, controllers=(), fail_mode=None, extra=(), log_name="edgeflow"):
        self.ports = list(ports)
        self.controllers = list(controllers)
        self.fail_mode = fail_mode
        self.extra = list(extra)
        self.mgmt_port = free_port()
        self.log_path = run_dir("logs") / f"{log_name}.log"
        self.proc = None

    def command(self):
        cmd = [EDGEFLOW_BIN, "run", "--listen", f"ptcp:{self.mgmt_port}:127.0.0.1"]
        for p in self.ports:
            cmd += ["--port", p]
        for c in self.controllers:
            cmd += ["--controller", c]
        if self.fail_mode:
            cmd += ["--fail-mode", self.fail_mode]
        return cmd + self.extra

    def start(self):
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(lambda: self.proc.poll() is not None or port_open(self.mgmt_port), what="edgeflow to listen")
        if self.proc.poll() is not None:
            raise RuntimeError(f"edgeflow exited with {self.proc.returncode}: {self.log()}")
        return self

    def stop(self):
        """SIGTERM, and the exit status (0 means a clean shutdown)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        code, self.proc = self.proc.returncode, None
        return code

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        return self.log_path.read_text() if self.log_path.exists() else ""

    @property
    def target(self):
        return f"tcp:127.0.0.1:{self.mgmt_port}"

    def ofctl(self, *args, check=True):
        """ovs-ofctl against the management listener; returns stdout."""
        opts = [a for a in args if a.startswith("-")]
        rest = [a for a in args if not a.startswith("-")]
        r = sh("ovs-ofctl", "-O", "OpenFlow13", *opts, rest[0], self.target, *rest[1:], check=False, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def flows(self, table=None):
        out = self.ofctl("dump-flows", *([f"table={table}"] if table is not None else []))
        return [l.strip() for l in out.splitlines() if "actions=" in l]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
