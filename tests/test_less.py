"""LESS mode with real frames (docs/less.md): a sender that writes its own label stack crosses a
chain of three edgeflow switches; the labels on every link are read with scapy and must be what the
per-hop rule makes of them; the receiver gets plain IP and loses nothing. Malformed stacks are
dropped and counted under their reasons, and a port that loses carrier is counted as no route."""

import contextlib
import json
import struct
import sys
import time

from scapy.all import AsyncSniffer, Ether, rdpcap

from testbed import loadgen, netns
from testbed.switches import Edgeflow
from testbed.topology import chain, single
from testbed.util import run_dir


@contextlib.contextmanager
def less_switches(fabric, datapath="user", tag="less"):
    switches = {}
    try:
        for name in fabric.switches:
            sw = Edgeflow(fabric.ports[name], datapath=datapath, mode="less", log_name=f"{tag}-{name}-{datapath}")
            switches[name] = sw.start()
        yield switches
    finally:
        codes = {n: sw.stop() for n, sw in switches.items()}
    assert all(c == 0 for c in codes.values()), codes


def counters(sw):
    """The mode's label counters, plus the switch's drop reasons."""
    report = sw.stats()
    labels = next(g["counters"] for g in report["mode_counters"] if g["name"] == "labels")
    return labels, report["drops"]


def carries_labels_or_ip(frame):
    return Ether in frame and frame[Ether].type in (0x8847, 0x0800)


def stacks(frames):
    """Per captured frame: its label stack entries as (ports, bottom, ttl), then the ethertype of what
    follows (the Ethernet type when there is no stack)."""
    out = []
    for f in frames:
        eth = Ether(bytes(f))
        raw = bytes(eth.payload)
        if eth.type != 0x8847:
            out.append(((), eth.type))
            continue
        entries, at = [], 0
        while at + 4 <= len(raw):
            (word,) = struct.unpack("!I", raw[at:at + 4])
            entry = ((word >> 24, (word >> 16) & 0xff, (word >> 8) & 0xff), bool(word & 0x80), word & 0x7f)
            entries.append(entry)
            at += 4
            if entry[1]:
                break
        out.append((tuple(entries), raw[at] >> 4))
    return out


def send(host, dst, route=None, raw=None, count=100, rate=1000, size=128):
    args = [loadgen.LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst.mac, "--src-ip", host.addr,
            "--dst-ip", dst.addr, "--size", str(size), "--rate", str(rate), "--count", str(count),
            "--duration", "30", "--engine", "socket"]
    if route:
        args += ["--less", route]
    if raw:
        args += ["--less-raw", ",".join(f"{w:08x}" for w in raw)]
    return host.run(*args, timeout=60)


def inject(host, dst_mac, stack, count):
    """Sends `count` frames of a LESS ethertype and exactly `stack` as payload, with scapy, from
    inside `host`'s namespace."""
    script = (f"from scapy.all import Ether, Raw, sendp; "
              f"sendp(Ether(dst={dst_mac!r}, type=0x8847) / Raw({stack!r}), iface='eth0', count={count}, "
              f"inter=0.01, verbose=False)")
    host.run(sys.executable, "-c", script, timeout=60)


def test_labels_are_rewritten_hop_by_hop_and_the_receiver_gets_ip():
    netns.cleanup()
    # h1 - s1 - s2 - s3 - h2. Each switch's host port is 1; s2's ports are 1 (to s1) and 2 (to s3).
    fabric = chain("ls", 3)
    with fabric, less_switches(fabric) as sws:
        h1, h2 = fabric.hosts
        s1_s2, s2_s3 = fabric.links
        sniffers = {
            "s1->s2": AsyncSniffer(iface=s1_s2[1], lfilter=carries_labels_or_ip, store=True),
            "s2->s3": AsyncSniffer(iface=s2_s3[1], lfilter=carries_labels_or_ip, store=True),
        }
        for s in sniffers.values():
            s.start()
        # A switch's AF_PACKET transmit bypasses the taps of its own side: h2's view is taken inside h2.
        pcap = run_dir("less") / "at-h2.pcap"
        dump = h2.popen("tcpdump", "-i", "eth0", "-U", "-w", str(pcap), "udp or ether proto 0x8847")
        time.sleep(0.5)
        recv = h2.popen(loadgen.LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket", "--flow", "1",
                        "--duration", "20", "--idle", "1.0")
        time.sleep(0.4)
        send(h1, h2, route="2.2.1", count=200)
        out, err = recv.communicate(timeout=30)
        time.sleep(0.3)
        seen = {k: stacks(s.stop()) for k, s in sniffers.items()}
        dump.terminate()
        dump.wait(timeout=10)
        seen["s3->h2"] = stacks(rdpcap(str(pcap)))
        got = json.loads(out)
        assert got["received"] == 200 and got["lost"] == 0, got
        # s1 used port 2 and shifted: "2.1" with TTL 2; s2 used 2: "1" with TTL 1; s3 popped it.
        assert set(seen["s1->s2"]) == {((((2, 1, 0), True, 2),), 4)}, seen["s1->s2"][:3]
        assert set(seen["s2->s3"]) == {((((1, 0, 0), True, 1),), 4)}, seen["s2->s3"][:3]
        assert set(seen["s3->h2"]) == {((), 0x0800)}, seen["s3->h2"][:3]
        assert all(len(v) >= 200 for v in seen.values()), {k: len(v) for k, v in seen.items()}
        shifted = [counters(sws[s])[0]["shifted"] for s in ("s1", "s2")]
        assert shifted == [200, 200] and counters(sws["s3"])[0]["delivered"] == 200, shifted


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
        for reason, stack in crafted.items():
            inject(h1, h2.mac, stack, count=7)
        cases.update(crafted)
        # A well-formed one-hop stack gets through, to show the switch kept running.
        send(h1, h2, route="2", count=5)
        time.sleep(0.5)
        labels, drops = counters(sw)
        for reason in cases:
            assert labels[reason] == 7, (reason, labels)
        assert drops["bad_label"] == 7 * len(cases), drops
        assert labels["delivered"] == 5, labels


def test_a_port_without_carrier_is_counted_as_no_route():
    netns.cleanup()
    fabric = single("ln", 2)
    with fabric, less_switches(fabric, tag="less-down") as sws:
        h1, h2 = fabric.hosts
        netns.sh("ip", "link", "set", h2.switch_side, "down")
        time.sleep(0.3)
        send(h1, h2, route="2", count=10)
        time.sleep(0.3)
        labels, drops = counters(sws["s"])
        assert labels["no_route"] == 10 and labels["delivered"] == 0, labels
        netns.sh("ip", "link", "set", h2.switch_side, "up")
        time.sleep(0.5)
        send(h1, h2, route="2", count=10)
        time.sleep(0.3)
        assert counters(sws["s"])[0]["delivered"] == 10
