"""Small helpers shared by the testbed modules."""

import os
import random
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


#: Ports this process has handed out: two switches set up side by side before either listens
#: must not be given the same one.
_HANDED_OUT = set()


def _ephemeral_range():
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the kernel's ephemeral
    range: a port the kernel picks for `bind(0)` is one it may also give the next outgoing
    connection as its source port (a probe of another switch's listener did exactly that, and the
    switch that was to listen on it then could not), but it never picks one below that range."""
    low, _ = _ephemeral_range()
    first = 20000 if low > 24000 else 1024
    for _ in range(200):
        port = random.randrange(first, low)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free TCP port in {first}..{low}")


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
