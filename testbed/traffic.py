"""Traffic: iperf3 between hosts, parsed from its JSON output."""

import json

from .util import free_port, wait_for


def listening(server, port):
    """Waits until an iperf3 server started in `server` accepts on `port`: a fixed pause was too
    short for an emulated guest (make test-kernels), whose client then found nothing there."""
    wait_for(lambda: server.run("ss", "-Hltn", f"sport = :{port}", check=False).stdout.strip(),
             what=f"iperf3 listening on port {port}")


def iperf3_tcp(client, server, seconds=3, parallel=1, reverse=False, pin=False, ipv6=False):
    """Runs iperf3 TCP from `client` to `server` (hosts); returns received bits per second. With
    `pin`, client and server each get a core of their own (iperf3 -A), which steadies the figure
    on a small machine. With `ipv6`, to the server's IPv6 address."""
    port = free_port()
    affinity = ["-A", "0,1"] if pin else []
    srv = server.popen("iperf3", "-s", "-1", "-p", str(port), *(["-A", "1"] if pin else []))
    try:
        listening(server, port)
        args = ["iperf3", "-c", server.addr6 if ipv6 else server.addr, "-p", str(port), "-t", str(seconds), "-J", "-P", str(parallel), *affinity]
        if reverse:
            args.append("-R")
        r = client.run(*args, check=False, timeout=seconds + 30)
        data = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        if "error" in data or "end" not in data:
            raise RuntimeError(f"iperf3 failed: {data.get('error', r.stderr)}")
        return data["end"]["sum_received"]["bits_per_second"]
    finally:
        try:
            srv.communicate(timeout=5)
        except Exception:
            srv.kill()
            srv.communicate()


def iperf3_udp(client, server, rate_bps, length=1400, seconds=3):
    """iperf3 UDP at a fixed offered rate. Returns sent/received packets, received payload bit
    rate, loss and jitter as the receiver measured them."""
    port = free_port()
    srv = server.popen("iperf3", "-s", "-1", "-p", str(port))
    try:
        listening(server, port)
        r = client.run("iperf3", "-c", server.addr, "-p", str(port), "-u", "-b", str(int(rate_bps)), "-l", str(length),
                       "-t", str(seconds), "-J", check=False, timeout=seconds + 30)
        data = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        if "error" in data or "end" not in data:
            raise RuntimeError(f"iperf3 failed: {data.get('error', r.stderr)}")
        s = data["end"]["sum"]
        sent = s["packets"]
        lost = s["lost_packets"]
        duration = s["seconds"]
        return {
            "sent_packets": sent,
            "received_packets": sent - lost,
            "received_pps": (sent - lost) / duration,
            "received_bps": (sent - lost) * length * 8 / duration,
            "lost_percent": s["lost_percent"],
            "jitter_ms": s["jitter_ms"],
        }
    finally:
        try:
            srv.communicate(timeout=5)
        except Exception:
            srv.kill()
            srv.communicate()


def blast(host, frame, per_burst, bursts, gap=0.1, iface="eth0"):
    """Sends `frame` from `host` raw (AF_PACKET), `per_burst` copies every `gap` seconds."""
    script = (
        "import socket, time\n"
        f"s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('{iface}', 0))\n"
        f"f = bytes.fromhex('{frame.hex()}')\n"
        f"for _ in range({bursts}):\n"
        f"    t = time.monotonic()\n"
        f"    for _ in range({per_burst}): s.send(f)\n"
        f"    time.sleep(max(0, {gap} - (time.monotonic() - t)))\n"
    )
    host.run("python3", "-c", script, timeout=bursts * gap + 30)


def udp_frame(src_mac, dst_mac, src_ip, dst_ip, sport=9, dport=9, payload=18):
    """An Ethernet/IPv4/UDP frame (UDP checksum 0, IPv4 checksum computed)."""
    import ipaddress
    import struct
    udp = struct.pack("!HHHH", sport, dport, 8 + payload, 0) + bytes(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     ipaddress.IPv4Address(src_ip).packed, ipaddress.IPv4Address(dst_ip).packed)
    total = sum(struct.unpack("!10H", ip))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    ip = ip[:10] + struct.pack("!H", ~total & 0xffff) + ip[12:]
    mac = lambda m: bytes.fromhex(m.replace(":", ""))
    return mac(dst_mac) + mac(src_mac) + b"\x08\x00" + ip + udp
