"""The P4 paper's figure 7: forwarded frame rate against frame size, offered as fast as the
generator goes (its XDP engine), for each switch in native (MAC-learning) mode."""

from .. import loadgen, netns
from ..switches import DEFAULT_SWITCHES
from .common import Table, bare_chain, bottleneck_of, plot, progress, switch_under_test

FULL_SIZES = [64, 128, 256, 512, 1024, 1518]
QUICK_SIZES = [64, 1518]


def line_rate_bits(size, pps):
    """Bits per second on the wire, with the 20 bytes of preamble and inter-frame gap."""
    return (size + 20) * 8 * pps


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    sizes = QUICK_SIZES if quick else FULL_SIZES
    seconds = 1.0 if quick else 5.0
    table = Table("framerate", "Forwarded frame rate against frame size",
                  ["switch", "size", "offered_pps", "received_pps", "received_gbit_s", "loss_pct", "bottleneck",
                   "bare_pps", "switch_ns_per_frame"],
                  note=(f"edgeflow-loadgen, XDP sender at full speed for {seconds:.0f} s per size, XDP receiver; "
                        "native mode (MAC learning). bottleneck: 'generator' when every frame arrived (the switch "
                        "kept up), else 'switch' (received_pps is its own rate). A kernel switch keeps up with the "
                        "XDP sender by construction: the sender's softirq carries each frame through it and the "
                        "receiver, so its offer is the whole chain's rate. bare_pps: the same frames over a bare "
                        "veth just before; switch_ns_per_frame = 1/received − 1/bare where every frame arrived, "
                        "the switch's own time per frame. Gbit/s counts preamble and inter-frame gap."))
    netns.cleanup()
    with bare_chain("fbare") as (bare_src, bare_dst), netns.Topology("f") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        loadgen.prepare_xdp_sender(h1)
        for kind in switches:
            with switch_under_test(kind, topo.hosts, topo.switch_ports):
                # The receiver's address must be learned, or the first frames flood.
                h2.ping(h1.addr, count=1)
                for size in sizes:
                    progress(f"framerate: {kind} {size} B")
                    bare = loadgen.run(bare_src, bare_dst, size=size, rate=0, duration=seconds, send_engine="xdp")[1]
                    sent, got = loadgen.run(h1, h2, size=size, rate=0, duration=seconds, send_engine="xdp")
                    offered = sent["achieved_pps"]
                    loss = 100.0 * (1 - got["received"] / max(sent["sent"], 1))
                    limited = bottleneck_of(loss)
                    ns = 1e9 / got["pps"] - 1e9 / bare["pps"] if limited == "generator" and bare["pps"] > 0 else None
                    table.add(switch=kind, size=size, offered_pps=offered, received_pps=got["pps"],
                              received_gbit_s=line_rate_bits(size, got["pps"]) / 1e9, loss_pct=loss,
                              bottleneck=limited, bare_pps=bare["pps"],
                              switch_ns_per_frame=round(ns, 1) if ns and ns > 0 else None)
    table.write(out)

    def draw(plt):
        for kind in switches:
            rows = [r for r in table.rows if r["switch"] == kind]
            plt.plot([r["size"] for r in rows], [r["received_pps"] / 1e6 for r in rows], marker="o", label=kind)
        offered = [max(r["offered_pps"] for r in table.rows if r["size"] == s) / 1e6 for s in sizes]
        plt.plot(sizes, offered, "k--", label="offered (generator)")
        plt.xlabel("frame size (bytes)")
        plt.ylabel("frames per second (millions)")
        plt.title("Forwarded frame rate")
        plt.legend()
    plot(out / "framerate.png", draw)
    return [table]
