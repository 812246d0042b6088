"""AFDX networks in namespaces: end systems with one interface on network A and one on network B,
one switch per network, a virtual-link table written as the switches' config, and the end systems
of `edgeflow-loadgen` (es-send, es-recv) to drive them.

End system i is port i on both switches. Its interfaces are `net_a` and `net_b` in namespace
`ef-<tag>e<i>`; their peers in the root namespace are `ef-<tag>a<i>` and `ef-<tag>b<i>`.
"""

import json
import signal
import subprocess
import time
from dataclasses import dataclass, field

from .loadgen import LOADGEN_BIN, finish_receiver, start_receiver
from .netns import PREFIX, sh
from .switches import Edgeflow
from .util import run_dir, wait_for


@dataclass
class VL:
    """One virtual link as the switches police it (sizes with FCS, as in the config)."""
    id: int
    source: int
    dests: list
    bag_ms: int
    smin: int = 64
    smax: int = 1518
    jitter_us: int = 0
    priority: str = "low"
    police: str = "frame"
    ip_check: bool = False

    def toml(self):
        return (f"[[afdx.vl]]\nid = {self.id}\nin_port = {self.source}\nout_ports = {list(self.dests)}\n"
                f"bag_ms = {self.bag_ms}\nsmin = {self.smin}\nsmax = {self.smax}\njitter_us = {self.jitter_us}\n"
                f"priority = \"{self.priority}\"\npolice = \"{self.police}\"\n"
                f"ip_check = {'true' if self.ip_check else 'false'}\n")


def config_text(vls, network=None, ports=(), pace_to_link=True, link_mbps=None, timing=None):
    """An AFDX switch's config: its VLs, the network it is on ("a", "b"; None: either), its ports
    (interface names, port 1 first; none: given on the command line), the link speed of some of
    them ({port number: Mbit/s}), and whether ports without a rate are paced to their link's
    speed (the default); `timing`: the switch's `egress_timing` (sleep, fifo, busy)."""
    link_mbps = link_mbps or {}
    port_lines = "".join(f"[[port]]\nname = \"{p}\"\n" + (f"link_mbps = {link_mbps[k]}\n" if k in link_mbps else "")
                         for k, p in enumerate(ports, 1))
    section = f"network = \"{network.upper()}\"\n" if network else ""
    section += "" if pace_to_link else "pace_to_link_speed = false\n"
    section = f"[afdx]\n{section}\n" if section else ""
    top = "mode = \"afdx\"\n" + (f"egress_timing = \"{timing}\"\n" if timing else "") + "\n"
    return top + port_lines + section + "\n".join(vl.toml() for vl in vls)


