"""Captures OpenFlow 1.3 messages as real peers encode them, for the ofp crate's decode/re-encode tests.

- os-ken: messages built with os-ken's parser and serialized by it.
- ovs-ofctl: what `ovs-ofctl` sends to a switch, captured by a listener standing in for the switch.

Writes crates/ofp/tests/vectors/{osken,ovs-ofctl}.txt, one `name hex` per line. Run with the testbed
venv's python (it needs os_ken) and ovs-ofctl on PATH:

    .venv/bin/python -m testbed.tools.capture_vectors
"""

import socket
import struct
import subprocess
import threading
from pathlib import Path

from testbed.ofpeer import hello13, osken_bytes

OUT = Path(__file__).resolve().parents[2] / "crates" / "ofp" / "tests" / "vectors"


def osken_vectors():
    v = {}

    def add(name, build):
        v[name] = osken_bytes(build)

    add("hello", lambda p, o, dp: p.OFPHello(dp))
    add("echo_request", lambda p, o, dp: p.OFPEchoRequest(dp, data=b"keepalive"))
    add("features_request", lambda p, o, dp: p.OFPFeaturesRequest(dp))
    add("set_config", lambda p, o, dp: p.OFPSetConfig(dp, o.OFPC_FRAG_NORMAL, 0xffff))
    add("barrier_request", lambda p, o, dp: p.OFPBarrierRequest(dp))
    add("flow_mod_table_miss", lambda p, o, dp: p.OFPFlowMod(
        dp, priority=0, match=p.OFPMatch(),
        instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [p.OFPActionOutput(o.OFPP_CONTROLLER, o.OFPCML_NO_BUFFER)])]))
    add("flow_mod_l2", lambda p, o, dp: p.OFPFlowMod(
        dp, cookie=0x1234, priority=10, idle_timeout=60, match=p.OFPMatch(in_port=1, eth_src="02:00:00:00:00:01", eth_dst="02:00:00:00:00:02"),
        instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [p.OFPActionOutput(2)])]))
    add("flow_mod_masked_ipv4_tcp", lambda p, o, dp: p.OFPFlowMod(
        dp, table_id=3, priority=100, flags=o.OFPFF_SEND_FLOW_REM | o.OFPFF_CHECK_OVERLAP,
        match=p.OFPMatch(eth_type=0x0800, ipv4_src=("10.0.0.0", "255.0.0.0"), ip_proto=6, tcp_dst=443),
        instructions=[p.OFPInstructionMeter(5), p.OFPInstructionWriteMetadata(0xab, 0xff),
                      p.OFPInstructionActions(o.OFPIT_WRITE_ACTIONS, [p.OFPActionDecNwTtl(), p.OFPActionOutput(4)]),
                      p.OFPInstructionGotoTable(7)]))
    add("flow_mod_faucet_style_vlan", lambda p, o, dp: p.OFPFlowMod(
        dp, table_id=1, priority=9000, match=p.OFPMatch(in_port=2, vlan_vid=(0x1000, 0x1000)),
        instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [
            p.OFPActionPushVlan(0x8100), p.OFPActionSetField(vlan_vid=0x1000 | 100), p.OFPActionOutput(3),
            p.OFPActionPopVlan(), p.OFPActionOutput(o.OFPP_CONTROLLER, 128)]), p.OFPInstructionGotoTable(2)]))
    add("flow_mod_ipv6_nd", lambda p, o, dp: p.OFPFlowMod(
        dp, priority=7, match=p.OFPMatch(eth_type=0x86dd, ip_proto=58, icmpv6_type=135, ipv6_nd_target="fe80::1"),
        instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [p.OFPActionSetField(ipv6_nd_target="fe80::2"), p.OFPActionOutput(o.OFPP_FLOOD)])]))
    add("flow_mod_mpls", lambda p, o, dp: p.OFPFlowMod(
        dp, priority=7, match=p.OFPMatch(eth_type=0x8847, mpls_label=16, mpls_bos=1),
        instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [
            p.OFPActionCopyTtlIn(), p.OFPActionPopMpls(0x0800), p.OFPActionSetMplsTtl(9), p.OFPActionDecMplsTtl(),
            p.OFPActionPushMpls(0x8847), p.OFPActionCopyTtlOut(), p.OFPActionSetQueue(1), p.OFPActionSetNwTtl(3),
            p.OFPActionGroup(1)]), p.OFPInstructionActions(o.OFPIT_CLEAR_ACTIONS, [])]))
    add("flow_mod_delete", lambda p, o, dp: p.OFPFlowMod(
        dp, command=o.OFPFC_DELETE, table_id=o.OFPTT_ALL, out_port=o.OFPP_ANY, out_group=o.OFPG_ANY,
        cookie=0x10, cookie_mask=0xff, match=p.OFPMatch(in_port=1)))
    add("packet_out", lambda p, o, dp: p.OFPPacketOut(
        dp, buffer_id=o.OFP_NO_BUFFER, in_port=o.OFPP_CONTROLLER, actions=[p.OFPActionOutput(o.OFPP_FLOOD)],
        data=bytes.fromhex("ffffffffffff020000000001080600010800060400010200000000010a000001000000000000" "0a000002")))
    add("group_mod_select", lambda p, o, dp: p.OFPGroupMod(
        dp, o.OFPGC_ADD, o.OFPGT_SELECT, 1, [p.OFPBucket(weight=3, actions=[p.OFPActionOutput(2)]),
                                            p.OFPBucket(weight=1, actions=[p.OFPActionOutput(3)])]))
    add("group_mod_ff", lambda p, o, dp: p.OFPGroupMod(
        dp, o.OFPGC_ADD, o.OFPGT_FF, 2, [p.OFPBucket(watch_port=2, actions=[p.OFPActionOutput(2)]),
                                        p.OFPBucket(watch_port=3, actions=[p.OFPActionOutput(3)])]))
    add("meter_mod", lambda p, o, dp: p.OFPMeterMod(
        dp, o.OFPMC_ADD, o.OFPMF_KBPS | o.OFPMF_BURST, 1,
        [p.OFPMeterBandDrop(rate=1000, burst_size=100), p.OFPMeterBandDscpRemark(rate=500, burst_size=50, prec_level=1)]))
    add("port_mod", lambda p, o, dp: p.OFPPortMod(dp, 1, "02:00:00:00:00:01", o.OFPPC_NO_FWD, o.OFPPC_NO_FWD, 0))
    add("table_mod", lambda p, o, dp: p.OFPTableMod(dp, 0, 3))
    add("role_request", lambda p, o, dp: p.OFPRoleRequest(dp, o.OFPCR_ROLE_MASTER, 7))
    add("set_async", lambda p, o, dp: p.OFPSetAsync(dp, [3, 0], [7, 7], [15, 0]))
    add("get_async", lambda p, o, dp: p.OFPGetAsyncRequest(dp))
    add("queue_get_config", lambda p, o, dp: p.OFPQueueGetConfigRequest(dp, 1))
    add("mp_desc", lambda p, o, dp: p.OFPDescStatsRequest(dp, 0))
    add("mp_flow", lambda p, o, dp: p.OFPFlowStatsRequest(dp, 0, o.OFPTT_ALL, o.OFPP_ANY, o.OFPG_ANY, 0, 0, p.OFPMatch(in_port=1)))
    add("mp_aggregate", lambda p, o, dp: p.OFPAggregateStatsRequest(dp, 0, 0, o.OFPP_ANY, o.OFPG_ANY, 0, 0, p.OFPMatch()))
    add("mp_table", lambda p, o, dp: p.OFPTableStatsRequest(dp, 0))
    add("mp_port_stats", lambda p, o, dp: p.OFPPortStatsRequest(dp, 0, o.OFPP_ANY))
    add("mp_queue", lambda p, o, dp: p.OFPQueueStatsRequest(dp, 0, o.OFPP_ANY, o.OFPQ_ALL))
    add("mp_group", lambda p, o, dp: p.OFPGroupStatsRequest(dp, 0, o.OFPG_ALL))
    add("mp_group_desc", lambda p, o, dp: p.OFPGroupDescStatsRequest(dp, 0))
    add("mp_group_features", lambda p, o, dp: p.OFPGroupFeaturesStatsRequest(dp, 0))
    add("mp_meter", lambda p, o, dp: p.OFPMeterStatsRequest(dp, 0, o.OFPM_ALL))
    add("mp_meter_config", lambda p, o, dp: p.OFPMeterConfigStatsRequest(dp, 0, o.OFPM_ALL))
    add("mp_meter_features", lambda p, o, dp: p.OFPMeterFeaturesStatsRequest(dp, 0))
    add("mp_table_features_empty", lambda p, o, dp: p.OFPTableFeaturesStatsRequest(dp, 0, []))
    add("mp_port_desc", lambda p, o, dp: p.OFPPortDescStatsRequest(dp, 0))
    return v


