"""Writes the seed corpus (fuzz/seeds/<target>/): a few well-formed inputs per target for the
fuzzer to mutate from, so that it starts inside the formats instead of at random bytes.
Run from the repository root with the testbed's Python: .venv/bin/python fuzz/seeds.py"""

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.churn import ADD, DELETE_STRICT, flow_mod  # noqa: E402
from testbed.ofpeer import hello13, header, osken_bytes  # noqa: E402
from testbed.traffic import udp_frame  # noqa: E402

OUT = Path(__file__).resolve().parent / "seeds"
A, B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"


def frames():
    udp = udp_frame(A, B, "10.0.0.1", "10.0.0.2", 5000, 53)
    vlan = udp[:12] + struct.pack("!HH", 0x8100, 0x2005) + udp[12:]
    arp = bytes.fromhex("ffffffffffff02000000000a0806000108000604000102000000000a0a000001000000000000" "0a000002")
    mpls = udp[:12] + struct.pack("!HI", 0x8847, (100 << 12) | 0x100 | 64) + udp[14:]
    ipv6 = (bytes.fromhex("02000000000b02000000000a86dd") + struct.pack("!IHBB", 6 << 28, 8, 17, 64)
            + bytes(15) + b"\x01" + bytes(15) + b"\x02" + struct.pack("!HHHH", 1, 2, 8, 0))
    return {"udp": udp, "vlan": vlan, "arp": arp, "mpls": mpls, "ipv6": ipv6}


def openflow():
    msgs = {
        "hello": hello13(),
        "echo": header(2, 12, 5) + b"ping",
        "features": header(5, 8, 6),
        "barrier": header(20, 8, 7),
        "flow_add": flow_mod(ADD, 9000, 10000, 2),
        "flow_delete": flow_mod(DELETE_STRICT, 9000, 10000, 2),
    }

    def group(p, o, dp):
        return p.OFPGroupMod(dp, o.OFPGC_ADD, o.OFPGT_ALL, 1, [p.OFPBucket(actions=[p.OFPActionOutput(2)])])

    def meter(p, o, dp):
        return p.OFPMeterMod(dp, o.OFPMC_ADD, o.OFPMF_PKTPS, 1, [p.OFPMeterBandDrop(rate=100, burst_size=10)])

    def stats(p, o, dp):
        return p.OFPFlowStatsRequest(dp, table_id=o.OFPTT_ALL)

    def packet_out(p, o, dp):
        return p.OFPPacketOut(dp, o.OFP_NO_BUFFER, 1, [p.OFPActionOutput(o.OFPP_TABLE)], frames()["udp"])

    for name, build in (("group_add", group), ("meter_add", meter), ("flow_stats", stats), ("packet_out", packet_out)):
        msgs[name] = osken_bytes(build)
    return msgs


def records(pairs):
    """pipeline_messages input: (kind, bytes) records, each a kind byte, a length, the bytes."""
    return b"".join(struct.pack("!BH", kind, len(body)) + body for kind, body in pairs)


def afdx_frame(vl):
    """A UDP frame to AFDX virtual link `vl` (destination 03:00:00:00:VL)."""
    udp = udp_frame(A, "03:00:00:00:00:01", "10.0.0.1", "224.224.0.1", 5000, 5000, payload=60)
    return udp[:4] + struct.pack("!H", vl) + udp[6:]


def records_afdx(pairs):
    """afdx_frames input: (in port and time step byte, frame) records, each with a length byte."""
    return b"".join(struct.pack("!BB", head, len(f)) + f for head, f in pairs)


PORTS = '[[port]]\nname = "a"\n[[port]]\nname = "b"\n[[port]]\nname = "c"\n'


