"""Hosts in network namespaces, wired to a switch by veth pairs.

Every namespace and interface this module creates starts with PREFIX, so that `cleanup()` can remove
what a crashed or interrupted run left behind without touching anything else on the machine.
"""

import json
import re
import subprocess
from dataclasses import dataclass, field

from .util import TIMEOUT_SCALE

PREFIX = "ef"


def sh(*cmd, check=True, timeout=60, input=None):
    """Runs a command, returning its CompletedProcess (text mode)."""
    if timeout is not None:
        timeout *= TIMEOUT_SCALE
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, input=input)


def namespaces():
    out = sh("ip", "-j", "netns", "list", check=False).stdout.strip()
    return [n["name"] for n in json.loads(out)] if out else []


def links():
    out = sh("ip", "-j", "link", "show", check=False).stdout.strip()
    return [l["ifname"] for l in json.loads(out)] if out else []


#: Held by whoever builds namespaces for a while (a test session, a benchmark, a soak, the demo):
#: a second one would wipe the first one's namespaces and interfaces when it cleans up (a test
#: session did, and failed a CI run half-way).
SESSION_LOCK = "/run/edgeflow-tests.lock"


class Busy(RuntimeError):
    pass


_held = None


def exclusive(what):
    """Takes the testbed's lock for `what` (a name for the message), or raises Busy; a process that
    holds it already (a test session running a benchmark) keeps it. The lock lasts while the
    returned file is open, or for the process."""
    global _held
    import fcntl
    if _held is not None and not _held.closed:
        return _held
    lock = open(SESSION_LOCK, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise Busy(f"another edgeflow session (tests, bench, soak or demo) holds {SESSION_LOCK}: {what} would "
                   "wipe its namespaces and interfaces; wait for it to finish") from None
    _held = lock
    return lock


def cleanup(prefix=PREFIX):
    """Deletes every namespace and root-namespace interface whose name starts with `prefix`, and
    stops Open vSwitch daemons a crashed run left in the testbed's run directory."""
    from .util import RUN_DIR
    sh("pkill", "-9", "-f", f"(ovsdb-server|ovs-vswitchd) .*{RUN_DIR}", check=False)
    for ns in namespaces():
        if ns.startswith(prefix + "-"):
            sh("ip", "netns", "del", ns, check=False)
    for link in links():
        if link.startswith(prefix + "-"):
            sh("ip", "link", "del", link, check=False)


def testbed_object(name, *defines):
    """A BPF object of testbed/bpf/NAME.c, built on demand (once per set of -D defines)."""
    from .util import ROOT, run_dir

    obj = run_dir("bpf") / ("_".join([name, *(d.split("=")[-1] for d in defines)]) + ".o")
    src = ROOT / "testbed" / "bpf" / f"{name}.c"
    if not obj.exists() or obj.stat().st_mtime < src.stat().st_mtime:
        arch = subprocess.run(["uname", "-m"], capture_output=True, text=True).stdout.strip()
        sh("clang-14", "-O2", "-g", "-target", "bpf", *(f"-D{d}" for d in defines), f"-I/usr/include/{arch}-linux-gnu",
           "-c", str(src), "-o", str(obj))
    return obj


def host_vlan_object(vid):
    """The BPF object that makes a host interface a tagged member of VLAN `vid`."""
    return testbed_object("host_vlan", f"VID={vid}")


def tag_interface(ns, dev, vid):
    """Makes `dev` in namespace `ns` send and receive only frames tagged with `vid`.

    The kernel here has no 802.1Q module (no VLAN subinterfaces), so a tc BPF program pushes the
    tag on egress and pops it on ingress; the host's stack sees plain frames.
    """
    obj = str(host_vlan_object(vid))
    base = ["ip", "netns", "exec", ns, "tc"]
    sh(*base, "qdisc", "add", "dev", dev, "clsact")
    sh(*base, "filter", "add", "dev", dev, "egress", "bpf", "direct-action", "obj", obj, "sec", "tc/egress")
    sh(*base, "filter", "add", "dev", dev, "ingress", "bpf", "direct-action", "obj", obj, "sec", "tc/ingress")


@dataclass
class Host:
    """A namespace with one interface (`eth0`) whose peer sits in the root namespace."""

    name: str
    ip: str
    switch_side: str
    mac: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def addr(self):
        return self.ip.split("/")[0]

    @property
    def addr6(self):
        """The IPv6 address the host was given, if any."""
        ip6 = self.extra.get("ip6")
        return ip6.split("/")[0] if ip6 else None

    def cmd(self, *cmd):
        # nsenter keeps /sys of the root namespace visible (pinned BPF objects need that later);
        # `ip netns exec` would remount it.
        return ["nsenter", f"--net=/run/netns/{self.name}", *cmd]

    def run(self, *cmd, check=True, timeout=60):
        return sh(*self.cmd(*cmd), check=check, timeout=timeout)

    def popen(self, *cmd, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        return subprocess.Popen(self.cmd(*cmd), **kw)

    def ping(self, dst, count=3, interval=0.2, timeout=10):
        """Returns (received, sent, avg_rtt_ms or None)."""
        r = self.run("ping", "-n", "-c", str(count), "-i", str(interval), "-W", "1", dst, check=False, timeout=timeout)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", r.stdout)
        if not m:
            # Output that cannot be read says nothing about what arrived: it is no 0.
            raise RuntimeError(f"ping {dst} from {self.name}: no summary (exit {r.returncode}): "
                               f"{(r.stdout + r.stderr).strip()}")
        sent, received = int(m.group(1)), int(m.group(2))
        rtt = re.search(r"= [\d.]+/([\d.]+)/", r.stdout)
        return received, sent, float(rtt.group(1)) if rtt else None

    def set_offload(self, **features):
        """ethtool -K on the host interface, e.g. set_offload(tx="off"). GRO on is how a veth takes
        frames an XDP program redirects into it (NAPI) from Linux 5.13; before, only an XDP
        program of its own does that, so one that passes everything is attached too."""
        args = [x for k, v in features.items() for x in (k, v)]
        self.run("ethtool", "-K", "eth0", *args)
        from .util import kernel_version

        if features.get("gro") == "on" and kernel_version() < (5, 13):
            self.run("ip", "link", "set", "dev", "eth0", "xdpdrv", "obj", str(testbed_object("xdp_pass")), "sec", "xdp")


class Topology:
    """N hosts, each attached to one switch-side interface `ef-<tag>p<i>`."""

    def __init__(self, tag="t"):
        self.tag = tag
        self.hosts = []

    def add_host(self, ip=None, vlan=None, queues=None):
        """`queues`: that many transmit and receive queues on both ends of the veth (else one)."""
        i = len(self.hosts) + 1
        ns = f"{PREFIX}-{self.tag}h{i}"
        side = f"{PREFIX}-{self.tag}p{i}"
        ip = ip or f"10.0.0.{i}/24"
        sh("ip", "netns", "add", ns)
        q = ["numtxqueues", str(queues), "numrxqueues", str(queues)] if queues else []
        sh("ip", "link", "add", side, *q, "type", "veth", "peer", "name", "eth0", *q, "netns", ns)
        sh("ip", "link", "set", side, "up")
        base = ["ip", "-n", ns]
        sh(*base, "link", "set", "lo", "up")
        sh(*base, "link", "set", "eth0", "up")
        sh(*base, "addr", "add", ip, "dev", "eth0")
        if vlan is not None:
            tag_interface(ns, "eth0", vlan)
        # Off: IPv6 duplicate-address detection and router solicitations add traffic tests do not expect.
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        sh("sysctl", "-qw", f"net.ipv6.conf.{side}.disable_ipv6=1", check=False)
        mac = json.loads(sh(*base, "-j", "link", "show", "eth0").stdout)[0]["address"]
        host = Host(ns, ip, side, mac)
        self.hosts.append(host)
        return host

    @property
    def switch_ports(self):
        return [h.switch_side for h in self.hosts]

    def teardown(self):
        for h in self.hosts:
            sh("ip", "netns", "del", h.name, check=False)
            sh("ip", "link", "del", h.switch_side, check=False)
        self.hosts = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()


class CarrierWatch:
    """Notes when the kernel reports carrier lost on any of `ifnames` (root namespace), on the
    CLOCK_REALTIME clock the load generator stamps frames with: `ip -ts monitor link` at
    SCHED_FIFO, which stamps each netlink message as it arrives (tens of µs late at most; a
    thread of the testbed's own was late by up to a millisecond while the link went down)."""

    LINE = re.compile(r"^\[(\S+)\] (?:Deleted )?\d+: ([^:@]+)[@:].*?<([^>]*)>")

    def __init__(self, ifnames):
        import time
        self.ifnames = set(ifnames)
        self.proc = subprocess.Popen(["chrt", "-f", "50", "ip", "-ts", "-o", "monitor", "link"],
                                     stdout=subprocess.PIPE, text=True)
        time.sleep(0.2)

    def close(self):
        """Stops watching; the time (ns) of the first carrier loss seen, or None."""
        from datetime import datetime
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        for line in out.splitlines():
            m = self.LINE.match(line)
            if m and m.group(2) in self.ifnames and "LOWER_UP" not in m.group(3).split(","):
                # `ip` prints local time; fromisoformat/timestamp read it back as local time.
                return int(datetime.fromisoformat(m.group(1)).timestamp() * 1e6) * 1000
        return None
