"""Multi-switch topologies for each kind of switch, and cleanup after Ctrl-C or a crash."""

import signal
import subprocess
import sys
import time

import pytest

from testbed import netns, topology
from testbed.switches import DEFAULT_SWITCHES, LinuxBridge, OvsNetdev, edgeflow_on
from testbed.util import ROOT


def start_all(kind, fabric, stack):
    """A switch of `kind` for every switch of `fabric`, learning on its own (no controller). Open
    vSwitch runs one bridge per switch on one daemon (its userspace datapath is one per machine)."""
    ovs = None
    for name in fabric.switches:
        ports = fabric.ports[name]
        if kind == "linux-bridge":
            stack.enter_context(LinuxBridge(ports, dev=f"ef-br{name}"))
        elif kind == "ovs-netdev" and ovs is not None:
            ovs.add_bridge(f"ef-ovs{name}", ports)
        elif kind == "ovs-netdev":
            ovs = stack.enter_context(OvsNetdev(ports, log_name=f"topo-ovs-{name}", bridge=f"ef-ovs{name}"))
        else:
            datapath = kind.split("-")[1] if "-" in kind else "user"
            stack.enter_context(edgeflow_on(datapath, fabric.hosts, ports, log_name=f"topo-{kind}-{name}"))


@pytest.mark.parametrize("kind", DEFAULT_SWITCHES)
def test_chain_and_leaf_spine(kind):
    from contextlib import ExitStack
    for fabric in (topology.chain("c", 3), topology.leaf_spine("s", leaves=2, hosts_per_leaf=2)):
        with fabric, ExitStack() as stack:
            start_all(kind, fabric, stack)
            first, last = fabric.hosts[0], fabric.hosts[-1]
            received = 0
            for _ in range(5):  # learning across several switches takes a moment
                received = first.ping(last.addr, count=2, interval=0.2)[0]
                if received:
                    break
                time.sleep(0.5)
            assert received == 2, f"{kind}: {fabric.switches}"
    assert not [n for n in netns.namespaces() if n.startswith("ef-c") or n.startswith("ef-s")]


BUILDER = """
import sys, time
sys.path.insert(0, {root!r})
from testbed import topology
topology.teardown_on_exit()
f = topology.leaf_spine("k").build()
print("built", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("how", ["sigint", "sigkill"])
def test_teardown_after_interrupt_or_crash(how):
    proc = subprocess.Popen([sys.executable, "-c", BUILDER.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "built"
    assert any(n.startswith("ef-kh") for n in netns.namespaces())
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
        # The process tore its own topology down.
        assert not any(n.startswith("ef-k") for n in netns.namespaces())
        assert not any(l.startswith("ef-k") for l in netns.links())
    else:
        proc.kill()
        proc.wait()
        assert any(n.startswith("ef-kh") for n in netns.namespaces()), "a crash leaves it behind..."
        netns.cleanup()
        assert not any(n.startswith("ef-k") for n in netns.namespaces()), "...and the next run's cleanup removes it"
        assert not any(l.startswith("ef-k") for l in netns.links())
