"""LESS mode with real frames (docs/less.md).

- A sender that writes its own label stack crosses a chain of three edgeflow switches: the labels on
  every link, read with scapy, are what the per-hop rule makes of them, and the receiver gets plain
  IP with nothing lost. Malformed stacks are dropped and counted under their reasons.
- A host on an edge port cannot take the fabric in: ARP from invented senders fills its port's
  share of hosts, and the announcement goes in frames that fit, so the switch's real hosts stay
  known; the protocol's frames from an edge port are dropped and counted.
- On six switches with redundant links, unmodified hosts ping (IPv4 and IPv6) and carry TCP over
  LESS, and traffic keeps flowing while a link is taken down for each reroute case, losing fewer
  frames than a controller rerouting on port-status loses to the same failure; addresses
  re-converge when the link goes and when it comes back. These tests share one fabric per
  datapath (TestSixSwitches).

About 680 lines, one concern: LESS as a fabric of real switches sees it, from one chain to six
switches; the mode's logic with frames passed in memory is crates/forwarding/tests/less.rs.
"""

import contextlib
import json
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from scapy.all import AsyncSniffer, Ether, conf, rdpcap

from testbed import less, loadgen, netns
from testbed.less import counters, less_switches, stacks
from testbed.switches import EDGEFLOW_BIN, Edgeflow
from testbed.topology import Fabric, chain, single
from testbed.traffic import iperf3_tcp
from testbed.util import TIMEOUT_SCALE, run_dir, wait_for


def sniffer(iface):
    """A capture on `iface` (in the root namespace). Interfaces are recreated with the same names
    from test to test: scapy's cached list is refreshed first, or it binds to a stale index."""
    conf.ifaces.reload()
    return AsyncSniffer(iface=iface, lfilter=carries_labels_or_ip, store=True)


def carries_labels_or_ip(frame):
    return Ether in frame and frame[Ether].type in (0x8847, 0x0800)


def send(host, dst, route=None, raw=None, count=100, rate=1000, size=128):
    args = [loadgen.LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst.mac, "--src-ip", host.addr,
            "--dst-ip", dst.addr, "--size", str(size), "--rate", str(rate), "--count", str(count),
            "--duration", "30", "--engine", "socket"]
    if route:
        args += ["--less", route]
    if raw:
        args += ["--less-raw", ",".join(f"{w:08x}" for w in raw)]
    return host.run(*args, timeout=60)


def send_frames(host, frames, rounds=1):
    """Writes `frames` (bytes) out of `host`'s eth0 through a packet socket, `rounds` times over."""
    script = ("import socket, sys\n"
              "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
              "s.bind(('eth0', 0))\n"
              "frames = [bytes.fromhex(f) for f in sys.argv[2:]]\n"
              "for _ in range(int(sys.argv[1])):\n"
              "    for f in frames:\n"
              "        s.send(f)\n")
    host.run(sys.executable, "-c", script, str(rounds), *(f.hex() for f in frames), timeout=60)


def test_labels_are_rewritten_hop_by_hop_and_the_receiver_gets_ip():
    netns.cleanup()
    # h1 - s1 - s2 - s3 - h2. Each switch's host port is 1; s2's ports are 1 (to s1) and 2 (to s3).
    fabric = chain("ls", 3)
    with fabric, less_switches(fabric, tag="less-chain") as sws:
        h1, h2 = fabric.hosts
        s1_s2, s2_s3 = fabric.links
        sniffers = {
            "s1->s2": sniffer(s1_s2[1]),
            "s2->s3": sniffer(s2_s3[1]),
        }
        for s in sniffers.values():
            s.start()
        # A switch's AF_PACKET transmit bypasses the taps of its own side: h2's view is taken inside h2.
        pcap = run_dir("less") / "at-h2.pcap"
        dump = h2.popen("tcpdump", "-i", "eth0", "-U", "-w", str(pcap), "udp or ether proto 0x8847")
        time.sleep(0.5)
        with loadgen.receiving(h2.popen, loadgen.LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket",
                               "--flow", "1", "--duration", "30") as recv:
            got = loadgen.finish_receiver(recv, [send(h1, h2, route="2.2.1", count=200).stdout])
        time.sleep(0.3)
        seen = {k: stacks(s.stop()) for k, s in sniffers.items()}
        dump.terminate()
        dump.wait(timeout=10)
        seen["s3->h2"] = stacks(rdpcap(str(pcap)))
        assert got["received"] == 200 and got["lost"] == 0, got
        # s1 used port 2 and shifted: "2.1" with TTL 2; s2 used 2: "1" with TTL 1; s3 popped it.
        assert set(seen["s1->s2"]) == {((((2, 1, 0), True, 2),), 4)}, seen["s1->s2"][:3]
        assert set(seen["s2->s3"]) == {((((1, 0, 0), True, 1),), 4)}, seen["s2->s3"][:3]
        assert set(seen["s3->h2"]) == {((), 0x0800)}, seen["s3->h2"][:3]
        assert all(len(v) >= 200 for v in seen.values()), {k: len(v) for k, v in seen.items()}
        shifted = [counters(sws[s])["shifted"] for s in ("s1", "s2")]
        assert shifted == [200, 200] and counters(sws["s3"])["delivered"] == 200, shifted


