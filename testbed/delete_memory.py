"""The switch's peak resident memory through a mass delete (issue 56): the roles sequence's
flows (exact shape, each with OFPFF_SEND_FLOW_REM) installed by a master, then one delete-all
flow-mod whose flow-removed messages the master reads to the last. As `testbed/roles.py` runs it: A
master, B equal with flow-removed messages turned off, C slave; only A hears of the delete. The
switch has one port: a namespace's veth, so it runs under the machine lock,

    ef-itest .venv/bin/python -m testbed.delete_memory [FLOWS]     (EDGEFLOW_BIN picks the build)

or an interface given as DELETE_MEMORY_PORT (a dummy one made by hand: no traffic is sent).

Prints VmHWM once the flows are in, the highest VmRSS seen while the delete's messages were
made and read (sampled every 5 ms, and from VmHWM reset before the delete), and the delete's
rate as `roles.run` times it."""

import contextlib
import os
import sys
import threading
import time

from . import netns, roles
from .churn import encode_flows
from .ofpeer import FLOW_REMOVED
from .switches import Edgeflow


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid):
    """Linux 4.0+: writing 5 to clear_refs sets VmHWM to the current resident set."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


class Sampler:
    """The highest VmRSS seen, every 5 ms, until stopped."""

    def __init__(self, pid):
        self.pid, self.peak, self.running = pid, 0, True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            self.peak = max(self.peak, status_kib(self.pid, "VmRSS"))
            time.sleep(0.005)

    def stop(self):
        self.running = False
        self.thread.join()
        return self.peak


def measure(n):
    given = os.environ.get("DELETE_MEMORY_PORT")
    with contextlib.ExitStack() as stack:
        if given:
            ports = [given]
        else:
            topo = stack.enter_context(netns.Topology("dm"))
            topo.add_host()
            ports = topo.switch_ports
        ctls = stack.enter_context(roles.Controllers())
        with Edgeflow(ports, controllers=ctls.targets, extra=["--dpid", "0xe8"], log_name="delete-memory") as sw:
            pid = sw.proc.pid
            a, b, c = ctls.accept()
            idle = status_kib(pid, "VmRSS")
            assert a.set_role(roles.MASTER, 1, 11)[:2] == (roles.ROLE_REPLY, roles.MASTER)
            assert c.set_role(roles.SLAVE, 1, 12)[:2] == (roles.ROLE_REPLY, roles.SLAVE)
            b.send(roles.set_async_no_flow_removed())
            b.barrier(13)
            a.send(roles.with_send_flow_rem(encode_flows("exact", n, 2)))
            a.barrier(14)
            assert not a.errors, a.errors[:3]
            installed_rss, install_hwm = status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
            reset_peak(pid)
            sampler = Sampler(pid)
            t0 = time.monotonic()
            a.send(roles.delete_all(21))
            a.barrier(22)
            a.wait(lambda: a.counts[FLOW_REMOVED] >= n, 600)
            delete_s = time.monotonic() - t0
            sampled = sampler.stop()
            delete_hwm = status_kib(pid, "VmHWM")
            after = status_kib(pid, "VmRSS")
            removed = [p.counts[FLOW_REMOVED] for p in (a, b, c)]
            assert removed == [n, 0, 0], removed
    mib = lambda k: round(k / 1024, 1)  # noqa: E731
    return dict(flows=n, idle_mib=mib(idle), installed_mib=mib(installed_rss), install_hwm_mib=mib(install_hwm),
                delete_hwm_mib=mib(delete_hwm), delete_sampled_mib=mib(sampled), after_delete_mib=mib(after),
                delete_per_s=round(n / delete_s))


if __name__ == "__main__":
    print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000))
