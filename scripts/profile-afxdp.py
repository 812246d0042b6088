"""Where a userspace AF_XDP forwarder's time goes (docs/deploy.md, "The limit: a bare AF_XDP
forwarder"): the bare forwarder (`edgeflow-loadgen forward --engine af_xdp`) or the switch on AF_XDP
ports (`edgeflow-afxdp`) between two hosts' veths, while loadgen's XDP sender offers frames at full
speed for 3 s. Prints one JSON line: rates, frames forwarded, the process's user and system CPU time
(/proc/PID/stat) and CPU time per forwarded frame, and for the forwarder how long its thread ran and
waited for a core (/proc/PID/schedstat); with perf (the default), `perf stat` counts its
system calls into OUT/WHAT-SIZE.stat and `perf record -g` samples it into OUT/WHAT-SIZE.data.

Run through the machine lock, from the checkout:
    ef-itest env PYTHONPATH=. .venv/bin/python scripts/profile-afxdp.py [forward|switch] [wait|busy] [SIZE]
        [--no-perf] [--out DIR]
"""

import argparse
import json
import subprocess
from contextlib import ExitStack
from pathlib import Path

from testbed import loadgen, netns
from testbed.experiments.common import switch_under_test

SECONDS = 3.0
PERF_EVENTS = ("task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_sendto,"
               "syscalls:sys_enter_ppoll,syscalls:sys_enter_recvfrom")
CLOCK_TICKS = 100  # /proc/PID/stat's unit (USER_HZ)


def cpu_seconds(pid):
    """User and system CPU time of the whole process (every thread), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def sched_seconds(pid):
    """Time the process's first thread ran and waited runnable for a core, in seconds
    (/proc/PID/schedstat): the forwarder's one thread; the switch's forwarding thread is another."""
    run_ns, wait_ns = Path(f"/proc/{pid}/schedstat").read_text().split()[:2]
    return int(run_ns) / 1e9, int(wait_ns) / 1e9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("forward", "switch"), nargs="?", default="forward")
    p.add_argument("poll", choices=("wait", "busy"), nargs="?", default="wait")
    p.add_argument("size", type=int, nargs="?", default=64)
    p.add_argument("--no-perf", action="store_true", help="CPU time only (perf costs the process time)")
    p.add_argument("--out", type=Path, default=Path("build/profile-afxdp"))
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    stem = a.out / f"{a.what}-{a.poll}-{a.size}"
    with netns.Topology("pax") as topo, ExitStack() as stack:
        h1, h2 = topo.add_host(), topo.add_host()
        src, dst = topo.switch_ports
        if a.what == "switch":
            kind = "edgeflow-afxdp" + ("-busy" if a.poll == "busy" else "")
            sw, _ = stack.enter_context(switch_under_test(kind, topo.hosts, topo.switch_ports))
            h2.ping(h1.addr, count=1)  # the receiver's address learned: no flooding
            proc = sw.proc
        else:
            proc = subprocess.Popen([loadgen.LOADGEN_BIN, "forward", "--engine", "af_xdp", "--poll", a.poll, "--from",
                                     src, "--to", dst], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            stack.callback(proc.kill)
            if not proc.stdout.readline():
                raise SystemExit(f"forwarder: {proc.stderr.read()}")
        # As the switch's hosts have them (Edgeflow.HOST_SETTINGS["af_xdp"]); GRO on at the sender's
        # far end, for the XDP sender's frames to enter it.
        for h in (h1, h2):
            h.set_offload(tx="off", gro="off")
        loadgen.prepare_xdp_sender(h1)
        perf = []
        if not a.no_perf:
            window = ["--", "sleep", str(SECONDS + 0.5)]
            perf = [subprocess.Popen(["perf", "stat", "-x", ",", "-e", PERF_EVENTS, "-p", str(proc.pid), "-o",
                                      f"{stem}.stat", *window]),
                    subprocess.Popen(["perf", "record", "-q", "-F", "1999", "-g", "-p", str(proc.pid), "-o",
                                      f"{stem}.data", *window], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        user0, sys0 = cpu_seconds(proc.pid)
        ran0, waited0 = sched_seconds(proc.pid)
        sent, got = loadgen.run(h1, h2, size=a.size, rate=0, duration=SECONDS, send_engine="xdp")
        for x in perf:
            x.wait()
        user1, sys1 = cpu_seconds(proc.pid)
        ran1, waited1 = sched_seconds(proc.pid)
        forwarded = got["received"]
        if a.what == "forward":
            proc.terminate()
            out, _ = proc.communicate(timeout=20)
            totals = json.loads(out.splitlines()[-1])
            forwarded = totals["forwarded"]
    user, system = user1 - user0, sys1 - sys0
    print(json.dumps(dict(what=a.what, poll=a.poll, size=a.size, offered_pps=sent["achieved_pps"],
                          received_pps=got["pps"], forwarded=forwarded, user_s=round(user, 2),
                          system_s=round(system, 2),
                          cpu_ns_per_frame=round((user + system) * 1e9 / max(forwarded, 1), 1),
                          kernel_share=round(system / max(user + system, 1e-9), 3),
                          **({"ran_s": round(ran1 - ran0, 2), "waited_runnable_s": round(waited1 - waited0, 2)}
                             if a.what == "forward" else {}))))
    if perf:
        print(Path(f"{stem}.stat").read_text())


if __name__ == "__main__":
    main()