def ofctl_vectors():
    """Runs ovs-ofctl commands against a listener that records what arrives."""
    commands = {
        "ofctl_add_flow_l2": ["add-flow", "priority=10,in_port=1,dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,actions=output:2"],
        "ofctl_add_flow_ip": ["add-flow", "table=2,priority=300,idle_timeout=5,hard_timeout=30,cookie=0xbeef,ip,nw_src=10.0.0.0/8,nw_dst=192.168.1.1,tcp,tp_dst=80,actions=mod_nw_dst:10.1.1.1,mod_tp_dst:8080,dec_ttl,output:3"],
        "ofctl_add_flow_vlan": ["add-flow", "priority=5,in_port=2,dl_vlan=100,actions=strip_vlan,push_vlan:0x88a8,set_field:200->vlan_vid,output:1,goto_table:4"],
        "ofctl_add_flow_ipv6": ["add-flow", "priority=6,ipv6,ipv6_src=2001:db8::/32,udp,udp_src=53,actions=write_actions(output:2),write_metadata:0x1/0xff,goto_table:1"],
        "ofctl_add_flow_mpls": ["add-flow", "priority=7,mpls,mpls_label=100,mpls_bos=1,actions=pop_mpls:0x0800,output:1"],
        "ofctl_add_flow_arp": ["add-flow", "priority=8,arp,arp_tpa=10.0.0.1,arp_op=1,actions=CONTROLLER:128,NORMAL"],
        "ofctl_add_group": ["add-group", "group_id=1,type=all,bucket=output:1,bucket=output:2"],
        "ofctl_add_group_ff": ["add-group", "group_id=2,type=fast_failover,bucket=watch_port:1,output:1,bucket=watch_port:2,output:2"],
        "ofctl_add_meter": ["add-meter", "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100"],
        "ofctl_del_flows": ["del-flows", "cookie=0x10/0xff,in_port=1"],
        "ofctl_dump_flows": ["dump-flows", "table=0,in_port=1"],
        "ofctl_dump_ports": ["dump-ports", "1"],
        "ofctl_packet_out": ["packet-out", "in_port=controller packet=ffffffffffff0200000000010800450000140000000040ff0000000a0000010a000002 actions=output:1"],
    }
    out = {}
    for name, args in commands.items():
        msgs = capture(args)
        for i, m in enumerate(msgs):
            out[f"{name}_{i}" if len(msgs) > 1 else name] = m
    return out