def test_malformed_stacks_are_dropped_and_counted_per_reason():
    netns.cleanup()
    fabric = single("lm", 2)
    with fabric, less_switches(fabric, tag="less-bad") as sws:
        h1, h2 = fabric.hosts
        sw = sws["s"]
        word = lambda ports, bottom, ttl: (ports[0] << 24) | (ports[1] << 16) | (ports[2] << 8) | (bottom << 7) | ttl
        cases = {
            "port_zero": [word((0, 2, 0), 1, 1)],
            "bad_ttl": [word((2, 0, 0), 1, 2)],
            "unknown_port": [word((9, 0, 0), 1, 1)],
            "too_many_labels": [word((2, 0, 0), 0, 1)] * 16 + [word((2, 0, 0), 1, 1)],
        }
        for words in cases.values():
            send(h1, h2, raw=words, count=7, size=200)
        # Frames loadgen cannot make (it always carries IP): a stack that runs to the frame's end
        # without a bottom entry, and a bottom label over something that is not IP.
        crafted = {
            "truncated": struct.pack("!3I", *[word((2, 0, 0), 0, 1)] * 3),
            "not_ip": struct.pack("!I", word((2, 0, 0), 1, 1)) + bytes(46),
        }
        frames = [bytes.fromhex(h2.mac.replace(":", "")) + bytes.fromhex(h1.mac.replace(":", "")) + b"\x88\x47" + stack
                  for stack in crafted.values()]
        send_frames(h1, frames, rounds=7)
        cases.update(crafted)
        # A well-formed one-hop stack gets through, to show the switch kept running.
        send(h1, h2, route="2", count=5)
        time.sleep(0.5)
        labels = counters(sw)
        drops = labels["drops"]
        for reason in cases:
            assert labels[reason] == 7, (reason, labels)
        assert drops["bad_label"] == 7 * len(cases), drops
        assert labels["delivered"] == 5, labels


def test_labelled_frames_from_the_xdp_sender_cross_the_xdp_fast_path_at_full_speed():
    """loadgen's XDP sender writes labels (its probe moves behind them) and keeps them right frame
    after frame although the switch pops them in the pages it hands back: the switch's kernel
    delivers every frame it is sent (a wrong label is not delivered). The receiving host's
    socket may drop a few at the sender's full speed (1 217 of 3.66 million once, at 3.6 Mpps on
    an idle machine): that is the receiver's limit, not the switch's, so the receiver is held
    only to in-order delivery of nearly all of them."""
    netns.cleanup()
    fabric = single("lq", 2)
    with fabric, less_switches(fabric, root=None, datapath="xdp", tag="less-xdp-send") as sws:
        h1, h2 = fabric.hosts
        loadgen.prepare_xdp_sender(h1)
        sent, got = less.stream(h1, h2, 128, 0, 1.0, "2", engine="xdp")
        print(f"XDP sender through the XDP LESS switch: {sent['sent']} sent, {got['received']} received")
        # Enough frames that the labels stayed right frame after frame (1-3.6 million a second here).
        assert sent["sent"] > 20_000, sent
        # At 3.9 Mpps on an idle machine the switch's port once took 3 577 fewer of 3.93 million
        # (0.09 %) than the sender sent: a veth drops what its ring cannot hold before any program
        # sees it. A wrong label would cost every frame, so the labels are still held to 99.8 %.
        delivered = counters(sws["s"])["kernel"]["delivered"]
        assert 0.998 * sent["sent"] <= delivered <= sent["sent"], (sent, counters(sws["s"]))
        assert got["received"] >= 0.99 * sent["sent"] and got["reordered"] == 0, (sent, got)


def test_a_port_without_carrier_is_counted_as_no_route():
    netns.cleanup()
    fabric = single("ln", 2)
    with fabric, less_switches(fabric, tag="less-down") as sws:
        h1, h2 = fabric.hosts
        netns.sh("ip", "link", "set", h2.switch_side, "down")
        time.sleep(0.3)
        send(h1, h2, route="2", count=10)
        # All ten counted, and then nothing else: none delivered.
        wait_for(lambda: counters(sws["s"])["no_route"] == 10, timeout=5, what="ten frames without a route")
        labels = counters(sws["s"])
        assert labels["no_route"] == 10 and labels["delivered"] == 0, labels
        netns.sh("ip", "link", "set", h2.switch_side, "up")
        time.sleep(0.5)
        send(h1, h2, route="2", count=10)
        wait_for(lambda: counters(sws["s"])["delivered"] >= 10, timeout=5, what="ten frames delivered")
        assert counters(sws["s"])["delivered"] == 10


def arp_reply_from(n):
    """An ARP reply to everyone from invented sender n (MAC 02:aa:…, IP 10.0.1.0 + n)."""
    mac = bytes([2, 0xaa, 0, 0, n >> 8, n & 0xff])
    ip = bytes([10, 0, 1 + (n >> 8), n & 0xff])
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 2) + mac + ip + bytes(6) + bytes([10, 0, 0, 254])
    return b"\xff" * 6 + mac + b"\x08\x06" + arp + bytes(18)


#: The LESS protocol's frames (docs/less.md §2) as a host on an edge port could forge them.
LESS_GROUP, LESS_PROTOCOL = bytes([0x03, 0x00, 0x4c, 0x45, 0x53, 0x53]), b"\x88\xb5"


