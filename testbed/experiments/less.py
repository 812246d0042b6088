"""LESS label switching (seed 003: an FPGA LESS router, Figs. 5 and 6), on edgeflow's three datapaths.

- 5(a) processing latency T_l − T_d: a frame's latency through one switch minus its latency over a
  direct veth, by frame size and label-stack type (the label deleted, shifted by one port, by two).
- 5(b) throughput by frame size through one switch, beside the direct veth.
- 6(a) rerouting, per case, on the six-switch fabric of testbed/less.py: the latency of frames whose
  output port is down (taking the detour) against the same stream before the failure, and the
  outage, the longest gap in arrivals around the carrier loss.
- 6(b) throughput during rerouting: what arrives while frames take the detour, as a fraction of
  what was offered.
- Recovery, per case and datapath over many failures: from the carrier loss to the first frame
  that came round it (the seed's router recovers in < 1 ms), its p50 and p99, frames lost, and
  frames that died looping (none may).
The seed's own figures are beside ours in the notes (read off its plots: ~650-685 µs per reroute
through the soft processor; 1 Gbit/s line rate).
"""

import time

from .. import less, loadgen, netns
from ..netns import sh
from ..topology import single
from ..tsn import read_log
from ..util import run_dir
from .common import FLOORS, Table, bare_redirect, bottleneck_of, direct_pair, paired_latency, plot, progress

DATAPATHS = ["user", "tc", "xdp"]
#: Stack types at the switch under test: its port 2, then ports the sink ignores.
STACKS = {"delete": "2", "shift-1": "2.9", "shift-2": "2.9.9"}
SEED_REROUTE_US = {"a": 670, "b": 685, "c": 650}
#: Per case: the stream's source host, the link taken down (its two switches), and the LESS
#: detour hop by hop (a stream sent along it with its labels written by the sender takes the same
#: path with no reroute: the reference the reroute's cost is measured against).
CASES = {"a": ("he", "e", "d", ["e", "c", "a", "r", "b"]),
         "b": ("he", "d", "b", ["e", "d", "e", "c", "a", "r", "b"]),
         "c": ("hc", "r", "b", ["c", "a", "r", "a", "b"])}
#: The routes LESS takes before the failure: the OpenFlow comparison installs the same ones.
LESS_ROUTES = less.ROUTES
REROUTE_RATE = 10_000


