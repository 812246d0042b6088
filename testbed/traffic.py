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
