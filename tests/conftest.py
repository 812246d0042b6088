import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed import background, netns  # noqa: E402
from testbed.switches import EDGEFLOW_BIN  # noqa: E402
from testbed.util import TIMEOUT_SCALE  # noqa: E402

# tests/bench runs every experiment (~10 minutes): `make bench-quick` asks for it by name.
collect_ignore = [] if os.environ.get("EDGEFLOW_BENCH") == "1" else ["bench"]
# tests/init boots a Debian root under systemd (`make test-init`, after its setup step).
collect_ignore += [] if os.environ.get("EDGEFLOW_INIT") == "1" else ["init"]
# tests/cross runs the i586 and MIPS images, which `make cross-test` builds first (too long for make test).
collect_ignore += [] if os.environ.get("EDGEFLOW_CROSS") == "1" else ["cross"]


NEEDS_ROOT = ("this test builds network namespaces and loads BPF programs: run `make test` as root, or set "
              "EDGEFLOW_SKIP_INTEGRATION=1 to run only the tests that need no root")


def pytest_configure(config):
    config.addinivalue_line("markers", "no_root: runs without root (no namespaces, sockets or BPF programs)")
    config.addinivalue_line("markers", "background(job): collects a job of testbed/background.py that the session "
                                       "starts at once and runs beside the other tests; the test runs last")


def needs_root(item):
    return item.get_closest_marker("no_root") is None


def background_jobs(item):
    return [m.args[0] for m in item.iter_markers("background")]


def pytest_collection_modifyitems(config, items):
    # The tests that collect a background job wait for it: last, so that it had the run's length.
    items.sort(key=lambda item: bool(background_jobs(item)))
    # A test's own time limit stretches as its waits do (testbed.util.TIMEOUT_SCALE: an emulated
    # guest); the marker put first is the one pytest-timeout reads.
    if TIMEOUT_SCALE != 1:
        default = float(config.getini("timeout") or 0)
        for item in items:
            limit = item.get_closest_marker("timeout")
            seconds = limit.args[0] if limit and limit.args else default
            if seconds:
                item.add_marker(pytest.mark.timeout(seconds * TIMEOUT_SCALE), append=False)
    # Without root, the tests that need none run first; the first one that needs root stops the
    # run with the reason (a run that skipped everything must not read as a pass), unless the
    # caller asked for the skip by name.
    if os.geteuid() == 0:
        return
    items.sort(key=needs_root)
    if os.environ.get("EDGEFLOW_SKIP_INTEGRATION") == "1":
        skip = pytest.mark.skip(reason="EDGEFLOW_SKIP_INTEGRATION=1: this test needs root")
        for item in items:
            if needs_root(item):
                item.add_marker(skip)


def pytest_runtest_setup(item):
    if os.geteuid() != 0 and needs_root(item):
        pytest.exit(f"{item.nodeid}: {NEEDS_ROOT}", returncode=1)


@pytest.fixture(scope="session", autouse=True)
def clean_machine(request):
    if os.geteuid() != 0 or not any(needs_root(item) for item in request.session.items):
        yield
        return
    try:
        lock = netns.exclusive("starting a test session")
    except netns.Busy as e:
        pytest.exit(str(e), returncode=3)
    assert Path(EDGEFLOW_BIN).exists(), f"{EDGEFLOW_BIN} missing: run `make build` first"
    netns.cleanup()
    for name in dict.fromkeys(job for item in request.session.items for job in background_jobs(item)):
        background.start(name)
    yield
    background.stop_all()
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