def processing(sizes, seconds, lat, tput, rounds=1, senders=("xdp", "socket")):
    """5(a) and 5(b): one switch between two hosts, against the direct veth (paired_latency), with
    each of loadgen's `senders`: `xdp` hands the switch port each frame as a NIC driver hands one
    to XDP (in a page with headroom, nothing queued behind it); `socket` as a host's packet socket
    does (an skb with 2 bytes of headroom, which a veth copies into a page before its XDP program
    may see it)."""
    netns.cleanup()
    direct_src, direct_dst = direct_pair("ldir")

    def gro(on):
        # The sink's receive as it is through the switch: NAPI (GRO on) where XDP frames arrive.
        sh("ip", "netns", "exec", direct_dst.name, "ethtool", "-K", "eth0", "gro", "on" if on else "off")

    def paired(dp, src, dst, size, route, sender):
        def direct():
            gro(sender == "xdp" or dp in ("xdp", "xdp-redirect"))
            return less.stream(direct_src, direct_dst, size, 2000, seconds / rounds, route, sender=sender)[1]
        return paired_latency(direct, lambda: less.stream(src, dst, size, 2000, seconds / rounds, route,
                                                          sender=sender)[1], rounds)
    try:
        direct = {}
        for size in sizes:
            # No labels: the XDP receiver reads its probe where IP puts it (a switch pops them).
            sent, got = less.stream(direct_src, direct_dst, size, 0, seconds, None, engine="xdp")
            direct[size] = got["received"] / seconds
        for dp in DATAPATHS:
            fabric = single("lx", 2)
            with fabric, less.less_switches(fabric, root=None, datapath=dp, tag="less-bench") as sws:
                src, dst = fabric.hosts
                loadgen.prepare_xdp_sender(src)
                for size in sizes:
                    progress(f"less: processing through one switch, {dp}, {size} B")
                    for sender in senders:
                        for name, route in STACKS.items():
                            lat.add(datapath=dp, sender=sender, stack=name, size=size,
                                    **paired(dp, src, dst, size, route, sender))
                    sent, got = less.stream(src, dst, size, 0, seconds, "2", engine="xdp")
                    fps = got["received"] / seconds
                    dfps = direct[size]
                    loss = 100.0 * (1 - got["received"] / max(sent["sent"], 1))
                    tput.add(datapath=dp, size=size, kfps=round(fps / 1e3, 1), mbit_s=round(fps * size * 8 / 1e6, 1),
                             offered_kfps=round(sent["sent"] / seconds / 1e3, 1), loss_pct=round(loss, 3),
                             bottleneck=bottleneck_of(loss), direct_kfps=round(dfps / 1e3, 1),
                             ratio=round(fps / dfps, 3) if dfps else 0.0)
        # The floors under any switch here: the same place taken by the kernel's own redirect,
        # port 1 to port 2, no program, the frames left as they are.
        fabric = single("lk", 2)
        with fabric:
            p1, p2 = fabric.ports["s"]
            src, dst = fabric.hosts
            loadgen.prepare_xdp_sender(src)
            for floor in FLOORS:
                dst.set_offload(gro="on" if floor == "xdp-redirect" else "off")
                with bare_redirect(floor, p1, p2):
                    for size in sizes:
                        progress(f"less: processing through a bare kernel redirect ({floor}), {size} B")
                        for sender in senders:
                            lat.add(datapath=floor, sender=sender, stack="shift-1", size=size,
                                    **paired(floor, src, dst, size, STACKS["shift-1"], sender))
    finally:
        for h in (direct_src, direct_dst):
            sh("ip", "netns", "del", h.name, check=False)


