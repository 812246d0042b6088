"""Flows at scale (issue 56): 10 000, 100 000 and 1 000 000 flows of two shapes installed in one
table over one OpenFlow connection, on every datapath and on Open vSwitch's userspace datapath in
the same run. Per row: the switch's resident memory over its idle self, per flow; the install rate
(flow-mods sent at once, up to the reply to a barrier after the last); and, for edgeflow's pipeline
alone (crates/pipeline/examples/scale.rs, no I/O), its heap bytes per flow and the time a lookup
takes that misses the megaflow cache: a full walk of the classifier, which should follow the number
of masks and not the number of flows."""

import json
import os
import subprocess
import time

from .. import netns, roles
from ..churn import Churner, encode_flows
from ..loadgen import LOADGEN_BIN, finish_receiver, receiving
from ..reactive import Reactive
from ..switches import DEFAULT_SWITCHES
from ..util import ROOT, run_dir
from .common import SWITCHES, Table, median, plot, progress, switch_under_test

#: Switches that take flows from a controller.
KINDS = ("edgeflow", "edgeflow-tc", "edgeflow-xdp", "ovs-netdev")
SHAPES = ("exact", "prefix")
SCALE_EXAMPLE = ROOT / "target" / "release" / "examples" / "scale"
#: Switches whose new-flow setup rate is measured (through `testbed/reactive.py`), on the exact
#: shape's rows: edgeflow's userspace datapath (the tc and xdp ones set flows up in the same
#: thread) and Open vSwitch's.
SETUP_KINDS = ("edgeflow", "ovs-netdev")
#: New flows offered per setup burst, and how fast: more than either switch sets up.
SETUP_FLOWS, SETUP_OFFERED = 20_000, 300_000
#: Bursts per started switch, each of new flows (its own source port). A burst lasts a fraction
#: of a second, so one scheduling stall on a shared machine halves its rate: the row is the
#: median of every burst of every run.
SETUP_BURSTS = 3
#: Flow counts to measure instead of 10 000, 100 000 and 1 000 000 (`EDGEFLOW_SCALE_FLOWS=100000`,
#: comma-separated), for a closer look at one without the whole table.
FLOWS_ENV = "EDGEFLOW_SCALE_FLOWS"
#: New source addresses offered to a learning switch (at most 65 535: the sender counts two bytes).
LEARN_FLOWS = 60_000


