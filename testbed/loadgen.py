"""Drives edgeflow-loadgen between two hosts and collects both ends' reports."""

import json
import os
import time

from .netns import sh
from .util import ROOT

LOADGEN_BIN = os.environ.get("EDGEFLOW_LOADGEN", str(ROOT / "target" / "release" / "edgeflow-loadgen"))


def run(sender, receiver, size=64, rate=0, gap_ns=None, duration=1.0, send_engine="auto", recv_engine="xdp",
        extra_send=(), flow=1, dst_mac=None):
    """Sends from `sender` to `receiver` (Hosts) and returns (sender report, receiver report).
    `dst_mac`: the frames' destination instead of the receiver's MAC."""
    recv = receiver.popen(LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", recv_engine, "--flow", str(flow),
                          "--duration", str(duration + 10), "--idle", "1.0")
    try:
        time.sleep(0.4)  # the receiver attaches before the first frame
        args = [LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst_mac or receiver.mac, "--src-ip", sender.addr,
                "--dst-ip", receiver.addr, "--size", str(size), "--duration", str(duration), "--engine", send_engine,
                "--flow", str(flow)]
        args += ["--gap-ns", str(gap_ns)] if gap_ns else ["--rate", str(rate)]
        s = sender.run(*args, *extra_send, timeout=duration + 60)
        sent = json.loads(s.stdout)
        out, err = recv.communicate(timeout=duration + 30)
        if recv.returncode != 0:
            raise RuntimeError(f"loadgen recv: {err.strip()}")
        return sent, json.loads(out)
    finally:
        if recv.poll() is None:
            recv.kill()


def prepare_xdp_sender(sender):
    """Frames sent by the XDP engine enter the peer interface only if it runs NAPI (GRO on)."""
    sh("ethtool", "-K", sender.switch_side, "gro", "on", check=False)
    return {"gro_on_switch_port": "on"}


def bottleneck(sent, received):
    """Who limited the rate: the generator (everything sent arrived) or the path (switch/receiver)."""
    if sent["sent"] == 0:
        return "none"
    lost = 1 - received["received"] / sent["sent"]
    return "generator" if lost < 0.001 else "switch"