def run(out, quick=False, switches=()):
    sizes = [128, 1024] if quick else [64, 128, 256, 512, 1024, 1500]
    seconds = 0.5 if quick else 1.5
    lat = Table("less", "LESS processing latency through one switch (T_l - T_d, µs), by label-stack type and "
                        "frame size", ["datapath", "sender", "stack", "size", "rounds", "through_p50_us",
                                        "through_p99_us", "direct_p50_us", "processing_us", "lost"],
                note="2000 frames/s. `direct`: the same frames over one veth between the two hosts (the seed's "
                     "direct connection), run just before each run through the switch; with several `rounds`, "
                     "medians, and `processing_us` the median of the rounds' differences. sender `xdp`: loadgen's "
                     "XDP engine, one frame per run, which enters the switch port as a NIC driver hands a frame to "
                     "XDP; `socket`: its packet socket, whose frames a veth copies before XDP may see them. "
                     "delete: the switch removes "
                     "the last label and delivers IP; shift-1/2: the label's ports shift by one, the TTL drops. "
                     "tc-mirred / xdp-redirect: no switch, the kernel's own redirect in its place (a tc mirred "
                     "action; loadgen's one-line XDP program), frames unchanged: the floor of the second veth hop "
                     "on this VM under TC and XDP. Seed (FPGA, Fig. 5a): a few µs.")
    tput = Table("less-throughput", "LESS throughput through one switch by frame size (sender at full speed)",
                 ["datapath", "size", "kfps", "mbit_s", "offered_kfps", "loss_pct", "bottleneck", "direct_kfps", "ratio"],
                 note="loadgen's XDP sender at full speed (frames labelled for the switch's port 2) and its XDP "
                      "receiver, which counts and drops. Sender, switch and receiver share two cores, so kfps is the "
                      "whole chain's rate; `ratio` is against the same frames over the direct veth. `bottleneck`: "
                      "`switch` where it dropped part of the offer (kfps is its own rate), else `generator` (it "
                      "took all the sender offered; a kernel switch paces the sender's XDP run). Seed (Fig. 5b): "
                      "1 Gbit/s line rate.")
    rr = Table("less-reroute", "Rerouting per case on six switches (one link taken down mid-stream): LESS, "
                               "and OpenFlow on the same fabric",
               ["switch", "datapath", "case", "size", "sent", "lost", "outage_us", "first_rerouted_us", "sender_stall_us",
                "before_p50_us", "detour_p50_us", "detour_p99_us", "same_path_p50_us", "reroute_us",
                "during_fraction", "seed_us"],
               note=f"{REROUTE_RATE} frames/s. detour: frames sent after the loss, on their way around (a 60 s "
                    "hold keeps LESS's there). same_path: frames whose sender wrote the detour's labels itself "
                    "(the same hops, no reroute); reroute_us = detour - same_path, the cost of rerouting a frame, "
                    "as the seed measured it (seed_us: its FPGA's, through a soft processor, Fig. 6a). "
                    "first_rerouted_us: from the carrier loss (the netlink event reaching the testbed) to the "
                    "arrival of the first frame sent after it; sender_stall_us: the longest pause in the sender's "
                    "schedule around the loss (the machine stalls while the kernel takes a link down), which "
                    "delays that first frame as much (the sender runs at SCHED_FIFO to keep it short; the switches "
                    "at their default, SCHED_OTHER). outage: the longest gap between arrivals around "
                    "the loss, less the frame spacing: it includes the kernel taking the link down (ip link "
                    "set), not only the switch. during_fraction: arrivals after the loss / (those + lost) "
                    "(Fig. 6b). openflow-failover: the LESS routes as OpenFlow paths, each hop a fast-failover "
                    "group whose second bucket is the shortest way round, with crankback where a hop has none "
                    "(testbed/apps/fabric_routes.py); openflow-reactive: the same paths as plain outputs, "
                    "rewritten by os-ken on port-status.")
    processing(sizes[:2] if quick else sizes, seconds, lat, tput, rounds=1 if quick else 3,
               senders=("xdp",) if quick else ("xdp", "socket"))
    rr_sizes, rr_seconds = ([256], 1.0) if quick else ([256, 1024], 2.0)
    # Quick runs (CI) reroute on userspace and one kernel datapath: tests/test_less.py already
    # takes each case through all three.
    reroute_runs(rr_sizes, rr_seconds, rr, ["user", "xdp"] if quick else DATAPATHS)
    openflow_runs(rr_sizes, rr_seconds, rr, ["user"] if quick else DATAPATHS)
    rec = recovery_table()
    recovery_runs(rec, 3 if quick else RECOVERY_REPEATS, ["xdp"] if quick else [*DATAPATHS, "user+fifo"])
    for t in (lat, tput, rr, rec):
        t.write(out)

    def draw(plt):
        ax1 = plt.subplot(1, 3, 1)
        for sender, style in (("xdp", "-"), ("socket", ":")):
            for dp in DATAPATHS:
                for stack in STACKS:
                    rows = [r for r in lat.rows if (r["datapath"], r["sender"], r["stack"]) == (dp, sender, stack)]
                    if rows:
                        ax1.plot([r["size"] for r in rows], [r["processing_us"] for r in rows], marker="o",
                                 linestyle=style, label=f"{dp} {stack} ({sender} sender)")
            for floor, colour in zip(FLOORS, ("gray", "black")):
                rows = [r for r in lat.rows if (r["datapath"], r["sender"]) == (floor, sender)]
                if rows:
                    ax1.plot([r["size"] for r in rows], [r["processing_us"] for r in rows], color=colour,
                             linestyle="--" if sender == "xdp" else ":", label=f"{floor}, no switch ({sender})")
        ax1.set_xlabel("frame size (B)")
        ax1.set_ylabel("T_l - T_d (µs)")
        ax1.legend(fontsize=6)
        ax2 = plt.subplot(1, 3, 2)
        for dp in DATAPATHS:
            rows = [r for r in rr.rows if r["datapath"] == dp and r["switch"] == "less"]
            ax2.bar([f"{r['case']}\n{dp}\n{r['size']}" for r in rows], [max(0.1, r["reroute_us"]) for r in rows],
                    label=dp)
        ax2.axhline(min(SEED_REROUTE_US.values()), color="gray", linestyle="--", label="seed (FPGA)")
        ax2.set_ylabel("reroute cost per frame (µs, detour - same path)")
        ax2.set_yscale("log")
        ax2.tick_params(axis="x", labelsize=5)
        ax2.legend(fontsize=7)
        # The comparison: frames lost to the same failure, LESS against OpenFlow's two ways.
        ax3 = plt.subplot(1, 3, 3)
        kinds = sorted({(r["switch"], r["datapath"]) for r in rr.rows})
        width = 0.8 / max(1, len(kinds))
        for i, (sw, dp) in enumerate(kinds):
            lost = [sum(r["lost"] for r in rr.rows if (r["switch"], r["datapath"], r["case"]) == (sw, dp, c))
                    for c in CASES]
            ax3.bar([j + i * width for j in range(len(CASES))], lost, width, label=f"{sw} {dp}")
        ax3.set_xticks([j + 0.4 - width / 2 for j in range(len(CASES))], [f"case {c}" for c in CASES])
        ax3.set_ylabel(f"frames lost at {REROUTE_RATE // 1000} kframes/s")
        ax3.legend(fontsize=5)

    plot(out / "less.png", draw)
    return [lat, tput, rr]


