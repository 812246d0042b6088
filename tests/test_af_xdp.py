"""The userspace datapath on AF_XDP sockets (`--io af_xdp`): an XDP program on each port hands its
frames to the switch's socket, which sends from memory it shares with the kernel (copy mode on
veth, which has no zero-copy)."""

import json
import os
import subprocess
import urllib.request

import pytest

from testbed import netns
from testbed.switches import EDGEFLOW_BIN, Edgeflow
from testbed.traffic import iperf3_udp
from testbed.netns import sh
from testbed.util import free_port, wait_for


def test_openflow_on_af_xdp_ports_forwards_ping_and_a_udp_stream(two_hosts):
    """OpenFlow flows on AF_XDP ports: ping both ways and a UDP stream arrive whole, the frames
    counted on the flows, and the report says which socket each port got. XDP sees no sk_buff,
    so no checksum a sender left to offload can be told from a wrong one: the hosts send theirs
    complete, as for the xdp fast path (docs/ARCHITECTURE.md, AF_XDP ports)."""
    h1, h2 = two_hosts.hosts
    for h in (h1, h2):
        h.set_offload(tx="off")
    with Edgeflow(two_hosts.switch_ports, io="af_xdp", log_name="afxdp") as sw:
        sw.ofctl("del-flows")
        sw.ofctl("add-flow", "priority=10,in_port=1,actions=output:2")
        sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
        assert h1.ping(h2.addr, count=5, interval=0.05)[0] == 5
        assert h2.ping(h1.addr, count=5, interval=0.05)[0] == 5
        # 2000 datagrams of 1200 bytes in 2 s: a stream, not a trickle, and nothing lost.
        udp = iperf3_udp(h1, h2, rate_bps=9_600_000, length=1200, seconds=2)
        assert udp["sent_packets"] >= 1900 and udp["received_packets"] == udp["sent_packets"], udp
        ports = {p["no"]: p for p in sw.stats()["ports"]}
        assert ports[1]["io"] == ports[2]["io"] == "af_xdp copy", ports
        to_h2 = next(f for f in sw.flows() if "in_port=1" in f)
        packets = int(to_h2.split("n_packets=")[1].split(",")[0])
        assert packets >= udp["sent_packets"] + 5, to_h2


