"""ovs-ofctl manages the switch through its passive listener."""

import re

from testbed.switches import Edgeflow


def counters(dump_ports, port):
    """(rx_pkts, tx_pkts) of a port in `ovs-ofctl dump-ports` output."""
    block = re.search(rf"port\s+{port}: rx pkts=(\d+).*?\n\s+tx pkts=(\d+)", dump_ports)
    return int(block.group(1)), int(block.group(2))


def test_add_del_flows_and_port_counters(two_hosts):
    h1, h2 = two_hosts.hosts
    with Edgeflow(two_hosts.switch_ports) as sw:
        sw.ofctl("del-flows")
        assert sw.flows() == []
        received, _, _ = h1.ping(h2.addr, count=2)
        assert received == 0, "no flows: nothing is forwarded"

        sw.ofctl("add-flow", "priority=100,in_port=1,actions=output:2")
        sw.ofctl("add-flow", "priority=100,in_port=2,actions=output:1")
        sw.ofctl("add-flow", "table=0,priority=200,ip,nw_dst=10.0.0.99,actions=drop")
        flows = sw.flows()
        assert len(flows) == 3, flows
        before = sw.ofctl("dump-ports")
        received, sent, _ = h1.ping(h2.addr, count=4)
        assert received == sent == 4
        after = sw.ofctl("dump-ports")
        assert counters(after, 1)[0] - counters(before, 1)[0] >= 4
        assert counters(after, 2)[1] - counters(before, 2)[1] >= 4
        hits = {f.split("actions=")[1]: int(re.search(r"n_packets=(\d+)", f).group(1)) for f in sw.flows()}
        assert hits["output:2"] >= 4 and hits["output:1"] >= 4 and hits["drop"] == 0

        # Strict delete of one direction breaks the ping; the other flow stays.
        sw.ofctl("--strict", "del-flows", "priority=100,in_port=2")
        assert len(sw.flows()) == 2
        assert h1.ping(h2.addr, count=2)[0] == 0
        sw.ofctl("del-flows", "in_port=1")
        assert [f for f in sw.flows() if "in_port" in f] == []
        assert "dl_src" not in sw.ofctl("dump-flows")


def test_show_tables_and_desc(two_hosts):
    with Edgeflow(two_hosts.switch_ports) as sw:
        show = sw.ofctl("show")
        assert "n_tables:64" in show
        for name in two_hosts.switch_ports:
            assert f"({name})" in show
        assert "edgeflow" in sw.ofctl("dump-desc")
        tables = sw.ofctl("dump-tables")
        assert "table 0" in tables and "active=1" in tables
        features = sw.ofctl("dump-table-features")
        # ovs-ofctl prints 'table N ("name"):' per table (or folds a run into "tables A...B"):
        # together they must name exactly tables 0-63.
        named = {int(n) for n in re.findall(r"^\s*table (\d+)\b", features, re.M)}
        for a, b in re.findall(r"^\s*tables (\d+)\.\.\.(\d+)", features, re.M):
            named |= set(range(int(a), int(b) + 1))
        assert named == set(range(64)), (sorted(named), features[:2000])


def test_groups_meters_and_their_multipart_replies(three_hosts):
    h1, h2, h3 = three_hosts.hosts
    with Edgeflow(three_hosts.switch_ports) as sw:
        sw.ofctl("add-group", "group_id=7,type=all,bucket=output:2,bucket=output:3")
        sw.ofctl("add-meter", "meter=1,pktps,burst,band=type=drop,rate=1000,burst_size=10")
        sw.ofctl("add-flow", "priority=50,in_port=1,actions=meter:1,group:7")
        sw.ofctl("add-flow", "priority=50,in_port=2,actions=output:1")
        sw.ofctl("add-flow", "priority=50,in_port=3,actions=output:1")
        assert h1.ping(h2.addr, count=2)[0] == 2
        assert h1.ping(h3.addr, count=2)[0] == 2
        groups = sw.ofctl("dump-groups")
        assert "group_id=7,type=all,bucket=actions=output:2,bucket=actions=output:3" in groups
        stats = sw.ofctl("dump-group-stats")
        assert "group_id=7" in stats and "ref_count=1" in stats and "packet_count=0" not in stats
        assert "meter=1 pktps burst bands=" in sw.ofctl("dump-meters")
        mstats = sw.ofctl("meter-stats")
        assert "meter:1 flow_count:1" in mstats
        features = sw.ofctl("meter-features")
        assert "max_meter:65536" in features and "drop" in features
        assert "Group table:" in sw.ofctl("dump-group-features")
        agg = sw.ofctl("dump-aggregate")
        assert "flow_count=4" in agg, "three added plus the native NORMAL flow"


def test_unix_listener_config_file_and_version_negotiation(two_hosts, tmp_path):
    from testbed import ofpeer
    from testbed.netns import sh
    sock = tmp_path / "sw.sock"
    conf = tmp_path / "sw.toml"
    conf.write_text(
        f'listen = ["punix:{sock}"]\ntables = 12\n'
        + "".join(f'[[port]]\nname = "{p}"\nnumber = {10 + i}\n' for i, p in enumerate(two_hosts.switch_ports)))
    with Edgeflow([], extra=["--config", str(conf)]) as sw:
        out = sh("ovs-ofctl", "-O", "OpenFlow13", "show", f"unix:{sock}").stdout
        assert "n_tables:12" in out and " 10(" in out and " 11(" in out
        # A peer that only speaks OpenFlow 1.0 is told so and disconnected.
        c = ofpeer.Conn.connect(sw.mgmt_port, hello=False)
        c.send(ofpeer.header(ofpeer.HELLO, 8, 1, version=1))
        msgs = []
        try:
            while True:
                msgs.append(c.recv(timeout=3))
        except ConnectionError:
            pass
        assert [m.type for m in msgs] == [ofpeer.HELLO, ofpeer.ERROR]
        assert msgs[1].error[:2] == (0, 0), "OFPET_HELLO_FAILED / OFPHFC_INCOMPATIBLE"
