"""LESS fabrics (docs/less.md): edgeflow switches in LESS mode joined by veth links, unmodified hosts
on them, and what tests and the experiment read off them (labels on a link, counters).

The six-switch fabric is the one `crates/forwarding/tests/less.rs` drives in memory:

           R (root)
          /   \\
         A --- B --- hB
         |     |
   hC -- C     D
         |     |
         +- E -+
            |
            hE

E has two shortest paths from the root; taking one of its links, D's uplink, or R's link to B
down exercises reroute case (a), (b) and (c) respectively.
"""

import contextlib
import json
import struct
import time

from . import loadgen, netns
from .switches import Edgeflow, stop_all
from .topology import Fabric
from .util import run_dir, wait_for

#: Fabric links carry labels and a reroute block on top of a host's 1500-byte packets, as MPLS
#: cores carry a larger MTU than their edges.
FABRIC_MTU = 1600


def six(tag="lf"):
    f = Fabric(tag)
    for s in "rabcde":
        f.switch(s)
    f.host("b", "10.0.0.2/24", ip6="fd00::2/64")
    f.host("c", "10.0.0.3/24", ip6="fd00::3/64")
    f.host("e", "10.0.0.5/24", ip6="fd00::5/64")
    for a, b in ["ra", "rb", "ab", "ac", "bd", "ce", "de"]:
        f.link(a, b)
    return f


#: The routes LESS takes on the six-switch fabric before a failure, from hE and hC to hB (up to the
#: common ancestor, then down): an OpenFlow fabric compared with it (`openflow_switches`) is given
#: the same ones, so that the same link failure hits the same stream.
ROUTES = {"he": ["e", "d", "b"], "hc": ["c", "a", "r", "b"]}


def port_of(fabric, switch, peer):
    """The port number of `switch` on its link to `peer` (a switch name, or a Host)."""
    if isinstance(peer, netns.Host):
        return fabric.ports[switch].index(peer.switch_side) + 1
    for a_if, b_if in fabric.links:
        for mine, theirs in ((a_if, b_if), (b_if, a_if)):
            if mine in fabric.ports[switch] and theirs in fabric.ports[peer]:
                return fabric.ports[switch].index(mine) + 1
    raise KeyError((switch, peer))


def iface(fabric, switch, peer):
    """`switch`'s interface on its link to switch `peer`."""
    return fabric.ports[switch][port_of(fabric, switch, peer) - 1]


@contextlib.contextmanager
def less_switches(fabric, root="r", datapath="user", tag="less", hello_ms=None, hold_ms=None, timing=None,
                  less_settings=None):
    """One edgeflow switch in LESS mode per switch of `fabric`, `root` the root (or a list of
    root-capable switches: the first, with the lowest switch id, is the root, the others stand by);
    fabric links get FABRIC_MTU. Each switch's config lists its ports on links to other switches
    as its `fabric_ports`, as an operator would; `less_settings` ({key: value}) adds to every switch's
    [less] section. `timing` "fifo" runs each switch's loop at SCHED_FIFO. A switch the test
    stopped itself is not asked to stop again."""
    roots = [] if root is None else [root] if isinstance(root, str) else list(root)
    for a_if, b_if in fabric.links:
        for i in (a_if, b_if):
            netns.sh("ip", "link", "set", i, "mtu", str(FABRIC_MTU))
    settings = Edgeflow.HOST_SETTINGS[datapath]
    for h in fabric.hosts:
        if settings:
            h.set_offload(**settings)
    switches = {}
    try:
        for name in fabric.switches:
            cfg = run_dir("less") / f"{tag}-{name}.toml"
            # Switch ids are dpids: the roots' are the lowest, in the order given.
            dpid = [f'dpid = "0x{roots.index(name) + 1:x}"'] if name in roots and len(roots) > 1 else []
            lines = (['mode = "less"'] + dpid + ([f'egress_timing = "{timing}"'] if timing else [])
                     + ["[less]", f"root = {'true' if name in roots else 'false'}"])
            if hello_ms:
                lines.append(f"hello_ms = {hello_ms}")
            if hold_ms:
                lines.append(f"hold_ms = {hold_ms}")
            linked = [i for i in fabric.ports[name] if any(i in link for link in fabric.links)]
            lines.append("fabric_ports = [" + ", ".join(f'"{i}"' for i in linked) + "]")
            lines += [f"{k} = {v}" for k, v in (less_settings or {}).items()]
            cfg.write_text("\n".join(lines) + "\n")
            sw = Edgeflow(fabric.ports[name], datapath=datapath, extra=["--config", str(cfg)],
                          log_name=f"{tag}-{name}-{datapath}")
            # One after another, in the fabric's order (the root first), not side by side
            # (start_all): a fabric started all at once failed once in CI to settle on its
            # addresses within 10 s (hold_ms 10000); see the stop 49 note.
            switches[name] = sw.start()
        yield switches
    finally:
        codes = dict(zip(switches, stop_all(switches.values())))
    assert all(c in (0, None) for c in codes.values()), codes


