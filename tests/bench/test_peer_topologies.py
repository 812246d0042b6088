"""The peers the experiments measure edgeflow against, on the multi-switch fabrics they use: the
Linux bridge and Open vSwitch (userspace datapath) learn across a chain of three switches and a
two-leaf spine. This tests the testbed, not edgeflow (whose own run is in make test's
tests/test_topologies.py), so it runs in `make bench-quick`."""

import pytest

from testbed import netns, topology
from testbed.switches import learn_across


@pytest.mark.parametrize("kind", ["ovs-netdev", "linux-bridge"])
def test_peers_learn_across_chain_and_leaf_spine(kind):
    for fabric in (topology.chain("c", 3), topology.leaf_spine("s", leaves=2, hosts_per_leaf=2)):
        assert learn_across(kind, fabric) == 2, f"{kind}: {fabric.switches}"
    assert not [n for n in netns.namespaces() if n.startswith("ef-c") or n.startswith("ef-s")]