def configs():
    """One file per mode and section: the fuzzer starts from text the parser accepts."""
    example = (Path(__file__).resolve().parent.parent / "docs" / "example.toml").read_text()
    return {
        "example": example,
        "limits": "max_connections = 8\nmax_handshakes = 2\nmax_request_bytes = 70000\n"
                  "controller_packet_in_rate = 100\nchannel_output_limit = 1048576\n" + PORTS,
        "portmap": 'mode = "portmap"\n' + PORTS + "[[portmap]]\nfrom = 1\nto = 2\n",
        "afdx": 'mode = "afdx"\n' + PORTS + '[afdx]\nmac_constant = "03:00:00:00"\n[[afdx.vl]]\nid = 10\n'
                'in_port = 1\nout_ports = [2, 3]\nbag_ms = 4\nsmin = 64\nsmax = 512\npriority = "high"\n'
                'jitter_us = 500\npolice = "byte"\n',
        "less": 'mode = "less"\n' + PORTS + "[less]\nroot = true\nmax_labels = 8\nhold_ms = 2500\n",
        "tsn": 'egress_timing = "fifo"\n[[port]]\nname = "a"\nrate_mbps = 100\npcp_map = [0, 0, 1, 1, 2, 2, 6, 7]\n'
               '[[port.queue]]\nid = 7\nscheduler = "cbs"\nidleslope_kbps = 20000\n[[port.queue]]\nid = 2\n'
               'scheduler = "drr"\nweight = 3\nlimit_bytes = 30000\n[port.gates]\nclock = "realtime"\n'
               'cycle_ns = 1000000\nentries = [{ duration_ns = 200000, open = [7] }, '
               '{ duration_ns = 800000, open = [0, 1, 2] }]\n[[port]]\nname = "b"\nmode = "learning"\n',
    }


def p4_id(prefix, name):
    """The id edgeflow's P4Info gives `name` (crates/p4/src/info.rs): FNV-1a under the prefix."""
    h = 0x811C9DC5
    for b in name.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return (prefix << 24) | max(h & 0xFFFFFF, 1)


def pb(*fields):
    """A protobuf message of (field number, value) pairs: an int as a varint, bytes as such."""
    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out
    out = b""
    for no, v in fields:
        if isinstance(v, int):
            out += varint(no << 3) + varint(v)
        else:
            out += varint(no << 3 | 2) + varint(len(v)) + v
    return out


def p4runtime():
    """p4runtime_handlers inputs: the program's index, then (kind, bytes) records of protobuf
    WriteRequests (even kinds) and ReadRequests (odd)."""
    table, action = 0x02, 0x01
    exact = lambda fid, value: pb((1, fid), (2, pb((1, value))))
    lpm = lambda fid, value, length: pb((1, fid), (4, pb((1, value), (2, length))))
    act = lambda aid, *params: pb((1, pb((1, aid), *((4, pb((2, i + 1), (3, v))) for i, v in enumerate(params)))))
    insert = lambda entry, kind=1: pb((1, kind), (2, pb((2, entry))))
    write = lambda *updates: pb((1, 1), *((4, u) for u in updates))
    read_all = pb((1, 1), (2, pb((2, b""))))
    dmac = pb((1, p4_id(table, "L2Ingress.dmac")), (2, exact(1, b"\x00\x0a")), (2, exact(2, bytes.fromhex("02000000000b"))),
              (3, act(p4_id(action, "L2Ingress.forward"), b"\x02")))
    route = pb((1, p4_id(table, "RouterIngress.routes")), (2, lpm(1, bytes([10, 0, 2, 0]), 24)),
               (3, act(p4_id(action, "RouterIngress.next_hop"), bytes.fromhex("02000000000a"),
                       bytes.fromhex("02000000000b"), b"\x02", b"\x07")))
    counter = pb((1, 1), (2, pb((7, pb((1, p4_id(0x12, "RouterIngress.routed")), (2, pb((1, 7))))))))
    return {
        "l2_insert_read_delete": b"\x00" + records([(0, write(insert(dmac))), (1, read_all),
                                                     (0, write(insert(dmac, 3))), (1, read_all)]),
        "router_route_counter": b"\x01" + records([(0, write(insert(route))), (1, read_all), (1, counter)]),
    }


