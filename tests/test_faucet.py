"""Faucet (from PyPI) controls the switch; Gauge, a second controller, collects port statistics."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from testbed import netns
from testbed.controllers import FAUCET_VENV, Faucet
from testbed.switches import edgeflow_on
from testbed.util import ROOT, run_dir, wait_for



@pytest.fixture(autouse=True)
def faucet_installed():
    # `make setup` installs Faucet: without it the install is broken, which is a failure, not a skip.
    assert (FAUCET_VENV / "bin" / "faucet").exists(), f"{FAUCET_VENV}/bin/faucet missing: run `make setup`"


@pytest.fixture
def faucet_hosts():
    with netns.Topology("f") as topo:
        topo.add_host("10.0.100.1/24")             # port 1: office, untagged
        topo.add_host("10.0.100.2/24")             # port 2: office, untagged
        topo.add_host("10.0.100.3/24", vlan=100)   # port 3: trunk, host tags office
        topo.add_host("10.0.200.4/24")             # port 4: guest, every frame dropped by an ACL
        topo.add_host("10.0.200.5/24")             # port 5: guest, untagged
        topo.add_host("10.0.200.6/24", vlan=200)   # port 6: guest, tagged
        topo.add_host("10.0.100.7/24")             # port 7: guest, but addressed in office's subnet
        yield topo


def reachable(src, dst):
    return src.ping(dst.addr, count=2, interval=0.3)[0] > 0


# One kernel hook: Faucet's flows (VLAN push and pop, floods, the ACL's drop) run in the one action
# executor both hooks share (bpf/fp_ctx.h). TC, whose floods clone in the kernel (XDP sends them to
# userspace); XDP's pushes and pops are held to userspace's bytes by BPF_PROG_TEST_RUN
# (`every_action_does_in_the_kernel_what_userspace_does`).
@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_faucet_vlans_acl_and_gauge(faucet_hosts, tmp_path, datapath):
    h = faucet_hosts.hosts
    faucet_yaml = tmp_path / "faucet.yaml"
    faucet_yaml.write_text((ROOT / "testbed" / "configs" / "faucet-two-vlans.yaml").read_text())
    stats = run_dir("gauge") / "port_stats.txt"
    stats.unlink(missing_ok=True)
    gauge_yaml = tmp_path / "gauge.yaml"
    gauge_yaml.write_text(
        f"faucet_configs:\n  - {faucet_yaml}\n"
        "watchers:\n  port_stats:\n    dps: ['sw1']\n    type: 'port_stats'\n    interval: 1\n    db: 'stats'\n"
        f"dbs:\n  stats:\n    type: 'text'\n    file: '{stats}'\n    compress: false\n")
    with Faucet(faucet_yaml) as faucet, Faucet(gauge_yaml, gauge=True) as gauge, \
            edgeflow_on(datapath, h, faucet_hosts.switch_ports, controllers=[faucet.target, gauge.target],
                        extra=["--dpid", "0x1"], log_name="faucet") as sw:
        wait_for(lambda: len(sw.flows()) > 20, timeout=20, what="Faucet's pipeline")
        # Within a VLAN, untagged and tagged members reach each other.
        assert reachable(h[0], h[1])
        assert reachable(h[0], h[2]), "untagged office port to the trunk's office VLAN"
        assert reachable(h[4], h[5]), "untagged guest port to a tagged guest port"
        # Across VLANs nothing passes, even within one IP subnet; and the ACL holds: port 4 reaches
        # nobody, and nobody reaches it. Each of these waits for replies that never come: side by
        # side, on hosts that have nothing to do with each other.
        with ThreadPoolExecutor(3) as pool:
            crossed = list(pool.map(lambda pair: reachable(*pair), [(h[0], h[6]), (h[3], h[4]), (h[4], h[3])]))
        assert crossed == [False, False, False], crossed
        # Port 7 itself works in its own VLAN (an address in guest's subnet reaches port 5). Port 5
        # reaches the tagged guest port (above), and what port 4 sent reached the switch: the
        # ACL's flow dropped it.
        h[6].run("ip", "addr", "add", "10.0.200.7/24", "dev", "eth0")
        assert h[6].ping("10.0.200.5", count=2, interval=0.3)[0] > 0, "port 7 forwards within guest"
        acl = [l for l in sw.ofctl("dump-flows").splitlines() if "in_port=4" in l and "actions=drop" in l]
        assert acl and int(re.search(r"n_packets=(\d+)", acl[0]).group(1)) > 0, acl
        # Known hosts, learned flows: steady traffic, which the kernel datapaths carry themselves.
        assert h[0].ping(h[2].addr, count=10, interval=0.05)[0] == 10

        flows = sw.ofctl("dump-flows")
        tables = {int(t) for t in re.findall(r"table=(\d+)", flows)}
        assert tables >= {0, 1, 2, 3, 4}, f"Faucet uses tables 0-4; populated: {sorted(tables)}"
        learned_src = [l for l in flows.splitlines() if "table=2" in l and "dl_src=" in l and "hard_timeout" in l]
        learned_dst = [l for l in flows.splitlines() if "table=3" in l and "dl_dst=" in l and "idle_timeout" in l]
        assert len(learned_src) >= 4 and len(learned_dst) >= 4, flows
        assert "in_port=4 actions=drop" in flows

        # Gauge's port statistics come back (its text database, written every second).
        def stats_for_port1():
            if not stats.exists():
                return None
            m = re.findall(r"sw1-1-packets-in\s+(\d+)", stats.read_text())
            return m and int(m[-1]) > 0
        wait_for(stats_for_port1, timeout=15, what="Gauge port stats")
        assert "Traceback" not in faucet.log() + gauge.log()
    if datapath != "user":
        # Known flows crossed Faucet's five tables in the kernel: the hits show it.
        totals = sw.fastpath_totals()
        assert totals and totals["hits"] >= 15, totals
