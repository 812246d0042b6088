"""Forwarding modes behind the one seam: the port-map mode (the smallest complete mode) and the
learning mode forward real frames on every datapath; egress queues are chosen by set_queue and
VLAN priority and reported to OpenFlow; an idle switch sleeps."""

import re
import time

import pytest

from testbed import netns
from testbed.switches import edgeflow_on
from testbed.traffic import iperf3_tcp


# One kernel hook: portmap's entries are ordinary megaflow entries to either hook.
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_portmap_mode_forwards_mapped_ports_only(datapath):
    netns.cleanup()
    with netns.Topology("pm") as topo:
        h1, h2, h3 = topo.add_host(), topo.add_host(), topo.add_host()
        with edgeflow_on(datapath, topo.hosts, topo.switch_ports, mode="portmap", portmap=[(1, 2), (2, 1)],
                         log_name="portmap") as sw:
            received, sent, _ = h1.ping(h2.addr, count=20, interval=0.05)
            assert received == sent == 20
            assert h3.ping(h1.addr, count=2, interval=0.1)[0] == 0, "port 3 is mapped nowhere"
            # Not programmable by OpenFlow: a switch without tables, whose ports a manager still reads.
            assert sw.flows() == []
            # (--no-names: ovs-ofctl would first ask for table features, and it cannot take a
            # reply that lists no table.)
            assert "OFPFMFC_EPERM" in sw.ofctl("--no-names", "add-flow", "actions=drop", check=False)
            assert "n_tables:0" in sw.ofctl("show")
            stats = sw.ofctl("dump-ports")
            assert re.search(r"port\s+3: rx pkts=[1-9]", stats), stats
            assert sw.stop() == 0
        log = sw.log()
        assert "mode=\"portmap\"" in log or "mode=portmap" in log, log
        dropped = re.search(r"no_action=(\d+)", log)
        assert dropped and int(dropped.group(1)) >= 1, "what port 3 sent is counted as dropped"
        totals = sw.fastpath_totals()
    if datapath != "user":
        # Each direction's first frame goes up; the rest stay in the kernel.
        assert totals["hits"] >= 30, totals


def test_learning_mode_carries_tcp_and_refuses_flow_mods():
    netns.cleanup()
    with netns.Topology("lm") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        with edgeflow_on("user", topo.hosts, topo.switch_ports, mode="learning", log_name="learning") as sw:
            assert h1.ping(h2.addr, count=5, interval=0.1)[0] == 5
            # It carries TCP (how fast is the benchmarks' business).
            assert iperf3_tcp(h1, h2, seconds=1) > 100e6
            assert "OFPFMFC_EPERM" in sw.ofctl("--no-names", "add-flow", "actions=drop", check=False)
            assert h1.ping(h2.addr, count=2, interval=0.1)[0] == 2, "the refused flow-mod changed nothing"


def queue_stats(sw):
    """{(port, queue): (packets, bytes)} from ovs-ofctl queue-stats."""
    out = sw.ofctl("queue-stats")
    return {(int(p), int(q)): (int(n), int(b))
            for p, q, b, n in re.findall(r"port\s+(\d+) queue (\d+): bytes=(\d+), pkts=(\d+)", out)}


# One kernel hook: the queues are userspace's; the kernel only hands such frames up, the same way
# on both hooks.
@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_set_queue_and_vlan_priority_pick_egress_queues(datapath):
    netns.cleanup()
    with netns.Topology("q") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        with edgeflow_on(datapath, topo.hosts, topo.switch_ports, log_name="queues") as sw:
            sw.ofctl("del-flows")
            sw.ofctl("add-flow", "priority=10,in_port=1,actions=set_queue:5,output:2")
            sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
            received, sent, _ = h1.ping(h2.addr, count=20, interval=0.05)
            assert received == sent == 20
            stats = queue_stats(sw)
            assert len([k for k in stats if k[0] == 1]) == 8, "eight queues per port"
            # Requests (and h1's ARP) left port 2 on queue 5; the untagged replies left port 1 on
            # queue 1, where 802.1Q puts priority 0. Kernel-forwarded frames count there too.
            assert stats[(2, 5)][0] >= 20, stats
            assert stats[(1, 1)][0] >= 20, stats
            assert sum(n for (p, q), (n, _) in stats.items() if (p, q) not in ((2, 5), (1, 1))) == 0, stats
            config = sw.ofctl("queue-get-config", "2")
            assert len(re.findall(r"queue \d+", config)) == 8, config
            bad = sw.ofctl("queue-stats", "2", "9", check=False)
            assert "OFPQOFC_BAD_QUEUE" in bad, bad


