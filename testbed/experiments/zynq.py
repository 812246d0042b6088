"""The ONetSwitch (Zynq) figures: UDP offered load against received rate, loss and jitter
(iperf3), and ping delay, per switch under L2-learning control (the Linux bridge learns itself)."""

import statistics

from .. import netns
from ..traffic import iperf3_udp
from ..switches import DEFAULT_SWITCHES
from .common import Table, plot, progress, switch_under_test

FULL_RATES = [10, 50, 100, 200, 500, 1000, 2000, 4000]
QUICK_RATES = [20, 400]


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    rates = QUICK_RATES if quick else FULL_RATES
    seconds = 1 if quick else 5
    pings = 10 if quick else 50
    udp = Table("zynq", "UDP offered load: received rate, loss and jitter",
                ["switch", "app", "offered_mbit_s", "received_mbit_s", "loss_pct", "jitter_ms"],
                note=f"iperf3 UDP, 1400-byte datagrams, {seconds} s per rate.")
    delay = Table("zynq_ping", "Ping delay", ["switch", "app", "pings", "received", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms"])
    netns.cleanup()
    with netns.Topology("y") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        for kind in switches:
            app = "none" if kind == "linux-bridge" else "l2-learning"
            with switch_under_test(kind, topo.hosts, topo.switch_ports, app):
                for rate in rates:
                    progress(f"zynq: {kind} UDP {rate} Mbit/s")
                    r = iperf3_udp(h1, h2, rate_bps=rate * 1e6, length=1400, seconds=seconds)
                    udp.add(switch=kind, app=app, offered_mbit_s=float(rate), received_mbit_s=r["received_bps"] / 1e6,
                            loss_pct=r["lost_percent"], jitter_ms=r["jitter_ms"])
                progress(f"zynq: {kind} ping")
                rtts = rtt_samples(h1, h2.addr, pings)
                delay.add(switch=kind, app=app, pings=pings, received=len(rtts),
                          rtt_min_ms=min(rtts) if rtts else None, rtt_avg_ms=statistics.mean(rtts) if rtts else None,
                          rtt_max_ms=max(rtts) if rtts else None)
    udp.write(out)
    delay.write(out)

    def draw(plt):
        fig = plt.gcf()
        a1 = fig.add_subplot(1, 2, 1)
        a2 = fig.add_subplot(1, 2, 2)
        for kind in switches:
            rows = [r for r in udp.rows if r["switch"] == kind]
            a1.plot([r["offered_mbit_s"] for r in rows], [r["received_mbit_s"] for r in rows], marker="o", label=kind)
            a2.plot([r["offered_mbit_s"] for r in rows], [r["loss_pct"] for r in rows], marker="o", label=kind)
        for a, y in ((a1, "received (Mbit/s)"), (a2, "loss (%)")):
            a.set_xscale("log")
            a.set_xlabel("offered UDP load (Mbit/s)")
            a.set_ylabel(y)
            a.legend(fontsize=7)
        a1.set_title("Throughput")
        a2.set_title("Packet loss")
    plot(out / "zynq.png", draw)
    return [udp, delay]


def rtt_samples(host, dst, count):
    """Individual ping RTTs in ms."""
    r = host.run("ping", "-n", "-c", str(count), "-i", "0.05", "-W", "1", dst, check=False, timeout=count + 30)
    return [float(l.split("time=")[1].split()[0]) for l in r.stdout.splitlines() if "time=" in l]