def wait_converged(fabric, sws):
    """Waits until every switch of the six-switch fabric has its addresses (E two), then until its
    hosts reach each other."""
    want = {"r": 1, "a": 1, "b": 1, "c": 1, "d": 1, "e": 2}
    wait_for(lambda: all(counters(sws[n])["addresses"] == k for n, k in want.items()), timeout=10,
             what="LESS addresses")
    wait_reachable(fabric)


def wait_reachable(fabric):
    """Waits until the six-switch fabric's hosts reach each other, found by ARP as unmodified
    hosts do (retried until answered)."""
    hb, hc, he = fabric.hosts
    for a, b in [(he, hb), (hc, hb), (hb, hc), (hb, he)]:
        wait_for(lambda: a.ping(b.addr, count=1, timeout=3)[0] == 1, timeout=15, what=f"{a.name} -> {b.addr}")


def stream(src, dst, size, rate, seconds, route=None, log=None, during=None, at=None, fifo=False, flow=3,
           engine="socket", sender=None):
    """loadgen frames src → dst at `rate` for `seconds` (LESS labels for `route`, or none; `log`: the
    receiver's per-frame log); `during()` runs `at` seconds in; `fifo` runs the sender at
    SCHED_FIFO; `engine` "xdp" sends and counts in XDP (full speed; no per-frame log); `sender`,
    if given, the sending engine alone. Returns (sender report, receiver report)."""
    args = [loadgen.LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", engine, "--flow", str(flow), "--duration",
            str(seconds + 30)]
    if log:
        args += ["--log", str(log)]
    send = [loadgen.LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst.mac, "--src-ip", src.addr, "--dst-ip",
            dst.addr, "--size", str(size), "--rate", str(rate), "--duration", str(seconds), "--engine", sender or engine,
            "--flow", str(flow)]
    if route:
        send += ["--less", route]
    if fifo:
        send = ["chrt", "-f", "20", *send]
    with loadgen.receiving(dst.popen, *args) as recv:
        p = src.popen(*send)
        if during:
            time.sleep(at)
            during()
        out, err = p.communicate(timeout=seconds + 30)
        if p.returncode != 0:
            raise RuntimeError(f"loadgen send: {err.strip()}")
        sent = json.loads(out)
        return sent, loadgen.finish_receiver(recv, [sent])


def counters(sw):
    """{name: value} of the mode's counter groups (labels and fabric), the switch's drops, and
    under "kernel" what the kernel fast path forwarded itself (empty in userspace)."""
    report = sw.stats()
    out = {}
    for g in report["mode_counters"]:
        out.update(g["counters"])
    out["drops"] = report["drops"]
    out["kernel"] = (report.get("fast_path") or {}).get("labels", {})
    return out


def stacks(frames):
    """Per frame: its label stack entries as (ports, bottom, ttl), then the IP version after them;
    for a frame with no stack, ((), its ethertype)."""
    from scapy.all import Ether
    out = []
    for f in frames:
        eth = Ether(bytes(f))
        raw = bytes(eth.payload)
        if eth.type != 0x8847:
            out.append(((), eth.type))
            continue
        entries, at = [], 0
        while at + 4 <= len(raw):
            (word,) = struct.unpack("!I", raw[at:at + 4])
            entry = ((word >> 24, (word >> 16) & 0xff, (word >> 8) & 0xff), bool(word & 0x80), word & 0x7f)
            entries.append(entry)
            at += 4
            if entry[1]:
                break
        out.append((tuple(entries), raw[at] >> 4 if at < len(raw) else None))
    return out


