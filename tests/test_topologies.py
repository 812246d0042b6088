"""Multi-switch topologies for each kind of switch, and cleanup after Ctrl-C or a crash."""

import signal
import subprocess
import sys

import pytest

from testbed import netns, topology
from testbed.switches import learn_across
from testbed.util import ROOT


@pytest.mark.parametrize("kind", ["edgeflow", "edgeflow-xdp"])
def test_chain_and_leaf_spine(kind):
    """edgeflow learns across a chain of three switches and a two-leaf spine, in userspace and on
    one kernel hook (XDP): learning is userspace's, and TC and XDP forward the entries it writes
    with one executor (`bpf/fp_ctx.h`), as test_faucet and test_osken show on TC.
    The same fabrics on the Linux bridge and Open vSwitch test the testbed, not the switch: they
    run in `make bench-quick` (tests/bench/test_peer_topologies.py), before the experiments that use
    those peers."""
    for fabric in (topology.chain("c", 3), topology.leaf_spine("s", leaves=2, hosts_per_leaf=2)):
        assert learn_across(kind, fabric) == 2, f"{kind}: {fabric.switches}"
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
