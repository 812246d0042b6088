"""The switch's peak resident memory through a mass delete (issue 56): the roles sequence's
flows (exact shape, each with OFPFF_SEND_FLOW_REM) installed by a master, then one delete-all
flow-mod whose flow-removed messages the master reads to the last. As `testbed/roles.py` runs it: A
master, B equal with flow-removed messages turned off, C slave; only A hears of the delete. The
switch has one port: a namespace's veth, so it runs under the machine lock,

    ef-itest .venv/bin/python -m testbed.delete_memory [FLOWS]     (EDGEFLOW_BIN picks the build)

or an interface given as DELETE_MEMORY_PORT (one made by hand: no traffic is sent).
DELETE_MEMORY_DATAPATH=tc (or xdp) runs the switch on that datapath.

With DELETE_MEMORY_LATE=1, B keeps the default asynchronous configuration (an equal gets
flow-removed messages) and reads nothing until A has all of them: what the switch holds for a
controller that reads late is then in the peak too. B then reads every one, counted.

Prints VmHWM once the flows are in, the highest VmRSS seen while the delete's messages were
made and read (sampled every 5 ms, and from VmHWM reset before the delete), and the delete's
rate as `roles.run` times it."""

import contextlib
import os
import struct
import sys
import threading
import time

from . import netns, roles
from .churn import encode_flows
from .ofpeer import ECHO_REPLY, ECHO_REQUEST, FLOW_REMOVED, header
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


def read_flow_removed(conn, n, timeout=600):
    """Reads `conn` (an `ofpeer.Conn`) until `n` flow-removed messages came, answering echoes."""
    buf, seen, deadline = conn.buf, 0, time.monotonic() + timeout
    conn.sock.settimeout(timeout)
    while seen < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"delete_memory: {seen} of {n} flow-removed messages")
        chunk = conn.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError(f"delete_memory: closed after {seen} of {n} flow-removed messages")
        buf += chunk
        at = 0
        while len(buf) - at >= 8:
            _, typ, length, xid = struct.unpack_from("!BBHI", buf, at)
            if len(buf) - at < length:
                break
            if typ == FLOW_REMOVED:
                seen += 1
            elif typ == ECHO_REQUEST:
                conn.send(header(ECHO_REPLY, length, xid) + buf[at + 8:at + length])
            at += length
        buf = buf[at:]
    return seen


def measure(n):
    given = os.environ.get("DELETE_MEMORY_PORT")
    late = os.environ.get("DELETE_MEMORY_LATE") == "1"
    with contextlib.ExitStack() as stack:
        if given:
            ports = [given]
        else:
            topo = stack.enter_context(netns.Topology("dm"))
            topo.add_host()
            ports = topo.switch_ports
        ctls = stack.enter_context(roles.Controllers())
        extra = ["--dpid", "0xe8", "--probe-interval", "120"]
        datapath = os.environ.get("DELETE_MEMORY_DATAPATH")  # user (the default), tc or xdp
        with Edgeflow(ports, controllers=ctls.targets, extra=extra, log_name="delete-memory", datapath=datapath) as sw:
            pid = sw.proc.pid
            if late:
                conns = [listener.accept(timeout=60) for listener in ctls.listeners]
                ctls.peers = [roles.Peer(conns[0]), roles.Peer(conns[2])]
                (a, c), b = ctls.peers, conns[1]
            else:
                a, b, c = ctls.accept()
            idle = status_kib(pid, "VmRSS")
            assert a.set_role(roles.MASTER, 1, 11)[:2] == (roles.ROLE_REPLY, roles.MASTER)
            assert c.set_role(roles.SLAVE, 1, 12)[:2] == (roles.ROLE_REPLY, roles.SLAVE)
            if not late:
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
            a.wait(lambda: a.counts[FLOW_REMOVED] >= n, 600)
            delete_s = time.monotonic() - t0
            # Past its output limit in flow-removed messages, B holds every connection's
            # requests: A's barrier is read once B has read.
            late_read = read_flow_removed(b, n) if late else 0
            a.barrier(22)
            sampled = sampler.stop()
            delete_hwm = status_kib(pid, "VmHWM")
            after = status_kib(pid, "VmRSS")
            removed = [a.counts[FLOW_REMOVED], late_read, c.counts[FLOW_REMOVED]]
            assert removed == [n, n if late else 0, 0], removed
    mib = lambda k: round(k / 1024, 1)  # noqa: E731
    return dict(flows=n, idle_mib=mib(idle), installed_mib=mib(installed_rss), install_hwm_mib=mib(install_hwm),
                delete_hwm_mib=mib(delete_hwm), delete_sampled_mib=mib(sampled), after_delete_mib=mib(after),
                delete_per_s=round(n / delete_s), late_reader=late,
                datapath=datapath or "user")


if __name__ == "__main__":
    print(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000))
