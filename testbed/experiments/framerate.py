"""The P4 paper's figure 7: forwarded frame rate against frame size, offered as fast as the
generator goes (its XDP engine), for each switch in native (MAC-learning) mode."""

from .. import loadgen, netns
from ..switches import DEFAULT_SWITCHES
from .common import FLOORS, Table, bare_chain, bare_redirect, bottleneck_of, plot, progress, switch_under_test

FULL_SIZES = [64, 128, 256, 512, 1024, 1518]
#: Each kernel datapath's limit row: the kernel's own redirect between the same veths, no switch.
LIMIT_OF = {"edgeflow-tc": "tc-mirred", "edgeflow-xdp": "xdp-redirect"}
QUICK_SIZES = [64, 1518]


def line_rate_bits(size, pps):
    """Bits per second on the wire, with the 20 bytes of preamble and inter-frame gap."""
    return (size + 20) * 8 * pps


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    sizes = QUICK_SIZES if quick else FULL_SIZES
    seconds = 1.0 if quick else 5.0
    table = Table("framerate", "Forwarded frame rate against frame size",
                  ["switch", "size", "offered_pps", "received_pps", "received_gbit_s", "loss_pct", "bottleneck",
                   "bare_pps", "switch_ns_per_frame", "of_limit"],
                  note=(f"edgeflow-loadgen, XDP sender at full speed for {seconds:.0f} s per size, XDP receiver; "
                        "native mode (MAC learning). bottleneck: 'generator' when every frame arrived (the switch "
                        "kept up), else 'switch' (received_pps is its own rate). A kernel switch keeps up with the "
                        "XDP sender by construction: the sender's softirq carries each frame through it and the "
                        "receiver, so its offer is the whole chain's rate. bare_pps: the same frames over a bare "
                        "veth just before; switch_ns_per_frame = 1/received − 1/bare where every frame arrived, "
                        "the switch's own time per frame. Gbit/s counts preamble and inter-frame gap. Limit rows "
                        "(`tc-mirred`, `xdp-redirect`): no switch, the kernel's own redirect between the same "
                        "veths (a tc mirred filter; a one-line XDP redirect), the most a TC or XDP program in "
                        "the switch's place could carry here; `of_limit`: the TC and XDP fast paths' received "
                        "rate over their limit row's at that size."))
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
        for floor in FLOORS:
            # Veth's defaults, as a switch run starts from; an XDP redirect into a veth needs NAPI
            # at the far end (GRO on), as the xdp fast path's hosts have it.
            h1.set_offload(tx="on", gro="off")
            h2.set_offload(tx="on", gro="on" if floor == "xdp-redirect" else "off")
            with bare_redirect(floor, *topo.switch_ports):
                for size in sizes:
                    progress(f"framerate: {floor} (limit) {size} B")
                    sent, got = loadgen.run(h1, h2, size=size, rate=0, duration=seconds, send_engine="xdp")
                    loss = 100.0 * (1 - got["received"] / max(sent["sent"], 1))
                    table.add(switch=floor, size=size, offered_pps=sent["achieved_pps"], received_pps=got["pps"],
                              received_gbit_s=line_rate_bits(size, got["pps"]) / 1e9, loss_pct=loss,
                              bottleneck=bottleneck_of(loss))
    limit = {(r["switch"], r["size"]): r["received_pps"] for r in table.rows if r["switch"] in FLOORS}
    for r in table.rows:
        floor = LIMIT_OF.get(r["switch"])
        if floor and limit.get((floor, r["size"])):
            r["of_limit"] = round(r["received_pps"] / limit[floor, r["size"]], 3)
    table.write(out)

    def draw(plt):
        for kind in (*switches, *FLOORS):
            rows = [r for r in table.rows if r["switch"] == kind]
            plt.plot([r["size"] for r in rows], [r["received_pps"] / 1e6 for r in rows], marker="o", label=kind,
                     linestyle=":" if kind in FLOORS else "-")
        offered = [max(r["offered_pps"] for r in table.rows if r["size"] == s) / 1e6 for s in sizes]
        plt.plot(sizes, offered, "k--", label="offered (generator)")
        plt.xlabel("frame size (bytes)")
        plt.ylabel("frames per second (millions)")
        plt.title("Forwarded frame rate")
        plt.legend()
    plot(out / "framerate.png", draw)
    return [table]
