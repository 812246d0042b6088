"""What every experiment shares: switches under test with their controllers, result tables written
as Markdown and CSV, plots, progress lines."""

import csv
import json
import platform
import statistics
import subprocess
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .. import loadgen, netns
from ..controllers import FAUCET_VENV, Faucet, OsKen
from ..switches import SWITCHES
from ..util import ROOT, run_dir, wait_for

RESULTS = ROOT / "results"
DPID = 1

#: Controller applications by the names the papers use; None is native mode (no controller).
APPS = {
    "none": None,
    "pass-through": "pass_through",
    "l2-learning": "l2_learning",
    "four-table": "four_table",
    "faucet": "faucet",
}

_started = time.monotonic()


def median(xs):
    """The middle value (the mean of the two middle ones for an even count); 0.0 for none."""
    return statistics.median(xs) if xs else 0.0


def direct_pair(tag):
    """Two hosts joined by one veth, no switch (the papers' "direct connection"): (sender, sink)."""
    hosts = []
    names = [f"{netns.PREFIX}-{tag}{i}" for i in (1, 2)]
    for ns in names:
        netns.sh("ip", "netns", "add", ns)
    netns.sh("ip", "link", "add", "eth0", "netns", names[0], "type", "veth", "peer", "name", "eth0", "netns", names[1])
    for i, ns in enumerate(names):
        netns.sh("ip", "-n", ns, "link", "set", "eth0", "up")
        netns.sh("ip", "-n", ns, "addr", "add", f"10.9.0.{i + 1}/24", "dev", "eth0")
        mac = json.loads(netns.sh("ip", "-n", ns, "-j", "link", "show", "eth0").stdout)[0]["address"]
        hosts.append(netns.Host(ns, f"10.9.0.{i + 1}/24", "", mac))
    return hosts


@contextmanager
def bare_chain(tag):
    """The hosts of a frame-rate run with no switch between them: one veth, the sink's end
    running NAPI (GRO on) so that loadgen's XDP engine's frames enter it. Yields (sender, sink).

    With the XDP engine at full speed a kernel switch drops nothing: the sender's run carries each
    frame through the switch's program and the receiver in its own softirq, so what it offers is
    the rate of the whole chain on one core, and 1/received − 1/(this chain's rate) is the switch's
    own time per frame."""
    src, dst = direct_pair(tag)
    try:
        netns.sh("ip", "netns", "exec", dst.name, "ethtool", "-K", "eth0", "gro", "on")
        yield src, dst
    finally:
        for h in (src, dst):
            netns.sh("ip", "netns", "del", h.name, check=False)


#: Loss (% of what the sender sent) from which a run's rate is the switch's: it could not take all
#: that was offered (loadgen.bottleneck's threshold).
SWITCH_LOSS_PCT = 0.1


def bottleneck_of(loss_pct):
    """`switch` when the switch dropped part of the offer (its received rate is its own), else
    `generator`: it took everything the sender offered, so its rate is at most a floor of its own."""
    return "switch" if loss_pct >= SWITCH_LOSS_PCT else "generator"


#: The kernel's own redirect in a switch's place, no switch program, frames unchanged: what a
#: second veth hop costs on this VM at all, under TC and under XDP (bare_redirect).
FLOORS = ("tc-mirred", "xdp-redirect")
#: The userspace datapath on AF_XDP ports' limit rows: a bare AF_XDP forwarder in the switch's place
#: (`edgeflow-loadgen forward --engine af_xdp`: the switch's sockets, rings, batches and wait, none
#: of its work), waking on its sockets or busy polling them as the switch does.
AFXDP_FLOORS = {"edgeflow-afxdp": "afxdp-forward", "edgeflow-afxdp-busy": "afxdp-forward-busy"}


def floors_for(switches):
    """The limit rows a table of `switches` measures: the kernel's two always, and an AF_XDP
    forwarder's for each AF_XDP switch in it (they cost a run each, so only where compared)."""
    return FLOORS + tuple(AFXDP_FLOORS[s] for s in switches if s in AFXDP_FLOORS)


