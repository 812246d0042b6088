"""Native and standalone mode: the switch forwards with no controller at all."""

import re
import subprocess
import time

from testbed.ofpeer import Controller
from testbed.switches import Edgeflow
from testbed.traffic import iperf3_tcp, udp_frame
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


MADE_UP_SOURCES = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
dst, n = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    src = bytes([0x02, 0xee]) + i.to_bytes(4, "big")
    s.send(dst + src + b"\x88\xb5" + bytes(46))
    if i % 200 == 199:
        time.sleep(0.02)
"""

LISTEN_FOR = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("eth0", 0))
s.settimeout(0.2)
print("ready", file=sys.stderr, flush=True)
dst, end, seen = bytes.fromhex(sys.argv[1]), time.time() + float(sys.argv[2]), 0
while time.time() < end:
    try:
        data, addr = s.recvfrom(65536)
    except socket.timeout:
        continue
    seen += addr[2] != socket.PACKET_OUTGOING and data[:6] == dst
print(seen)
"""


def test_made_up_sources_do_not_stop_learning(three_hosts):
    """One host sending from 10 000 made-up MAC addresses fills only its port's share of the
    learning table, so a host that comes later is learned at once and frames to it are not
    flooded (before, the full table learned nothing more for the 5 minutes an address ages)."""
    h1, h2, h3 = three_hosts.hosts
    with Edgeflow(three_hosts.switch_ports) as sw:
        received, _, _ = h2.ping(h1.addr, count=1)
        assert received == 1
        h1.run("python3", "-c", MADE_UP_SOURCES, h2.mac.replace(":", ""), "10000", timeout=60)

        def mac_table():
            return next(g["counters"] for g in sw.stats()["mode_counters"] if g["name"] == "mac table")

        # Every made-up source reached the table (the old table would have been full at 8 192).
        wait_for(lambda: sum(mac_table()[k] for k in ("addresses", "evicted_table_full", "evicted_port_limit"))
                 >= 10000, timeout=10, what="the made-up sources learned or evicted")
        table = mac_table()
        assert table["evicted_port_limit"] >= 10000 - 2048 and table["addresses"] <= 2048 + 4, table
        # The newcomer speaks, then h2 sends to it: only h3's port gets the frame, h1's does not.
        # Listening from when its socket is bound, for a second and a half: the pings take 0.4 s.
        listen = h1.popen("python3", "-c", LISTEN_FOR, h3.mac.replace(":", ""), "1.5",
                          stdout=subprocess.PIPE, text=True)
        assert listen.stderr.readline().strip() == "ready", listen.communicate(timeout=10)
        received, _, _ = h3.ping(h2.addr, count=3, interval=0.2)
        assert received == 3
        flooded = int(listen.communicate(timeout=30)[0])
        assert flooded == 0, f"{flooded} frames to h3 flooded to h1: h3 was not learned"
        assert sw.stop() == 0
