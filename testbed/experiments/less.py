"""LESS label switching (seed 003: an FPGA LESS router, Figs. 5 and 6), on edgeflow's three datapaths.

- 5(a) processing latency T_l − T_d: a frame's latency through one switch minus its latency over a
  direct veth, by frame size and label-stack type (the label deleted, shifted by one port, by two).
- 5(b) throughput by frame size through one switch, beside the direct veth.
- 6(a) rerouting, per case, on the six-switch fabric of testbed/less.py: the latency of frames whose
  output port is down (taking the detour) against the same stream before the failure, and the
  outage, the longest gap in arrivals around the carrier loss.
- 6(b) throughput during rerouting: what arrives while frames take the detour, as a fraction of
  what was offered.
The seed's own figures are beside ours in the notes (read off its plots: ~650-685 µs per reroute
through the soft processor; 1 Gbit/s line rate).
"""

import json
import time

from .. import less, netns
from ..loadgen import LOADGEN_BIN
from ..netns import Host, sh
from ..topology import single
from ..tsn import read_log
from ..util import run_dir
from .common import Table, plot, progress

DATAPATHS = ["user", "tc", "xdp"]
#: Stack types at the switch under test: its port 2, then ports the sink ignores.
STACKS = {"delete": "2", "shift-1": "2.9", "shift-2": "2.9.9"}
SEED_REROUTE_US = {"a": 670, "b": 685, "c": 650}


def direct_pair(tag):
    """Two hosts joined by one veth (the seed's "direct connection"): (sender, sink)."""
    hosts = []
    names = [f"{netns.PREFIX}-{tag}{i}" for i in (1, 2)]
    for ns in names:
        sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", "eth0", "netns", names[0], "type", "veth", "peer", "name", "eth0", "netns", names[1])
    for i, ns in enumerate(names):
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "addr", "add", f"10.9.0.{i + 1}/24", "dev", "eth0")
        mac = json.loads(sh("ip", "-n", ns, "-j", "link", "show", "eth0").stdout)[0]["address"]
        hosts.append(Host(ns, f"10.9.0.{i + 1}/24", "", mac))
    return hosts


def one_stream(src, dst, size, rate, seconds, route, log=None, during=None, at=None):
    """Frames src → dst (LESS labels for `route`, or none); `during()` runs `at` seconds in.
    Returns (sender report, receiver report)."""
    args = [LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket", "--flow", "3", "--duration",
            str(seconds + 15), "--idle", "1.0"]
    if log:
        args += ["--log", str(log)]
    recv = dst.popen(*args)
    time.sleep(0.4)
    send = [LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst.mac, "--src-ip", src.addr, "--dst-ip",
            dst.addr, "--size", str(size), "--rate", str(rate), "--duration", str(seconds), "--engine", "socket",
            "--flow", "3"]
    if route:
        send += ["--less", route]
    p = src.popen(*send)
    if during:
        time.sleep(at)
        during()
    out, err = p.communicate(timeout=seconds + 30)
    if p.returncode != 0:
        raise RuntimeError(f"loadgen send: {err.strip()}")
    got, err = recv.communicate(timeout=30)
    if recv.returncode != 0:
        raise RuntimeError(f"loadgen recv: {err.strip()}")
    return json.loads(out), json.loads(got)


