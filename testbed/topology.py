"""Multi-switch topologies: switches joined by veth links, hosts in namespaces on them.

`Fabric` describes the graph; `build()` creates every namespace and veth pair (all named `ef-…`)
and tells each switch which interfaces are its ports, in OpenFlow port order. Teardown deletes
them again; `netns.cleanup()` removes what a crashed run left.
"""

import atexit
import signal
import sys

from .netns import PREFIX, Host, cleanup, sh, tag_interface


class Fabric:
    def __init__(self, tag):
        self.tag = tag
        self.switches = []            # names
        self.ports = {}               # switch -> [interface names]
        self.hosts = []               # Host objects
        self.links = []               # (a_if, b_if)
        self._host_specs = []
        self._link_specs = []

    def switch(self, name):
        self.switches.append(name)
        self.ports[name] = []
        return name

    def host(self, switch, ip, vlan=None, ip6=None):
        """A host on `switch`; with `ip6` ("fd00::2/64") it speaks IPv6 too, from that address
        and its link-local one (both without duplicate address detection, so usable at once);
        otherwise IPv6 is off, and its multicast chatter with it."""
        self._host_specs.append((switch, ip, vlan, ip6))

    def link(self, a, b):
        self._link_specs.append((a, b))

    def _ifname(self, sw):
        # Interface names have at most 15 characters: ef-<tag><switch><n>.
        name = f"{PREFIX}-{self.tag}{sw}{len(self.ports[sw]) + 1}"
        assert len(name) <= 15, name
        return name

    def build(self):
        for i, (sw, ip, vlan, ip6) in enumerate(self._host_specs, 1):
            ns = f"{PREFIX}-{self.tag}h{i}"
            side = self._ifname(sw)
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", side, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", side, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            if ip6:
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0")
            else:
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "addr", "add", ip, "dev", "eth0")
            if ip6:
                sh("ip", "-n", ns, "addr", "add", ip6, "dev", "eth0", "nodad")
            sh("sysctl", "-qw", f"net.ipv6.conf.{side}.disable_ipv6=1", check=False)
            if vlan is not None:
                tag_interface(ns, "eth0", vlan)
            import json
            mac = json.loads(sh("ip", "-n", ns, "-j", "link", "show", "eth0").stdout)[0]["address"]
            self.ports[sw].append(side)
            self.hosts.append(Host(ns, ip, side, mac, extra={"ip6": ip6} if ip6 else {}))
        for a, b in self._link_specs:
            ia, ib = self._ifname(a), None
            self.ports[a].append(ia)
            ib = self._ifname(b)
            self.ports[b].append(ib)
            sh("ip", "link", "add", ia, "type", "veth", "peer", "name", ib)
            for i in (ia, ib):
                sh("ip", "link", "set", i, "up")
                sh("sysctl", "-qw", f"net.ipv6.conf.{i}.disable_ipv6=1", check=False)
            self.links.append((ia, ib))
        return self

    def teardown(self):
        for h in self.hosts:
            sh("ip", "netns", "del", h.name, check=False)
            sh("ip", "link", "del", h.switch_side, check=False)
        for a, _ in self.links:
            sh("ip", "link", "del", a, check=False)
        self.hosts, self.links = [], []

    def __enter__(self):
        return self.build()

    def __exit__(self, *exc):
        self.teardown()


def single(tag, n):
    """N hosts on one switch `s`."""
    f = Fabric(tag)
    f.switch("s")
    for i in range(1, n + 1):
        f.host("s", f"10.0.0.{i}/24")
    return f


def chain(tag, length):
    """h1 - s1 - s2 - … - s<length> - h2."""
    f = Fabric(tag)
    names = [f.switch(f"s{i}") for i in range(1, length + 1)]
    f.host(names[0], "10.0.0.1/24")
    f.host(names[-1], "10.0.0.2/24")
    for a, b in zip(names, names[1:]):
        f.link(a, b)
    return f


def two_paths(tag):
    """h1 - a ==(two links)== b - h2: the failover topology (it has a loop: needs OpenFlow flows)."""
    f = Fabric(tag)
    f.switch("a")
    f.switch("b")
    f.host("a", "10.0.0.1/24")
    f.host("b", "10.0.0.2/24")
    f.link("a", "b")
    f.link("a", "b")
    return f


def leaf_spine(tag, leaves=2, hosts_per_leaf=2):
    """A small fabric: leaves with hosts, each leaf linked to one spine (a tree: no loop)."""
    f = Fabric(tag)
    spine = f.switch("p")
    n = 0
    for l in range(1, leaves + 1):
        leaf = f.switch(f"l{l}")
        for _ in range(hosts_per_leaf):
            n += 1
            f.host(leaf, f"10.0.0.{n}/24")
        f.link(leaf, spine)
    return f


def teardown_on_exit():
    """Removes every `ef-` namespace and interface when the process ends, also on Ctrl-C or SIGTERM."""
    def handler(signum, frame):
        cleanup()
        sys.exit(128 + signum)

    atexit.register(cleanup)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
