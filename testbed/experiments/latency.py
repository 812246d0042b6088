"""The P4 paper's figure 8: one-way latency against the gap between frames, for small and large
frames, for each switch in native mode. Frames are paced one by one (the loadgen's socket engine)."""

from collections import defaultdict

from .. import loadgen, netns
from ..switches import DEFAULT_SWITCHES
from .common import (Table, bare_chain, bare_redirect, floors_for, median, plot, progress, set_floor_offloads,
                     switch_under_test)

FULL_GAPS_US = [1000, 100, 20, 10, 5, 3, 2]
QUICK_GAPS_US = [100, 10]
#: Rounds of the whole table, each switch started afresh in each; a row is the median of its rounds.
ROUNDS = 3
#: The row with no switch at all: the two hosts joined by one veth (the papers' "direct
#: connection"), measured in each round; `added_p50_us` is a switch's p50 over it.
DIRECT = "direct-veth"
#: `make bench`'s switches for this table: the default ones and the userspace datapath on
#: AF_PACKET and on AF_XDP, each waking on its rings and busy polling them (issue 55).
BENCH_SWITCHES = (DEFAULT_SWITCHES[0], "edgeflow-busy", "edgeflow-afxdp", "edgeflow-afxdp-busy",
                  *DEFAULT_SWITCHES[1:])
STATS = ("min", "mean", "p50", "p99", "max")


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    gaps = QUICK_GAPS_US if quick else FULL_GAPS_US
    sizes = [64, 1518]
    rounds = 1 if quick else ROUNDS
    seconds = 0.5 if quick else 0.7
    table = Table("latency", "One-way latency against frame gap (µs)",
                  ["switch", "size", "gap_us", "offered_pps", "received", "loss_pct", "lat_min_us", "lat_mean_us",
                   "lat_p50_us", "lat_p99_us", "lat_max_us", "added_p50_us", "generator_limited", "runs"],
                  note=f"edgeflow-loadgen, socket sender paced frame by frame, XDP receiver, {seconds} s per point "
                       "and round; each figure the median of `runs` rounds, every switch started afresh in each "
                       "(`received`: the rounds' sum). Limit rows (`tc-mirred`, `xdp-redirect`): no switch, the "
                       "kernel's own redirect between the same veths, the least a switch in that place could add; with an "
                       "AF_XDP switch, `afxdp-forward` (`-busy`): a bare userspace forwarder on AF_XDP sockets, the "
                       "least such a switch could add. "
                       f"`{DIRECT}`: no switch and no second veth, the hosts on one veth; `added_p50_us`: a row's "
                       "p50 less that of the direct veth at the same size and gap in the same round, the median "
                       "of the rounds' differences: what the switch adds.")
    runs = defaultdict(list)  # (switch, size, gap) -> one report a round
    floors = floors_for(switches)
    netns.cleanup()
    with bare_chain("lbare") as direct, netns.Topology("l") as topo:
        h1, h2 = topo.add_host(), topo.add_host()

        def points(kind, sender, receiver, round_no):
            for size in sizes:
                for gap in gaps:
                    progress(f"latency: {kind} {size} B every {gap} µs (round {round_no} of {rounds})")
                    sent, got = loadgen.run(sender, receiver, size=size, gap_ns=gap * 1000, duration=seconds,
                                            send_engine="socket")
                    runs[kind, size, gap].append((sent, got))

        for round_no in range(1, rounds + 1):
            points(DIRECT, *direct, round_no)
            for kind in switches:
                with switch_under_test(kind, topo.hosts, topo.switch_ports):
                    h2.ping(h1.addr, count=1)
                    points(kind, h1, h2, round_no)
            for floor in floors:
                set_floor_offloads(floor, h1, h2)
                with bare_redirect(floor, *topo.switch_ports):
                    points(floor, h1, h2, round_no)
    for kind in (DIRECT, *switches, *floors):
        for size in sizes:
            for gap in gaps:
                these = runs[kind, size, gap]
                row = table.add(switch=kind, size=size, gap_us=gap,
                                offered_pps=median([s["achieved_pps"] for s, _ in these]),
                                received=sum(g["received"] for _, g in these),
                                loss_pct=median([100.0 * (1 - g["received"] / max(s["sent"], 1)) for s, g in these]),
                                generator_limited=any(s["generator_limited"] for s, _ in these), runs=len(these))
                for stat in STATS:
                    row[f"lat_{stat}_us"] = median([g["latency_us"][stat] for _, g in these])
                if kind != DIRECT:
                    base = runs[DIRECT, size, gap]
                    row["added_p50_us"] = round(median([g["latency_us"]["p50"] - d["latency_us"]["p50"]
                                                        for (_, g), (_, d) in zip(these, base)]), 2)
    table.write(out)

    def draw(plt):
        for kind in (DIRECT, *switches, *floors):
            for size in sizes:
                rows = [r for r in table.rows if r["switch"] == kind and r["size"] == size]
                plt.plot([r["gap_us"] for r in rows], [r["lat_p50_us"] for r in rows], marker="o", label=f"{kind} {size} B p50")
        plt.xscale("log")
        plt.yscale("log")
        plt.gca().invert_xaxis()
        plt.xlabel("time between frames (µs)")
        plt.ylabel("one-way latency (µs)")
        plt.title("Latency against frame gap")
        plt.legend(fontsize=7)
    plot(out / "latency.png", draw)
    return [table]
