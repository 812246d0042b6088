"""Faults the switch survives and reports (a log line and a counter in `edgeflow stats`): its
controller goes away, a controller floods it with flow-mods or garbage, a port flaps, an interface
vanishes and comes back under the same port number, a table fills up, and the kernel programs or
port guards are detached behind its back. Each test first shows the normal path working."""

import json
import struct
import time

import pytest

from testbed import ofpeer
from testbed.netns import sh
from testbed.ofpeer import Controller, header
from testbed.switches import Edgeflow
from testbed.util import wait_for


def flow_mod(priority, match=None, out=None, table=0):
    """An OpenFlow 1.3 flow-mod: `match` a dict of os-ken match fields, `out` a port (None: drop)."""
    def build(p, o, dp):
        actions = [p.OFPActionOutput(out)] if out is not None else []
        inst = [p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, actions)] if actions else []
        return p.OFPFlowMod(dp, table_id=table, priority=priority, match=p.OFPMatch(**(match or {})), instructions=inst)
    return ofpeer.osken_bytes(build)


def between_ports(c):
    """Port 1 to port 2 and back, whatever the addresses: what a controller installs and leaves."""
    assert c.request(flow_mod(10, {"in_port": 1}, 2) + flow_mod(10, {"in_port": 2}, 1)) == []


def host_settings(hosts, datapath):
    for h in hosts:
        if Edgeflow.HOST_SETTINGS[datapath]:
            h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])