def failure(fabric, src, dst, link, size, seconds, log, rate=REROUTE_RATE):
    """A stream src → dst at `rate` while `link` (an interface) goes down a third of the way in;
    what it measured. The link is brought back up after."""
    marks = {}
    peer = next(b if a == link else a for a, b in fabric.links if link in (a, b))
    watch = netns.CarrierWatch([link, peer])

    def fail():
        marks["down"] = time.clock_gettime_ns(time.CLOCK_REALTIME)
        sh("ip", "link", "set", link, "down")

    try:
        # The sender runs at SCHED_FIFO: taking a link down stalls the machine for milliseconds,
        # and a SCHED_OTHER sender stops sending for as long, which hid the switches' reaction.
        sent, got = less.stream(src, dst, size, rate, seconds, None, log=log, during=fail, at=seconds / 3,
                               fifo=True)
    finally:
        lost_at = watch.close()
        sh("ip", "link", "set", link, "up")
    frames = read_log(log)
    down = marks["down"]
    lost_at = lost_at or down
    before = sorted(rx - tx for _, tx, rx in frames if rx < down)
    after = sorted(rx - tx for _, tx, rx in frames if tx > down + 1_000_000)
    rx_times = sorted(rx for _, _, rx in frames)
    gaps = [b_ - a_ for a_, b_ in zip(rx_times, rx_times[1:]) if a_ > down - 5_000_000]
    outage = max(gaps) - 1e9 / rate if gaps else 0.0
    # The first frame sent after the carrier loss that arrived came round the failure (the old
    # path had no carrier): how long after the loss it arrived.
    first = min((rx for _, tx, rx in frames if tx >= lost_at), default=None)
    # The machine stalls while the kernel takes a link down (RCU waits, IPIs on two cores), and
    # the sender with it: the longest pause in its schedule around the loss says how much of the
    # above was the sender's. Frames lost in a pause count as sent on time.
    spacing = 1e9 / rate
    near = sorted((seq, tx) for seq, tx, _ in frames if lost_at - 5_000_000 < tx < lost_at + 20_000_000)
    stall = max((tb - ta - (sb - sa) * spacing for (sa, ta), (sb, tb) in zip(near, near[1:])), default=0.0)
    q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))] / 1e3 if xs else 0.0
    after_loss = sum(1 for _, tx, _ in frames if tx > down)
    return dict(sent=sent["sent"], lost=got["lost"], outage_us=round(outage / 1e3, 1),
                first_rerouted_us=round((first - lost_at) / 1e3, 1) if first else None,
                sender_stall_us=round(max(0.0, stall) / 1e3, 1),
                before_p50_us=q(before, 0.5), detour_p50_us=q(after, 0.5), detour_p99_us=q(after, 0.99),
                during_fraction=round(after_loss / max(1, after_loss + got["lost"]), 3))


