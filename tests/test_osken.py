"""An os-ken application controls the switch."""

import re

from testbed.controllers import OsKen
from testbed.switches import Edgeflow
from testbed.util import wait_for


def test_l2_learning_app(two_hosts):
    h1, h2 = two_hosts.hosts
    with OsKen("l2_learning") as ctl, Edgeflow(two_hosts.switch_ports, controllers=[ctl.target]) as sw:
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


def test_pass_through_app(two_hosts):
    h1, h2 = two_hosts.hosts
    with OsKen("pass_through") as ctl, Edgeflow(two_hosts.switch_ports, controllers=[ctl.target]) as sw:
        wait_for(lambda: len(sw.flows()) == 2, what="the two pass-through flows")
        assert h1.ping(h2.addr, count=5)[0] == 5
        flows = sw.flows()
        assert any("in_port=1 actions=output:2" in f for f in flows)
        assert any("in_port=2 actions=output:1" in f for f in flows)
        assert "packet_in" not in ctl.log().lower()


def test_four_table_app(three_hosts):
    h1, h2, h3 = three_hosts.hosts
    with OsKen("four_table") as ctl, Edgeflow(three_hosts.switch_ports, controllers=[ctl.target]) as sw:
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