def capture(args):
    """Messages other than hello and barrier that ovs-ofctl sends for one command."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = []

    srv.settimeout(5)

    def fake_switch():
        try:
            c, _ = srv.accept()
        except socket.timeout:
            return
        c.settimeout(2)
        c.sendall(hello13())
        buf = b""
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 8 and len(buf) >= struct.unpack("!H", buf[2:4])[0]:
                    n = struct.unpack("!H", buf[2:4])[0]
                    msg, buf = buf[:n], buf[n:]
                    t, xid = msg[1], struct.unpack("!I", msg[4:8])[0]
                    if t == 20:  # barrier: answer so ovs-ofctl finishes
                        c.sendall(struct.pack("!BBHI", 4, 21, 8, xid))
                    elif t == 18:  # multipart: an empty reply of the same type
                        c.sendall(struct.pack("!BBHI", 4, 19, 16, xid) + msg[8:10] + b"\0" * 6)
                    if t not in (0, 20):
                        got.append(msg)
        except socket.timeout:
            pass
        c.close()

    t = threading.Thread(target=fake_switch)
    t.start()
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", args[0], f"tcp:127.0.0.1:{port}", *args[1:]],
                       capture_output=True, text=True, timeout=10)
    if r.returncode != 0 and not got:
        print(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
    t.join()
    srv.close()
    return got


def write(name, vectors):
    OUT.mkdir(parents=True, exist_ok=True)
    lines = [f"{k} {v.hex()}" for k, v in vectors.items()]
    (OUT / name).write_text("\n".join(lines) + "\n")
    print(f"{OUT / name}: {len(lines)} messages")


if __name__ == "__main__":
    write("osken.txt", osken_vectors())
    write("ovs-ofctl.txt", ofctl_vectors())