def forged_hello(switch_id):
    """A HELLO from a root-capable switch `switch_id` with no addresses, as if from its port 1."""
    body = bytes([2, 1]) + struct.pack("!QBBB", switch_id, 1, 1, 0)
    return (LESS_GROUP + bytes([2, 0, 0, 0, 0, 0x99]) + LESS_PROTOCOL + body).ljust(60, b"\0")


def forged_hosts(origin, ip, mac):
    """HOSTS from switch `origin` (the root, empty address) announcing `ip` at `mac` on its port 1."""
    body = bytes([2, 2]) + struct.pack("!QIBB", origin, 1, 1, 0) + struct.pack("!HB", 1, 4)
    body += bytes(int(b) for b in ip.split(".")) + bytes.fromhex(mac.replace(":", "")) + b"\x01"
    return (LESS_GROUP + bytes([2, 0, 0, 0, 0, 0x98]) + LESS_PROTOCOL + body).ljust(60, b"\0")


def test_a_host_inventing_senders_or_speaking_the_protocol_leaves_the_fabric_as_it_was():
    """Two switches, A the root with a host and a spoofing host, B with a host. The spoofer sends
    ARP from 200 invented senders: A learns its port's share (160), refuses and counts the rest,
    and announces its 161 hosts in two frames, where one would have been over the links' MTU
    and never sent, and B, hearing nothing from A for 30 HELLOs, would have forgotten A's real
    host. The spoofer then says HELLO as a root switch and announces B's host as its own: A's
    port to it is not listed as a fabric port, so A drops both and counts them. After all that,
    B still knows A's hosts, and the real hosts still reach each other."""
    netns.cleanup()
    f = Fabric("lg")
    f.switch("a")
    f.switch("b")
    f.host("a", "10.0.0.1/24")
    f.host("a", "10.0.0.9/24")
    f.host("b", "10.0.0.2/24")
    f.link("a", "b")
    # HELLOs every 20 ms: B forgets a switch unheard for 30 of them (0.6 s), not 3 s.
    with f, less_switches(f, root="a", tag="less-guard", hello_ms=20,
                          less_settings={"max_hosts_per_port": 160}) as sws:
        h1, spoofer, h2 = f.hosts
        a, b = sws["a"], sws["b"]
        wait_for(lambda: counters(b)["addresses"] == 1, timeout=10, what="B's LESS address")
        wait_for(lambda: h2.ping(h1.addr, count=1, timeout=5)[0] == 1, timeout=15, what="h2 to h1 over LESS")
        assert counters(b)["hosts"] == 2 and counters(a)["announcement_frames"] == 1

        # 200 invented senders, sent again until A has seen them all (however fast Python sends):
        # 160 learned, besides h1 and (remote) h2.
        spoofed = [arp_reply_from(n) for n in range(1, 201)]

        def learned():
            send_frames(spoofer, spoofed)
            c = counters(a)
            return c["hosts"] == 162 and c["hosts_over_port_limit"] >= 40
        wait_for(learned, timeout=10, interval=0, what="A to learn the spoofer's share")
        wait_for(lambda: counters(b)["hosts"] == 162, timeout=5, what="B to hear A's 161 hosts")
        time.sleep(1.0)
        assert counters(a)["announcement_frames"] == 2, counters(a)
        assert counters(b)["hosts"] == 162, "B forgot A's announcement"
        assert h2.ping(h1.addr, count=3, interval=0.05)[0] == 3

        before = counters(a)
        send_frames(spoofer, [forged_hello(0x99), forged_hosts(0x98, h2.addr, spoofer.mac)])
        wait_for(lambda: counters(a)["protocol_on_edge_port"] == 2, timeout=5, what="A to drop the forged frames")
        time.sleep(0.2)
        after = counters(a)
        assert (after["neighbours"], after["root"], after["hosts"]) == (1, 1, 162), after
        assert after["protocol_in"] > before["protocol_in"], "B's HELLOs are heard all along"
        assert after["drops"].get("filtered", 0) - before["drops"].get("filtered", 0) == 2, after["drops"]
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3


# The six-switch fabric (testbed/less.py) takes 3-7 s to build, start one switch after another
# and converge (user, tc, xdp), and as long to take down; most of the tests below need the same
# one, so each datapath's is built once for all of them (class TestSixSwitches).

#: The reroute test's failures: the case, the stream's source host, the link taken down (its two
#: switches), and the switch that reroutes with the counter it counts that under.
REROUTE_CASES = [
    # (a) E's link to D goes: E has its other address, through C.
    ("a", "he", ("e", "d"), "e", "rerouted_local"),
    # (b) D's only uplink goes: D has no other address, its neighbour E has.
    ("b", "he", ("d", "b"), "d", "rerouted_neighbour"),
    # (c) R's link to B goes: hB lies under R only through it; back to A, which takes A-B.
    ("c", "hc", ("r", "b"), "r", "backtracked"),
]
#: Each failure's stream to hB: 256-byte frames at 2 000 a second, the link taken down 0.5 s in
#: (a thousand frames on the path as it was), and on for half a second after it: the hold (100 ms)
#: ends and the addresses move well within it (the reroute test then waits for them anyway), and
#: the controller's rewrite takes tens of ms.
REROUTE_SIZE, REROUTE_RATE, REROUTE_AT, REROUTE_AFTER = 256, 2000, 0.5, 0.5


