"""The P4 paper's figure 7: forwarded frame rate against frame size, offered as fast as the
generator goes (its XDP engine), for each switch in native (MAC-learning) mode."""

from collections import defaultdict

from .. import loadgen, netns
from ..switches import DEFAULT_SWITCHES
from .common import (AFXDP_FLOORS, Table, bare_chain, bare_redirect, bottleneck_of, floors_for, median, plot,
                     progress, set_floor_offloads, switch_under_test)

FULL_SIZES = [64, 128, 256, 512, 1024, 1518]
#: Each datapath's limit row: for the kernel's, the kernel's own redirect between the same veths, no
#: switch; for the userspace datapath on AF_XDP, a bare AF_XDP forwarder (common.AFXDP_FLOORS).
LIMIT_OF = {"edgeflow-tc": "tc-mirred", "edgeflow-xdp": "xdp-redirect", **AFXDP_FLOORS}
QUICK_SIZES = [64, 1518]
#: Runs of the whole table, each switch started afresh in each; a row is the median of its runs.
#: A round measures every switch and then the limit rows, so a ratio to a limit row is taken
#: within one round (minutes apart at most) and the median is of those ratios.
ROUNDS = 3
#: `make bench`'s switches for this table: the default ones and the userspace datapath on AF_XDP,
#: waking on its rings and busy polling them (issue 55).
BENCH_SWITCHES = (DEFAULT_SWITCHES[0], "edgeflow-afxdp", "edgeflow-afxdp-busy", *DEFAULT_SWITCHES[1:])


def line_rate_bits(size, pps):
    """Bits per second on the wire, with the 20 bytes of preamble and inter-frame gap."""
    return (size + 20) * 8 * pps


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    sizes = QUICK_SIZES if quick else FULL_SIZES
    rounds = 1 if quick else ROUNDS
    seconds = 1.0 if quick else 1.5
    table = Table("framerate", "Forwarded frame rate against frame size",
                  ["switch", "size", "offered_pps", "received_pps", "received_gbit_s", "loss_pct", "bottleneck",
                   "bare_pps", "switch_ns_per_frame", "of_limit", "runs"],
                  note=(f"edgeflow-loadgen, XDP sender at full speed for {seconds} s per size, XDP receiver; "
                        "native mode (MAC learning). Each figure the median of `runs` rounds, every switch started "
                        "afresh in each. bottleneck: 'generator' when every frame arrived (the switch "
                        "kept up), else 'switch' (received_pps is its own rate). A kernel switch keeps up with the "
                        "XDP sender by construction: the sender's softirq carries each frame through it and the "
                        "receiver, so its offer is the whole chain's rate. bare_pps: the same frames over a bare "
                        "veth just before; switch_ns_per_frame = 1/received − 1/bare where every frame arrived, "
                        "the switch's own time per frame. Gbit/s counts preamble and inter-frame gap. Limit rows "
                        "(`tc-mirred`, `xdp-redirect`): no switch, the kernel's own redirect between the same "
                        "veths (a tc mirred filter; a one-line XDP redirect), the most a TC or XDP program in "
                        "the switch's place could carry here, measured in each round after the switches; with an "
                        "AF_XDP switch, `afxdp-forward` (`-busy`): a bare userspace forwarder on the same AF_XDP "
                        "sockets, ring sizes, batches and wait (or busy polling) as the switch, none of its work, "
                        "the most a userspace program on AF_XDP carries here. `of_limit`: the TC and XDP fast "
                        "paths' and the AF_XDP switches' received rate over their limit row's at that size in "
                        "the same round, the median of the rounds' ratios."))
    runs = defaultdict(list)  # (switch, size) -> one measurement a round
    floors = floors_for(switches)

    def measure(kind, size, bare=None):
        sent, got = loadgen.run(h1, h2, size=size, rate=0, duration=seconds, send_engine="xdp")
        loss = 100.0 * (1 - got["received"] / max(sent["sent"], 1))
        ns = None
        if bare and bottleneck_of(loss) == "generator" and got["pps"] > 0:
            ns = 1e9 / got["pps"] - 1e9 / bare
        runs[kind, size].append(dict(offered=sent["achieved_pps"], received=got["pps"], loss=loss, bare=bare, ns=ns))

    netns.cleanup()
    with bare_chain("fbare") as (bare_src, bare_dst), netns.Topology("f") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        loadgen.prepare_xdp_sender(h1)
        for round_no in range(1, rounds + 1):
            for kind in switches:
                with switch_under_test(kind, topo.hosts, topo.switch_ports):
                    # The receiver's address must be learned, or the first frames flood.
                    h2.ping(h1.addr, count=1)
                    for size in sizes:
                        progress(f"framerate: {kind} {size} B (round {round_no} of {rounds})")
                        bare = loadgen.run(bare_src, bare_dst, size=size, rate=0, duration=1.0,
                                           send_engine="xdp")[1]["pps"]
                        measure(kind, size, bare)
            for floor in floors:
                set_floor_offloads(floor, h1, h2)
                with bare_redirect(floor, *topo.switch_ports):
                    for size in sizes:
                        progress(f"framerate: {floor} (limit) {size} B (round {round_no} of {rounds})")
                        measure(floor, size)
    for kind in (*switches, *floors):
        for size in sizes:
            these = runs[kind, size]
            loss = median([m["loss"] for m in these])
            received = median([m["received"] for m in these])
            own = [m["ns"] for m in these if m["ns"] is not None]
            row = table.add(switch=kind, size=size, offered_pps=median([m["offered"] for m in these]),
                            received_pps=received, received_gbit_s=line_rate_bits(size, received) / 1e9,
                            loss_pct=loss, bottleneck=bottleneck_of(loss), runs=len(these))
            if kind not in floors:
                row["bare_pps"] = median([m["bare"] for m in these])
                if own and row["bottleneck"] == "generator" and median(own) > 0:
                    row["switch_ns_per_frame"] = round(median(own), 1)
            limit = runs.get((LIMIT_OF.get(kind), size))
            if limit:
                ratios = [m["received"] / l["received"] for m, l in zip(these, limit) if l["received"] > 0]
                if ratios:
                    row["of_limit"] = round(median(ratios), 3)
    table.write(out)

    def draw(plt):
        for kind in (*switches, *floors):
            rows = [r for r in table.rows if r["switch"] == kind]
            plt.plot([r["size"] for r in rows], [r["received_pps"] / 1e6 for r in rows], marker="o", label=kind,
                     linestyle=":" if kind in floors else "-")
        offered = [max(r["offered_pps"] for r in table.rows if r["size"] == s) / 1e6 for s in sizes]
        plt.plot(sizes, offered, "k--", label="offered (generator)")
        plt.xlabel("frame size (bytes)")
        plt.ylabel("frames per second (millions)")
        plt.title("Forwarded frame rate")
        plt.legend()
    plot(out / "framerate.png", draw)
    return [table]