def test_af_xdp_with_the_tc_fast_path_is_refused_with_the_reason(two_hosts):
    """An AF_XDP socket takes frames from XDP only, which runs before TC: under the tc fast path
    the kernel would see none of an AF_XDP port's frames. The combination is refused at start,
    naming what to change, rather than one of them silently getting nothing."""
    r = subprocess.run([EDGEFLOW_BIN, "run", "--port", two_hosts.switch_ports[0], "--io", "af_xdp",
                        "--datapath", "tc"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "need datapath user or xdp, not tc" in r.stderr, r.stderr


def test_the_xdp_fast_path_sends_up_into_the_af_xdp_sockets(three_hosts, tmp_path):
    """With the xdp fast path, the fast path's own program sends what it does not forward into the
    arrival port's AF_XDP socket: the first frames of each direction reach the switch there, the
    switch installs their flow in the kernel, and every later frame is a kernel hit that never
    comes up; a frame whose TTL expires is sent up there too. One port is on AF_PACKET
    (`[[port]] io`): its misses still go to the stack."""
    h1, h2, h3 = three_hosts.hosts
    for h in (h1, h2, h3):
        h.set_offload(**Edgeflow.HOST_SETTINGS["xdp"])
    cfg = tmp_path / "sw.toml"
    cfg.write_text("".join(f'[[port]]\nname = "{name}"\n' + ('io = "af_packet"\n' if no == 3 else "")
                           for no, name in enumerate(three_hosts.switch_ports, 1)))
    with Edgeflow([], datapath="xdp", io="af_xdp", extra=["--config", str(cfg)], log_name="afxdp-xdp") as sw:
        sw.ofctl("del-flows")
        sw.ofctl("add-flow", "priority=10,in_port=1,actions=output:2")
        sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
        sw.ofctl("add-flow", "priority=10,in_port=3,actions=output:1")

        def report():
            r = sw.stats()
            return {p["no"]: p for p in r["ports"]}, r["fast_path"]
        ports, fast = report()
        assert ports[1]["io"] == ports[2]["io"] == "af_xdp copy", ports
        assert ports[3]["io"] == "af_packet rings", ports
        assert ports[1]["socket_rx_packets"] == ports[2]["socket_rx_packets"] == 0, ports

        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        ports, fast = report()
        # Up through the sockets: h1's first frames on port 1, h2's answers on port 2.
        assert ports[1]["socket_rx_packets"] >= 1 and ports[2]["socket_rx_packets"] >= 1, ports
        assert sw.kernel_flows()["megaflows"], "no flow in the kernel"
        went_up = {no: ports[no]["socket_rx_packets"] for no in (1, 2)}
        upcalls, hits = fast["upcalls"], fast["hits"]

        assert h1.ping(h2.addr, count=20, interval=0.02)[0] == 20
        ports, fast = report()
        assert fast["hits"] >= hits + 40, fast
        assert fast["upcalls"] == upcalls, fast
        assert {no: ports[no]["socket_rx_packets"] for no in (1, 2)} == went_up, ports
        # The kernel's hits count on the port as frames received.
        assert ports[1]["rx_packets"] >= went_up[1] + 20, ports

        # A frame an entry matches but only userspace may finish (its TTL expires here) comes up
        # through the socket of the port it arrived on too.
        sw.ofctl("add-flow", "priority=20,in_port=1,icmp,actions=dec_ttl,output:2")
        assert h1.ping(h2.addr, count=2, interval=0.05)[0] == 2
        slow, read = sw.stats()["fast_path"]["slow"], report()[0][1]["socket_rx_packets"]
        h1.run("ping", "-n", "-c", "2", "-i", "0.05", "-t", "1", "-W", "1", h2.addr, check=False)
        ports, fast = report()
        assert fast["slow"] >= slow + 2, fast
        assert ports[1]["socket_rx_packets"] >= read + 2 and ports[2]["socket_rx_packets"] == went_up[2], ports

        # The AF_PACKET port's miss goes up to the stack and its packet socket, as before (h1's
        # answers go to port 2: this ping is not answered).
        h3.ping(h1.addr, count=1)
        wait_for(lambda: report()[0][3]["socket_rx_packets"] >= 1, timeout=5, what="port 3's miss read")


@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_a_vlan_tag_the_sender_kept_in_metadata_is_matched(two_hosts, datapath):
    """A veth sender's stack hands its VLAN tag over in metadata, not in the frame, and XDP sees
    the frame untagged unless it asks the driver: the port's program does (a copy bound to the
    device), so flows on the tag match and the tag leaves with the frame. With the xdp fast path
    its program does, and carries the tag up into the socket in the stamp: the first frames,
    matched in userspace, match the tag too."""
    h1, h2 = two_hosts.hosts
    for h in (h1, h2):
        h.set_offload(**Edgeflow.HOST_SETTINGS["af_xdp" if datapath == "user" else datapath])
        netns.tag_interface(h.name, "eth0", 10)
    with Edgeflow(two_hosts.switch_ports, io="af_xdp", datapath=datapath, log_name=f"afxdp-vlan-{datapath}") as sw:
        sw.ofctl("del-flows")
        for f in ["priority=20,in_port=1,dl_vlan=10,actions=output:2",
                  "priority=20,in_port=2,dl_vlan=10,actions=output:1",
                  "priority=10,actions=drop"]:
            sw.ofctl("add-flow", f)
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        drop = next(f for f in sw.flows() if "actions=drop" in f)
        assert "n_packets=0" in drop, drop
        if datapath == "xdp":
            assert {p["no"]: p["socket_rx_packets"] >= 1 for p in sw.stats()["ports"]} == {1: True, 2: True}


@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_frames_on_every_receive_queue_reach_the_switch(datapath):
    """An AF_XDP socket gets only the frames of the receive queue it is bound to, so a port on an
    interface with several queues has one socket per queue. A veth delivers a frame on the receive
    queue of the sender's transmit queue: h1's frames are put on transmit queue 2 (tc skbedit at
    its transmit packet steering, XPS: every CPU maps to queue 2 alone), so they arrive on the switch
    port's queue 2, where only that queue's socket (or,
    with the xdp fast path, the fast path's slot for that queue) can take them. What the sockets
    read is the port's `edgeflow_port_socket_receive_packets_total`."""
    with netns.Topology("q") as topo:
        h1, h2 = topo.add_host(queues=4), topo.add_host(queues=4)
        for h in (h1, h2):
            h.set_offload(**Edgeflow.HOST_SETTINGS["af_xdp" if datapath == "user" else datapath])
        # The CPU mask in the kernel's notation: 32-bit groups in hex, comma-separated.
        mask, groups = (1 << os.cpu_count()) - 1, []
        while mask:
            groups.insert(0, f"{mask & 0xffffffff:x}")
            mask >>= 32
        every_cpu = ",".join(groups)
        for q in range(4):
            # `ip netns exec` mounts the namespace's own /sys, where its eth0 is.
            sh("ip", "netns", "exec", h1.name, "sh", "-c",
               f"echo {every_cpu if q == 2 else 0} > /sys/class/net/eth0/queues/tx-{q}/xps_cpus")
        metrics = free_port()
        with Edgeflow(topo.switch_ports, io="af_xdp", datapath=datapath, extra=["--metrics", str(metrics)],
                      log_name=f"afxdp-queues-{datapath}") as sw:
            sw.ofctl("del-flows")
            sw.ofctl("add-flow", "priority=10,in_port=1,actions=output:2")
            sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
            assert h1.ping(h2.addr, count=5, interval=0.05)[0] == 5, json.dumps(sw.stats()["ports"])
            assert h2.ping(h1.addr, count=5, interval=0.05)[0] == 5, json.dumps(sw.stats()["ports"])
            ports = {p["no"]: p for p in sw.stats()["ports"]}
            queues = ports[1]["socket_rx_queues"]
            assert len(queues) == 4, ports[1]
            # Everything h1 sent came in on queue 2 (with the xdp fast path, what was sent up).
            assert queues[2] >= 1 and queues[2] == sum(queues), ports[1]
            if datapath == "user":
                assert queues[2] >= 10, ports[1]
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as r:
                scraped = r.read().decode()
            ports = {p["no"]: p for p in sw.stats()["ports"]}
            for no, name in enumerate(topo.switch_ports, 1):
                line = f'edgeflow_port_socket_receive_packets_total{{port="{no}",name="{name}"}} '
                assert line + str(ports[no]["socket_rx_packets"]) in scraped.splitlines(), (line, scraped)


def test_frames_as_large_as_the_mtu_pass_in_one_chunk_or_several(two_hosts):
    """A UMEM chunk holds one frame behind 256 bytes of XDP headroom: 2 KiB chunks for a 1500 MTU,
    4 KiB ones up to an MTU of 3822, and above that a frame spread over several 4 KiB chunks
    (multi-buffer AF_XDP: the frags program, sockets bound with XDP_USE_SG). Frames of the full MTU
    pass both ways at 1500, 3000 and 9000 (pings that fill the MTU, not fragmented), counted as one
    frame each. With the XDP fast path, whose programs read a frame in one buffer, a 9000 MTU is
    refused at start, saying why, rather than every frame above a chunk dropped."""
    h1, h2 = two_hosts.hosts
    for h in (h1, h2):
        h.set_offload(**Edgeflow.HOST_SETTINGS["af_xdp"])

    def set_mtu(mtu):
        for h, port in zip((h1, h2), two_hosts.switch_ports):
            h.run("ip", "link", "set", "dev", "eth0", "mtu", str(mtu))
            sh("ip", "link", "set", "dev", port, "mtu", str(mtu))

    for mtu in (1500, 3000, 9000):
        set_mtu(mtu)
        with Edgeflow(two_hosts.switch_ports, io="af_xdp", log_name=f"afxdp-mtu-{mtu}") as sw:
            sw.ofctl("del-flows")
            sw.ofctl("add-flow", "priority=10,in_port=1,actions=output:2")
            sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
            # IPv4 and ICMP headers take 28 bytes of the MTU; -M do forbids fragmenting.
            full = ["-M", "do", "-s", str(mtu - 28), "-c", "3", "-i", "0.05", "-W", "1"]
            for a, b in ((h1, h2), (h2, h1)):
                r = a.run("ping", "-n", *full, b.addr, check=False)
                assert " 3 received" in r.stdout, (mtu, r.stdout, r.stderr)
            ports = sw.stats()["ports"]
            assert all(p["tx_dropped"] == 0 for p in ports), ports
            # Each full-size echo crossed as one frame, not one per chunk: each port took 3
            # requests and 3 replies, and whatever ARP or neighbour discovery the hosts sent (at
            # 9000, three chunks a frame would count 18 or more).
            assert all(6 <= p["socket_rx_packets"] <= 12 for p in ports), (mtu, [(p["socket_rx_packets"], p.get("rx_packets"), p.get("rx_dropped")) for p in ports])
    r = subprocess.run([EDGEFLOW_BIN, "run", "--port", two_hosts.switch_ports[0], "--io", "af_xdp",
                        "--datapath", "xdp"], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "MTU too large for AF_XDP without multi-buffer frames (at most 3822)" in r.stderr \
        and "the XDP fast path's programs do not take" in r.stderr, r.stderr