def named_hosts(fabric):
    return dict(zip(("hb", "hc", "he"), fabric.hosts))


def troubles(sws):
    """Per switch, what it counts only when something went wrong or a link went: neighbours given
    up for silence, frames rerouted (each case, in userspace and in the kernel)."""
    out = {}
    for n, sw in sws.items():
        c = counters(sw)
        out[n] = [c["neighbours_silenced"], c["rerouted_local"], c["rerouted_neighbour"], c["backtracked"],
                  c["kernel"].get("rerouted", 0)]
    return out


def since(now, then):
    """The counters (less.counters) that grew from `then` to `now`, by how much, kernel's too."""
    out = {k: v - then.get(k, 0) for k, v in now.items() if isinstance(v, int)}
    out["kernel"] = {k: v - then["kernel"].get(k, 0) for k, v in now["kernel"].items()}
    return out


@pytest.fixture(scope="class", params=["user", "tc"])
def six(request):
    """The six-switch LESS fabric on one datapath, shared by TestSixSwitches (see there): R the
    root, B standing by. On userspace and one kernel hook: TC and XDP switch LESS frames with one
    program (`bpf/fp_less.h` over the ctx of `bpf/fp_ctx.h`), whose label pushes, pops and
    detours BPF_PROG_TEST_RUN holds to userspace's bytes on both hooks; XDP switches a fabric's
    labelled frames in test_labelled_frames_from_the_xdp_sender_cross_the_xdp_fast_path_at_full_speed
    and loops one to its budget in test_a_frame_caught_between_two_detours_dies_with_its_budget. Built as every six-switch test built its own: the switches started one
    by one, the root first (started all at once, a fabric once failed to settle on its addresses
    within 10 s), then every address and every host pair waited for."""
    netns.cleanup()
    fabric = less.six("lf")
    with fabric, less_switches(fabric, root=("r", "b"), datapath=request.param, tag="less-six") as sws:
        less.wait_converged(fabric, sws)
        # Every link up and nothing lost yet: no switch has rerouted a frame or given up a
        # neighbour while the fabric came up (each test checks its own part from where it starts).
        assert not any(any(t) for t in troubles(sws).values()), troubles(sws)
        yield SimpleNamespace(datapath=request.param, fabric=fabric, sws=sws, hosts=named_hosts(fabric))


@pytest.fixture(scope="class")
def reactive_losses():
    """What the reroute test's failures cost when a controller reroutes: the same fabric of
    edgeflow switches under OpenFlow, os-ken rewriting the paths when a port-status says a link
    went (testbed/apps/fabric_routes.py, "reactive"), the routes LESS takes installed before.
    Per case, the frames lost from the same stream (size, rate, the link taken down 0.5 s in, 0.5 s
    after it).
    Measured once a run on the userspace datapath (the controller's reaction is what costs), beside
    the LESS fabric of the moment, which sits idle meanwhile (its HELLOs take 0.3 % of a core)."""
    fabric = less.six("lo")
    with fabric:
        hosts = named_hosts(fabric)
        hb = hosts["hb"]
        paths = [(hosts[h], hb, route) for h, route in less.ROUTES.items()]
        with less.openflow_switches(fabric, "reactive", paths, tag="less-reactive") as sws:
            less.wait_paths_restored(fabric, sws, paths)
            less.wait_reachable(fabric)
            lost = {}
            for case, src, (a, b), _, _ in REROUTE_CASES:
                link = less.iface(fabric, a, b)
                try:
                    sent, got = less.stream(hosts[src], hb, REROUTE_SIZE, REROUTE_RATE, REROUTE_AT + REROUTE_AFTER,
                                            during=lambda: netns.sh("ip", "link", "set", link, "down"),
                                            at=REROUTE_AT, flow=7)
                finally:
                    netns.sh("ip", "link", "set", link, "up")
                # The controller did reroute: most of what was sent after the link went arrived (a
                # controller that did nothing would lose all of it, and any loss would beat it).
                after = REROUTE_AFTER * REROUTE_RATE
                assert got["received"] + got["lost"] == sent["sent"] and got["lost"] < after / 2, (case, sent, got)
                lost[case] = got["lost"]
                less.wait_paths_restored(fabric, sws, paths)
    print(f"\nos-ken reacting to port-status, frames lost per case: {lost}")
    return lost


