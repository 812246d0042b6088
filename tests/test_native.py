"""Native and standalone mode: the switch forwards with no controller at all."""

import re
import time

from testbed.ofpeer import Controller
from testbed.switches import Edgeflow
from testbed.traffic import iperf3_tcp
from testbed.util import wait_for


def test_native_ping_and_tcp_with_default_offloads(two_hosts):
    h1, h2 = two_hosts.hosts
    with Edgeflow(two_hosts.switch_ports) as sw:
        received, sent, _ = h1.ping(h2.addr, count=5)
        assert received == sent == 5
        # The hosts keep checksum offload and TSO on: the switch must carry partial checksums (or
        # TCP would not get through at all) and GSO super-frames whole: port 2 sent frames far
        # over the MTU on average. (Speed is a benchmark's business: `make bench`, zodiac.)
        before = port_tx(sw, 2)
        bps = iperf3_tcp(h1, h2, seconds=2)
        packets, octets = (a - b for a, b in zip(port_tx(sw, 2), before))
        assert bps > 100e6, f"{bps / 1e9:.2f} Gbit/s"
        assert octets / packets > 3000, f"{octets / packets:.0f} bytes per frame: super-frames were cut up"
        # Native mode is a NORMAL flow that ovs-ofctl can see.
        flows = sw.flows()
        assert len(flows) == 1 and "actions=NORMAL" in flows[0] and "priority=0" in flows[0]
        assert sw.stop() == 0, "clean shutdown on SIGTERM"


def port_tx(sw, port):
    """(tx packets, tx bytes) of a port, from ovs-ofctl dump-ports."""
    out = sw.ofctl("dump-ports", str(port))
    m = re.search(r"tx pkts=(\d+), bytes=(\d+)", out)
    return int(m.group(1)), int(m.group(2))


def test_standalone_learns_when_no_controller_answers(two_hosts):
    h1, h2 = two_hosts.hosts
    dead = Controller()  # listens but we never accept: the switch cannot complete a handshake
    dead.close()
    with Edgeflow(two_hosts.switch_ports, controllers=[dead.target], fail_mode="standalone") as sw:
        # The default delay: 3 s with no controller, not sooner (1.5 s of it left for the switch's
        # start to have taken, however slow).
        time.sleep(1.5)
        assert "standalone learning switch" not in sw.log(), sw.log()
        wait_for(lambda: "standalone learning switch" in sw.log(), timeout=5, what="fail-open after 3 s")
        received, _, _ = h1.ping(h2.addr, count=3)
        assert received == 3
        assert sw.flows() == [], "fail-open learning does not install OpenFlow flows"


def test_secure_mode_drops_without_controller(two_hosts):
    h1, h2 = two_hosts.hosts
    dead = Controller()
    dead.close()
    # Past a (shortened) fail-open delay, secure mode has not opened.
    with Edgeflow(two_hosts.switch_ports, controllers=[dead.target], fail_mode="secure",
                  extra=["--fail-open-delay", "1"]) as sw:
        time.sleep(1.5)
        received, _, _ = h1.ping(h2.addr, count=2)
        assert received == 0
        # The positive control: the same pings, once a flow allows them, all come back (so the 0
        # above was the switch's doing, not a ping that could not be read).
        sw.ofctl("add-flow", "priority=1,actions=NORMAL")
        received, _, _ = h1.ping(h2.addr, count=2)
        assert received == 2
