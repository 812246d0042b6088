"""Restart without loss (issue 35, docs/deploy.md#restart): a switch run with `--keep-fastpath`
leaves the kernel forwarding the flows it holds when it is killed or stopped, and the next run of
the same switch takes the kernel's programs and maps over, while a stream between two hosts
loses nothing (sequence numbers). Its controller then sends its flows again; the entries the
last run left stay until its barrier, then the new run's own take over. `edgeflow stop --clean`
removes everything kept. Without `--keep-fastpath` the same restart loses frames."""

import json
import os
import signal
import subprocess
import time

import pytest

from testbed import loadgen
from testbed.switches import EDGEFLOW_BIN, Edgeflow
from testbed.util import run_dir, wait_for

from test_reload import Listener

DPID = "00000000000000e8"
FLOWS = ["priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"]


def config(ports, controller, keep):
    text = f'dpid = "0x{DPID}"\ncontrollers = ["tcp:127.0.0.1:{controller.port}"]\nkeep_fastpath = {str(keep).lower()}\n'
    return text + "".join(f'\n[[port]]\nname = "{p}"\nnumber = {i}\n' for i, p in ports)


def pinned():
    """What is pinned for the switch under /sys/fs/bpf/edgeflow."""
    d = f"/sys/fs/bpf/edgeflow/{DPID}"
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def bpftool(*args):
    return json.loads(subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True).stdout or "[]")


def newest_link():
    """The newest BPF link's id (ids only grow): links made after it are this test's."""
    return max((link["id"] for link in bpftool("link", "show")), default=0)


def attached(ports, since):
    """How many of the switch's programs are attached to `ports`: through links made after link
    `since` (bpftool lists them by program; Debian's bpftool names no interface for a TCX link, and
    a fast path another run kept on the machine holds links of its own), as TC filters or as
    netlink XDP programs."""
    names = {p["id"]: p.get("name", "") for p in bpftool("prog", "show")}
    n = sum(1 for link in bpftool("link", "show")
            if link["id"] > since and names.get(link.get("prog_id"), "").startswith("ef_"))
    for p in ports:
        tc = subprocess.run(["tc", "filter", "show", "dev", p, "ingress"], capture_output=True, text=True).stdout
        xdp = subprocess.run(["ip", "-d", "link", "show", "dev", p], capture_output=True, text=True).stdout
        n += tc.count("ef_tc_ingress") + ("prog/xdp" in xdp and "link_id" not in xdp)
    return n


def restart_under_stream(two_hosts, datapath, stop, keep, extra=()):
    """Starts the switch, streams h1 → h2 for 3 s at 5000 frames/s, and 0.8 s in stops the switch
    (`stop`: "kill" or "term") and starts it again; once it listens, the flows are sent again with
    a barrier (what a controller does on reconnecting). Returns the receiver's and sender's
    reports and the second run."""
    h1, h2 = two_hosts.hosts
    p1, p2 = two_hosts.switch_ports
    for h in two_hosts.hosts:
        if Edgeflow.HOST_SETTINGS[datapath]:
            h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
    controller = Listener()
    path = run_dir("restart") / f"edgeflow-{datapath}-{stop}.toml"
    path.write_text(config([(1, p1), (2, p2)], controller, keep))
    args = dict(datapath=datapath, extra=["--config", str(path), *extra])
    first = Edgeflow([], log_name=f"restart-{datapath}-{stop}-1", **args).start()
    second = Edgeflow([], log_name=f"restart-{datapath}-{stop}-2", **args)
    try:
        wait_for(lambda: controller.accepted >= 1, what="the controller's connection")
        for f in FLOWS:
            first.ofctl("add-flow", f)
        assert h1.ping(h2.addr, count=2, interval=0.05)[0] == 2
        with loadgen.streaming(h1, h2, rate=5000, duration=3) as finish:
            time.sleep(0.8)
            if stop == "kill":
                first.kill()
            else:
                assert first.stop(clean=False) == 0, first.log()
            if keep:
                # The maps and the record for the next run (and the links, where there are links).
                assert {"ef_megaflows", "record"} <= set(pinned()), pinned()
            second.start()
            wait_for(lambda: controller.accepted >= 2, what="the second run's controller connection")
            time.sleep(0.3)
            # The controller's flows again; ovs-ofctl ends with a barrier.
            for f in FLOWS:
                second.ofctl("add-flow", f)
            sent, got = finish()
        return got, sent, second
    except BaseException:
        second.stop()
        raise
    finally:
        if first.proc is not None:
            first.stop()


@pytest.mark.parametrize("datapath,stop,extra", [
    ("tc", "kill", ()),
    ("xdp", "term", ()),
    ("tc", "term", ("--kernel-compat", "legacy")),
], ids=["tc-sigkill", "xdp-sigterm", "tc-legacy-sigterm"])
def test_a_kept_fast_path_forwards_through_a_restart_without_a_lost_frame(two_hosts, datapath, stop, extra):
    h1, h2 = two_hosts.hosts
    ports = two_hosts.switch_ports
    since = newest_link()
    try:
        got, sent, second = restart_under_stream(two_hosts, datapath, stop, True, extra)
        try:
            print(f"\n{datapath} {stop}: {got['received']} of {sent['sent']} frames received, {got['lost']} lost")
            assert sent["sent"] > 10_000 and got["received"] == sent["sent"] and got["lost"] == 0, (sent, got)
            log = second.log()
            assert "kernel state kept by the last run taken over" in log, log
            assert "the last run's kernel entries released (the first barrier)" in log, log
            fp = second.stats()["fast_path"]
            assert fp["kept"]["inherited_entries"] is None, fp["kept"]
            # The new run's own entries carry the stream now: a handful of upcalls, not the stream.
            assert fp["upcalls"] + fp["misses"] < 200, fp
            # Both ways through the new run's entries, so that the kernel holds them when it stops.
            # Pinged before the dump: on a slow minute the 3 s stream ends before the new run has
            # installed anything (its log said installed=0), and then only these frames make the
            # entries the dump must show.
            assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
            assert any(f["actions"] == "output:2" for f in second.kernel_flows()["megaflows"])
            kinds = {a["kind"] for a in fp["attachments"]}
            assert kinds == ({"tc clsact"} if extra else {"tcx"} if datapath == "tc" else {"xdp native link"}), kinds
        finally:
            assert second.stop(clean=False) == 0, second.log()
        # Stopped, the kernel still forwards; `stop --clean` takes it all away.
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        assert attached(ports, since) >= 2, "programs stay attached while the switch is stopped"
        r = subprocess.run([EDGEFLOW_BIN, "stop", "--clean", DPID], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and f"switch {DPID}: removed" in r.stdout, (r.stdout, r.stderr)
        assert pinned() == [] and attached(ports, since) == 0
        assert h1.ping(h2.addr, count=2, interval=0.05)[0] == 0, "nothing forwards once cleaned"
    finally:
        subprocess.run([EDGEFLOW_BIN, "stop", "--clean", DPID], capture_output=True, timeout=30)


def test_without_keeping_a_restart_loses_frames(two_hosts):
    """The same restart without `--keep-fastpath`: the kernel stops forwarding with the daemon, so
    the restart test above can fail."""
    got, sent, second = restart_under_stream(two_hosts, "tc", "term", False)
    second.stop()
    print(f"\nwithout keeping: {got['lost']} of {sent['sent']} frames lost")
    assert got["lost"] > 100, (sent, got)
    assert pinned() == []
