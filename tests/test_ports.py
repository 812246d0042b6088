"""Ports: port-mod config bits, the LOCAL port, packet-in buffers, packet-out, active TLS."""

import ssl
import struct
import subprocess
import threading
import time

from testbed import ofpeer
from testbed.netns import sh
from testbed.ofpeer import Controller, Conn
from testbed.switches import Edgeflow


def port_config(sw, port):
    desc = sw.ofctl("dump-ports-desc")
    block = desc.split(f" {port}(")[1]
    return block.split("config:")[1].split("\n")[0].strip()


def cpu_ticks_over(pid, seconds):
    """Clock ticks (1/100 s) of CPU the process used over the next `seconds`."""
    def ticks():
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    before = ticks()
    time.sleep(seconds)
    return ticks() - before


def test_port_mod_config_bits(three_hosts):
    h1, h2, h3 = three_hosts.hosts
    with Edgeflow(three_hosts.switch_ports) as sw:
        assert h1.ping(h2.addr, count=2)[0] == 2
        # no-forward on port 2: nothing is sent out of it.
        sw.ofctl("mod-port", "2", "no-forward")
        assert "NO_FWD" in port_config(sw, 2)
        assert h1.ping(h2.addr, count=2)[0] == 0
        assert h1.ping(h3.addr, count=2)[0] == 2
        sw.ofctl("mod-port", "2", "forward")
        assert h1.ping(h2.addr, count=2)[0] == 2
        # no-receive on port 1: what h1 sends is dropped (and counted as dropped).
        sw.ofctl("mod-port", "1", "no-receive")
        assert h1.ping(h3.addr, count=2)[0] == 0
        assert "drop=0," not in sw.ofctl("dump-ports", "1").split("tx")[0]
        sw.ofctl("mod-port", "1", "receive")
        # down: the interface goes administratively down, the peer sees no carrier.
        sw.ofctl("mod-port", "3", "down")
        assert "PORT_DOWN" in port_config(sw, 3)
        assert "LOWER_UP" not in h3.run("ip", "link", "show", "eth0").stdout
        # Idle with a port down: its packet socket's ENETDOWN once kept every poll returning
        # at once, and the switch spun at ~90 % of a core (about 90 ticks a second).
        assert cpu_ticks_over(sw.proc.pid, 1.0) < 30
        sw.ofctl("mod-port", "3", "up")
        assert h1.ping(h3.addr, count=3)[0] >= 2
        # A port-mod naming a port that does not exist is refused.
        bad = sh("ovs-ofctl", "-O", "OpenFlow13", "mod-port", sw.target, "9", "down", check=False)
        assert bad.returncode != 0


def test_local_port_is_a_tap_interface(datapath):
    # The switch runs in a namespace of its own; its LOCAL tap interface is that namespace's way
    # onto the switch, and a host pings it. With a fast path, frames for LOCAL stay with
    # userspace: sent on the tap in the kernel they would reach the switch, not the host (all but
    # the first ping were lost that way).
    sw_ns, host_ns = "ef-tswns", "ef-tlh1"
    try:
        for ns in (sw_ns, host_ns):
            sh("ip", "netns", "add", ns)
        sh("ip", "-n", sw_ns, "link", "add", "ef-tlp1", "type", "veth", "peer", "name", "eth0", "netns", host_ns)
        for ns, dev in ((sw_ns, "ef-tlp1"), (host_ns, "eth0"), (host_ns, "lo"), (sw_ns, "lo")):
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", host_ns, "addr", "add", "10.0.0.1/24", "dev", "eth0")
        enter = ["nsenter", f"--net=/run/netns/{sw_ns}"]
        from testbed.switches import EDGEFLOW_BIN, Edgeflow
        from testbed.util import wait_for
        settings = [x for k, v in Edgeflow.HOST_SETTINGS[datapath].items() for x in (k, v)]
        if settings:
            sh("ip", "netns", "exec", host_ns, "ethtool", "-K", "eth0", *settings)
        fast = [] if datapath == "user" else ["--datapath", datapath]
        proc = subprocess.Popen([*enter, EDGEFLOW_BIN, "run", "--port", "ef-tlp1", "--local-port", "ef-tlocal",
                                 "--listen", "ptcp:6634:127.0.0.1", *fast], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: sh(*enter, "ip", "link", "show", "ef-tlocal", check=False).returncode == 0, what="the tap")
            sh(*enter, "ip", "addr", "add", "10.0.0.9/24", "dev", "ef-tlocal")
            show = wait_for(lambda: sh(*enter, "ovs-ofctl", "-O", "OpenFlow13", "show", "tcp:127.0.0.1:6634", check=False).stdout,
                            what="the listener")
            assert "LOCAL(ef-tlocal)" in show
            r = sh("nsenter", f"--net=/run/netns/{host_ns}", "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.0.0.9", check=False)
            assert "3 received" in r.stdout, (datapath, r.stdout)
            ports = sh(*enter, "ovs-ofctl", "-O", "OpenFlow13", "dump-ports", "tcp:127.0.0.1:6634", "LOCAL").stdout
            assert "rx pkts=0," not in ports, ports
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    finally:
        for ns in (sw_ns, host_ns):
            sh("ip", "netns", "del", ns, check=False)