def processing(sizes, seconds, lat, tput):
    """5(a) and 5(b): one switch between two hosts, and the direct veth."""
    direct = {}
    try:
        src, dst = direct_pair("lxd")
        for size in sizes:
            for name, route in STACKS.items():
                _, got = one_stream(src, dst, size, 2000, seconds, route)
                direct[(name, size)] = got["latency_us"]["p50"]
            sent, got = one_stream(src, dst, size, 0, seconds, "2")
            direct[("tput", size)] = (got["received"] / seconds, sent.get("generator_limited"))
    finally:
        netns.cleanup("ef-lxd")
    for dp in DATAPATHS:
        netns.cleanup()
        fabric = single("lx", 2)
        with fabric, less.less_switches(fabric, root=None, datapath=dp, tag="less-bench") as sws:
            src, dst = fabric.hosts
            for size in sizes:
                progress(f"less: processing through one switch, {dp}, {size} B")
                for name, route in STACKS.items():
                    _, got = one_stream(src, dst, size, 2000, seconds, route)
                    p50 = got["latency_us"]["p50"]
                    lat.add(datapath=dp, stack=name, size=size, through_p50_us=p50, through_p99_us=got["latency_us"]["p99"],
                            direct_p50_us=direct[(name, size)], processing_us=round(p50 - direct[(name, size)], 2),
                            lost=got["lost"])
                sent, got = one_stream(src, dst, size, 0, seconds, "2")
                fps = got["received"] / seconds
                dfps, dlimited = direct[("tput", size)]
                tput.add(datapath=dp, size=size, kfps=round(fps / 1e3, 1), mbit_s=round(fps * size * 8 / 1e6, 1),
                         direct_kfps=round(dfps / 1e3, 1), ratio=round(fps / dfps, 3) if dfps else 0.0,
                         generator_limited=sent.get("generator_limited"))


def run(out, quick=False, switches=()):
    sizes = [128, 1024] if quick else [64, 128, 256, 512, 1024, 1500]
    seconds = 0.5 if quick else 1.5
    lat = Table("less", "LESS processing latency through one switch (T_l - T_d, µs), by label-stack type and "
                        "frame size", ["datapath", "stack", "size", "through_p50_us", "through_p99_us",
                                        "direct_p50_us", "processing_us", "lost"],
                note="2000 frames/s. `direct`: the same frames over one veth between the two hosts (the seed's "
                     "direct connection). delete: the switch removes the last label and delivers IP; shift-1/2: "
                     "the label's ports shift by one, the TTL drops. Seed (FPGA, Fig. 5a): a few µs.")
    tput = Table("less-throughput", "LESS throughput through one switch by frame size (sender at full speed)",
                 ["datapath", "size", "kfps", "mbit_s", "direct_kfps", "ratio", "generator_limited"],
                 note="The sender is loadgen's socket engine (the XDP sender cannot write labels yet): when it is "
                      "the limit, `ratio` against the direct veth says how much of it the switch keeps. Seed "
                      "(Fig. 5b): 1 Gbit/s line rate.")
    rr = Table("less-reroute", "LESS rerouting per case on six switches (one link taken down mid-stream)",
               ["datapath", "case", "size", "sent", "lost", "outage_us", "before_p50_us", "detour_p50_us",
                "detour_p99_us", "same_path_p50_us", "reroute_us", "during_fraction", "seed_us"],
               note="10 000 frames/s. detour: frames sent after the loss, on their way around (a 60 s hold keeps "
                    "them there). same_path: frames whose sender wrote the detour's labels itself (the same hops, "
                    "no reroute); reroute_us = detour - same_path, the cost of rerouting, as the seed measured it "
                    "(seed_us: its FPGA's, through a soft processor, Fig. 6a). outage: the longest gap between "
                    "arrivals around the loss, less the 100 µs spacing: it includes the kernel taking the link "
                    "down (ip link set), not only the switch. during_fraction: arrivals after the loss / (those "
                    "+ lost) (Fig. 6b).")
    processing(sizes[:2] if quick else sizes, seconds, lat, tput)
    reroute_runs([256] if quick else [256, 1024], 1.0 if quick else 2.0, rr)
    for t in (lat, tput, rr):
        t.write(out)

    def draw(plt):
        ax1 = plt.subplot(1, 2, 1)
        for dp in DATAPATHS:
            for stack in STACKS:
                rows = [r for r in lat.rows if r["datapath"] == dp and r["stack"] == stack]
                ax1.plot([r["size"] for r in rows], [r["processing_us"] for r in rows], marker="o",
                         label=f"{dp} {stack}")
        ax1.set_xlabel("frame size (B)")
        ax1.set_ylabel("T_l - T_d (µs)")
        ax1.legend(fontsize=6)
        ax2 = plt.subplot(1, 2, 2)
        for dp in DATAPATHS:
            rows = [r for r in rr.rows if r["datapath"] == dp]
            ax2.bar([f"{r['case']}\n{dp}\n{r['size']}" for r in rows], [max(0.1, r["reroute_us"]) for r in rows],
                    label=dp)
        ax2.axhline(min(SEED_REROUTE_US.values()), color="gray", linestyle="--", label="seed (FPGA)")
        ax2.set_ylabel("reroute cost per frame (µs, detour - same path)")
        ax2.set_yscale("log")
        ax2.tick_params(axis="x", labelsize=5)
        ax2.legend(fontsize=7)

    plot(out / "less.png", draw)
    return [lat, tput, rr]