RECOVERY_REPEATS = 30
#: Frames 50 µs apart: the first frame after a failure waits up to that long to be sent, which
#: every figure of the recovery table includes.
RECOVERY_RATE = 20_000


def recovery_table():
    return Table("less-recovery", "LESS recovery per case and datapath: carrier loss to the first frame round it",
                 ["datapath", "timing", "case", "runs", "first_p50_us", "first_p99_us", "first_max_us",
                  "detour_p50_us", "stall_max_us", "lost_p50", "lost_max", "looped", "target_p99_us"],
                 note=f"{RECOVERY_RATE} frames/s of 256 bytes across the six-switch fabric; one link taken down a "
                      "third of the way into a 0.6 s stream, then brought back, `runs` times per row. first: from "
                      "the carrier loss (the netlink event, stamped by `ip monitor` at SCHED_FIFO) to the arrival of "
                      "the first frame sent after it (frames leave every 50 µs: up to 50 µs of each figure is "
                      "waiting for that frame); p50 and p99 interpolated between runs (numpy's default), and the "
                      "largest. detour: the median "
                      "latency of the frames sent 1 ms after the loss and later, on the same way round: what "
                      "crossing the detour's switches costs at all (the six userspace switches share two cores "
                      "with the sender and receiver). timing: the switches' `egress_timing` (fifo: the "
                      "forwarding thread at SCHED_FIFO). stall: the sender's longest pause around the loss (the machine stalls while the kernel takes a link "
                      "down), which delays that frame as much. lost: frames lost per run. looped: frames that died "
                      "with their reroute budget spent, on every switch (user and kernel). target: the issue's, "
                      "< 1 ms everywhere, < 200 µs in the kernel; the seed's router: < 1 ms (its reroute 650-685 µs).")


def spent_everywhere(sws):
    """Frames dropped with no reroute budget left, on every switch, userspace and kernel."""
    counted = [less.counters(sw) for sw in sws.values()]
    return sum(c["budget_spent"] + c["kernel"].get("budget_spent", 0) for c in counted)


def recovery_runs(table, repeats, datapaths):
    """Each case's failure `repeats` times per datapath ("user+fifo": userspace with the loop at
    SCHED_FIFO): the first frame round it, p50 and p99."""
    def rank(xs, p):
        if not xs:
            return None
        xs, at = sorted(xs), (len(xs) - 1) * p / 100
        lo = int(at)
        return round(xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (at - lo), 1)
    for spec in datapaths:
        dp, _, timing = spec.partition("+")
        netns.cleanup()
        fabric = less.six("lv")
        with fabric, less.less_switches(fabric, datapath=dp, tag="less-bench-rec", hold_ms=60_000,
                                        timing=timing or None) as sws:
            less.wait_converged(fabric, sws)
            hb, hc, he = fabric.hosts
            hosts = {"hc": hc, "he": he}
            for case, (src_name, a, b, _) in CASES.items():
                firsts, stalls, lost, detour = [], [], [], []
                spent = spent_everywhere(sws)
                for i in range(repeats):
                    progress(f"less: recovery, case {case}, {dp}, run {i + 1}/{repeats}")
                    log = run_dir("less") / f"rec-{dp}-{case}.log"
                    got = failure(fabric, hosts[src_name], hb, less.iface(fabric, a, b), 256, 0.6, log,
                                  rate=RECOVERY_RATE)
                    if got["first_rerouted_us"] is not None:
                        firsts.append(got["first_rerouted_us"])
                    stalls.append(got["sender_stall_us"])
                    detour.append(got["detour_p50_us"])
                    lost.append(got["lost"])
                    less.wait_converged(fabric, sws)
                table.add(datapath=dp, timing=timing or "default", case=case, runs=len(firsts),
                          first_p50_us=rank(firsts, 50), first_p99_us=rank(firsts, 99),
                          first_max_us=max(firsts, default=None), detour_p50_us=rank(detour, 50),
                          stall_max_us=max(stalls), lost_p50=rank(lost, 50), lost_max=max(lost),
                          looped=spent_everywhere(sws) - spent, target_p99_us=1000 if dp == "user" else 200)


