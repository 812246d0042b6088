"""`make demo`: two hosts behind edgeflow, without a controller and with the os-ken L2 learning
app; ping and iperf3 TCP results for each, printed as a table.
"""

import argparse
import sys

from . import netns
from .controllers import OsKen
from .switches import Edgeflow
from .traffic import iperf3_tcp
from .util import wait_for


def measure(h1, h2, seconds):
    received, sent, rtt = h1.ping(h2.addr, count=10, interval=0.1)
    c2s = iperf3_tcp(h1, h2, seconds=seconds)
    s2c = iperf3_tcp(h1, h2, seconds=seconds, reverse=True)
    return {"ping": f"{received}/{sent}", "rtt_ms": rtt, "c2s": c2s / 1e9, "s2c": s2c / 1e9}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=int, default=5, help="iperf3 duration per direction")
    a = p.parse_args()
    _lock = netns.exclusive("the demo")
    netns.cleanup()
    rows = []
    topo = netns.Topology("d")
    try:
        h1 = topo.add_host()
        h2 = topo.add_host()
        print(f"hosts: {h1.name} {h1.addr} <-> edgeflow <-> {h2.name} {h2.addr} (offloads left on)\n", flush=True)

        print("native mode (no controller: a NORMAL flow, MAC learning)...", flush=True)
        with Edgeflow(topo.switch_ports, log_name="demo-native") as sw:
            rows.append(("native", measure(h1, h2, a.seconds)))
            print("  flows:", *sw.flows(), sep="\n    ")

        print("\nos-ken L2 learning app (table-miss to the controller, learned flows)...", flush=True)
        with OsKen("l2_learning") as ctl, Edgeflow(topo.switch_ports, controllers=[ctl.target], log_name="demo-osken") as sw:
            wait_for(lambda: sw.flows(), what="the app's table-miss flow")
            rows.append(("os-ken l2_learning", measure(h1, h2, a.seconds)))
            print("  flows:", *sw.flows(), sep="\n    ")
    finally:
        topo.teardown()

    print()
    print("| mode | ping | avg RTT (ms) | TCP h1→h2 (Gbit/s) | TCP h2→h1 (Gbit/s) |")
    print("|---|---|---|---|---|")
    for name, r in rows:
        rtt = f"{r['rtt_ms']:.3f}" if r["rtt_ms"] is not None else "-"
        print(f"| {name} | {r['ping']} | {rtt} | {r['c2s']:.2f} | {r['s2c']:.2f} |")
    ok = all(r["ping"].split("/")[0] == r["ping"].split("/")[1] for _, r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