def forwarding_thread_switches(pid):
    """Voluntary context switches of the daemon's forwarding thread: how often it slept and woke."""
    for tid in __import__("os").listdir(f"/proc/{pid}/task"):
        if open(f"/proc/{pid}/task/{tid}/comm").read().strip() == "forwarding":
            status = open(f"/proc/{pid}/task/{tid}/status").read()
            return int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status).group(1))
    raise AssertionError("no forwarding thread")


def test_idle_switch_sleeps_until_something_happens(two_hosts):
    """No fast poll: with no traffic and nothing timed the forwarding thread wakes only for its
    once-a-second housekeeping."""
    h1, h2 = two_hosts.hosts
    with edgeflow_on("user", two_hosts.hosts, two_hosts.switch_ports, log_name="idle-loop") as sw:
        assert h1.ping(h2.addr, count=2, interval=0.1)[0] == 2
        time.sleep(1)
        before = forwarding_thread_switches(sw.proc.pid)
        time.sleep(3)
        woke = forwarding_thread_switches(sw.proc.pid) - before
        # A 100 ms poll would wake 30 times; the once-a-second check that nothing was detached
        # wakes 3 times, stray host traffic (IPv6 neighbour discovery) a few.
        assert woke <= 9, f"the forwarding thread woke {woke} times in 3 idle seconds"


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_edgeflow_stats_reports_ports_queues_tables_fast_path_and_drops(datapath):
    import subprocess
    from testbed.switches import EDGEFLOW_BIN
    netns.cleanup()
    with netns.Topology("st") as topo:
        h1, h2, h3 = topo.add_host(), topo.add_host(), topo.add_host()
        with edgeflow_on(datapath, topo.hosts, topo.switch_ports, log_name="stats") as sw:
            sw.ofctl("del-flows")
            sw.ofctl("add-flow", "priority=10,in_port=1,actions=set_queue:6,output:2")
            sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
            assert h1.ping(h2.addr, count=10, interval=0.05)[0] == 10
            assert h3.ping(h1.addr, count=2, interval=0.1)[0] == 0, "port 3 matches no flow"
            run = lambda *a: subprocess.run([EDGEFLOW_BIN, "stats", *a], capture_output=True, text=True, timeout=20)
            report = sw.stats()
            assert report["mode"] == "openflow" and report["datapath"] == datapath
            ports = {p["no"]: p for p in report["ports"]}
            assert sorted(ports) == [1, 2, 3]
            assert ports[1]["rx_packets"] >= 10 and ports[2]["tx_packets"] >= 10, ports
            assert ports[2]["queues"][6]["tx_packets"] >= 10, ports[2]["queues"]
            assert report["tables"][0]["flows"] == 2 and report["tables"][0]["lookups"] >= 20, report["tables"]
            if datapath == "user":
                assert report["drops"]["no_action"] >= 2, report["drops"]
                assert report["fast_path"] is None
            else:
                # The first miss is dropped in userspace; the kernel holds that decision after it.
                assert report["drops"]["no_action"] >= 1, report["drops"]
                assert report["fast_path"]["hits"] >= 10, report["fast_path"]
                # ... and counts the frames it drops for it by reason.
                assert report["fast_path"]["drops"]["no_output"] >= 1, report["fast_path"]
            # By dpid through the switch's own management socket, as a person would type it.
            human = run(report["dpid"])
            assert human.returncode == 0, human.stderr
            for heading in ("queues in use", "dropped frames by reason", "tables in use"):
                assert heading in human.stdout, human.stdout
            assert re.search(r"^2\s+6\s+strict\s+\d+", human.stdout, re.M), human.stdout
        assert run(report["dpid"]).returncode != 0, "the socket goes with the switch"