def reroute_runs(sizes, seconds, table, datapaths):
    """6(a) and 6(b): a stream across the six-switch fabric while one link goes down, per case."""
    for dp in datapaths:
        netns.cleanup()
        fabric = less.six("lb")
        # A long hold keeps frames on their detours for the whole stream (addresses do not change).
        with fabric, less.less_switches(fabric, datapath=dp, tag="less-bench-rr", hold_ms=60_000) as sws:
            less.wait_converged(fabric, sws)
            hb, hc, he = fabric.hosts
            hosts = {"hc": hc, "he": he}
            for case, (src_name, a, b, path) in CASES.items():
                for size in sizes:
                    progress(f"less: reroute case {case}, {dp}, {size} B")
                    log = run_dir("less") / f"rr-{dp}-{case}-{size}.log"
                    got = failure(fabric, hosts[src_name], hb, less.iface(fabric, a, b), size, seconds, log)
                    ports = [less.port_of(fabric, x, y) for x, y in zip(path, path[1:])] + [less.port_of(fabric, "b", hb)]
                    _, ref = less.stream(hosts[src_name], hb, size, REROUTE_RATE, seconds / 2, ".".join(map(str, ports)))
                    table.add(switch="less", datapath=dp, case=case, size=size, **got,
                              same_path_p50_us=ref["latency_us"]["p50"],
                              reroute_us=round(got["detour_p50_us"] - ref["latency_us"]["p50"], 2),
                              seed_us=SEED_REROUTE_US[case])
                    less.wait_converged(fabric, sws)


def openflow_runs(sizes, seconds, table, datapaths):
    """The same failures on the same fabric under OpenFlow: fast-failover groups, and os-ken
    reacting to port-status. There is no label stack to write a reference path with, so the
    reroute's cost shows as loss, outage and the first rerouted frame's delay."""
    for dp in datapaths:
        for mode in ("failover", "reactive"):
            netns.cleanup()
            fabric = less.six("lo")
            with fabric:
                hb, hc, he = fabric.hosts
                hosts = {"hc": hc, "he": he}
                paths = [(hosts[h], hb, route) for h, route in LESS_ROUTES.items()]
                with less.openflow_switches(fabric, mode, paths, datapath=dp, tag="less-bench-of") as sws:
                    less.wait_paths_restored(fabric, sws, paths)
                    less.wait_reachable(fabric)
                    for case, (src_name, a, b, _) in CASES.items():
                        for size in sizes:
                            progress(f"less: OpenFlow {mode}, case {case}, {dp}, {size} B")
                            log = run_dir("less") / f"of-{mode}-{dp}-{case}-{size}.log"
                            got = failure(fabric, hosts[src_name], hb, less.iface(fabric, a, b), size, seconds, log)
                            table.add(switch=f"openflow-{mode}", datapath=dp, case=case, size=size, **got,
                                      seed_us=SEED_REROUTE_US[case])
                            less.wait_paths_restored(fabric, sws, paths)