def test_packet_in_buffers_packet_out_and_flow_mod_with_buffer(two_hosts):
    h1, h2 = two_hosts.hosts
    ctl = Controller()
    with Edgeflow(two_hosts.switch_ports, controllers=[ctl.target]) as sw:
        c = ctl.accept()
        miss = ofpeer.osken_bytes(lambda p, o, dp: p.OFPFlowMod(dp, priority=0, match=p.OFPMatch(), instructions=[
            p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [p.OFPActionOutput(o.OFPP_CONTROLLER, 64)])]))
        assert c.request(miss) == []
        pinger = h1.popen("ping", "-c", "6", "-i", "0.2", "-W", "1", h2.addr)
        seen = 0
        while pinger.poll() is None or seen < 2:
            try:
                m = c.recv_type(ofpeer.PACKET_IN, timeout=3)
            except TimeoutError:
                break
            pin = ofpeer.decode_osken(m.raw)
            assert pin.buffer_id != 0xffffffff and len(pin.data) <= 64 and pin.total_len >= len(pin.data)
            assert pin.match["in_port"] in (1, 2) and pin.reason == 0
            out_port = 3 - pin.match["in_port"]
            if seen < 3:
                # A hub: send the buffered packet on with a packet-out naming the buffer.
                po = ofpeer.osken_bytes(lambda p, o, dp: p.OFPPacketOut(dp, buffer_id=pin.buffer_id, in_port=pin.match["in_port"],
                                                                       actions=[p.OFPActionOutput(out_port)], data=None))
            else:
                # Then a flow for this direction, applied to the buffered packet too.
                po = ofpeer.osken_bytes(lambda p, o, dp: p.OFPFlowMod(
                    dp, priority=10, buffer_id=pin.buffer_id, match=p.OFPMatch(in_port=pin.match["in_port"]),
                    instructions=[p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, [p.OFPActionOutput(out_port)])]))
            c.send(po)
            seen += 1
        out, _ = pinger.communicate(timeout=10)
        assert " 0% packet loss" in out or "6 received" in out, out
        # A stale buffer id is refused.
        stale = ofpeer.osken_bytes(lambda p, o, dp: p.OFPPacketOut(dp, buffer_id=pin.buffer_id, in_port=1,
                                                                  actions=[p.OFPActionOutput(2)], data=None))
        errs = [m.error[:2] for m in c.request(stale)]
        assert errs == [(1, 8)], "OFPBRC_BUFFER_UNKNOWN"


def test_active_tls_controller(two_hosts, tmp_path):
    from test_channel import make_pki
    keys = make_pki(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(keys / "ctl.pem", keys / "ctl.key")
    ctx.load_verify_locations(keys / "ca.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctl = Controller()
    tls = ["--private-key", str(keys / "switch.key"), "--certificate", str(keys / "switch.pem"), "--ca-cert", str(keys / "ca.pem")]
    with Edgeflow(two_hosts.switch_ports, controllers=[f"tls:127.0.0.1:{ctl.port}"], extra=tls):
        ctl.listener.settimeout(15)
        raw, _ = ctl.listener.accept()
        conn = Conn(ctx.wrap_socket(raw, server_side=True))
        conn.send(ofpeer.hello13())
        assert conn.recv().type == ofpeer.HELLO
        reply = conn.request(ofpeer.header(ofpeer.FEATURES_REQUEST, 8, 5))
        assert reply[0].type == ofpeer.FEATURES_REPLY
        n_tables = reply[0].body[12]
        assert n_tables == 64


def test_rings_are_sized_for_each_ports_link(two_hosts):
    """Without `--ring-frames` each port's AF_PACKET rings fit its link: a gigabit port (a
    gateway's; here a tap told it is one) 256 receive slots, a faster one (veth: 10 Gbit/s) 1024.
    The flag sizes every port alike."""
    tap = "ef-tring0"
    sh("ip", "tuntap", "add", "dev", tap, "mode", "tap")
    try:
        sh("ip", "link", "set", tap, "up")
        sh("ethtool", "-s", tap, "speed", "1000", "duplex", "full")
        ports = [*two_hosts.switch_ports, tap]
        with Edgeflow(ports) as sw:
            rings = {p["name"]: p["ring_frames"] for p in sw.stats()["ports"]}
            assert rings == {**{p: 1024 for p in two_hosts.switch_ports}, tap: 256}, rings
            h1, h2 = two_hosts.hosts
            assert h1.ping(h2.addr, count=2)[0] == 2
        with Edgeflow(ports, extra=["--ring-frames", "300"]) as sw:
            assert {p["ring_frames"] for p in sw.stats()["ports"]} == {300}
    finally:
        sh("ip", "link", "del", tap, check=False)
