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