@dataclass
class EndSystem:
    index: int
    ns: str
    ports: dict = field(default_factory=dict)  # network ("a"/"b") -> root-side interface

    def cmd(self, *cmd):
        return ["nsenter", f"--net=/run/netns/{self.ns}", *cmd]

    def run(self, *cmd, check=True, timeout=60):
        return sh(*self.cmd(*cmd), check=check, timeout=timeout)

    def popen(self, *cmd, **kw):
        return subprocess.Popen(self.cmd(*cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def root_popen(*cmd, **kw):
    """A process in the root namespace, piped as an end system's are."""
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def backlog_drops():
    """Frames the CPUs' receive backlogs (netdev_max_backlog) had no room for, since boot: a veth
    hands every frame to one."""
    with open("/proc/net/softnet_stat") as f:
        return sum(int(line.split()[1], 16) for line in f)


class AfdxNetwork:
    """`n` end systems wired to network A (and B when `redundant`)."""

    def __init__(self, tag, n, redundant=True):
        self.tag = tag
        self.networks = ["a", "b"] if redundant else ["a"]
        self.end_systems = []
        for i in range(1, n + 1):
            ns = f"{PREFIX}-{tag}e{i}"
            sh("ip", "netns", "add", ns)
            es = EndSystem(i, ns)
            for net in self.networks:
                side = f"{PREFIX}-{tag}{net}{i}"
                sh("ip", "link", "add", side, "type", "veth", "peer", "name", f"net_{net}", "netns", ns)
                sh("ip", "link", "set", side, "up")
                sh("sysctl", "-qw", f"net.ipv6.conf.{side}.disable_ipv6=1", check=False)
                sh("ip", "-n", ns, "link", "set", f"net_{net}", "up")
                es.ports[net] = side
            sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            self.end_systems.append(es)

    def ports(self, net):
        """The switch-side interfaces of network `net`, port 1 first."""
        return [es.ports[net] for es in self.end_systems]

    def set_offload(self, **features):
        """ethtool -K on every end-system interface (what the switch's datapath needs)."""
        args = [x for k, v in features.items() for x in (k, v)]
        for es in self.end_systems:
            for net in self.networks:
                es.run("ethtool", "-K", f"net_{net}", *args)

    def link_drops(self):
        """{(end system, network): {"es_tx": .., "es_rx": .., "sw_tx": .., "sw_rx": ..}}: the frames
        each veth pair's kernel counters dropped, so a loss shows whether it was outside the switch."""
        def dropped(cmd):
            st = json.loads(sh(*cmd).stdout)[0]["stats64"]
            return st["tx"]["dropped"], st["rx"]["dropped"]
        out = {}
        for es in self.end_systems:
            for net, side in es.ports.items():
                es_tx, es_rx = dropped(es.cmd("ip", "-s", "-j", "link", "show", "dev", f"net_{net}"))
                sw_tx, sw_rx = dropped(["ip", "-s", "-j", "link", "show", "dev", side])
                out[(es.index, net)] = {"es_tx": es_tx, "es_rx": es_rx, "sw_tx": sw_tx, "sw_rx": sw_rx}
        return out

    def write_config(self, vls, name, network=None):
        """The config of switch `name`, on `network` ("a", "b"; None: either's frames pass)."""
        path = run_dir("afdx") / f"{self.tag}-{name}.toml"
        path.write_text(config_text(vls, network))
        return path

    def teardown(self):
        for es in self.end_systems:
            sh("ip", "netns", "del", es.ns, check=False)
            for side in es.ports.values():
                sh("ip", "link", "del", side, check=False)
        self.end_systems = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()


def vl_arg(vl_id, bag_ms, size, gap_us=None):
    return f"{vl_id}:{bag_ms}:{size}" + (f":{gap_us}" if gap_us is not None else "")


class Receiver:
    """es-recv in an end system, ready before the senders start; `result` ends it once the senders
    are done, given their reports."""

    # SkewMax: on this VM one network's switch may hold a frame a few ms longer than the other's.
    def __init__(self, es, networks=("a", "b"), duration=60, skew_max_us=50_000, log=None, wire_mbps=None):
        """`wire_mbps`: network A reaches the end system over a link that slow (`es-recv
        --wire-mbps`), which nothing but the switch paces."""
        args = [LOADGEN_BIN, "es-recv", "--iface-a", "net_a", "--duration", str(duration),
                "--skew-max-us", str(skew_max_us)]
        if log:
            args += ["--log", str(log)]
        if "b" in networks:
            args += ["--iface-b", "net_b"]
        if wire_mbps:
            args += ["--wire-mbps", str(wire_mbps)]
        self.proc = start_receiver(es.popen, *args)

    def result(self, reports=(), timeout=60):
        """Its report once every frame of the senders' `reports` is in (or nothing more comes)."""
        r = finish_receiver(self.proc, reports, timeout)
        r["vls"] = {int(k): v for k, v in r["vls"].items()}
        return r

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()


class IngressTap:
    """When each frame of end system `es` reached the switches: es-recv in the root namespace,
    listening on the switch side of its interfaces (an AF_PACKET socket beside the switch's own,
    stamped by the kernel at the same point), logging every frame. Policing recomputed on these
    times is what the switches saw, not what the sender's clock said; the two differ by whatever
    the path and the scheduler add."""

    def __init__(self, es, networks=("a", "b"), duration=60, sender_side=False):
        """`sender_side`: tap the end system's own interfaces, as they send, instead (its sender
        must be `visible`): an XDP program on the switch's side takes frames before any tap there
        sees them, and a frame sent on a veth reaches the peer's XDP program in the same pass."""
        self.log = run_dir("afdx") / f"tap-{es.ports['a']}.log"
        if sender_side:
            args = ["es-recv", "--iface-a", "net_a", "--outgoing"] + (["--iface-b", "net_b"] if "b" in networks else [])
        else:
            args = ["es-recv", "--iface-a", es.ports["a"]] + (["--iface-b", es.ports["b"]] if "b" in networks else [])
        args = [LOADGEN_BIN] + args + ["--duration", str(duration), "--log", str(self.log)]
        self.proc = start_receiver(es.popen if sender_side else root_popen, *args)

    def times(self, reports=(), timeout=60):
        """{network index: {vl: [receive ns]}} once the tap has seen every frame of the end
        system's `reports` (or nothing more comes)."""
        finish_receiver(self.proc, reports, timeout)
        out = {}
        for line in open(self.log):
            vl, _seq, _sn, network, rx_ns, _ = line.split()
            out.setdefault(int(network), {}).setdefault(int(vl), []).append(int(rx_ns))
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()


def send(es, vls, duration, networks=("a", "b"), jitter_us=0, log=None, seed=1, background=False, visible=False):
    """es-send from end system `es`: `vls` are `vl_arg` strings. Returns its report (or the process).
    `visible`: through the interfaces' qdisc, where a sender-side IngressTap sees the frames."""
    args = [LOADGEN_BIN, "es-send", "--iface-a", "net_a", "--es", str(es.index), "--duration", str(duration),
            "--jitter-us", str(jitter_us), "--seed", str(seed)] + (["--visible"] if visible else [])
    if "b" in networks:
        args += ["--iface-b", "net_b"]
    for v in vls:
        args += ["--vl", v]
    if log:
        args += ["--log", str(log)]
    if background:
        return es.popen(*args)
    return json.loads(es.run(*args, timeout=duration + 60).stdout)


def read_log(path):
    """{vl: [(seq, tx_ns, size)]} from an es-send log."""
    out = {}
    for line in open(path):
        vl, seq, tx, size = (int(x) for x in line.split())
        out.setdefault(vl, []).append((seq, tx, size))
    return out


def police_offline(times_ns, sizes, bag_ms, smax, jitter_us=0, by_bytes=False):
    """ARINC 664 part 7's account-based policing, run on a list of arrival (or send) times: how
    many frames a switch policing this contract admits. Written apart from the switch's own code
    (floating point on purpose), to check it against."""
    bag = bag_ms * 1e6
    cap = smax * (1 + jitter_us * 1e3 / bag)
    credit, last, admitted = cap, None, 0
    for t, size in zip(times_ns, sizes):
        if last is not None:
            credit = min(cap, credit + (t - last) * smax / bag)
        last = t
        cost = size if by_bytes else smax
        # A frame exactly at its due time passes: allow for float rounding.
        if credit >= cost - 1e-6:
            credit -= cost
            admitted += 1
    return admitted


def contract_admits(times_ns, size, bag_ms, smax, jitter_us=0, by_bytes=False):
    """(fewest, most) frames of `size` that a switch holding a VL to its contract may admit when
    they reach it at `times_ns`: derived from the contract itself, not from any policing code.

    The contract (ARINC 664 part 7): the account earns Smax bytes (frame mode: one frame) per BAG
    and holds at most Smax·(1 + J/BAG); a frame leaves only on credit and spends its cost. Over
    the span T from the first arrival to the last, starting full, admitted × cost = cap + earned −
    credit left − credit lost at the cap, with earned = T·Smax/BAG. So at most (cap + earned) /
    cost. Credit is lost only while the account is full: after any decision it holds at most
    M = max(cost, cap − cost), so a gap g between arrivals loses at most max(0, M + g·Smax/BAG −
    cap). A gap that lost any ends in a full account, and the frame that ends it leaves (cap ≥
    cost): only gaps before admitted frames lose credit, at most `most` of them, so the `most`
    largest of those losses bound what was lost, and at least (earned − lost) / cost frames
    leave. One frame either way for a time stamp a few µs from the switch's own clock."""
    if not times_ns:
        return 0, 0
    bag = bag_ms * 1e6
    rate = smax / bag  # bytes of credit per ns
    cap = smax * (1 + jitter_us * 1e3 / bag)
    cost = size if by_bytes else smax
    span = times_ns[-1] - times_ns[0]
    earned = rate * span
    held = max(cost, cap - cost)
    most = int((cap + earned) // cost) + 1
    losses = sorted((max(0.0, held + (b - a) * rate - cap) for a, b in zip(times_ns, times_ns[1:])), reverse=True)
    lost = sum(losses[:most])
    return max(0, int((earned - lost) // cost) - 1), most


def priority_on_slow_port(datapath, mbps, n_background, seconds, pace_to_link=True, tag="aq", more_ports=(),
                          timing=None):
    """High-priority latency on a port that nothing in the config paces (issue 34, item 4): end
    system 4 is on a link of `mbps` (its receiver's `wire_mbps`; the switch is told the speed by
    `link_mbps`, as a veth's driver reports 10 Gbit/s), offered `n_background` low-priority VLs
    of 1518 bytes every 1 ms by end system 2. End system 1 sends VL 1 (high, 64 B) alone first,
    then VL 2 (high) and VL 3 (low, the control) under the load, which starts before them (once
    the port's queue has overflowed, when paced) and stops once they are done. VL 50 (high, to
    end system 3, not sent) needs no priority: the kernel may hold it. `more_ports`: interfaces
    that are ports 5, 6... and carry nothing; `timing`: the switch's `egress_timing`. Returns (receiver report,
    {vl: frames sent, "background": the load's frames, "background_s": at most how long it ran},
    the switch's report)."""
    vls = [VL(1, 1, [4], bag_ms=1, smax=64, jitter_us=2000, priority="high"),
           VL(2, 1, [4], bag_ms=1, smax=64, jitter_us=2000, priority="high"),
           VL(3, 1, [4], bag_ms=1, smax=64, jitter_us=2000),
           VL(50, 1, [3], bag_ms=1, smax=64, priority="high")]
    vls += [VL(100 + k, 2, [4], bag_ms=1, smax=1518, jitter_us=2000) for k in range(n_background)]
    with AfdxNetwork(tag, 4, redundant=False) as net:
        if Edgeflow.HOST_SETTINGS[datapath]:
            net.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
        cfg = run_dir("afdx") / f"{tag}-slow-{datapath}.toml"
        cfg.write_text(config_text(vls, ports=net.ports("a") + list(more_ports), pace_to_link=pace_to_link,
                                   link_mbps={4: mbps}, timing=timing))
        es = net.end_systems
        with Edgeflow([], datapath=datapath, extra=["--config", str(cfg)],
                      log_name=f"afdx-{tag}-slow-{datapath}") as sw:
            rx = Receiver(es[3], networks=("a",), wire_mbps=mbps)
            background = None
            try:
                alone = send(es[0], [vl_arg(1, 1, 64)], seconds, networks=("a",), jitter_us=100)
                # The load runs from before the loaded VLs start until they are done, however
                # long either takes to start on a busy machine: 60 s only bounds a hung run.
                started = time.monotonic()
                background = send(es[1], [vl_arg(100 + k, 1, 1518) for k in range(n_background)], 60,
                                  networks=("a",), jitter_us=100, background=True)
                # The backlog has built wherever it builds: the switch's queue for the port has
                # overflowed, or (unpaced) the link's ring has had 0.3 s to (0.15 s fills 1000).
                if pace_to_link:
                    wait_for(lambda: sw.stats()["drops"]["queue_full"] > 0, timeout=10,
                             what="the slow port's queue to fill")
                else:
                    time.sleep(0.3)
                loaded = send(es[0], [vl_arg(2, 1, 64), vl_arg(3, 1, 64)], seconds, networks=("a",), jitter_us=100,
                              seed=2)
                background.send_signal(signal.SIGINT)
                background_s = time.monotonic() - started
                out, err = background.communicate(timeout=60)
                assert background.returncode == 0, err
                loads = json.loads(out)
                got = rx.result([alone, loaded, loads])
            finally:
                rx.kill()
                if background is not None and background.poll() is None:
                    background.kill()
            report = sw.stats()
    sent = {int(k): v for r in (alone, loaded) for k, v in r["sent"].items()}
    sent["background"] = sum(loads["sent"].values())
    # At most what the load's sender ran for (it started after this was taken).
    sent["background_s"] = background_s
    return got, sent, report
