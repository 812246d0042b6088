"""Controllers started and stopped by the testbed."""

import os
import signal
import subprocess
import sys

from .util import ROOT, VENV, free_port, port_open, run_dir, wait_for


class OsKen:
    """An os-ken application (from testbed/apps) listening for switches on 127.0.0.1."""

    def __init__(self, *apps, port=None, log_name=None, env=None, tls=None):
        """`tls`: (key, certificate, CA) paths: listen with TLS only, requiring a switch certificate
        the CA signed."""
        self.apps = [a if "." in a else f"testbed.apps.{a}" for a in apps]
        self.tls = tuple(str(p) for p in tls) if tls else None
        self.env = env or {}
        self.port = port or free_port()
        self.log_path = run_dir("logs") / f"{log_name or apps[0]}.osken.log"
        self.proc = None

    @property
    def target(self):
        return f"{'tls' if self.tls else 'tcp'}:127.0.0.1:{self.port}"

    def start(self):
        python = VENV / "bin" / "python"
        if not python.exists():
            python = sys.executable
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(python), "-m", "testbed.osken_runner", "--port", str(self.port),
             *(["--tls", *self.tls] if self.tls else []), *self.apps],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **self.env})
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


FAUCET_VENV = ROOT / ".venv-faucet"


def stop_group(proc, timeout=10):
    """Stops a process started in its own session, and everything it spawned."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


class Faucet:
    """Faucet (or, with gauge=True, Gauge) from PyPI, in its own venv, listening on 127.0.0.1.

    Faucet re-executes `osken-manager` from PATH, so the venv's bin goes first, and the whole
    process group is stopped together.
    """

    def __init__(self, config, gauge=False, port=None, log_name=None):
        self.config = config
        self.gauge = gauge
        self.port = port or free_port()
        self.name = "gauge" if gauge else "faucet"
        self.dir = run_dir(log_name or self.name)
        self.proc = None

    @property
    def target(self):
        return f"tcp:127.0.0.1:{self.port}"

    def start(self):
        env = dict(os.environ)
        env["PATH"] = f"{FAUCET_VENV / 'bin'}:{env['PATH']}"
        prefix = "GAUGE" if self.gauge else "FAUCET"
        env.update({
            f"{prefix}_CONFIG": str(self.config),
            f"{prefix}_LOG": str(self.dir / f"{self.name}.log"),
            f"{prefix}_EXCEPTION_LOG": str(self.dir / f"{self.name}.exception.log"),
            f"{prefix}_PROMETHEUS_ADDR": "127.0.0.1",
            f"{prefix}_PROMETHEUS_PORT": str(free_port()),
        })
        self._out = open(self.dir / f"{self.name}.out", "w")
        self.proc = subprocess.Popen([str(FAUCET_VENV / "bin" / self.name), f"--ryu-ofp-tcp-listen-port={self.port}",
                                      "--ryu-ofp-listen-host=127.0.0.1"],
                                     env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self.proc.poll() is not None or port_open(self.port), timeout=60, what=f"{self.name} to listen")
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited: {self.log()}")
        return self

    def stop(self):
        stop_group(self.proc)
        if self.proc:
            self._out.close()
        self.proc = None

    def log(self):
        p = self.dir / f"{self.name}.log"
        return p.read_text() if p.exists() else ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
