"""An os-ken application controls the switch — userspace only, and with the kernel fast path at
TC and at XDP (the `datapath` fixture). With a fast path, the traffic after the controller's
flows are in place must be forwarded by the kernel: its hit counter shows it."""

import re

import pytest

from testbed.controllers import OsKen
from testbed.switches import edgeflow_on
from testbed.util import wait_for


def assert_kernel_forwarded(sw, datapath, at_least):
    totals = sw.fastpath_totals()
    if datapath == "user":
        assert totals is None
    else:
        assert totals and totals["hits"] >= at_least, totals


def test_l2_learning_app(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with OsKen("l2_learning") as ctl, \
            edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, controllers=[ctl.target], log_name="l2") as sw:
        wait_for(lambda: any("CONTROLLER" in f for f in sw.flows()), what="table-miss flow from the app")
        received, sent, _ = h1.ping(h2.addr, count=5)
        assert received == sent == 5, ctl.log()
        flows = sw.flows()
        learned = [f for f in flows if "priority=10" in f]
        assert len(learned) == 2, flows
        macs = {h1.mac, h2.mac}
        for f in learned:
            src = re.search(r"dl_src=([0-9a-f:]+)", f).group(1)
            dst = re.search(r"dl_dst=([0-9a-f:]+)", f).group(1)
            assert {src, dst} == macs
            assert int(re.search(r"n_packets=(\d+)", f).group(1)) >= 1, "pings after learning stay in the switch"
        def misses():
            miss = next(f for f in sw.flows() if "CONTROLLER" in f)
            return int(re.search(r"n_packets=(\d+)", miss).group(1))
        before = misses()
        assert h1.ping(h2.addr, count=5, interval=0.05)[0] == 5
        assert misses() == before, "learned traffic reached the controller"
    assert_kernel_forwarded(sw, datapath, at_least=8)


# One kernel hook each for the apps that only forward: test_l2_learning_app runs on both.
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_pass_through_app(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with OsKen("pass_through") as ctl, \
            edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, controllers=[ctl.target], log_name="pt") as sw:
        wait_for(lambda: len(sw.flows()) == 2, what="the two pass-through flows")
        assert h1.ping(h2.addr, count=5)[0] == 5
        flows = sw.flows()
        assert any("in_port=1 actions=output:2" in f for f in flows)
        assert any("in_port=2 actions=output:1" in f for f in flows)
        # OpenFlow counters include what the kernel forwarded: 5 requests, 5 replies at least.
        for f in flows:
            assert int(re.search(r"n_packets=(\d+)", f).group(1)) >= 5, flows
        assert "packet_in" not in ctl.log().lower()
    assert_kernel_forwarded(sw, datapath, at_least=8)


# One kernel hook each for the apps that only forward: test_l2_learning_app runs on both.
@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_four_table_app(three_hosts, datapath):
    h1, h2, h3 = three_hosts.hosts
    with OsKen("four_table") as ctl, \
            edgeflow_on(datapath, three_hosts.hosts, three_hosts.switch_ports, controllers=[ctl.target], log_name="ft") as sw:
        wait_for(lambda: len(sw.flows()) >= 6, what="the four-table pipeline")
        assert h1.ping(h2.addr, count=4)[0] == 4
        assert h3.ping(h1.addr, count=4)[0] == 4
        by_table = {t: sw.flows(table=t) for t in range(4)}
        assert len([f for f in by_table[1] if "dl_src=" in f]) == 3, by_table[1]
        assert len([f for f in by_table[2] if "dl_dst=" in f]) == 3, by_table[2]
        # Once learned, traffic between known hosts never reaches table 3 (flood).
        flood = by_table[3][0]
        before = int(re.search(r"n_packets=(\d+)", flood).group(1))
        assert h1.ping(h2.addr, count=5, interval=0.05)[0] == 5
        after = int(re.search(r"n_packets=(\d+)", sw.flows(table=3)[0]).group(1))
        assert after == before
    assert_kernel_forwarded(sw, datapath, at_least=8)
