import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed import netns  # noqa: E402
from testbed.switches import EDGEFLOW_BIN  # noqa: E402


def pytest_collection_modifyitems(config, items):
    # A run that skips everything must not read as a pass: without root, refuse to start unless the
    # caller asks for the skip by name.
    if os.geteuid() != 0:
        if os.environ.get("EDGEFLOW_SKIP_INTEGRATION") != "1":
            raise pytest.UsageError("the integration tests need root (network namespaces, AF_PACKET): run "
                                    "`make test` as root, or set EDGEFLOW_SKIP_INTEGRATION=1 to skip them")
        skip = pytest.mark.skip(reason="EDGEFLOW_SKIP_INTEGRATION=1: integration tests need root")
        for item in items:
            item.add_marker(skip)


#: Held for the whole session: a second session would wipe the first one's namespaces and
#: interfaces when it cleans up (one did, and failed a CI run half-way).
SESSION_LOCK = "/run/edgeflow-tests.lock"


@pytest.fixture(scope="session", autouse=True)
def clean_machine():
    if os.geteuid() != 0:
        yield
        return
    import fcntl
    lock = open(SESSION_LOCK, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pytest.exit(f"another edgeflow test session holds {SESSION_LOCK}: starting would wipe its namespaces "
                    "and interfaces; wait for it to finish", returncode=3)
    assert Path(EDGEFLOW_BIN).exists(), f"{EDGEFLOW_BIN} missing: run `make build` first"
    netns.cleanup()
    yield
    netns.cleanup()
    lock.close()


@pytest.fixture
def two_hosts():
    with netns.Topology("t") as topo:
        topo.add_host()
        topo.add_host()
        yield topo


@pytest.fixture
def three_hosts():
    with netns.Topology("t") as topo:
        for _ in range(3):
            topo.add_host()
        yield topo


@pytest.fixture(params=["user", "tc", "xdp"])
def datapath(request):
    """Runs a test once per datapath: userspace only, and with the kernel fast path at TC and XDP."""
    return request.param

