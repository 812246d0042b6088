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


def ef_links():
    """The ids of the BPF links (bpftool lists them, by program) whose program is one of the
    switch's (named ef_...), whatever they are attached to."""
    def bpftool(*args):
        return json.loads(subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True).stdout or "[]")
    names = {p["id"]: p.get("name", "") for p in bpftool("prog", "show")}
    return {link["id"] for link in bpftool("link", "show") if names.get(link.get("prog_id"), "").startswith("ef_")}


def attached(ports, before):
    """How many of the switch's programs are attached to `ports`: through links (those not in
    `before`, the ids there were before the switch started: a link's device is not listed, and a
    link left by anything else, even one whose device is gone, is not this switch's), as TC
    filters or as netlink XDP programs."""
    n = len(ef_links() - before)
    for p in ports:
        tc = subprocess.run(["tc", "filter", "show", "dev", p, "ingress"], capture_output=True, text=True).stdout
        xdp = subprocess.run(["ip", "-d", "link", "show", "dev", p], capture_output=True, text=True).stdout
        n += tc.count("ef_tc_ingress") + ("prog/xdp" in xdp and "link_id" not in xdp)
    return n


#: Frames the new run's own entry must carry before the stream stops: 0.2 s of it.
CARRIED = 1000


def output_2(sw):
    """The frames the kernel's h1 → h2 megaflow has carried (0 if it holds none)."""
    return sum(f["packets"] for f in sw.kernel_flows()["megaflows"] if f["actions"] == "output:2")


def restart_under_stream(two_hosts, datapath, stop, keep, extra=()):
    """Starts the switch, streams h1 → h2 at 5000 frames/s, and 0.5 s in stops the switch
    (`stop`: "kill" or "term") and starts it again; once it listens, the flows are sent again with
    a barrier (what a controller does on reconnecting). The stream goes on until the new run's own
    entry has carried CARRIED of its frames, however long the restart took, and then stops.
    Returns the receiver's and sender's reports, the second run, its fast path's counters just
    after the barrier and the frames its entry had carried when the stream stopped."""
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
        # 60 s only bounds a run that hangs: the stream stops once the new run's entry carries it.
        with loadgen.streaming(h1, h2, rate=5000, duration=60) as finish:
            time.sleep(0.5)
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
            at_barrier = second.stats()["fast_path"]
            carried = wait_for(lambda: (n := output_2(second)) >= CARRIED and n, timeout=20,
                               what=f"the new run's own entry to carry {CARRIED} frames of the stream")
            sent, got = finish(stop=True)
        return got, sent, second, at_barrier, carried
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
    ("xdp", "kill", ("--io", "af_xdp")),
], ids=["tc-sigkill", "xdp-sigterm", "tc-legacy-sigterm", "xdp-af_xdp-sigkill"])
def test_a_kept_fast_path_forwards_through_a_restart_without_a_lost_frame(two_hosts, datapath, stop, extra):
    h1, h2 = two_hosts.hosts
    ports = two_hosts.switch_ports
    before = ef_links()
    try:
        got, sent, second, at_barrier, carried = restart_under_stream(two_hosts, datapath, stop, True, extra)
        try:
            fp = second.stats()["fast_path"]
            print(f"\n{datapath} {stop}: {got['received']} of {sent['sent']} frames received, {got['lost']} lost; "
                  f"the new run's entry carried {carried} before the stream stopped, and the kernel "
                  f"sent {fp['upcalls'] - at_barrier['upcalls']} frames up after the barrier")
            # The stream ran before the stop (0.5 s: 2 500 frames), through the restart, and on
            # through the new run's own entry; nothing was lost.
            assert sent["sent"] > 2_500 + carried and got["received"] == sent["sent"] and got["lost"] == 0, (sent, got)
            log = second.log()
            assert "kernel state kept by the last run taken over" in log, log
            assert "the last run's kernel entries released (the first barrier)" in log, log
            assert fp["kept"]["inherited_entries"] is None, fp["kept"]
            # The new run's own entries carry the stream now: it installed them (the last run's
            # were released at the barrier), and after the barrier the kernel sent a handful of
            # frames up (misses and frames its entries leave to userspace), not the stream (the
            # counters are the kernel's, kept across runs, hence the difference).
            assert fp["installed"] >= 1, fp
            assert fp["upcalls"] - at_barrier["upcalls"] < 20, (at_barrier, fp)
            # Both ways through the new run's entries, so that the kernel holds them when it stops.
            # Pinged before the dump: the stream has stopped, and idle entries may have gone; these
            # frames make the ones the dump must show.
            assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
            assert any(f["actions"] == "output:2" for f in second.kernel_flows()["megaflows"])
            if "af_xdp" in extra:
                # The new run put its own sockets in the kept XSKMAP: what the kernel sends up (the
                # first frames of a flow it holds no entry for: h1's from a port no stream used)
                # reaches it through the arrival port's socket.
                by_no = {p["no"]: p for p in second.stats()["ports"]}
                assert by_no[1]["io"] == by_no[2]["io"] == "af_xdp copy", by_no
                went_up = by_no[2]["socket_rx_packets"]
                second.ofctl("add-flow", "priority=20,in_port=2,icmp,actions=output:1")
                assert h2.ping(h1.addr, count=3, interval=0.05)[0] == 3
                assert {p["no"]: p for p in second.stats()["ports"]}[2]["socket_rx_packets"] > went_up
            kinds = {a["kind"] for a in fp["attachments"]}
            assert kinds == ({"tc clsact"} if "legacy" in extra else {"tcx"} if datapath == "tc" else {"xdp native link"}), kinds
        finally:
            assert second.stop(clean=False) == 0, second.log()
        # Stopped, the kernel still forwards; `stop --clean` takes it all away.
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        assert attached(ports, before) >= 2, "programs stay attached while the switch is stopped"
        r = subprocess.run([EDGEFLOW_BIN, "stop", "--clean", DPID], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and f"switch {DPID}: removed" in r.stdout, (r.stdout, r.stderr)
        assert pinned() == [] and attached(ports, before) == 0
        assert h1.ping(h2.addr, count=2, interval=0.05)[0] == 0, "nothing forwards once cleaned"
    finally:
        subprocess.run([EDGEFLOW_BIN, "stop", "--clean", DPID], capture_output=True, timeout=30)


def test_without_keeping_a_restart_loses_frames(two_hosts):
    """The same restart without `--keep-fastpath`: the kernel stops forwarding with the daemon, so
    the restart test above can fail."""
    got, sent, second, _, _ = restart_under_stream(two_hosts, "tc", "term", False)
    second.stop()
    print(f"\nwithout keeping: {got['lost']} of {sent['sent']} frames lost")
    assert got["lost"] > 100, (sent, got)
    assert pinned() == []
