"""Least privilege: the switch runs as an unprivileged user holding four capabilities (CAP_NET_RAW,
CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON) and forwards on every datapath; without one it refuses with
an error that names what it lacks."""

import subprocess
import time

import pytest

from testbed.netns import sh
from testbed.switches import EDGEFLOW_BIN, Edgeflow
from testbed.util import free_port, port_open, run_dir, wait_for

CAPS = ["net_raw", "net_admin", "bpf", "perfmon"]


def as_nobody(caps, *args):
    granted = ",".join(f"+{c}" for c in caps)
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", f"--inh-caps={granted}",
            f"--ambient-caps={granted}", EDGEFLOW_BIN, "run", *args]


@pytest.mark.parametrize("datapath", ["user", "tc", "xdp"])
def test_four_capabilities_are_enough(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    for h in two_hosts.hosts:
        if Edgeflow.HOST_SETTINGS[datapath]:
            h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
    port = free_port()
    args = [x for p in two_hosts.switch_ports for x in ("--port", p)]
    log_path = run_dir("logs") / f"unprivileged-{datapath}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(as_nobody(CAPS, *args, "--datapath", datapath, "--listen", f"ptcp:{port}"),
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: proc.poll() is not None or port_open(port), what="the unprivileged switch to listen")
        assert proc.poll() is None, log_path.read_text()
        target = f"tcp:127.0.0.1:{port}"
        for flow in ("priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"):
            sh("ovs-ofctl", "-O", "OpenFlow13", "add-flow", target, flow)
        assert h1.ping(h2.addr, count=3, interval=0.1)[0] == 3
        uid = int(open(f"/proc/{proc.pid}/status").read().split("Uid:")[1].split()[0])
        assert uid != 0, "it ran as nobody"
        # Everything it loads, it could: no warning but the management socket's directory (root's).
        warnings = [l for l in log_path.read_text().splitlines() if " WARN " in l or " ERROR " in l]
        assert all("no management socket" in l for l in warnings), warnings
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize("missing, says", [("net_raw", "this needs CAP_NET_RAW, which this process lacks"),
                                           ("perfmon", "this needs CAP_PERFMON, which this process lacks")])
def test_a_missing_capability_is_named(two_hosts, missing, says):
    args = [x for p in two_hosts.switch_ports for x in ("--port", p)]
    caps = [c for c in CAPS if c != missing]
    r = subprocess.run(as_nobody(caps, *args, "--datapath", "tc"), capture_output=True, text=True, timeout=20)
    assert r.returncode != 0
    assert says in r.stdout + r.stderr, r.stdout + r.stderr
