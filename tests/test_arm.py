"""The image a gateway runs: the minimal aarch64 build (`scripts/cross.sh aarch64-unknown-linux-musl
minimal`, built beside the other tests by testbed/background.py; `make cross-test`: static musl, OpenFlow
and the userspace datapath, no TLS, no fast path, no AFDX or LESS) under qemu-user on this
machine's kernel. An os-ken application drives it; hosts in namespaces ping and carry TCP
through it, and its own report says which socket features it had to do without."""

import re
import shutil
import subprocess

import pytest

from testbed import background
from testbed.controllers import OsKen
from testbed.switches import Edgeflow
from testbed.traffic import iperf3_tcp
from testbed.util import ROOT, wait_for

TARGET = "aarch64-unknown-linux-musl"
BINARY = ROOT / "build" / "cross" / TARGET / "edgeflow-minimal"
QEMU = "qemu-aarch64-static"


# Built beside the other tests; run on its own, the build (minutes) is in this test's time.
pytestmark = [pytest.mark.background("cross-aarch64-minimal"), pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def arm_switch():
    code, out, _ = background.result("cross-aarch64-minimal")
    assert code == 0, f"scripts/cross.sh aarch64-unknown-linux-musl minimal failed:\n{out[-3000:]}"
    if shutil.which(QEMU) is None:
        pytest.fail(f"{QEMU} is missing: scripts/setup.sh installs qemu-user-static")
    kind = subprocess.run(["file", "-b", str(BINARY)], capture_output=True, text=True).stdout
    assert "ARM aarch64" in kind and "statically linked" in kind, kind
    return [QEMU, str(BINARY)]


def test_the_aarch64_image_forwards_for_an_os_ken_app(arm_switch, two_hosts):
    h1, h2 = two_hosts.hosts
    # qemu-user translates none of AF_PACKET's own socket options, so the switch falls back to
    # plain packet sockets, which carry no offloads: the hosts finish their own checksums.
    for h in two_hosts.hosts:
        h.set_offload(tx="off")
    with OsKen("l2_learning") as ctl, \
            Edgeflow(two_hosts.switch_ports, controllers=[ctl.target], log_name="arm-l2", program=arm_switch) as sw:
        wait_for(lambda: any("CONTROLLER" in f for f in sw.flows()), timeout=30, what="the app's table-miss flow")
        received, sent, _ = h1.ping(h2.addr, count=5)
        assert received == sent == 5, sw.log()
        learned = [f for f in sw.flows() if "priority=10" in f]
        assert len(learned) == 2, sw.flows()
        bps = iperf3_tcp(h1, h2, seconds=2)
        # Emulated, the switch is slow; what matters is that TCP gets through whole.
        assert bps > 1e6, f"{bps / 1e6:.1f} Mbit/s"
        for f in learned:
            assert int(re.search(r"n_packets=(\d+)", f).group(1)) >= 1
        io = {p["name"]: p["io"] for p in sw.stats()["ports"]}
        print(f"aarch64 under qemu-user: TCP {bps / 1e6:.1f} Mbit/s; port I/O: {io}")
        assert set(io.values()) == {"af_packet plain"}, io
        assert "AF_PACKET's socket options are refused" in sw.log()
        # Under emulation too, SIGTERM is a clean shutdown: the forwarding thread stops and says
        # so, and the exit status is 0 (stopped here: once the `with` has stopped it, stop() has
        # nothing left to report).
        assert sw.alive()
        assert sw.stop() == 0, sw.log()
        log = sw.log()
        assert "SIGTERM: shutting down" in log and "forwarding stopped" in log, log


def test_the_minimal_image_refuses_what_it_was_built_without(arm_switch, two_hosts, tmp_path):
    config = tmp_path / "afdx.toml"
    config.write_text('mode = "afdx"\n[[port]]\nname = "a"\n[[port]]\nname = "b"\n')
    r = subprocess.run(arm_switch + ["check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "afdx.toml:1:" in r.stderr and "cargo feature `afdx`" in r.stderr, r.stderr
    ports = [a for p in two_hosts.switch_ports for a in ("--port", p)]
    r = subprocess.run(arm_switch + ["run", *ports, "--datapath", "tc"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "cargo feature `fastpath`" in r.stderr, r.stderr
    r = subprocess.run(arm_switch + ["run", *ports, "--controller", "tls:127.0.0.1:6653", "--private-key", "k",
                                     "--certificate", "c", "--ca-cert", "ca"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "cargo feature `tls`" in r.stderr, r.stderr


def test_the_minimal_image_fits_a_routers_flash(arm_switch):
    """Seed 004's micro OpenWrt image is 1.7 MB in all: the minimal build must stay within 3 MB
    stripped and 1.5 MB xz-compressed (what a squashfs root costs), as `make cross` also holds."""
    kind = subprocess.run(["file", "-b", str(BINARY)], capture_output=True, text=True).stdout
    assert "stripped" in kind and "not stripped" not in kind, kind
    size = BINARY.stat().st_size
    packed = len(subprocess.run(["xz", "-9e", "-T1", "-c", str(BINARY)], capture_output=True, check=True).stdout)
    print(f"\n{BINARY.name}: {size} bytes stripped, {packed} bytes xz")
    assert size <= 3_000_000, f"{size} bytes stripped, over the 3 MB budget"
    assert packed <= 1_500_000, f"{packed} bytes xz-compressed, over the 1.5 MB budget"
