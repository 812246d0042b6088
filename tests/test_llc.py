"""802.3 frames, whose type/length field is a length and whose payload starts with an LLC header,
as OpenFlow matches them on every datapath (docs/conformance.md): an LLC/SNAP frame with OUI 0 by
the ethertype in its SNAP header, every other one (a spanning-tree BPDU, say) as eth_type 0x05ff.
The kernel fast path decides plain LLC frames itself and sends LLC/SNAP ones up."""

import re
import struct
import subprocess

import pytest

from test_fastpath import SEND, start_captures, stop_captures

from testbed.switches import edgeflow_on
from testbed.traffic import udp_frame

STP_GROUP = "01:80:c2:00:00:00"


def mac(m):
    return bytes.fromhex(m.replace(":", ""))


def llc_snap(frame):
    """RFC 1042: an untagged Ethernet II frame as 802.3 with LLC/SNAP, OUI 0."""
    payload = frame[14:]
    return frame[:12] + struct.pack("!H", 8 + len(payload)) + bytes([0xaa, 0xaa, 0x03, 0, 0, 0]) + frame[12:14] + payload


def bpdu(src):
    """A spanning-tree configuration BPDU (LLC 0x42/0x42) from `src`."""
    body = struct.pack("!HBB", 0, 0, 0) + bytes(31)
    return mac(STP_GROUP) + mac(src) + struct.pack("!H", 3 + len(body)) + bytes([0x42, 0x42, 0x03]) + body


def n_packets(flows, out_port):
    line = next(f for f in flows if f.endswith(f"actions=output:{out_port}"))
    return int(re.search(r"n_packets=(\d+)", line).group(1))


# One kernel hook: both parse a frame with the same code (bpf/fp_parse.h). XDP here; TC reads the
# same bytes through the same parser in every other TC test.
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_snap_frames_match_their_ethertype_and_other_llc_frames_0x05ff(three_hosts, datapath):
    h1, h2, h3 = three_hosts.hosts
    snap = llc_snap(udp_frame(h1.mac, h2.mac, h1.addr, h2.addr, 4000, 9, 30))
    stp = bpdu(h1.mac)
    with edgeflow_on(datapath, three_hosts.hosts, three_hosts.switch_ports, log_name="llc") as sw:
        sw.ofctl("del-flows")
        sw.ofctl("add-flow", "priority=10,in_port=1,dl_type=0x0800,actions=output:2")
        sw.ofctl("add-flow", "priority=10,in_port=1,dl_type=0x05ff,actions=output:3")
        # Positive control on the same ports: a plain IPv4 frame takes the 0x0800 flow.
        plain = udp_frame(h1.mac, h2.mac, h1.addr, h2.addr, 4001, 9, 30)
        caps = start_captures((h2, h3))
        sent = [snap] * 3 + [stp] * 3 + [plain]
        h1.popen("python3", "-c", SEND, stdin=subprocess.PIPE).communicate(
            "".join(f.hex() + "\n" for f in sent), timeout=30)
        got = {name: [bytes.fromhex(f) for f in frames] for name, frames in stop_captures(caps).items()}
        ours = {name: [f for f in frames if f[6:12] == mac(h1.mac)] for name, frames in got.items()}
        flows = sw.flows()
    assert ours[h2.name] == [snap] * 3 + [plain], "the SNAP frames, unchanged, and the plain one, by the 0x0800 flow"
    assert ours[h3.name] == [stp] * 3, "the BPDUs, unchanged, by the 0x05ff flow"
    assert (n_packets(flows, 2), n_packets(flows, 3)) == (4, 3), flows
    totals = sw.fastpath_totals()
    if datapath != "user":
        # The BPDUs after the first were the kernel's: plain LLC is decided there.
        assert totals["hits"] >= 2, totals