def set_floor_offloads(kind, sender, receiver):
    """The hosts' offloads for limit row `kind`, as the switch it is the limit of has them: veth's
    defaults (a switch run starts from them), GRO on at the receiver for an XDP redirect into its
    veth (NAPI), transmit offload off on both for AF_XDP (Edgeflow.HOST_SETTINGS["af_xdp"]: what
    an AF_XDP socket receives carries no checksum offload)."""
    sender.set_offload(tx="on", gro="off")
    receiver.set_offload(tx="on", gro="on" if kind == "xdp-redirect" else "off")
    if kind in AFXDP_FLOORS.values():
        for h in (sender, receiver):
            h.set_offload(tx="off")


def chain_columns(offered, received, loss, bare_pps):
    """A frame-rate row's rate columns: what was offered and received, the loss, what limited the
    chain (`bottleneck_of`), the bare veth's rate, and, where the generator did, the switch's own
    time per frame (the chain's less the bare veth's)."""
    limited = bottleneck_of(loss)
    ns = 1e9 / received - 1e9 / bare_pps if limited == "generator" else None
    return dict(offered_pps=offered, received_pps=received, loss_pct=round(loss, 3), bottleneck=limited,
                bare_pps=bare_pps, switch_ns_per_frame=round(ns, 1) if ns and ns > 0 else None)


