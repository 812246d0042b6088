"""The P4 paper's figure 8: one-way latency against the gap between frames, for small and large
frames, for each switch in native mode. Frames are paced one by one (the loadgen's socket engine)."""

from .. import loadgen, netns
from ..switches import DEFAULT_SWITCHES
from .common import FLOORS, Table, bare_redirect, plot, progress, switch_under_test

FULL_GAPS_US = [1000, 100, 20, 10, 5, 3, 2]
QUICK_GAPS_US = [100, 10]


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    gaps = QUICK_GAPS_US if quick else FULL_GAPS_US
    sizes = [64, 1518]
    seconds = 0.5 if quick else 2.0
    table = Table("latency", "One-way latency against frame gap (µs)",
                  ["switch", "size", "gap_us", "offered_pps", "received", "loss_pct", "lat_min_us", "lat_mean_us",
                   "lat_p50_us", "lat_p99_us", "lat_max_us", "generator_limited"],
                  note=f"edgeflow-loadgen, socket sender paced frame by frame, XDP receiver, {seconds} s per point. "
                       "Limit rows (`tc-mirred`, `xdp-redirect`): no switch, the kernel's own redirect between the "
                       "same veths, the least a switch in that place could add.")
    netns.cleanup()
    with netns.Topology("l") as topo:
        h1, h2 = topo.add_host(), topo.add_host()

        def points(kind):
            for size in sizes:
                for gap in gaps:
                    progress(f"latency: {kind} {size} B every {gap} µs")
                    sent, got = loadgen.run(h1, h2, size=size, gap_ns=gap * 1000, duration=seconds, send_engine="socket")
                    lat = got["latency_us"]
                    table.add(switch=kind, size=size, gap_us=gap, offered_pps=sent["achieved_pps"],
                              received=got["received"], loss_pct=100.0 * (1 - got["received"] / max(sent["sent"], 1)),
                              lat_min_us=lat["min"], lat_mean_us=lat["mean"], lat_p50_us=lat["p50"],
                              lat_p99_us=lat["p99"], lat_max_us=lat["max"], generator_limited=sent["generator_limited"])

        for kind in switches:
            with switch_under_test(kind, topo.hosts, topo.switch_ports):
                h2.ping(h1.addr, count=1)
                points(kind)
        for floor in FLOORS:
            h1.set_offload(tx="on", gro="off")
            h2.set_offload(tx="on", gro="on" if floor == "xdp-redirect" else "off")
            with bare_redirect(floor, *topo.switch_ports):
                points(floor)
    table.write(out)

    def draw(plt):
        for kind in (*switches, *FLOORS):
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