class TestSixSwitches:
    """The tests on the six-switch fabric with its default timers, which share one fabric per
    datapath (the `six` fixture: pytest runs each datapath's tests together, in the order written
    here, then takes that fabric down). Sharing keeps each test's meaning because each leaves the
    fabric as it found it, or runs last on it:

    - Each starts by waiting until every switch has its addresses and the hosts reach each other,
      and reads the counters it checks as they are when it starts, not from zero.
    - The TCP test runs first, on a fabric nothing has happened to (the fixture checks that nothing
      was rerouted or given up while it came up).
    - The reroute test takes each link down and brings it back, and waits until the addresses are
      as they were before the next case (and before the next test).
    - The standby-root test stops R for good: it runs last. B standing by (root-capable, a higher
      switch id than R) is the one thing the fabric has for it alone; for the others B is any
      switch, addressed under R, and R is the root, as in a fabric of one root.

    The budget test keeps a fabric of its own: it needs a 10 s hold (its loop must last seconds
    inside it), where the reroute test needs the default 100 ms one to see the addresses move."""

    @pytest.mark.parametrize("six", ["tc"], indirect=True)
    def test_unmodified_hosts_ping_and_carry_tcp_over_six_switches(self, six):
        fabric, sws, datapath = six.fabric, six.sws, six.datapath
        less.wait_converged(fabric, sws)
        hb, hc, he = fabric.hosts
        start = {n: counters(sw) for n, sw in sws.items()}
        calm = troubles(sws)
        # E's shortest way to B is through D: the E-D link carries the labels for D and B.
        sniff = sniffer(less.iface(fabric, "d", "e"))
        sniff.start()
        time.sleep(0.3)
        assert he.ping(hb.addr, count=20, interval=0.05)[0] == 20
        time.sleep(0.2)
        # The link carries B's replies too: E's requests are the frames with E's host's source MAC
        # (LESS leaves Ethernet addresses as the host wrote them). An XDP redirect passes no tap.
        mine = [f for f in sniff.stop() if f[Ether].src == he.mac]
        seen = [s for s in stacks(mine) if s[0]]
        want = [less.port_of(fabric, "d", "b"), less.port_of(fabric, "b", hb)]
        if datapath != "xdp":
            assert len(seen) >= 20 and all(less.route_labels(s[0]) == want for s in seen), (want, seen[:3])
        assert hc.ping(hb.addr, count=10, interval=0.05)[0] == 10
        # IPv6 the same way: the edge answers neighbour solicitations for hosts across the fabric.
        # Nobody has announced hB's IPv6 address yet (this test is the first on its fabric, and the
        # only one to speak IPv6): E's first solicitation for it becomes a query, B asks hB as hE
        # would and learns it from its advertisement, and hE's retry is answered.
        replies = counters(sws["e"])["nd_replies"]
        wait_for(lambda: he.ping(hb.addr6, count=1, timeout=5)[0] == 1, timeout=15, what="hB over IPv6")
        assert counters(sws["e"])["nd_replies"] > replies
        kernel_pushed = counters(sws["e"])["kernel"].get("pushed", 0)
        assert he.ping(hb.addr6, count=20, interval=0.05)[0] == 20
        if datapath != "user":
            # The first frame planned hB's route; the kernel labels the rest itself, as for IPv4.
            assert counters(sws["e"])["kernel"]["pushed"] - kernel_pushed >= 15, counters(sws["e"])
            # And `dump-flows --kernel` shows the stacks E's kernel pushes towards hB, out of the
            # port to D, as the sniffed frames carried them.
            held = sws["e"].kernel_flows()["less"]
            to_b = {p["dst"]: p for p in held["push"]}
            assert {hb.addr, hb.addr6} <= set(to_b), held
            assert to_b[hb.addr]["port"] == less.port_of(fabric, "e", "d"), (to_b[hb.addr], held["ports"])
        wait_for(lambda: hc.ping(hb.addr6, count=1, timeout=5)[0] == 1, timeout=15, what="hB from hC over IPv6")
        assert hc.ping(hb.addr6, count=10, interval=0.05)[0] == 10
        bps = iperf3_tcp(he, hb, seconds=1)
        print(f"TCP over LESS, E to B ({datapath}): {bps / 1e9:.2f} Gbit/s")
        assert bps > 50e6, bps
        bps6 = iperf3_tcp(he, hb, seconds=1, ipv6=True)
        print(f"TCP/IPv6 over LESS, E to B ({datapath}): {bps6 / 1e9:.2f} Gbit/s")
        assert bps6 > 50e6, bps6
        # The load left the control plane alone: no neighbour was given up for silence, and with
        # no link down nothing was rerouted, in userspace or in the kernel.
        assert troubles(sws) == calm, (calm, troubles(sws))
        now = {n: counters(sws[n]) for n in "edb"}
        e, d, b = (since(now[n], start[n]) for n in "edb")
        pushed = e["pushed"] + e["kernel"].get("pushed", 0)
        delivered = b["delivered"] + b["kernel"].get("delivered", 0)
        assert pushed > 1000 and delivered > 1000, (e, b)
        if datapath != "user":
            # D only shifts (its label for B holds two ports): the kernel does it on both hooks,
            # pushes at E and delivers at B; userspace labels a destination's first frames only.
            # On TC the hosts' TCP super-frames stay whole all the way (every link is a veth).
            print("kernel:", {n: counters(sws[n])["kernel"] for n in "edb"})
            mine = ("pushed", "shifted", "delivered")
            print("userspace:", {n: {k: counters(sws[n])[k] for k in mine} for n in "edb"})
            assert d["kernel"]["shifted"] > 1000 and d["shifted"] < d["kernel"]["shifted"] / 10, d
            # The text report shows them too, beside the mode's own (the totals, read after D's).
            text = subprocess.run([EDGEFLOW_BIN, "stats", sws["d"].target], capture_output=True, text=True,
                                  timeout=20).stdout
            kernel = text.split("kernel label switching")[1].splitlines()
            shifted = int(kernel[2].split()[kernel[1].split().index("shifted")])
            assert shifted >= now["d"]["kernel"]["shifted"], text
            assert b["kernel"]["delivered"] > 1000 and b["delivered"] < b["kernel"]["delivered"] / 10, b
            assert e["kernel"]["pushed"] > 1000 and e["pushed"] < e["kernel"]["pushed"] / 10, e

    @pytest.mark.parametrize("six", ["user"], indirect=True)
    def test_less_aware_hosts_learn_their_addresses_and_send_by_them(self, six):
        """A host that speaks LESS learns its addresses from its edge switch's HELLOs, and sends to
        another host's address with the route it works out itself; no switch is told the route."""
        fabric, sws = six.fabric, six.sws
        less.wait_converged(fabric, sws)
        hb, hc, he = fabric.hosts
        port = lambda a, b: less.port_of(fabric, a, b)

        def addresses(host):
            out = host.run(loadgen.LOADGEN_BIN, "less-address", "--iface", "eth0", timeout=30).stdout
            return json.loads(out)["addresses"]

        # hB hangs under the root's link to B; hE under two paths (through C, and through B and D).
        assert addresses(hb) == [f"{port('r', 'b')}/{port('b', 'r')}.e{port('b', hb)}"]
        under_c = f"{port('r', 'a')}/{port('a', 'r')}.{port('a', 'c')}/{port('c', 'a')}"
        assert addresses(hc) == [f"{under_c}.e{port('c', hc)}"]
        e_addresses = addresses(he)
        assert sorted(e_addresses) == sorted([
            f"{under_c}.{port('c', 'e')}/{port('e', 'c')}.e{port('e', he)}",
            f"{port('r', 'b')}/{port('b', 'r')}.{port('b', 'd')}/{port('d', 'b')}.{port('d', 'e')}/{port('e', 'd')}"
            f".e{port('e', he)}"]), e_addresses
        before = {n: counters(sws[n]) for n in "bc"}
        with loadgen.receiving(hb.popen, loadgen.LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket",
                               "--flow", "4", "--duration", "30") as recv:
            sent = hc.run(loadgen.LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", hb.mac, "--src-ip", hc.addr,
                          "--dst-ip", hb.addr, "--size", "200", "--rate", "1000", "--count", "200", "--duration", "10",
                          "--engine", "socket", "--flow", "4", "--less-to", ",".join(addresses(hb)), timeout=60)
            got = loadgen.finish_receiver(recv, [sent.stdout])
        # Up C, A to the root, down to B, out to hB: the labels hC wrote, which the switches
        # followed (C pushed nothing: the frames came labelled).
        route = [port("c", "a"), port("a", "r"), port("r", "b"), port("b", hb)]
        assert json.loads(sent.stdout)["less_route"] == ".".join(map(str, route)), sent.stdout
        assert got["received"] == 200 and got["lost"] == 0, got
        assert counters(sws["b"])["delivered"] - before["b"]["delivered"] >= 200
        assert counters(sws["c"])["pushed"] == before["c"]["pushed"]

    def test_reroute_cases_keep_traffic_flowing_and_addresses_reconverge(self, six, reactive_losses):
        """A stream to hB keeps flowing while a link is taken down, for each reroute case, and loses
        fewer frames than os-ken loses to the same failure when it rewrites the paths on port-status
        (`reactive_losses`, measured in the same run): rerouting where the failure is beats asking a
        controller. The addresses move after the hold and come back with the link."""
        fabric, sws, datapath, hosts = six.fabric, six.sws, six.datapath, six.hosts
        less.wait_converged(fabric, sws)
        hb = hosts["hb"]
        for case, src_name, (a, b), where, counter in REROUTE_CASES:
            src, link = hosts[src_name], less.iface(fabric, a, b)
            before = counters(sws[where])
            try:
                sent, got = less.stream(src, hb, REROUTE_SIZE, REROUTE_RATE, REROUTE_AT + REROUTE_AFTER,
                                        during=lambda: netns.sh("ip", "link", "set", link, "down"), at=REROUTE_AT,
                                        flow=7)
                after = counters(sws[where])
                kernel = after["kernel"].get("rerouted", 0) - before["kernel"].get("rerouted", 0)
                marked = after["kernel"].get("ports_marked_down", 0) - before["kernel"].get("ports_marked_down", 0)
                print(f"case {case} ({datapath}): sent {sent['sent']} received {got['received']} lost {got['lost']} "
                      f"(os-ken reacting: {reactive_losses[case]}), {where}.{counter} "
                      f"+{after[counter] - before[counter]}, kernel rerouted +{kernel}, "
                      f"marked down by the carrier guard +{marked}")
                # Frames handed to the link before the switch heard of the loss are lost (a
                # millisecond or so of them in userspace: netlink, then the loop; in the kernel the
                # carrier guard marks the port down); nothing after. A controller hears of the loss
                # from the same netlink event, then has to rewrite the flows: the frames sent
                # meanwhile are lost too (8-21 of them here).
                assert got["received"] + got["lost"] == sent["sent"], (case, sent, got)
                assert got["lost"] < reactive_losses[case], (case, got, reactive_losses)
                upcalled = after[counter] - before[counter]
                if datapath == "user":
                    assert upcalled > 0, (case, counter, {n: counters(sws[n]) for n in "rabcde"})
                else:
                    # The detours were planned ahead: the kernel took the first frame round, and the
                    # ones after it. A few may still come up when the hold ends: frames labelled with
                    # the addresses of before that meet the failure after this switch heard the new
                    # ones (and planned for those). Before plans were made ahead, the first frame of
                    # each kind came up and the kernel took the rest after it.
                    assert kernel > 0 and upcalled * 50 <= kernel, (case, counter, upcalled, kernel)
                if case == "a":
                    # The hold is over: E's address through D is gone.
                    wait_for(lambda: counters(sws["e"])["addresses"] == 1, timeout=5, what="E down to one address")
                if case == "c":
                    a_counted = counters(sws["a"])
                    assert a_counted["rerouted_neighbour"] + a_counted["kernel"].get("rerouted", 0) > 0, a_counted
            finally:
                netns.sh("ip", "link", "set", link, "up")
            wait_for(lambda: counters(sws["e"])["addresses"] == 2, timeout=10, what="E's two addresses back")
            assert src.ping(hb.addr, count=5, interval=0.05)[0] == 5
        # As it was found: every switch's addresses back, the hosts reaching each other.
        less.wait_converged(fabric, sws)

    # The takeover is the control plane's; the kernel's part, its tables emptied and refilled as the
    # addresses move, is the same on both hooks: tc runs it (xdp passed too, docs/less.md).
    @pytest.mark.parametrize("six", ["user", "tc"], indirect=True)
    def test_a_standby_root_takes_over_and_hosts_keep_talking(self, six):
        """R is the root and B stands by (both `root = true`, R with the lower switch id). R's switch
        stops: its neighbours find it silent, the addresses under it are forgotten hop by hop, and B
        becomes the root with every address under it. hC's pings to hB, which went through R, carry
        on through A and B once the addresses have moved, and a TCP connection open across the change
        completes. R stays stopped: this test runs last on its fabric."""
        fabric, sws, datapath = six.fabric, six.sws, six.datapath
        less.wait_converged(fabric, sws)
        hb, hc, he = fabric.hosts
        assert [counters(sws[n])["root"] for n in "rb"] == [1, 0]
        port = 5300
        server = hb.popen("iperf3", "-s", "-1", "-p", str(port))
        time.sleep(0.3)
        client = hc.popen("iperf3", "-c", hb.addr, "-p", str(port), "-t", "4", "-i", "1", "-J")
        ping = hc.popen("ping", "-n", "-i", "0.1", "-c", "40", "-W", "1", hb.addr)
        time.sleep(1.5)
        sws["r"].stop()
        stopped = time.monotonic()
        wait_for(lambda: counters(sws["b"])["root"] == 1, timeout=10, what="B the root")
        took_over = time.monotonic() - stopped
        pings, _ = ping.communicate(timeout=30)
        tcp, _ = client.communicate(timeout=30)
        server.communicate(timeout=10)
        replies = [int(line.split("icmp_seq=")[1].split()[0]) for line in pings.splitlines() if "icmp_seq=" in line]
        report = json.loads(tcp)
        per_second = [i["sum"]["bytes"] for i in report.get("intervals", [])]
        every = {n: counters(sws[n]) for n in "abcde"}
        missing = sorted(set(range(1, 41)) - set(replies))
        print(f"\n{datapath}: B root {took_over:.2f} s after R stopped; {len(replies)} of 40 pings answered "
              f"(lost {missing}); TCP bytes a second {per_second}; addresses "
              f"{ {n: c['addresses'] for n, c in every.items()} }")
        assert "error" not in report and len(per_second) >= 4 and per_second[-1] > 0, report.get("error", per_second)
        assert len(replies) >= 25, replies
        # Some are lost while the addresses move (R stopped at ping 15: here 16-19 go); the last
        # second's, 1.5 s after it, came back: the pings carried on. One or two of those may drop
        # beside the TCP stream that fills the userspace datapath's rings on a busy minute (CI
        # lost one of 31-40 once, with 36 of 40 answered; once it was the 40th), as a ping beside
        # a full link does.
        assert len([s for s in range(31, 41) if s not in replies]) <= 2, missing
        assert all(c["addresses"] >= 1 for c in every.values()), every


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_less_and_a_learning_bridge_share_a_switch(datapath):
    """`[[port]] mode`: switch A runs LESS on its link to B and on host 1's port, and a learning
    bridge on the ports of hosts 3 and 4, all four hosts in one subnet. Both parts carry traffic;
    neither sees the other's frames, in userspace or in the kernel. On one kernel hook: which port
    runs which mode is one map both hooks read."""
    netns.cleanup()
    f = Fabric("lp")
    f.switch("a")
    f.switch("b")
    for ip in ("10.0.0.1/24", "10.0.0.3/24", "10.0.0.4/24"):
        f.host("a", ip)
    f.host("b", "10.0.0.2/24")
    f.link("a", "b")
    with f:
        h1, h3, h4, h2 = f.hosts
        for a_if, b_if in f.links:
            for i in (a_if, b_if):
                netns.sh("ip", "link", "set", i, "mtu", str(less.FABRIC_MTU))
        for h in f.hosts:
            if Edgeflow.HOST_SETTINGS[datapath]:
                h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
        a_ports = "".join(f'[[port]]\nname = "{p}"\n' + ('mode = "learning"\n' if i in (1, 2) else "")
                          for i, p in enumerate(f.ports["a"]))
        cfg_a = run_dir("less") / "shared-a.toml"
        cfg_a.write_text(f'mode = "less"\n[less]\nroot = true\n{a_ports}')
        cfg_b = run_dir("less") / "shared-b.toml"
        cfg_b.write_text('mode = "less"\n')
        with contextlib.ExitStack() as stack:
            sw_a = stack.enter_context(Edgeflow([], datapath=datapath, extra=["--config", str(cfg_a)],
                                                log_name=f"shared-a-{datapath}"))
            sw_b = stack.enter_context(Edgeflow(f.ports["b"], datapath=datapath, extra=["--config", str(cfg_b)],
                                                log_name=f"shared-b-{datapath}"))
            wait_for(lambda: counters(sw_b)["addresses"] == 1, timeout=10, what="B's LESS address")
            # LESS: host 1 to host 2 across the fabric (host 2 is found by a query, then labelled).
            wait_for(lambda: h1.ping(h2.addr, count=1, timeout=5)[0] == 1, timeout=15, what="h1 to h2 over LESS")
            assert h1.ping(h2.addr, count=10, interval=0.05)[0] == 10
            # The bridge: hosts 3 and 4, through the same switch.
            assert h3.ping(h4.addr, count=10, interval=0.05)[0] == 10
            # The protocol's HELLOs reach LESS's ports only (counted where the hosts receive: the
            # switch's sends bypass the taps on its side).
            dumps = {h.name: h.popen("timeout", str(1.5 * TIMEOUT_SCALE), "tcpdump", "-enli", "eth0",
                                     "ether proto 0x88b5")
                     for h in (h1, h3)}
            # Meanwhile (each waits for nothing to come back), neither part reaches the other:
            # host 3's ARP stays in the bridge, and LESS asks only its own edge ports for an
            # address it does not know.
            with ThreadPoolExecutor(2) as pool:
                crossed = list(pool.map(lambda pair: pair[0].ping(pair[1].addr, count=2, interval=0.2, timeout=5)[0],
                                        [(h3, h1), (h1, h4)]))
            assert crossed == [0, 0], crossed
            seen = {name: p.communicate(timeout=10)[0].count("0x88b5") for name, p in dumps.items()}
            assert seen[h1.name] >= 5 and seen[h3.name] == 0, seen
            a = counters(sw_a)
            assert a["parts"] == 2 and a["fenced"] == 0, a
            if datapath != "user":
                # The kernel labels host 1's frames and bridges hosts 3 and 4 itself, each part
                # on its own ports.
                report = sw_a.stats()["fast_path"]
                print("kernel:", report)
                assert a["kernel"]["pushed"] >= 5 and report["hits"] >= 5, report