@contextmanager
def bare_redirect(kind, a, b):
    """Frames arriving on interface `a` leave by `b` unchanged, with no switch: `tc-mirred` a u32
    filter with a mirred redirect at TC ingress (and b's frames by a); `xdp-redirect` loadgen's
    one-line XDP program, a to b (b's peer must run NAPI: GRO on); `afxdp-forward` and
    `afxdp-forward-busy` loadgen's AF_XDP forwarder, a to b (and b to a), waiting in poll(2) or busy
    polling (hosts' transmit offload off: set_floor_offloads)."""
    if kind == "tc-mirred":
        try:
            for x, y in ((a, b), (b, a)):
                netns.sh("tc", "qdisc", "add", "dev", x, "clsact")
                netns.sh("tc", "filter", "add", "dev", x, "ingress", "u32", "match", "u32", "0", "0", "action",
                         "mirred", "egress", "redirect", "dev", y)
            yield
        finally:
            for x in (a, b):
                netns.sh("tc", "qdisc", "del", "dev", x, "clsact", check=False)
        return
    engine = {"xdp-redirect": [], "afxdp-forward": ["--engine", "af_xdp"],
              "afxdp-forward-busy": ["--engine", "af_xdp", "--poll", "busy"]}[kind]
    p = subprocess.Popen([loadgen.LOADGEN_BIN, "forward", "--from", a, "--to", b, *engine], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        if not p.stdout.readline():  # a line once attached
            raise RuntimeError(f"loadgen forward: {p.stderr.read().strip()}")
        yield
    finally:
        p.terminate()  # the AF_XDP forwarder reports and closes its sockets; the XDP one just goes
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def paired_latency(direct, through, rounds):
    """What one switch adds to a frame's latency, against a direct connection. This VM's latency
    drifts by microseconds from one minute to the next, more than a switch adds, so each run
    through the switch (`through()`) follows one over the direct link (`direct()`), both loadgen
    receiver reports. Returns the table columns: medians over the `rounds` pairs, and as
    `processing_us` the median of the pairs' differences."""
    runs = []
    for _ in range(rounds):
        d, t = direct()["latency_us"], through()
        runs.append((d["p50"], t["latency_us"]["p50"], t["latency_us"]["p99"], t["lost"]))
    return dict(rounds=rounds, through_p50_us=median([r[1] for r in runs]),
                through_p99_us=median([r[2] for r in runs]), direct_p50_us=median([r[0] for r in runs]),
                processing_us=round(median([t - d for d, t, _, _ in runs]), 2), lost=sum(r[3] for r in runs))


def progress(msg):
    print(f"[{time.monotonic() - _started:7.1f}s] {msg}", flush=True)


def faucet_config(n_ports):
    path = run_dir("faucet") / "faucet-bench.yaml"
    ifaces = "".join(f"      {i}:\n        native_vlan: lan\n" for i in range(1, n_ports + 1))
    path.write_text(f"vlans:\n  lan:\n    vid: 100\ndps:\n  sw1:\n    dp_id: {DPID}\n    hardware: \"Open vSwitch\"\n"
                    f"    interfaces:\n{ifaces}")
    return path


def available_apps():
    return [a for a in APPS if a != "faucet" or (FAUCET_VENV / "bin" / "faucet").exists()]


@contextmanager
def switch_under_test(kind, hosts, ports, app="none", app_env=None, edgeflow_args=(), controllers=()):
    """Starts `app`'s controller (if any) and a `kind` switch on `ports` (an edgeflow one with
    `edgeflow_args` too; `controllers`: targets of controllers already running, besides), applies
    the host settings the switch needs, waits until it forwards, and yields (switch, settings)."""
    cls = SWITCHES[kind]
    settings = {"switch": kind, "app": app}
    for h in hosts:
        # Every run starts from veth's defaults; only a switch that needs it changes any.
        h.set_offload(tx="on", gro="off")
    for k, v in cls.host_settings.items():
        for h in hosts:
            h.set_offload(**{k: v})
        settings[f"hosts_{k}"] = v
    with ExitStack() as stack:
        controllers = list(controllers)
        module = APPS[app]
        if module == "faucet":
            ctl = stack.enter_context(Faucet(faucet_config(len(ports)), log_name=f"faucet-{kind}"))
            controllers.append(ctl.target)
        elif module:
            ctl = stack.enter_context(OsKen(module, log_name=f"{module}-{kind}", env=app_env))
            controllers.append(ctl.target)
        extra = []
        if kind.startswith("edgeflow"):
            extra = ["--dpid", hex(DPID), *edgeflow_args]
        sw = cls(ports, controllers=controllers, extra=extra, log_name=f"bench-{kind}")
        if kind == "ovs-netdev":
            sw.dpid = DPID
        stack.enter_context(sw)
        if controllers:
            wait_for(lambda: sw.flows(), timeout=30, what=f"{app} to program {kind}")
        # Warm up: ARP and MAC learning (and a reactive controller's first flows).
        for _ in range(3):
            if hosts[0].ping(hosts[1].addr, count=1)[0]:
                break
        yield sw, settings


class Table:
    """A result table, written as `<name>.md` and `<name>.csv`."""

    def __init__(self, name, title, columns, note=""):
        self.name = name
        self.title = title
        self.columns = columns
        self.note = note
        self.rows = []

    def add(self, **row):
        self.rows.append(row)
        return row

    def markdown(self):
        def fmt(v):
            if isinstance(v, float):
                return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
            return "" if v is None else str(v)
        lines = [f"### {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "---|" * len(self.columns))
        for r in self.rows:
            lines.append("| " + " | ".join(fmt(r.get(c)) for c in self.columns) + " |")
        return "\n".join(lines) + "\n"

    def write(self, out):
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.name}.md").write_text(self.markdown())
        keys = list(dict.fromkeys(k for r in self.rows for k in r))
        with open(out / f"{self.name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(self.rows)


def plot(path, draw):
    """Draws a figure with `draw(plt)` into `path` (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.figure(figsize=(8, 4.5))
    draw(plt)
    plt.tight_layout()
    plt.savefig(path, dpi=110)
    plt.close("all")


def machine():
    """A line describing the machine results were measured on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    import os
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {mem}, Linux {platform.release()}; "
            f"edgeflow {rev}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


