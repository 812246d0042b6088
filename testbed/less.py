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
import struct

from . import netns
from .switches import Edgeflow
from .topology import Fabric
from .util import run_dir, wait_for

#: Fabric links carry labels and a reroute block on top of a host's 1500-byte packets, as MPLS
#: cores carry a larger MTU than their edges.
FABRIC_MTU = 1600


def six(tag="lf"):
    f = Fabric(tag)
    for s in "rabcde":
        f.switch(s)
    f.host("b", "10.0.0.2/24")
    f.host("c", "10.0.0.3/24")
    f.host("e", "10.0.0.5/24")
    for a, b in ["ra", "rb", "ab", "ac", "bd", "ce", "de"]:
        f.link(a, b)
    return f


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
def less_switches(fabric, root="r", datapath="user", tag="less", hello_ms=None, hold_ms=None):
    """One edgeflow switch in LESS mode per switch of `fabric`, `root` the root; fabric links get
    FABRIC_MTU."""
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
            lines = ['mode = "less"', "[less]", f"root = {'true' if name == root else 'false'}"]
            if hello_ms:
                lines.append(f"hello_ms = {hello_ms}")
            if hold_ms:
                lines.append(f"hold_ms = {hold_ms}")
            cfg.write_text("\n".join(lines) + "\n")
            sw = Edgeflow(fabric.ports[name], datapath=datapath, extra=["--config", str(cfg)],
                          log_name=f"{tag}-{name}-{datapath}")
            switches[name] = sw.start()
        yield switches
    finally:
        codes = {n: sw.stop() for n, sw in switches.items()}
    assert all(c == 0 for c in codes.values()), codes


def wait_converged(fabric, sws):
    """Waits until every switch of the six-switch fabric has its addresses (E two), then lets its
    hosts find each other as unmodified hosts do: by ARP, retried until answered."""
    want = {"r": 1, "a": 1, "b": 1, "c": 1, "d": 1, "e": 2}
    wait_for(lambda: all(counters(sws[n])["addresses"] == k for n, k in want.items()), timeout=10,
             what="LESS addresses")
    hb, hc, he = fabric.hosts
    for a, b in [(he, hb), (hc, hb), (hb, hc), (hb, he)]:
        wait_for(lambda: a.ping(b.addr, count=1, timeout=3)[0] == 1, timeout=15, what=f"{a.name} -> {b.addr}")


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