def route_labels(stack):
    """The route part of a stack (entries with TTL ≠ 0), as the ports still to use."""
    ports = []
    for (p, _bottom, ttl) in stack:
        if ttl == 0:
            break
        ports.extend(p[:ttl])
    return ports


def host_switch(fabric, host):
    return next(s for s in fabric.switches if host.switch_side in fabric.ports[s])


@contextlib.contextmanager
def openflow_switches(fabric, mode, paths, datapath="user", tag="less-of"):
    """The same fabric under OpenFlow, for comparison: edgeflow switches (datapath ids 1, 2, … in
    fabric order) programmed by the os-ken app testbed/apps/fabric_routes.py, which is told the
    wiring. `mode` is "failover" (fast-failover groups) or "reactive" (the controller reroutes on
    port-status); `paths` is [(src host, dst host, [switch names])], the routes LESS would take."""
    from .controllers import OsKen
    for a_if, b_if in fabric.links:
        for i in (a_if, b_if):
            netns.sh("ip", "link", "set", i, "mtu", str(FABRIC_MTU))
    settings = Edgeflow.HOST_SETTINGS[datapath]
    for h in fabric.hosts:
        if settings:
            h.set_offload(**settings)
    links = []
    for a_if, b_if in fabric.links:
        a = next(s for s in fabric.switches if a_if in fabric.ports[s])
        b = next(s for s in fabric.switches if b_if in fabric.ports[s])
        links.append([a, fabric.ports[a].index(a_if) + 1, b, fabric.ports[b].index(b_if) + 1])
    spec = {
        "mode": mode,
        "switches": {s: i + 1 for i, s in enumerate(fabric.switches)},
        "links": links,
        "hosts": [{"ip": h.addr, "mac": h.mac, "switch": host_switch(fabric, h), "port": port_of(fabric, host_switch(fabric, h), h)}
                  for h in fabric.hosts],
        "paths": [{"src": s.addr, "dst": d.addr, "path": p} for s, d, p in paths],
    }
    path = run_dir("less") / f"{tag}-{mode}.json"
    path.write_text(json.dumps(spec, indent=1))
    switches = {}
    with OsKen("fabric_routes", env={"EF_FABRIC": str(path)}, log_name=f"{tag}-{mode}") as ctl:
        try:
            for i, name in enumerate(fabric.switches):
                sw = Edgeflow(fabric.ports[name], controllers=[ctl.target], fail_mode="secure", datapath=datapath,
                              extra=["--dpid", f"{i + 1:x}"], log_name=f"{tag}-{mode}-{name}-{datapath}")
                switches[name] = sw.start()
            yield switches
        finally:
            codes = {n: sw.stop() for n, sw in switches.items()}
    assert all(c == 0 for c in codes.values()), codes


def wait_paths_restored(fabric, sws, paths):
    """Waits until every switch of an OpenFlow fabric (openflow_switches) sees all its ports up and
    sends each path's frames along the path as configured (a reactive controller rewrote them
    while a link was down)."""
    def restored():
        for name, sw in sws.items():
            if not all(p["up"] for p in sw.stats()["ports"]):
                return False
        for src, dst, hops in paths:
            for at, name in enumerate(hops):
                want = port_of(fabric, name, hops[at + 1]) if at + 1 < len(hops) else port_of(fabric, name, dst)
                rule = [f for f in sws[name].flows() if "priority=20" in f and f"nw_src={src.addr}" in f
                        and f"nw_dst={dst.addr}" in f]
                if len(rule) != 1 or not (f"output:{want}" in rule[0] or "group:" in rule[0]):
                    return False
        return True
    wait_for(restored, timeout=15, what="OpenFlow paths restored")
