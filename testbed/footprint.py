"""The footprint table (docs/deploy.md): each image's size from `make cross` (build/cross/sizes.tsv)
and its idle resident memory, measured here: the switch on two ports of a namespace topology, a
controller connected (os-ken's l2_learning app: flows installed, a ping learned), then left idle
for a few seconds before its resident set is read: with a fast link's rings (1024 receive and 512
transmit frames of 2 KiB a port, 3 MiB a port, mapped into the process: what a veth port gets by
default) and with a gigabit port's (256: 0.75 MiB a port, what a gateway's ports get by default). Only images this machine runs natively are measured for
memory (x86_64: the musl builds and the ordinary release build); under qemu-user the resident
set is the emulator's, not the switch's. aarch64 runs the same code with the same word size.

usage: python -m testbed.footprint [--idle 3]   (`make footprint`, after `make cross`)
"""

import argparse
import json
import time

from . import netns
from .controllers import OsKen
from .switches import Edgeflow
from .util import ROOT, wait_for

SIZES = ROOT / "build" / "cross" / "sizes.tsv"
OUT = ROOT / "results" / "footprint"


def resident(pid):
    """The resident set as the page tables have it (smaps_rollup), not VmRSS: before 6.2 a
    process's RSS counters are cached per thread and synced every 64 faults, so pages a thread
    maps and then never faults again (the packet rings) can be missing from VmRSS for good."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Rss", "Anonymous"):
                fields[key] = int(value.split()[0]) * 1024
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == "VmHWM":
                fields[key] = int(value.split()[0]) * 1024
    return fields


GATEWAY_RINGS = 256


def idle_memory(program, idle, extra=()):
    with netns.Topology("fp") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        with OsKen("l2_learning") as ctl, \
                Edgeflow(topo.switch_ports, controllers=[ctl.target], log_name="footprint", program=program,
                         extra=list(extra)) as sw:
            wait_for(lambda: any("CONTROLLER" in f for f in sw.flows()), timeout=30, what="the app's flows")
            assert h1.ping(h2.addr, count=3)[0] == 3, sw.log()
            time.sleep(idle)
            return resident(sw.proc.pid)


def measure(row, program, idle):
    default = idle_memory(program, idle, ["--ring-frames", "1024"])
    gateway = idle_memory(program, idle, ["--ring-frames", str(GATEWAY_RINGS)])
    row.update(rss_default=default["Rss"], rss_gateway=gateway["Rss"], anon_gateway=gateway["Anonymous"],
               peak_gateway=gateway["VmHWM"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=3.0)
    args = ap.parse_args()
    rows = []
    sizes = [line.split("\t") for line in SIZES.read_text().splitlines()[1:]] if SIZES.exists() else []
    native = {"x86_64-unknown-linux-musl"}
    with netns.exclusive("footprint"):
        for target, variant, size, toolchain in sizes:
            row = {"target": target, "variant": variant, "bytes": int(size), "toolchain": toolchain}
            if target in native:
                name = "edgeflow" if variant == "full" else "edgeflow-minimal"
                measure(row, [str(ROOT / "build" / "cross" / target / name)], args.idle)
            rows.append(row)
        release = ROOT / "target" / "release" / "edgeflow"
        row = {"target": "x86_64-unknown-linux-gnu (make build)", "variant": "full, release profile",
               "bytes": release.stat().st_size}
        measure(row, [str(release)], args.idle)
        rows.append(row)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "footprint.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = ["| target | variant | binary | idle RSS, 1024-frame rings | idle RSS, 256-frame rings | of it, heap and stacks |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        mib = lambda b: f"{b / 2**20:.2f} MiB" if b is not None else "—"
        lines.append(f"| {r['target']} | {r['variant']} | {r['bytes'] / 1e6:.2f} MB | {mib(r.get('rss_default'))} | "
                     f"{mib(r.get('rss_gateway'))} | {mib(r.get('anon_gateway'))} |")
    (OUT / "footprint.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