def reroute_runs(sizes, seconds, table):
    """6(a) and 6(b): a stream across the six-switch fabric while one link goes down, per case."""
    rate = 10_000
    cases = [("a", "he", "e", "d"), ("b", "he", "d", "b"), ("c", "hc", "r", "b")]
    # Each case's detour, hop by hop: a stream sent along it with its labels written by the sender
    # takes the same path with no reroute (the reference the reroute's cost is measured against).
    detours = {"a": ["e", "c", "a", "r", "b"], "b": ["e", "d", "e", "c", "a", "r", "b"], "c": ["c", "a", "r", "a", "b"]}
    for dp in DATAPATHS:
        netns.cleanup()
        fabric = less.six("lb")
        # A long hold keeps frames on their detours for the whole stream (addresses do not change).
        with fabric, less.less_switches(fabric, datapath=dp, tag="less-bench-rr", hold_ms=60_000) as sws:
            less.wait_converged(fabric, sws)
            hb, hc, he = fabric.hosts
            hosts = {"hc": hc, "he": he}
            for case, src_name, a, b in cases:
                link = less.iface(fabric, a, b)
                for size in sizes:
                    progress(f"less: reroute case {case}, {dp}, {size} B")
                    log = run_dir("less") / f"rr-{dp}-{case}-{size}.log"
                    marks = {}

                    def fail():
                        marks["down"] = time.clock_gettime_ns(time.CLOCK_REALTIME)
                        sh("ip", "link", "set", link, "down")

                    sent, got = one_stream(hosts[src_name], hb, size, rate, seconds, None, log=log, during=fail,
                                           at=seconds / 3)
                    frames = read_log(log)
                    down = marks["down"]
                    before = sorted(rx - tx for _, tx, rx in frames if rx < down)
                    after = sorted(rx - tx for _, tx, rx in frames if tx > down + 1_000_000)
                    rx_times = sorted(rx for _, _, rx in frames)
                    gaps = [b_ - a_ for a_, b_ in zip(rx_times, rx_times[1:]) if a_ > down - 5_000_000]
                    outage = max(gaps) - 1e9 / rate if gaps else 0.0
                    q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))] / 1e3 if xs else 0.0
                    after_loss = sum(1 for _, tx, _ in frames if tx > down)
                    path = detours[case]
                    ports = [less.port_of(fabric, x, y) for x, y in zip(path, path[1:])] + [less.port_of(fabric, "b", hb)]
                    _, ref = one_stream(hosts[src_name], hb, size, rate, seconds / 2, ".".join(map(str, ports)))
                    detour_p50 = q(after, 0.5)
                    table.add(datapath=dp, case=case, size=size, sent=sent["sent"], lost=got["lost"],
                              outage_us=round(outage / 1e3, 1), before_p50_us=q(before, 0.5),
                              detour_p50_us=detour_p50, detour_p99_us=q(after, 0.99),
                              same_path_p50_us=ref["latency_us"]["p50"],
                              reroute_us=round(detour_p50 - ref["latency_us"]["p50"], 2),
                              during_fraction=round(after_loss / max(1, after_loss + got["lost"]), 3),
                              seed_us=SEED_REROUTE_US[case])
                    sh("ip", "link", "set", link, "up")
                    less.wait_converged(fabric, sws)
