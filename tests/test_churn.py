"""Flow churn leaves untouched traffic alone: flow-mods that no cached translation can see retire
nothing, in userspace or in the kernel, while traffic flows; a flow-mod that can retires exactly
the entry it affects, and the traffic then follows the new flow. (The rates are measured by the
`churn` benchmark in `make bench`.)"""

import time

import pytest

from testbed import loadgen, netns
from testbed.churn import Background, Churner
from testbed.experiments.churn import counters
from testbed.switches import edgeflow_on

SPORT, FIRST_PORT, N_FLOWS = 9000, 10000, 200


def traffic(h1, to, flows=N_FLOWS, dport=FIRST_PORT, seconds=1.0):
    """Frames over `flows` UDP flows from h1 to host `to`, paced: (sent, received) reports."""
    return loadgen.run(h1, to, size=64, rate=20_000, duration=seconds, send_engine="socket", recv_engine="socket",
                       extra_send=["--sport", str(SPORT), "--dport", str(dport), "--udp-flows", str(flows)])


# One kernel hook: which entries a flow-mod retires is userspace's decision, and retiring deletes
# from the megaflow map both hooks read.
@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_unrelated_churn_retires_nothing_and_a_related_flow_mod_retires_its_entry(datapath):
    netns.cleanup()
    with netns.Topology("r") as topo:
        h1, h2, h3 = topo.add_host(), topo.add_host(), topo.add_host()
        with edgeflow_on(datapath, topo.hosts, topo.switch_ports, log_name="churn") as sw:
            sw.ofctl("del-flows")
            with Churner(sw.target) as ctl:
                ctl.install(N_FLOWS, SPORT, FIRST_PORT, 2)
                assert ctl.errors == 0
            sent, got = traffic(h1, h2)
            assert got["received"] == sent["sent"] > 10_000, (sent, got)
            before = counters(sw)
            assert before["cache_entries"] >= N_FLOWS, before
            if datapath != "user":
                # Every flow's, and any other frame's the hosts sent (a drop is cached too).
                assert before["kernel_entries"] >= N_FLOWS, before

            # 2 000 flow-mods a second for flows of a source port no frame uses, while frames flow.
            with Churner(sw.target) as churner:
                with Background(churner, 2000, 7000, FIRST_PORT, 100, 2) as bg:
                    time.sleep(0.2)
                    sent, got = traffic(h1, h2)
                    mods, _ = bg.stop()
                assert churner.errors == 0
            assert mods >= 2000, mods
            assert got["received"] == sent["sent"], (sent, got)
            after = counters(sw)
            assert after["cache_retired"] == before["cache_retired"], (before, after)
            assert after["cache_flushes"] == before["cache_flushes"], (before, after)
            if datapath != "user":
                assert after["kernel_retired"] == before["kernel_retired"], (before, after)
                assert after["kernel_entries"] == before["kernel_entries"], (before, after)
                # Every frame of the churn run was the kernel's: no miss went up.
                assert after["kernel_upcalls"] == before["kernel_upcalls"], (before, after)

            # A flow that wins for one of the cached flows: that entry, and only it, goes.
            moved = FIRST_PORT + 7
            sw.ofctl("add-flow", f"priority=200,udp,tp_src={SPORT},tp_dst={moved},actions=output:3")
            changed = counters(sw)
            assert changed["cache_retired"] - after["cache_retired"] == 1, (after, changed)
            if datapath != "user":
                assert changed["kernel_retired"] - after["kernel_retired"] == 1, (after, changed)
                assert changed["kernel_entries"] == after["kernel_entries"] - 1, (after, changed)
            sent, got = traffic(h1, h3, flows=1, dport=moved, seconds=0.5)
            assert got["received"] == sent["sent"] > 1000, ("the moved flow reaches h3", sent, got)