def differential():
    """differential inputs (fuzz/harness/differential.rs): a stream of one-byte choices — the
    header (bit 0 TC's encoding, bits 1-3 ports 2-4 down, bits 4-5 meters, bits 6-7 groups), each
    meter's kind, each group, the flows, the frames. One seed per feature; the rest of each stream
    is left to the fuzzer. Comments name the choices in the order the harness reads them."""

    def stream(head, meters=(), groups=(), flows=(), frames=()):
        out = [head, *meters]
        for g in groups:
            out += g
        out.append(len(flows) - 1)
        for f in flows:
            out += f
        out.append(len(frames) - 1)
        for f in frames:
            out += f
        return bytes(out)

    # Flows: table/priority, match (eth_dst?, vlan, l3, [dst?, proto, port?]), instructions, the
    # actions (how many, each kind and its choices), the last action and its choices.
    v4_match = [0, 0, 1, 0, 0]       # no eth_dst, any vlan, IPv4, any address, any protocol
    out_port2 = [7, 0]               # last: output to port 2
    # Frames: kind (bit 3 IPv6, bit 4 fragment, bit 5 the first one; 0 mod 8 raw), destination,
    # tags, transport (and its choices), payload size, TTL, host, TOS (IPv6: class, label).
    udp4 = [1, 0, 0, 0, 0, 1, 0, 0, 0]
    big_udp4 = [1, 0, 0, 0, 0, 3, 0, 0, 0]
    icmp4 = [1, 0, 0, 2, 0, 0, 0, 0]
    later_fragment = [17, 0, 0, 0, 0, 1, 0, 0, 0]
    tagged_tcp6 = [9, 1, 1, 1, 5, 1, 1, 1, 2, 0, 1, 0x28, 7]
    udp6 = [9, 0, 0, 0, 0, 1, 0, 0, 0x28, 7]
    udp6_host2 = [9, 0, 0, 0, 1, 1, 0, 1, 0, 3]
    return {
        "forward": stream(0, flows=[[0, *v4_match, 0, 0, *out_port2]], frames=[udp4, big_udp4]),
        # TC: a group of type ALL with two buckets (ports 2 and 4): two copies from one entry.
        "tc_group_all": stream(0x41, groups=[[4, 0, 7, 0, 0, 7, 2]],
                               flows=[[0, 0, 0, 0, 0, 0, 6, 0]], frames=[udp4, tagged_tcp6]),
        # Tags: popped and pushed (802.1ad) with a new VID on tagged frames, pushed with a VID
        # and PCP and sent back on untagged ones; on both hooks.
        "tagged": stream(0, flows=[[0, 0, 4, 0, 0, 3, 3, 2, 0, 4, 2, 7, 1],
                                   [4, 0, 2, 0, 0, 3, 2, 1, 4, 3, 5, 6, 1]],
                         frames=[tagged_tcp6, udp4, [1, 2, 2, 0, 3, 1, 1, 10, 0, 1, 0, 1, 0, 0, 0, 0]]),
        # Two tables: a metered flow (1-packet burst) decrements the TTL and goes to table 1, whose
        # flow charges a 125-byte meter and writes an indirect group (port 3) into the action set.
        "goto_meters_group": stream(0x60, meters=[1, 2], groups=[[2, 0, 7, 1]],
                                    flows=[[0, *v4_match, 9, 1, 8, 0], [2, 0, 0, 0, 7, 0, 0, 0]],
                                    frames=[udp4, big_udp4, [1, 0, 0, 0, 0, 0, 1, 0, 0]]),
        # Two TTL decrements on a TTL of 2 (the kernel once forwarded it with 0), and an empty frame.
        "ttl_two_decrements": stream(0, flows=[[0, 0, 2, 1, 0, 0, 0, 2, 8, 8, *out_port2]],
                                     frames=[[1, 1, 0, 3, 2, 2, 0], [0, 0] + [0] * 14]),
        # A 14-byte 802.3 runt under a flow that rewrites addresses and sends nowhere.
        "runt_rewrites_no_output": stream(0, flows=[[0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 0]],
                                          frames=[[0, 0, 0x00, 0x1c, 0x31, 0xff, 0xed, 0xe5, 0xed, 0xed, 0xf9,
                                                   0x03, 0x01, 0x00, 0x00, 0x08]]),
        # An IPv4 source rewrite on ICMP (userspace once changed the ICMP checksum).
        "icmp_address_rewrite": stream(0, flows=[[0, *v4_match, 0, 1, 6, 0, *out_port2]], frames=[icmp4]),
        # A UDP port rewrite under a flow that matched no protocol: an ICMP frame and a later
        # fragment under the datagram's entry (the kernel once dropped the first and wrote the
        # port into the second's Ethernet header).
        "port_rewrite_other_frames": stream(0, flows=[[0, *v4_match, 0, 1, 9, *out_port2]],
                                            frames=[udp4, icmp4, later_fragment]),
        # TC, IPv6: DSCP, hop limit and port rewrites, then two copies (port 3 and back in).
        "ipv6_rewrites": stream(1, flows=[[0, 0, 0, 2, 1, 0, 1, 0, 0, 3, 7, 46, 8, 9, 2, 1]],
                                frames=[udp6, udp6_host2]),
        # TC, port 2 down: a fast-failover group (port 2, else 3) for IPv4, a weighted select group
        # over ports 2-4 for IPv6.
        "failover_select": stream(0x83, groups=[[7, 0, 0, 7, 0, 1, 0, 7, 1], [9, 0, 0, 7, 0, 1, 0, 7, 1, 2, 0, 7, 2]],
                                  flows=[[0, *v4_match, 0, 0, 6, 0], [4, 0, 0, 2, 0, 0, 0, 0, 6, 1]],
                                  frames=[udp4, udp6, udp6_host2]),
    }