def rss_bytes(pid):
    """A process's resident set, from /proc (VmRSS)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"scale: no VmRSS for {pid}")


def settled_rss(pid, seconds=0.5):
    """The resident set once it has stopped growing (an install's last allocations, a revalidator's
    pass), polled for up to ten seconds."""
    last, deadline = rss_bytes(pid), time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(seconds)
        now = rss_bytes(pid)
        if abs(now - last) < 64 * 1024:
            return now
        last = now
    return last


def pipeline_alone(shape, n_flows, lookups=100_000):
    """crates/pipeline/examples/scale.rs's figures for one shape and count."""
    r = subprocess.run([str(SCALE_EXAMPLE), shape, str(n_flows), str(lookups)], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"scale: {SCALE_EXAMPLE.name} {shape} {n_flows}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def ensure_example():
    """`make build` builds the example (as `make bench` and `make test` do first); a run from a
    checkout without it builds it here. Not each time: beside make test's background build,
    cargo's lock made it wait a minute."""
    if SCALE_EXAMPLE.exists():
        return
    r = subprocess.run(["cargo", "build", "--release", "--locked", "-p", "pipeline", "--example", "scale"],
                       cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"scale: building the pipeline's scale example: {r.stderr[-2000:]}")


def install(sw, data, n_flows):
    """Sends `data` (n_flows flow-mods) at once and waits for the barrier after it: the rate."""
    with Churner(sw.target, timeout=60) as ctl:
        t0 = time.monotonic()
        ctl.send(data)
        ctl.barrier(timeout=600)
        took = time.monotonic() - t0
        if ctl.errors:
            raise RuntimeError(f"scale: {sw.name} refused {ctl.errors} of the {n_flows} flows")
    return n_flows / took


def cpu_seconds(pids):
    """User and system time of every thread of `pids` so far (from /proc)."""
    ticks = 0
    for pid in pids:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def setup_rate(sw, ctl, hosts, n=SETUP_FLOWS, sport=7000):
    """New flows set up a second: `n` one-frame UDP flows no installed flow matches (source port
    `sport`), offered faster than the switch sets them up; each goes table miss -> packet-in ->
    `ctl`'s flow-mod and packet-out -> out to the other host. The rate is the frames that arrived
    there over the time from the first packet-in to the last answer. Returns (rate, flows set up
    by the controller)."""
    sw.ofctl("add-flow", "priority=0,actions=CONTROLLER:65535")
    ctl.setups, ctl.first, ctl.last = 0, None, None
    sender, receiver = hosts
    with receiving(receiver.popen, LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket", "--duration",
                   "60") as recv:
        s = sender.run(LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", receiver.mac, "--src-ip", sender.addr,
                       "--dst-ip", receiver.addr, "--size", "64", "--rate", str(SETUP_OFFERED), "--count", str(n),
                       "--udp-flows", str(n), "--sport", str(sport), "--dport", "20000", "--engine", "socket",
                       timeout=120)
        got = finish_receiver(recv, [s.stdout])
    if not ctl.setups or ctl.last <= ctl.first:
        raise RuntimeError(f"scale: {sw.name} set up no flow through the controller")
    return min(got["received"], ctl.setups) / (ctl.last - ctl.first), ctl.setups


def setup_bursts(sw, ctl, hosts, bursts=SETUP_BURSTS):
    """`bursts` setup measurements on one switch, each of new flows: their rates, and the
    switch's own CPU time (every thread, user and system) per flow set up over all of them. The
    CPU time is what the switch spent, whatever else ran on the machine; the rate is also how
    much of the machine it got."""
    pids = sw.cpu_pids()
    before = cpu_seconds(pids)
    rates, setups = [], 0
    for k in range(bursts):
        rate, done = setup_rate(sw, ctl, hosts, sport=7000 + k)
        rates.append(rate)
        setups += done
    return rates, (cpu_seconds(pids) - before) / setups * 1e6


def table_room(n_flows):
    """A config file giving edgeflow's table 0 room for `n_flows` installed, the table-miss flow
    and every flow the setup bursts add (at a million the default capacity has none)."""
    path = run_dir("scale") / f"table-{n_flows}.toml"
    path.write_text(f"[[table]]\nid = 0\nmax_flows = {n_flows + 1 + SETUP_BURSTS * SETUP_FLOWS}\n")
    return path


def learning_setup_rate(hosts, n=None):
    """New flows a learning switch sets up a second, no controller: `n` one-frame flows to the
    receiver (whose address the warm-up taught) from `n` new source addresses, offered faster
    than the switch sets them up. Each is a flow neither switch has seen: edgeflow learns the
    address and installs its translation, Open vSwitch's NORMAL upcalls it to ovs-vswitchd for
    MAC learning and a megaflow (its megaflows match the source address). The rate is what
    arrived over the time from the first frame's arrival to the last's; and whether the sender
    (a socket sender at full speed) offered less than the switch could take: then it is the
    switch's lower bound."""
    n = n or LEARN_FLOWS
    sender, receiver = hosts
    with receiving(receiver.popen, LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket", "--duration",
                   "60") as recv:
        s = sender.run(LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", receiver.mac, "--src-ip", sender.addr,
                       "--dst-ip", receiver.addr, "--size", "64", "--rate", "0", "--count", str(n),
                       "--src-spread", str(n), "--engine", "socket", timeout=120)
        got = finish_receiver(recv, [s.stdout])
    sent = json.loads(s.stdout)
    if got["received"] < 2 or got["duration_s"] <= 0:
        raise RuntimeError(f"scale: {got['received']} of {n} learning-switch flows arrived")
    return (got["received"] - 1) / got["duration_s"], got["received"] >= 0.99 * sent["sent"]


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    kinds = [k for k in switches if k in KINDS]
    counts = (10_000,) if quick else (10_000, 100_000, 1_000_000)
    if os.environ.get(FLOWS_ENV):
        counts = tuple(int(c) for c in os.environ[FLOWS_ENV].split(","))
    shapes = SHAPES[:1] if quick else SHAPES
    samples = 1 if quick else 3
    bursts = 1 if quick else SETUP_BURSTS
    ensure_example()
    table = Table("scale", "Memory per flow, install rate and lookup cost from 10 000 to 1 000 000 flows",
                  ["switch", "shape", "flows", "rss_mb", "bytes_per_flow", "install_per_s", "install_ratio",
                   "setup_per_s", "setup_ratio", "setup_cpu_us", "masks", "heap_bytes_per_flow", "lookup_ns"],
                  note=("One table, one OpenFlow connection (the switch's passive listener), every flow-mod encoded "
                        "before the clock starts and sent at once; install_per_s up to the reply to a barrier after "
                        "the last. rss_mb: the switch process's resident set with the flows in; bytes_per_flow: that "
                        "over the same switch's idle resident set, per flow (kernel memory, e.g. the fast path's maps, "
                        "is not in it; Open vSwitch: ovs-vswitchd). install_ratio: over Open vSwitch's in the same "
                        "run. Shapes: `exact`, UDP source and destination port (one mask, a reactive controller's "
                        "microflows); `prefix`, IPv4 destination /16 to /32 at priority = length (17 masks, a "
                        "routing table). masks, heap_bytes_per_flow and lookup_ns are edgeflow's pipeline alone "
                        "(crates/pipeline/examples/scale.rs: heap counted by its allocator; a lookup is a "
                        "translation that misses the megaflow cache and walks the classifier), so they are the "
                        f"same for its three datapaths. Medians of {samples} run(s), each on a freshly started "
                        "switch. Targets (issue 56): <= 512 bytes per flow at 1 000 000 flows, installs >= 2 x Open "
                        "vSwitch on every datapath, lookup_ns flat in the flow count. setup_per_s (exact rows, "
                        "edgeflow's userspace datapath and Open vSwitch, with the row's flows installed): new "
                        "one-frame UDP flows set up a second, table miss -> packet-in -> a reactive controller's "
                        "flow-mod and packet-out (testbed/reactive.py, the same bytes to both; edgeflow with "
                        "--packet-in-rate 0 and a table with room for them) -> out to the other host, "
                        f"{SETUP_FLOWS} offered at "
                        f"{SETUP_OFFERED}/s in each of {bursts} burst(s) a run, the median of every burst; setup_ratio "
                        "over Open vSwitch's (target >= 2); setup_cpu_us, the switch process's CPU time (all threads, "
                        "user and system) per flow set up: what the setups cost it, whatever else the machine ran. "
                        "Rows of shape `learning` (not in the quick form): each switch as a MAC-learning "
                        "switch, no controller and no flows (edgeflow's learning mode, Open vSwitch standalone, NORMAL), "
                        f"{LEARN_FLOWS} one-frame flows from as many new source addresses to a learned one, sent as fast as "
                        "a socket sender goes; setup_per_s what arrived a second, setup_ratio over Open vSwitch's; "
                        "`(sender-bound)` when every frame arrived (the switch took all it was offered: a lower bound)."))
    alone = {}
    for shape in shapes:
        for n in counts:
            runs = [pipeline_alone(shape, n) for _ in range(samples)]
            alone[shape, n] = {k: median([r[k] for r in runs]) for k in ("masks", "heap_bytes_per_flow", "lookup_ns")}
            progress(f"scale: pipeline {shape} {n}: {alone[shape, n]}")
    netns.cleanup()
    measured = {}
    with netns.Topology("sc") as topo:
        topo.add_host(), topo.add_host()
        for shape in shapes:
            for n in counts:
                data = encode_flows(shape, n, 2)
                for kind in kinds:
                    rates, rss, per_flow, setups, setup_cpu = [], [], [], [], []
                    setup = kind in SETUP_KINDS and shape == "exact"
                    # The table-miss flow and the flows set up need room beside the row's (at a
                    # million, edgeflow's default capacity has none).
                    args = ("--packet-in-rate", "0", "--config", str(table_room(n))) if setup else ()
                    for _ in range(samples):
                        with Reactive() as ctl, switch_under_test(
                                kind, topo.hosts, topo.switch_ports, controllers=[ctl.target] if setup else (),
                                edgeflow_args=args) as (sw, _):
                            pid = sw.cpu_pids()[0]
                            sw.ofctl("del-flows")
                            idle = settled_rss(pid)
                            rates.append(install(sw, data, n))
                            full = settled_rss(pid)
                            rss.append(full)
                            per_flow.append((full - idle) / n)
                            if setup:
                                burst_rates, cpu_us = setup_bursts(sw, ctl, topo.hosts, bursts)
                                setups += burst_rates
                                setup_cpu.append(cpu_us)
                    measured[kind, shape, n] = median(rates)
                    row = dict(switch=kind, shape=shape, flows=n, rss_mb=round(median(rss) / 2**20, 1),
                               bytes_per_flow=round(median(per_flow)), install_per_s=round(median(rates)))
                    if setups:
                        row["setup_per_s"] = round(median(setups))
                        row["setup_cpu_us"] = round(median(setup_cpu), 1)
                    if kind.startswith("edgeflow"):
                        row.update(alone[shape, n])
                    table.add(**row)
                    progress(f"scale: {kind} {shape} {n}: {row}")
        # Through the learning mode: each switch as a MAC-learning switch (edgeflow's learning
        # mode, Open vSwitch's NORMAL in standalone), no flows installed; not in the quick form.
        for kind in [k for k in SETUP_KINDS if k in kinds and not quick]:
            setups, bounded = [], False
            for _ in range(samples):
                args = ("--mode", "learning") if kind.startswith("edgeflow") else ()
                with switch_under_test(kind, topo.hosts, topo.switch_ports, edgeflow_args=args):
                    rate, all_arrived = learning_setup_rate(topo.hosts)
                    setups.append(rate)
                    bounded |= all_arrived
            # Every frame arrived: the sender, not the switch, set the rate (a lower bound).
            row = table.add(switch=kind, shape="learning" + (" (sender-bound)" if bounded else ""),
                            flows=LEARN_FLOWS, setup_per_s=round(median(setups)))
            progress(f"scale: {kind} learning: {row}")
    for r in table.rows:
        peer = measured.get(("ovs-netdev", r["shape"], r["flows"]))
        if peer and r["switch"] != "ovs-netdev":
            r["install_ratio"] = round(r["install_per_s"] / peer, 2)
        shape = r["shape"].split(" (")[0]
        peer_setup = next((p.get("setup_per_s") for p in table.rows if p["switch"] == "ovs-netdev"
                           and p["shape"].split(" (")[0] == shape and p["flows"] == r["flows"]), None)
        if peer_setup and r.get("setup_per_s") and r["switch"] != "ovs-netdev":
            r["setup_ratio"] = round(r["setup_per_s"] / peer_setup, 2)
    table.write(out)
    tables = [table]
    if not quick:
        tables.append(roles_table(kinds, counts, samples))
        tables[-1].write(out)

    def draw(plt):
        fig = plt.gcf()
        fig.set_size_inches(10, 4)
        left, right = fig.subplots(1, 2)
        for shape, style in zip(shapes, ("-o", "--s")):
            xs = [n for n in counts]
            left.plot(xs, [alone[shape, n]["lookup_ns"] for n in xs], style, label=f"{shape}")
            for kind in kinds:
                right.plot(xs, [next((r["bytes_per_flow"] for r in table.rows if r["switch"] == kind
                                      and r["shape"] == shape and r["flows"] == n), None) for n in xs], style,
                           label=f"{kind} {shape}")
        left.set_xscale("log")
        left.set_title("pipeline lookup, ns (cache miss)")
        left.legend(fontsize=7)
        right.set_xscale("log")
        right.axhline(512, color="k", linestyle=":", label="target 512")
        right.set_title("resident bytes per flow")
        right.legend(fontsize=6)
    plot(out / "scale.png", draw)
    return tables


def roles_table(kinds, counts, samples):
    """Issue 56 item 4: the flows of each row installed by a master with an equal and a slave
    beside it, a role change and the asynchronous configuration checked at that scale
    (testbed/roles.py; every count exact, or the run fails)."""
    table = Table("scale_roles", "Three controllers (master, equal, slave) over 100 000 and 1 000 000 flows",
                  ["switch", "flows", "install_per_s", "takeover_ms", "delete_per_s", "removed_master",
                   "removed_equal", "removed_slave"],
                  note=("testbed/roles.py: the switch connects to three controllers. A is master, B equal, C slave; B "
                        "turns flow-removed messages off (OFPT_SET_ASYNC). A installs the row's flows (exact shape, each "
                        "with OFPFF_SEND_FLOW_REM) up to a barrier: install_per_s. C's flow-mod is refused (IS_SLAVE). C "
                        "asks for master with a newer generation: takeover_ms, the time to its role reply; A is then "
                        "refused a flow-mod (IS_SLAVE) and a request with its older generation (STALE). C deletes "
                        "every flow: delete_per_s up to C's last flow-removed message; removed_*: the flow-removed "
                        "messages each got (master C all, equal B none as it asked, slave A none by default). "
                        f"Medians of {samples} run(s) of the times; the counts are checked exactly in every run."))
    with netns.Topology("rl") as topo:
        topo.add_host(), topo.add_host()
        for n in [c for c in counts if c >= 100_000]:
            for kind in kinds:
                runs = []
                for _ in range(samples):
                    with roles.Controllers() as ctls:
                        extra = ["--dpid", "0xe7"] if kind.startswith("edgeflow") else []
                        with SWITCHES[kind](topo.switch_ports, controllers=ctls.targets, extra=extra,
                                            log_name=f"roles-{kind}"):
                            runs.append(roles.run(ctls.accept(), n))
                row = {k: median([r[k] for r in runs]) for k in ("install_per_s", "takeover_ms", "delete_per_s")}
                row.update({k: runs[0][k] for k in ("removed_master", "removed_equal", "removed_slave")})
                table.add(switch=kind, flows=n, **row)
                progress(f"scale: roles {kind} {n}: {row}")
    return table
