"""The Zodiac FX table: TCP throughput (iperf3) client-to-server, server-to-client, and with five
parallel streams, per controller application — native, pass-through, L2 learning, four-table,
Faucet — for each switch under test."""

from .. import netns
from ..traffic import iperf3_tcp
from ..switches import DEFAULT_SWITCHES
from .common import Table, available_apps, plot, progress, switch_under_test

FLOWS = {"C2S": (1, False), "S2C": (1, True), "C2Sx5": (5, False), "S2Cx5": (5, True)}


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    seconds = 1 if quick else 10
    apps = ["none", "l2-learning"] if quick else available_apps()
    flows = ["C2S", "S2C"] if quick else list(FLOWS)
    table = Table("zodiac", "TCP throughput per controller application (Mbit/s)",
                  ["switch", "app", "flow", "mbit_s", "hosts_tx"],
                  note=f"iperf3, {seconds} s per run; hosts' offloads as each switch needs them (hosts_tx).")
    netns.cleanup()
    with netns.Topology("z") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        for kind in switches:
            for app in apps:
                if app != "none" and kind == "linux-bridge":
                    continue
                if quick and app != "none" and kind in ("edgeflow-xdp",):
                    continue
                with switch_under_test(kind, topo.hosts, topo.switch_ports, app) as (_, settings):
                    for flow in flows:
                        parallel, reverse = FLOWS[flow]
                        progress(f"zodiac: {kind} / {app} / {flow}")
                        try:
                            bps = iperf3_tcp(h1, h2, seconds=seconds, parallel=parallel, reverse=reverse)
                        except RuntimeError as e:
                            # A run that failed measured nothing: it is no 0 Mbit/s row.
                            raise RuntimeError(f"zodiac: {kind} / {app} / {flow}: {e}") from e
                        table.add(switch=kind, app=app, flow=flow, mbit_s=bps / 1e6, hosts_tx=settings.get("hosts_tx", "on"))
    table.write(out)

    def draw(plt):
        labels = [f"{r['switch']}\n{r['app']}" for r in table.rows if r["flow"] == flows[0]]
        width = 0.8 / len(flows)
        for i, flow in enumerate(flows):
            vals = [r["mbit_s"] for r in table.rows if r["flow"] == flow]
            plt.bar([x + i * width for x in range(len(vals))], vals, width, label=flow)
        plt.xticks([x + width * (len(flows) - 1) / 2 for x in range(len(labels))], labels, fontsize=7)
        plt.ylabel("TCP throughput (Mbit/s)")
        plt.yscale("log")
        plt.title("TCP throughput per switch and controller application")
        plt.legend()
    plot(out / "zodiac.png", draw)
    return [table]
