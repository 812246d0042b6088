"""The messages edgeflow sends, as its ofp crate encodes them, parsed by an implementation that is
not ours (os-ken's OpenFlow 1.3 codec): every field must read back as what was meant. The ofp
crate's own tests only round-trip through itself."""

import subprocess

import pytest

from testbed.util import ROOT
from testbed.tools.switch_conformance import OSKEN_VENV

pytestmark = pytest.mark.no_root

PARSE = r"""
import sys
from os_ken.ofproto import ofproto_parser, ofproto_protocol, ofproto_v1_3 as ofp

dp = ofproto_protocol.ProtocolDesc(ofp.OFP_VERSION)
for line in sys.stdin:
    name, hexed = line.split()
    buf = bytes.fromhex(hexed)
    version, msg_type, msg_len, xid = ofproto_parser.header(buf)
    msg = ofproto_parser.msg(dp, version, msg_type, msg_len, xid, buf)
    print(name, repr(msg.to_jsondict()))
"""


def parsed():
    samples = subprocess.run(["cargo", "run", "--release", "--locked", "-q", "-p", "ofp", "--example",
                              "switch_messages"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    out = subprocess.run([str(OSKEN_VENV / "bin" / "python3"), "-c", PARSE], input=samples, check=True,
                         capture_output=True, text=True).stdout
    msgs = {}
    for line in out.splitlines():
        name, d = line.split(" ", 1)
        msgs[name] = eval(d)  # a repr of plain dicts, lists, strings and numbers from os-ken
    return msgs


def oxm(match):
    return {f["OXMTlv"]["field"]: (f["OXMTlv"]["value"], f["OXMTlv"]["mask"]) for f in match["OFPMatch"]["oxm_fields"]}


def test_os_ken_reads_what_edgeflow_sends():
    m = parsed()
    assert len(m) == 14, sorted(m)
    f = m["features_reply"]["OFPSwitchFeatures"]
    assert (f["datapath_id"], f["n_buffers"], f["n_tables"], f["capabilities"]) == (0xabcdef, 256, 64, 0x4f)
    assert m["get_config_reply"]["OFPGetConfigReply"]["miss_send_len"] == 128
    pin = m["packet_in"]["OFPPacketIn"]
    assert (pin["buffer_id"], pin["total_len"], pin["reason"], pin["table_id"], pin["cookie"]) == (0xffffffff, 60, 1, 3, 0x1234)
    assert oxm(pin["match"]) == {"in_port": (2, None)}
    import base64
    assert base64.b64decode(pin["data"]) == bytes(range(60))
    fr = m["flow_removed"]["OFPFlowRemoved"]
    assert (fr["cookie"], fr["priority"], fr["reason"], fr["table_id"], fr["duration_sec"], fr["duration_nsec"],
            fr["idle_timeout"], fr["packet_count"], fr["byte_count"]) == (0xabcd, 10, 0, 1, 5, 250, 5, 7, 700)
    assert oxm(fr["match"]) == {"in_port": (1, None), "eth_type": (0x0800, None),
                                "ipv4_dst": ("10.0.0.0", "255.0.0.0"), "ip_proto": (6, None), "tcp_dst": (80, None)}
    ps = m["port_status"]["OFPPortStatus"]
    desc = ps["desc"]["OFPPort"]
    assert ps["reason"] == 2 and (desc["port_no"], desc["hw_addr"], desc["name"], desc["config"], desc["state"],
                                  desc["curr_speed"]) == (3, "02:00:00:00:00:03", "veth3", 1, 4, 10_000_000)
    err = m["error"]["OFPErrorMsg"]
    assert (err["type"], err["code"]) == (1, 1)
    assert base64.b64decode(err["data"])[:8] == bytes.fromhex("0402000c0000004d"), "the offending message's header"
    assert base64.b64decode(m["echo_reply"]["OFPEchoReply"]["data"]) == b"ping"
    assert "OFPBarrierReply" in m["barrier_reply"]
    rr = m["role_reply"]["OFPRoleReply"]
    assert (rr["role"], rr["generation_id"]) == (2, 42)
    d = m["desc_reply"]["OFPDescStatsReply"]["body"]["OFPDescStats"]
    assert (d["mfr_desc"], d["hw_desc"], d["sw_desc"], d["serial_num"], d["dp_desc"]) == ("edgeflow", "linux", "0.1", "none", "dp 1")
    fs = m["flow_stats_reply"]["OFPFlowStatsReply"]["body"][0]["OFPFlowStats"]
    assert (fs["table_id"], fs["duration_sec"], fs["priority"], fs["cookie"], fs["packet_count"], fs["byte_count"]) == (0, 3, 100, 9, 10, 1000)
    assert oxm(fs["match"])["tcp_dst"] == (80, None)
    act = fs["instructions"][0]["OFPInstructionActions"]
    assert act["type"] == 4 and act["actions"][0]["OFPActionOutput"]["port"] == 2
    pst = m["port_stats_reply"]["OFPPortStatsReply"]["body"][0]["OFPPortStats"]
    assert [pst[k] for k in ("port_no", "rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped",
                             "rx_errors", "duration_sec", "duration_nsec")] == [1, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    q = m["queue_stats_reply"]["OFPQueueStatsReply"]["body"][0]["OFPQueueStats"]
    assert [q[k] for k in ("port_no", "queue_id", "tx_bytes", "tx_packets", "tx_errors", "duration_sec")] == [1, 7, 1500, 1, 2, 3]
    pd = m["port_desc_reply"]["OFPPortDescStatsReply"]["body"][0]["OFPPort"]
    assert (pd["port_no"], pd["name"]) == (3, "veth3")
