"""Small helpers shared by the testbed modules."""

import os
import socket
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("EDGEFLOW_VENV", ROOT / ".venv"))
RUN_DIR = Path(os.environ.get("EDGEFLOW_RUN_DIR", ROOT / "build" / "run"))
#: How much longer every wait may take than on the machine the tests were written on: 1, but
#: more inside an emulated guest (`scripts/test-kernels.sh` under TCG), where starting Python,
#: scapy or os-ken takes many times as long. Waits and timeouts are upper bounds, never what a
#: test claims as a speed, so this loosens no claim but how long a failure takes to be called.
TIMEOUT_SCALE = float(os.environ.get("EDGEFLOW_TIMEOUT_SCALE", "1"))


def kernel_version():
    """The running kernel's (major, minor), what its features are decided by."""
    return tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout=10.0, interval=0.05, what="condition"):
    timeout *= TIMEOUT_SCALE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def run_dir(name):
    d = RUN_DIR / name
    d.mkdir(parents=True, exist_ok=True)
    return d