def main():
    f, m = frames(), openflow()
    seeds = {
        "openflow_decode": m,
        # No rewrite operations (first byte 0), then a VLAN push and a DSCP set.
        "packet_rewrite": {**{k: b"\0" + v for k, v in f.items()},
                           "udp_push_set": b"\x02" + f["udp"] + bytes([0, 0, 0, 4 + 5 * 8, 0, 12])},
        "pipeline_messages": {
            "flows_then_frames": records([(0, m["group_add"]), (0, m["meter_add"]), (0, m["flow_add"]),
                                          (1, f["udp"]), (0, m["flow_stats"]), (3, b"\0" * 4), (1, f["vlan"]),
                                          (0, m["packet_out"]), (0, m["flow_delete"]), (2, f["arp"])]),
        },
        # In port 1 (and time steps), a frame of VL 1 then VL 2: the 32-bit constant, the VL id.
        "afdx_frames": {"two_vls": records_afdx([(0x05, afdx_frame(1)), (0x09, afdx_frame(2)), (0x06, afdx_frame(3))])},
        "config_file": {name: text.encode() for name, text in configs().items()},
        "differential": differential(),
        # The cut (low 7 bits, less one) and the slave bit, then a stream of messages.
        "agent_framing": {"session": b"\x04" + b"".join(m.values()),
                          "slave": b"\x87" + m["hello"] + m["flow_add"] + m["flow_stats"] + m["echo"],
                          "broken": b"\x00" + m["echo"] + bytes([4, 2, 0, 4, 0, 0, 0, 1]) + m["echo"]},
        "metrics_http": {"get": b"\x10GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9108\r\nAccept: */*\r\n\r\n",
                         "head": b"\x03HEAD /metrics?x=1 HTTP/1.0\r\n\r\n",
                         "post": b"\xffPOST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"},
        "p4_frontend": {p.stem: p.read_bytes() for p in (OUT.parent.parent / "examples" / "p4").glob("*.p4")},
        "p4runtime_handlers": p4runtime(),
        "uci": {"openwrt": (OUT.parent.parent / "packaging" / "openwrt" / "edgeflow.config").read_bytes(),
                "include": b"config edgeflow\n\toption mode 'learning'\n\toption include '/etc/edgeflow/x.toml'\n"
                           b"\tlist listen \"ptcp:6634\"\nconfig port\n\toption name 'lan1'\n\toption rate_mbps 100\n"},
        "less_labels": {"stack": b"\x08" + bytes.fromhex("02000000000b02000000000a88b5") + struct.pack("!II", 0x02000040, 0x03000180)},
    }
    for target, inputs in seeds.items():
        d = OUT / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in inputs.items():
            (d / name).write_bytes(data)
    print(f"wrote {sum(len(v) for v in seeds.values())} seeds under {OUT}")


if __name__ == "__main__":
    main()