@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_fail_secure_keeps_forwarding_when_the_controller_goes(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    host_settings(two_hosts.hosts, datapath)
    ctl = Controller()
    with Edgeflow(two_hosts.switch_ports, controllers=[ctl.target], fail_mode="secure", datapath=datapath,
                  extra=["--fail-open-delay", "1"], log_name=f"faults-secure-{datapath}") as sw:
        c = ctl.accept()
        between_ports(c)
        assert h1.ping(h2.addr, count=2)[0] == 2, "the normal path"
        c.close()
        ctl.close()
        wait_for(lambda: sw.stats()["channel"]["sessions_ended"] == 1, timeout=5, what="the session to end")
        # Past the fail-open delay (1 s here), secure mode must have changed nothing; the kernel's
        # copies need only show they outlive the session.
        time.sleep(1.5)
        assert h1.ping(h2.addr, count=5, interval=0.1)[0] == 5, "installed flows keep forwarding"
        channel = sw.stats()["channel"]
        assert (channel["fail_open"], channel["fail_open_entered"]) == (False, 0), channel
        assert "disconnected" in sw.log()


def test_fail_standalone_learns_when_the_controller_goes_and_yields_when_it_returns(two_hosts):
    h1, h2 = two_hosts.hosts
    ctl = Controller()
    with Edgeflow(two_hosts.switch_ports, controllers=[ctl.target], fail_mode="standalone",
                  extra=["--fail-open-delay", "1"]) as sw:
        c = ctl.accept()
        assert c.request(flow_mod(0)) == []  # a table-miss flow that drops
        assert h1.ping(h2.addr, count=2)[0] == 0, "the controller's policy: nothing passes"
        c.close()
        ctl.close()
        wait_for(lambda: sw.stats()["channel"]["fail_open"], timeout=8, what="standalone mode")
        # The dropped pings left h1's ARP entry for h2 unresolved, its last solicitation a second
        # away: started over, so that the pings below are what standalone mode forwards.
        for h in (h1, h2):
            h.run("ip", "neigh", "flush", "all")
        assert h1.ping(h2.addr, count=3)[0] == 3, "standalone learning forwards"
        assert "standalone learning switch" in sw.log()
        channel = sw.stats()["channel"]
        assert channel["fail_open_entered"] == 1, channel
        # The controller comes back (the switch retries with backoff): its flows rule again.
        back = Controller(port=ctl.port)
        c = back.accept(timeout=20)
        wait_for(lambda: not sw.stats()["channel"]["fail_open"], timeout=5, what="control to return")
        assert h1.ping(h2.addr, count=2)[0] == 0, "the drop flow applies again"
        c.close()
        back.close()


def test_a_flood_of_flow_mods_and_garbage_leaves_forwarding_and_the_channel_alone(two_hosts):
    """20 000 flow-mods at once, then 1 000 messages of an unknown type, from the controller while
    a host pings across: every ping answered, every flow installed, every bad message answered
    with an error and counted, and the session still up."""
    h1, h2 = two_hosts.hosts
    ctl = Controller()
    with Edgeflow(two_hosts.switch_ports, controllers=[ctl.target]) as sw:
        c = ctl.accept()
        between_ports(c)
        pinger = h1.popen("ping", "-n", "-c", "300", "-i", "0.01", "-W", "1", h2.addr)
        time.sleep(0.5)
        flood = b"".join(flow_mod(100, {"eth_type": 0x0800, "ip_proto": 17, "udp_dst": port}, 2)
                         for port in range(1, 20_001))
        start = time.monotonic()
        assert c.request(flood, timeout=60) == [], "no errors, and the barrier answered"
        took = time.monotonic() - start
        garbage = b"".join(header(99, 8, 5000 + i) for i in range(1000))
        replies = c.request(garbage, timeout=30)
        out, _ = pinger.communicate(timeout=30)
        assert " 0% packet loss" in out, out
        assert [m.type for m in replies] == [1] * 1000, "an error for each"
        assert all(struct.unpack("!HH", m.body[:4]) == (1, 1) for m in replies), "OFPBRC_BAD_TYPE"
        report = sw.stats()
        flows = sum(t["flows"] for t in report["tables"])
        print(f"\n20 000 flow-mods taken in {took:.2f} s while pinging: 300 of 300 pings answered; "
              f"{flows} flows; channel {report['channel']}")
        assert flows == 20_002
        assert report["channel"]["malformed"] == 1000
        assert report["channel"]["sessions_ended"] == 0


def test_a_full_table_refuses_or_evicts_as_configured(two_hosts, tmp_path):
    """Table 1 holds 4 flows and refuses a fifth (OFPFMFC_TABLE_FULL); table 2 holds 2 and evicts
    the lowest-priority, least recently used one to make room. Both counted per table."""
    cfg = tmp_path / "tables.toml"
    cfg.write_text("[[table]]\nid = 1\nmax_flows = 4\n[[table]]\nid = 2\nmax_flows = 2\nevict = true\n")
    with Edgeflow(two_hosts.switch_ports, extra=["--config", str(cfg)]) as sw:
        for i in range(4):
            sw.ofctl("add-flow", f"table=1,priority=10,udp,tp_dst={i},actions=drop")
        refused = sw.ofctl("add-flow", "table=1,priority=10,udp,tp_dst=9,actions=drop", check=False)
        assert "OFPFMFC_TABLE_FULL" in refused, refused
        sw.ofctl("add-flow", "table=2,priority=5,udp,tp_dst=1,actions=drop")
        sw.ofctl("add-flow", "table=2,priority=20,udp,tp_dst=2,actions=drop")
        sw.ofctl("add-flow", "table=2,priority=20,udp,tp_dst=3,actions=drop")
        left = sw.flows(table=2)
        assert len(left) == 2 and not any("tp_dst=1," in f for f in left), left
        tables = {t["id"]: t for t in sw.stats()["tables"]}
        assert (tables[1]["flows"], tables[1]["full_refusals"], tables[1]["evictions"]) == (4, 1, 0), tables
        assert (tables[2]["flows"], tables[2]["full_refusals"], tables[2]["evictions"]) == (2, 0, 1), tables


def forwarding_between_ports(sw, h1, h2):
    """Port 1 to port 2 and back, installed with ovs-ofctl, and shown to carry pings."""
    sw.ofctl("add-flow", "priority=10,in_port=1,actions=output:2")
    sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
    assert h1.ping(h2.addr, count=2)[0] == 2, "the normal path"


def port_report(sw, no):
    return next((p for p in sw.stats()["ports"] if p["no"] == no), None)


def test_a_port_that_flaps_and_an_interface_that_vanishes_and_returns(two_hosts, datapath):
    """h2's link goes down and up twice (port-status each time, counted); then the switch-side
    interface is deleted and created again under the same name: the port comes back under the
    same number, the fast path is attached to the new interface, and traffic flows as before."""
    h1, h2 = two_hosts.hosts
    host_settings(two_hosts.hosts, datapath)
    with Edgeflow(two_hosts.switch_ports, datapath=datapath, log_name=f"faults-ports-{datapath}") as sw:
        forwarding_between_ports(sw, h1, h2)
        for _ in range(2):
            h2.run("ip", "link", "set", "eth0", "down")
            wait_for(lambda: not port_report(sw, 2)["up"], timeout=5, what="port 2 down")
            h2.run("ip", "link", "set", "eth0", "up")
            wait_for(lambda: port_report(sw, 2)["up"], timeout=5, what="port 2 up")
        assert port_report(sw, 2)["link_changes"] == 4
        assert h1.ping(h2.addr, count=3, interval=0.1)[0] == 3, "forwarding after the flaps"

        side = h2.switch_side
        sh("ip", "link", "del", side)
        wait_for(lambda: port_report(sw, 2) is None, timeout=5, what="port 2 to go")
        sh("ip", "link", "add", side, "type", "veth", "peer", "name", "eth0", "address", h2.mac, "netns", h2.name)
        sh("sysctl", "-qw", f"net.ipv6.conf.{side}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", side, "up")
        h2.run("ip", "link", "set", "eth0", "up")
        h2.run("ip", "addr", "add", h2.ip, "dev", "eth0")
        host_settings([h2], datapath)
        wait_for(lambda: (port_report(sw, 2) or {}).get("up"), timeout=5, what="port 2 to return")
        received, _, _ = h1.ping(h2.addr, count=5, interval=0.2)
        assert received >= 4, f"forwarding on the returned interface: {received} of 5"  # the first may find no ARP entry
        report = sw.stats()
        assert port_report(sw, 2)["removed"] == 1
        assert "interface removed" in sw.log() and "interface added" in sw.log()
        if datapath != "user":
            assert report["fast_path"]["reattached"] == 1, report["fast_path"]
            assert "fast path attached again" in sw.log()
            hits = report["fast_path"]["hits"]
            assert h1.ping(h2.addr, count=5, interval=0.1)[0] == 5
            wait_for(lambda: sw.stats()["fast_path"]["hits"] >= hits + 8, timeout=3,
                     what="the kernel to carry the returned port's traffic")


def bpf_links(prog_name):
    """The kernel's BPF links (`bpftool link show`) of programs named `prog_name`."""
    links = json.loads(sh("bpftool", "-j", "link", "show").stdout or "[]")
    names = {p["id"]: p.get("name") for p in json.loads(sh("bpftool", "-j", "prog", "show").stdout or "[]")}
    return [l for l in links if names.get(l.get("prog_id")) == prog_name]


def test_programs_detached_behind_the_switchs_back_are_attached_again(two_hosts, datapath):
    """`bpftool link detach` on the fast-path program of port 1 and on port 2's guard (the
    kernel's ids from the switch's report): within a second each is attached again under a new
    link, said in the log and counted, and the kernel forwards again."""
    h1, h2 = two_hosts.hosts
    host_settings(two_hosts.hosts, datapath)
    with Edgeflow(two_hosts.switch_ports, datapath=datapath, log_name=f"faults-detach-{datapath}") as sw:
        forwarding_between_ports(sw, h1, h2)
        report = sw.stats()
        guard = port_report(sw, 2)["guard_link_id"]
        # TC mode has no guards on its ports: the fast path takes every frame first.
        detached = []
        if datapath != "tc":
            assert guard in {l["id"] for l in bpf_links("port_guard")}, bpf_links("port_guard")
            sh("bpftool", "link", "detach", "id", str(guard))
            detached.append(guard)
        if datapath != "user":
            link = next(a["link_id"] for a in report["fast_path"]["attachments"] if a["port"] == 1)
            sh("bpftool", "link", "detach", "id", str(link))
            detached.append(link)
        if datapath != "tc":
            wait_for(lambda: port_report(sw, 2)["guard_reattached"] == 1, timeout=3, what="the guard to return")
            assert "port guard was detached: attached again" in sw.log()
            assert port_report(sw, 2)["guard_link_id"] != guard
        if datapath != "user":
            wait_for(lambda: sw.stats()["fast_path"]["reattached"] == 1, timeout=3, what="the fast path to return")
            assert "fast path program was detached: attached again" in sw.log()
            now = {a["port"]: a["link_id"] for a in sw.stats()["fast_path"]["attachments"]}
            assert now[1] != link, "a new link replaced the detached one"
            hits = sw.stats()["fast_path"]["hits"]
            assert h1.ping(h2.addr, count=5, interval=0.1)[0] == 5
            wait_for(lambda: sw.stats()["fast_path"]["hits"] >= hits + 8, timeout=3,
                     what="the kernel to forward again")
        else:
            assert h1.ping(h2.addr, count=3, interval=0.1)[0] == 3