# The kernel is where frames went round for ever; userspace's bound is forwarding/tests/less.rs's.
# One kernel hook, XDP (the six-switch fabric runs TC): both spend the budget in `bpf/fp_less.h`,
# and `a_detour_loop_between_two_switches_ends_with_the_budget` loops a frame to its budget on both,
# alternating between them, by BPF_PROG_TEST_RUN.
@pytest.mark.parametrize("datapath", ["xdp"])
def test_a_frame_caught_between_two_detours_dies_with_its_budget(datapath):
    """Two failures cut D and E off from the rest: D's uplink to B and E's link to C. Within the
    hold (addresses still as they were), D's way around to hB is its neighbour E's path through C
    (case b) and E's is its own address through D (case a): hE's frames to hB pass back and forth
    between D and E. Each pass spends one of the 8 reroute steps a frame starts with, so each frame
    is rerouted 8 times and then dropped as `budget_spent`. The kernel once
    wrote each frame the first frame's budget and kept them going round for ever. A fabric of its
    own, not TestSixSwitches' (see there): a 10 s hold keeps the addresses put while the frames go
    round, and the two links stay down."""
    netns.cleanup()
    fabric = less.six("ll")
    with fabric, less_switches(fabric, datapath=datapath, tag="less-loop", hold_ms=10000) as sws:
        less.wait_converged(fabric, sws)
        hb, hc, he = fabric.hosts
        for a, b in (("d", "b"), ("e", "c")):
            netns.sh("ip", "link", "set", less.iface(fabric, a, b), "down")
        time.sleep(0.3)

        def totals():
            out = {"spent": 0, "rerouted": 0}
            for n in "de":
                c = counters(sws[n])
                out["spent"] += c["budget_spent"] + c["kernel"].get("budget_spent", 0)
                out["rerouted"] += c["rerouted_local"] + c["rerouted_neighbour"] + c["kernel"].get("rerouted", 0)
            return out

        before = totals()
        # 250 frames: each must go round exactly eight times, one by one.
        sent, got = less.stream(he, hb, 256, 500, 0.5, flow=9)
        time.sleep(0.5)
        settled = totals()
        time.sleep(0.5)
        later = totals()
        spent, rerouted = (settled[k] - before[k] for k in ("spent", "rerouted"))
        print(f"\n{datapath}: sent {sent['sent']}, received {got['received']}; D and E rerouted {rerouted}, "
              f"budget spent {spent} (kernel: D {counters(sws['d'])['kernel']}, E {counters(sws['e'])['kernel']})")
        assert got["received"] == 0, got
        assert spent == sent["sent"] and rerouted == 8 * spent, (sent, settled, before)
        assert later == settled, "frames still going round"
