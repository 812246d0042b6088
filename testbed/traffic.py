"""Traffic: iperf3 between hosts, parsed from its JSON output."""

import json
import time

from .util import free_port


def iperf3_tcp(client, server, seconds=3, parallel=1, reverse=False):
    """Runs iperf3 TCP from `client` to `server` (hosts); returns received bits per second."""
    port = free_port()
    srv = server.popen("iperf3", "-s", "-1", "-p", str(port))
    try:
        time.sleep(0.3)
        args = ["iperf3", "-c", server.addr, "-p", str(port), "-t", str(seconds), "-J", "-P", str(parallel)]
        if reverse:
            args.append("-R")
        r = client.run(*args, check=False, timeout=seconds + 30)
        data = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        if "error" in data or "end" not in data:
            raise RuntimeError(f"iperf3 failed: {data.get('error', r.stderr)}")
        return data["end"]["sum_received"]["bits_per_second"]
    finally:
        try:
            srv.wait(timeout=5)
        except Exception:
            srv.kill()


def iperf3_udp(client, server, rate_bps, length=1400, seconds=3):
    """iperf3 UDP at a fixed offered rate. Returns sent/received packets, received payload bit
    rate, loss and jitter as the receiver measured them."""
    port = free_port()
    srv = server.popen("iperf3", "-s", "-1", "-p", str(port))
    try:
        time.sleep(0.3)
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
            srv.wait(timeout=5)
        except Exception:
            srv.kill()
