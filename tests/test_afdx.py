"""AFDX mode with real frames: end systems (edgeflow-loadgen es-send / es-recv) on two redundant
networks, one edgeflow switch per network, on every datapath. Conforming VLs lose nothing; a VL
offered at 2x and 10x its contract gets what that contract allows over the times its frames reached
the switch; every kind of bad frame is dropped and counted under its reason; taking network A
down mid-stream loses no frame at the receiver."""

import contextlib
import re
import sys
import time

import pytest

from testbed import afdx, netns
from testbed.afdx import VL, AfdxNetwork, Receiver, send, vl_arg
from testbed.switches import EDGEFLOW_BIN, Edgeflow, start_all, stop_all
from testbed.util import kernel_version, run_dir, wait_for


@contextlib.contextmanager
def afdx_switches(net, vls, datapath):
    """One edgeflow switch in AFDX mode per network of `net`, the end systems set as the
    datapath needs."""
    settings = Edgeflow.HOST_SETTINGS[datapath]
    if settings:
        net.set_offload(**settings)
    switches = {}
    try:
        for n in net.networks:
            cfg = net.write_config(vls, n, network=n)
            sw = Edgeflow(net.ports(n), datapath=datapath, extra=["--config", str(cfg)],
                          log_name=f"afdx-{net.tag}-{n}-{datapath}")
            switches[n] = sw
        start_all(switches.values())
        yield switches
    finally:
        codes = dict(zip(switches, stop_all(switches.values())))
    assert all(c == 0 for c in codes.values()), codes


def kernel_runs_afdx(sw, datapath):
    """Whether the kernel fast path decided the AFDX frames: with tc or xdp it does, except on a
    kernel older than 5.12 (its accounts take a compare-and-exchange), where the switch must have
    said that it keeps AFDX in userspace, and run without the fast path."""
    if datapath == "user":
        return False
    if kernel_version() < (5, 12):
        assert "cannot run the AFDX fast path" in sw.log() and sw.stats()["fast_path"] is None, sw.log()
        return False
    return True


def vl_counters(sw):
    """{"switch": {...}, 10: {...}, ...} from the switch's report."""
    out = {}
    for g in sw.stats()["mode_counters"]:
        name = g["name"]
        out["switch" if name == "switch" else int(name.split()[1])] = g["counters"]
    return out


def band_drops(meter_stats):
    """The packets a meter's band dropped, from `ovs-ofctl meter-stats` (OVS and edgeflow print the
    band as `0: packet_count:N byte_count:M`)."""
    counts = re.findall(r"\b0: packet_count:(\d+)", meter_stats)
    assert len(counts) == 1, meter_stats
    return int(counts[0])


def twice(vl, datapath):
    """From the receivers' logs: each frame of `vl` delivered twice, with the receiver's lines
    from the delivery before its first copy to its second."""
    out = []
    for log in sorted(run_dir("afdx").glob(f"recv-*-{datapath}.log")):
        lines = [l.split() for l in open(log)]
        mine = [(i, l) for i, l in enumerate(lines) if int(l[0]) == vl and l[5] == "delivered"]
        seen = {}
        for k, (i, l) in enumerate(mine):
            if l[1] in seen:
                first = seen[l[1]]
                out.append((log.name, [" ".join(x) for x in lines[mine[max(first - 1, 0)][0]:i + 1] if int(x[0]) == vl]))
            seen[l[1]] = k
    return out


# One kernel hook, alternating between the tests: TC and XDP run one AFDX account and filter
# (`bpf/fp_afdx.h`), held to each other frame by frame on both hooks by
# `every_afdx_refusal_is_counted_under_its_link_on_both_hooks` and
# `links_sharing_an_account_share_its_credit` (BPF_PROG_TEST_RUN); only the copies to several
# outputs differ, and `test_multicast_link_reaches_every_output` runs on both.
@pytest.mark.parametrize("datapath", ['user', 'xdp'])
def test_conforming_links_lose_nothing_and_babblers_get_their_contract(datapath):
    netns.cleanup()
    # The conforming VLs' tolerance covers what this VM adds on the way to the switch: the
    # sender's own lateness (a SCHED_OTHER process: up to ~1 ms) and veth delivery in softirq.
    vls = [
        VL(10, 1, [3], bag_ms=2, smax=300, jitter_us=2000),
        VL(20, 2, [3], bag_ms=1, smax=64, jitter_us=2000, priority="high"),
        # The babblers' accounts are deeper than what accrues between two of their frames, so the
        # cap is never reached: what they get is the credit accrued, +-1 frame, whatever jitter
        # the path adds. (With the 2x babbler's tolerance at 0.5 ms, credit lost at the cap hung
        # on a few µs of timing, and one network's switch admitted 3 fewer than the send times.)
        VL(11, 1, [3], bag_ms=4, smax=1518, jitter_us=2500),  # offered at 2x
        VL(12, 2, [3], bag_ms=2, smax=1000, jitter_us=500, police="byte"),  # 500 B frames at 10x
    ]
    conforming = {1: [vl_arg(10, 2, 300)], 2: [vl_arg(20, 1, 64)]}
    babbling = {1: [vl_arg(11, 4, 1518, 2000)], 2: [vl_arg(12, 2, 500, 100)]}
    with AfdxNetwork("af", 3) as net, afdx_switches(net, vls, datapath) as sws:
        es = net.end_systems

        def phase(extra, seconds, tag):
            rx = Receiver(es[2], log=run_dir("afdx") / f"recv-{tag}-{datapath}.log")
            taps = {i: afdx.IngressTap(es[i - 1], sender_side=datapath == "xdp") for i in (1, 2)}
            try:
                logs = {i: run_dir("afdx") / f"send-{tag}-{i}-{datapath}.log" for i in (1, 2)}
                procs = [send(es[i - 1], conforming[i] + extra.get(i, []), seconds, jitter_us=100, log=logs[i],
                              seed=i, background=True, visible=datapath == "xdp") for i in (1, 2)]
                reports = {}
                for i, p in zip((1, 2), procs):
                    reports[i], err = p.communicate(timeout=seconds + 60)
                    assert p.returncode == 0, err
                got = rx.result(reports.values())
                arrivals = {}
                for i, tap in taps.items():
                    for network, by_vl in tap.times([reports[i]]).items():
                        arrivals.setdefault(network, {}).update(by_vl)
            finally:
                rx.kill()
                for tap in taps.values():
                    tap.kill()
            sent = {}
            for i in (1, 2):
                sent.update(afdx.read_log(logs[i]))
            return got, sent, arrivals

        backlog_drops = afdx.backlog_drops()
        # Hundreds of frames of each VL in each phase: 750 and 1 500 of VL 20 (a BAG of 1 ms).
        quiet, quiet_sent, _ = phase({}, 0.75, "quiet")
        loaded, sent, arrivals = phase(babbling, 1.5, "babble")
        counters = {n: vl_counters(sw) for n, sw in sws.items()}
        reports = {n: sw.stats() for n, sw in sws.items()}
        kernel = {n: r["fast_path"] for n, r in reports.items()}
        dumps = {n: sw.kernel_flows() for n, sw in sws.items()} if datapath != "user" else {}
        # Where a lost frame could have gone: the veths', the CPUs' receive backlogs' and the
        # receiver's ring's drop counters, and the switch's own per-port ones.
        where = {"links": {k: v for k, v in net.link_drops().items() if any(v.values())},
                 "receiver_ring": [quiet["ring_drops"], loaded["ring_drops"]],
                 "cpu_backlogs": afdx.backlog_drops() - backlog_drops,
                 "switch_ports": {n: [{k: p[k] for k in ("rx_dropped", "tx_dropped")} for p in r["ports"]]
                                  for n, r in reports.items()}}

    if datapath != "user":
        # The kernel held every link and decided every frame of them itself.
        for n, fp in kernel.items():
            frames = sum(c["frames_in"] for vl, c in counters[n].items() if vl != "switch")
            assert fp["links"]["held"] == 4 and fp["links"]["decided"] == frames, (n, fp["links"], frames)
            # `dump-flows --kernel` reads the same four links out of the kernel's maps.
            links = dumps[n]["afdx_links"]
            assert len(links) == 4 and sum(l["frames_in"] for l in links) == frames, (n, links, frames)

    for got, offered in ((quiet, quiet_sent), (loaded, sent)):
        for vl in (10, 20):
            r = got["vls"][vl]
            at_switches = {n: c[vl] for n, c in counters.items()}
            assert r["delivered"] == len(offered[vl]) and r["lost"] == 0, (vl, r, at_switches, where)
            assert r["delivered_twice"] == 0 and r["integrity_errors"] == [0, 0], (vl, r, twice(vl, datapath),
                                                                                   at_switches, where)
            # Both networks carried every frame: one copy delivered, the other removed.
            assert r["received"] == [len(offered[vl])] * 2 and r["duplicates_removed"] == len(offered[vl]), (r, where)
    for n in ("a", "b"):
        assert counters[n][10]["policed"] == 0 and counters[n][20]["policed"] == 0, counters[n]

    # The babblers get what their contract allows on the times their frames reached each switch
    # (a tap beside the switch's socket): bounds worked out from BAG, jitter and Smax over the
    # span of those times (afdx.contract_admits), not by running a policing algorithm again; the
    # switch's own counters agree with what arrived.
    for vl, contract in ((11, vls[2]), (12, vls[3])):
        frames = sent[vl]
        size = frames[0][2]
        bounds = lambda times: afdx.contract_admits(times, size, contract.bag_ms, contract.smax, contract.jitter_us,
                                                    by_bytes=contract.police == "byte")
        # Enough had to be policed for the check to mean something (a sender that falls behind on
        # a loaded machine offers less than its nominal 2x or 10x).
        most_by_send_time = bounds([t for _, t, _ in frames])[1]
        assert most_by_send_time < len(frames) * 0.75, (vl, most_by_send_time, len(frames))
        for k, n in enumerate(("a", "b")):
            times = arrivals[k][vl]
            assert len(times) == len(frames), (vl, n, len(times), len(frames))
            fewest, most = bounds(times)
            arrived = loaded["vls"][vl]["received"][k]
            assert fewest <= arrived <= most, (vl, n, arrived, (fewest, most), len(frames))
            c = counters[n][vl]
            assert c["frames_out"] == arrived and c["policed"] == c["frames_in"] - arrived, (vl, n, c)

    # The conforming high-priority VL's latency is not moved by the babblers.
    before, during = quiet["vls"][20]["latency_us"], loaded["vls"][20]["latency_us"]
    assert during["p50"] <= 2 * before["p50"] + 50, (before, during)


# One kernel hook (XDP left out): as for the conforming links' test above.
@pytest.mark.parametrize("datapath", ['user', 'tc'])
def test_bad_frames_are_dropped_and_counted_per_reason(datapath):
    netns.cleanup()
    vls = [VL(10, 1, [3], bag_ms=2, smin=100, smax=300, jitter_us=2000, ip_check=True)]
    with AfdxNetwork("ab", 3, redundant=False) as net, afdx_switches(net, vls, datapath) as sws:
        es = net.end_systems
        sw = sws["a"]
        rx = Receiver(es[2], networks=("a",))
        try:
            one = dict(duration=0.2, networks=("a",))
            wrong_port = send(es[1], [vl_arg(10, 2, 200)], **one)["sent"]["10"]
            undersize = send(es[0], [vl_arg(10, 2, 64)], **one)["sent"]["10"]
            oversize = send(es[0], [vl_arg(10, 2, 400)], **one)["sent"]["10"]
            unknown = send(es[0], [vl_arg(99, 2, 200)], **one)["sent"]["99"]
            bad_dst = json_of(es[0].run(afdx.LOADGEN_BIN, "es-send", "--iface-a", "net_a", "--vl", vl_arg(10, 2, 200),
                                        "--duration", "0.2", "--mac-constant", "05000000"))["sent"]["10"]
            # A source MAC outside the end-system format (bits under the interface id set); one on
            # network B's interface (this switch is A's); and a frame whose datagram runs to the
            # frame's end, no room for the sequence number: `send` lays it out so, not as part 7.
            def raw(src):
                return json_of(es[0].run(afdx.LOADGEN_BIN, "send", "--iface", "net_a", "--src-mac", src, "--dst-mac",
                                         "03:00:00:00:00:0a", "--size", "200", "--rate", "200", "--count", "40",
                                         "--engine", "socket"))["sent"]

            bad_src = raw("02:00:00:00:01:21")
            wrong_network = raw("02:00:00:00:01:40")
            bad_ip = raw("02:00:00:00:01:20")
            # Not IPv4 (an experimental EtherType: a malformed IPv6 header would not reach the mode).
            script = ("from scapy.all import Ether, Raw, sendp; sendp(Ether(src='02:00:00:00:01:20', "
                      "dst='03:00:00:00:00:0a', type=0x88b5) / Raw(bytes(182)), iface='net_a', count=30, "
                      "inter=0.005, verbose=False)")
            es[0].run(sys.executable, "-c", script)
            not_ip = 30
            good = send(es[0], [vl_arg(10, 2, 200)], **one)["sent"]["10"]
            got = rx.result()
        finally:
            rx.kill()
        c = vl_counters(sw)
        stats = sw.stats()
        drops = stats["drops"]
        kernel_filtered = stats["fast_path"]["drops"]["filtered"] if stats["fast_path"] else 0
        in_kernel = kernel_runs_afdx(sw, datapath)
        port2 = next(p for p in stats["ports"] if p["no"] == 2)
    assert min(wrong_port, undersize, oversize, unknown, bad_dst, bad_src, wrong_network, bad_ip, good) >= 20
    # The wrong-port frames count as received on the port they came in on, whoever dropped them
    # (the host's own stray frames, IPv6 neighbour discovery, may add a few).
    assert port2["rx_packets"] >= wrong_port, port2
    assert got["vls"].keys() == {10} and got["vls"][10]["delivered"] == good and got["other_frames"] == 0, got
    assert c[10]["wrong_port"] == wrong_port
    assert c[10]["undersize"] == undersize
    assert c[10]["oversize"] == oversize
    assert c[10]["bad_source"] == bad_src
    assert (c[10]["wrong_network"], c[10]["bad_ethertype"], c[10]["bad_ip"]) == (wrong_network, not_ip, bad_ip), c[10]
    assert c[10]["policed"] == 0 and c[10]["frames_out"] == good
    assert c["switch"] == {"unknown_vl": unknown, "bad_destination": bad_dst}, c["switch"]
    # The kernel drops a held link's bad frames; frames of no link go up and are dropped there.
    of_the_link = wrong_port + undersize + oversize + bad_src + wrong_network + not_ip + bad_ip
    if in_kernel:
        assert kernel_filtered == of_the_link, stats["fast_path"]
    assert drops["filtered"] + kernel_filtered == of_the_link + unknown + bad_dst, drops


def json_of(completed):
    import json
    return json.loads(completed.stdout)


# One kernel hook (TC left out): as for the conforming links' test above.
@pytest.mark.parametrize("datapath", ['user', 'xdp'])
def test_network_a_down_mid_stream_loses_no_frame(datapath):
    netns.cleanup()
    # The tolerance covers this VM's path jitter, as in the first test: network B must carry every
    # frame on its own once A is down.
    vls = [VL(10, 1, [2], bag_ms=1, smax=200, jitter_us=2000, priority="high")]
    with AfdxNetwork("ar", 2) as net, afdx_switches(net, vls, datapath):
        es = net.end_systems
        rx = Receiver(es[1])
        try:
            log = run_dir("afdx") / f"send-failover-{datapath}.log"
            # 1.5 s of frames, network A down 0.6 s in: two fifths of them on both networks.
            p = send(es[0], [vl_arg(10, 1, 200)], 1.5, jitter_us=100, log=log, background=True)
            time.sleep(0.6)
            netns.sh("ip", "link", "set", es[1].ports["a"], "down")
            report, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            got = rx.result([report])["vls"][10]
        finally:
            rx.kill()
    sent = len(afdx.read_log(log)[10])
    assert got["delivered"] == sent and got["lost"] == 0 and got["delivered_twice"] == 0, (sent, got)
    a, b = got["received"]
    assert b == sent and 0.2 * sent < a < 0.7 * sent, (sent, got)


# One kernel hook (XDP left out): the table is rewritten by userspace alike for both; as above.
@pytest.mark.parametrize("datapath", ['user', 'tc'])
def test_a_virtual_link_added_on_sighup_forwards_and_the_others_lose_nothing(datapath):
    """SIGHUP with a table that adds VL 20: its frames pass from then on; VL 10, unchanged, loses
    no frame and keeps its counters (the kernel's copy of the table is rewritten)."""
    import signal
    netns.cleanup()
    vls = [VL(10, 1, [2], bag_ms=1, smax=200, jitter_us=2000, priority="high")]
    more = vls + [VL(20, 1, [2], bag_ms=1, smax=200, jitter_us=2000, priority="low")]
    with AfdxNetwork("ah", 2, redundant=False) as net, afdx_switches(net, vls, datapath) as sws:
        es, sw = net.end_systems, sws["a"]
        rx = Receiver(es[1], networks=("a",))
        try:
            # 1.5 s of frames, the new table 0.6 s in: VL 20 passes for the last three fifths.
            p = send(es[0], [vl_arg(10, 1, 200), vl_arg(20, 1, 200)], 1.5, networks=("a",), jitter_us=100,
                     background=True)
            time.sleep(0.6)
            net.write_config(more, "a", network="a")
            sw.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "configuration applied" in sw.log(), what="the new table")
            report, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            got = rx.result([report])
        finally:
            rx.kill()
        c = vl_counters(sw)
        held = [l["vl"] for l in sw.kernel_flows()["afdx_links"]] if kernel_runs_afdx(sw, datapath) else None
    sent = {int(k): v for k, v in json_of_report(report)["sent"].items()}
    r10, r20 = got["vls"][10], got["vls"][20]
    assert r10["delivered"] == sent[10] and r10["lost"] == 0, (sent, r10)
    assert c[10]["frames_in"] == sent[10] and c[10]["frames_out"] == sent[10], c[10]
    # VL 20 from the reload on: its first frames were unknown, the rest pass.
    assert 0.2 * sent[20] < r20["delivered"] < 0.8 * sent[20], (sent, r20)
    assert c[20]["frames_out"] == r20["delivered"] and c["switch"]["unknown_vl"] >= sent[20] - r20["delivered"], c
    if held is not None:
        assert sorted(held) == [10, 20], held


def json_of_report(report):
    return report if isinstance(report, dict) else __import__("json").loads(report)


def test_multicast_link_reaches_every_output(datapath):
    """A VL with two outputs: every frame reaches both end systems, copied by the kernel on tc
    (a clone per output) and on xdp (a broadcast into a DEVMAP of the outputs)."""
    netns.cleanup()
    vls = [VL(30, 1, [2, 3], bag_ms=1, smax=200, jitter_us=2000, priority="high")]
    with AfdxNetwork("am", 3, redundant=False) as net, afdx_switches(net, vls, datapath) as sws:
        es = net.end_systems
        rx2, rx3 = Receiver(es[1], networks=("a",)), Receiver(es[2], networks=("a",))
        try:
            report = send(es[0], [vl_arg(30, 1, 200)], 1.0, networks=("a",), jitter_us=100)
            sent = report["sent"]["30"]
            got2, got3 = rx2.result([report]), rx3.result([report])
        finally:
            rx2.kill()
            rx3.kill()
        c = vl_counters(sws["a"])[30]
        fp = sws["a"].stats()["fast_path"]
    assert sent >= 500
    for got in (got2, got3):
        r = got["vls"][30]
        assert r["delivered"] == sent and r["lost"] == 0, (sent, r)
    assert c["frames_in"] == sent and c["frames_out"] == sent and c["policed"] == 0, c
    if datapath != "user":
        assert fp["links"]["held"] == 1 and fp["links"]["decided"] == sent, fp["links"]


def test_compiled_program_runs_on_open_vswitch_and_edgeflow():
    """`edgeflow afdx compile` as an ovs-ofctl script, loaded into Open vSwitch (userspace
    datapath) and into edgeflow's OpenFlow mode: conforming and multicast VLs arrive whole, frames
    of the wrong input port are dropped, and a babbler is held to the meter, whose rate for a BAG
    of 32 ms is 32 frames/s where the account admits 31.25."""
    from testbed.switches import OvsNetdev
    netns.cleanup()
    vls = [VL(10, 1, [2, 3], bag_ms=2, smax=300, jitter_us=2000, priority="high"),
           VL(12, 2, [3], bag_ms=32, smax=200)]
    results = {}
    with AfdxNetwork("ac", 3, redundant=False) as net:
        cfg = net.write_config(vls, "compiled")
        script = run_dir("afdx") / "compiled.sh"
        r = netns.sh(EDGEFLOW_BIN, "afdx", "compile", str(cfg), "--network", "a")
        script.write_text(r.stdout)
        # Without the flag the config's own `[afdx] network` decides, and with none, any.
        commands = lambda text: [line for line in text.splitlines() if not line.startswith("#")]
        on_a = net.write_config(vls, "compiled-on-a", network="a")
        assert commands(netns.sh(EDGEFLOW_BIN, "afdx", "compile", str(on_a)).stdout) == commands(r.stdout)
        assert commands(netns.sh(EDGEFLOW_BIN, "afdx", "compile", str(cfg)).stdout) != commands(r.stdout)
        for name, switch in (("ovs", OvsNetdev(net.ports("a"), fail_mode="secure", log_name="ovs-afdx")),
                             ("edgeflow", Edgeflow(net.ports("a"), fail_mode="secure", log_name="afdx-compiled"))):
            with switch as sw:
                netns.sh("sh", str(script), sw.target)
                assert len(sw.flows()) == 2, sw.flows()
                es = net.end_systems
                rx2, rx3 = Receiver(es[1], networks=("a",)), Receiver(es[2], networks=("a",))
                try:
                    log = run_dir("afdx") / f"send-compiled-{name}.log"
                    babbler = send(es[1], [vl_arg(12, 32, 200, 100)], 3.0, networks=("a",), log=log, background=True)
                    conforming = send(es[0], [vl_arg(10, 2, 300)], 3.0, networks=("a",), jitter_us=100)
                    wrong_port = send(es[2], [vl_arg(10, 2, 300)], 0.2, networks=("a",))
                    _, err = babbler.communicate(timeout=60)
                    assert babbler.returncode == 0, err
                    got2, got3 = rx2.result(), rx3.result()
                finally:
                    rx2.kill()
                    rx3.kill()
                meter_drops = band_drops(sw.ofctl("meter-stats", "meter=1"))
                results[name] = (conforming, wrong_port, got2, got3, afdx.read_log(log)[12], meter_drops)
    for name, (conforming, wrong_port, got2, got3, babble, meter_drops) in results.items():
        sent = conforming["sent"]["10"]
        assert wrong_port["sent"]["10"] >= 50
        for got in (got2, got3):
            r = got["vls"][10]
            assert r["delivered"] + r["lost"] == sent, (name, sent, r)
            if name == "edgeflow":
                assert r["delivered"] == sent and meter_drops == 0, (name, sent, r, meter_drops)
            else:
                # Open vSwitch, the peer showing the program is portable, loses conforming frames at
                # its meter: its userspace meter counts whole milliseconds from when its poll thread
                # reads a frame, so frames read late, together, find the 2-frame burst spent. How
                # many hangs on how late its thread runs, which no bound of ours holds: 3 of 1496
                # once in CI, 18 of 1377 mid-suite on a fresh machine, 189 of 1475 (171 of them
                # its meter's) at the session's start beside the background builds. What a peer
                # shows here is that the program runs there: the VL arrives (most of it), and
                # what is lost is, but for a twentieth, what its meter dropped. edgeflow, above,
                # is held to no loss.
                assert r["delivered"] >= sent // 2, (name, sent, r, meter_drops)
                assert r["lost"] <= meter_drops + sent // 20, (name, sent, r, meter_drops)
        times = [t for _, t, _ in babble]
        by_account = afdx.police_offline(times, [200] * len(times), 32, 200)
        by_meter = got3["vls"][12]["received"][0]
        print(f"{name}: babbler offered {len(times)}, account admits {by_account}, meter passed {by_meter}")
        # 3 s of a frame every 100 µs: at 32 frames/s against the account's 31.25, edgeflow's meter
        # passes 2 more. Open vSwitch's userspace meter passes about what the account admits (94
        # of 94 in most runs), and fewer when its poll thread reads late, as with the conforming
        # VL above (91 of 93 once in CI, mid-suite): the peer is held to the contract's ceiling,
        # and to passing half of what it admits at least.
        if name == "edgeflow":
            assert by_account + 1 <= by_meter <= by_account + 4, (name, by_account, by_meter, len(times))
        else:
            assert by_account // 2 <= by_meter <= by_account + 4, (name, by_account, by_meter, len(times))


#: The slow link of the priority test, and the low-priority VLs (1518 bytes every 1 ms) offered to
#: it: 16 × 12 304 bits per ms, 197 Mbit/s, 4.9 times the link.
SLOW_LINK_MBPS, SLOW_BACKGROUND = 40, 16


# One kernel hook (TC left out): which links the kernel holds and which stay in userspace for their
# port's priority queues is userspace's choice, the same for both hooks (`sync_links`,
# crates/datapath/src/switch/fastsync.rs); the queues and the pacer are userspace's on either; the
# one held link runs in `bpf/fp_afdx.h`, as in the tests above.
@pytest.mark.parametrize("datapath", ['user', 'xdp'])
def test_high_priority_link_on_an_unpaced_slow_port_waits_only_for_the_frame_on_the_wire(datapath):
    """Issue 34, item 4. End system 4 sits behind a link that nothing in the config paces (its
    receiver is the link: `es-recv --wire-mbps`; a veth's driver says 10 Gbit/s, so the port says
    `link_mbps`), offered 4.9 times its 40 Mbit/s by low-priority VLs of 1518 bytes. The switch
    paces the port to its link, so the backlog builds in its queues: a high-priority VL loses
    nothing and a low-priority control VL waits behind the full queue. Without the pacing the
    backlog builds in the link's ring, and the high-priority VL waits ~300 ms there and loses
    frames (docs/afdx.md).

    Beside what it waits unloaded, the high-priority VL waits for the low-priority frame on the
    wire (308 µs, which no priority takes back on a link that does not preempt) and what the pacer
    hands the interface ahead to cover the thread's wake-ups (100 µs under the default
    `egress_timing`). The p99 is the sleeping thread's wake-up tail (ms on a busy machine), held
    far below a frame behind the queue. On tc and xdp the links to the port stay in userspace,
    where the queues are, and the kernel keeps the one that needs no priority. A tap whose driver
    says 50 Mbit/s is paced to that with nothing in the config.

    Saturation (the positive control) does not hang on how fast anything runs: the link is slow
    enough that a sender at a fifth of its speed still offers more than it carries, the switch's
    own count of what it took in says by how much, and the load runs from before the loaded VLs
    (once the port's queue has overflowed) until after them, however late either starts. The
    issue's 2x at 500 Mbit/s with busy timing is a speed claim, held by `make bench-quick`
    (`tests/bench/test_experiments.py`): there the sender must make 500 Mbit/s of 1518-byte frames
    and the spinning thread needs a core of its own, neither of which a shared 2-core machine
    promises (one failed with 429 frames over the queue where 1000 were asked; here, under two
    busy loops, the sender made 0.7 of its offer and the loaded p50 was 0.14-3.4 ms against 2x
    an unloaded 11-19 µs)."""
    mbps, seconds = SLOW_LINK_MBPS, 0.6
    netns.cleanup()
    tap = f"{netns.PREFIX}-aqt5"
    netns.sh("ip", "tuntap", "add", "mode", "tap", "name", tap)
    try:
        netns.sh("ethtool", "-s", tap, "speed", "50", "duplex", "full", "autoneg", "off")
        got, sent, report = afdx.priority_on_slow_port(datapath, mbps, SLOW_BACKGROUND, seconds, more_ports=[tap])
    finally:
        netns.sh("ip", "link", "del", tap, check=False)
    vls = got["vls"]
    unloaded, loaded, control = vls[1]["latency_us"], vls[2]["latency_us"], vls[3]["latency_us"]
    ports = {p["no"]: p for p in report["ports"]}
    frame_bits = (1518 + 20) * 8
    on_wire = frame_bits / mbps
    # What the switch took in from end system 2 (it sends nothing else) over at most the sender's
    # span, as the link counts it.
    offered = ports[2]["rx_packets"] * frame_bits / sent["background_s"] / 1e6
    print(f"\n{mbps} Mbit/s link: offered {offered:.0f} Mbit/s by the switch's count "
          f"({sent['background']} frames sent, {ports[2]['rx_packets']} taken in), "
          f"queue_full {report['drops']['queue_full']}\nunloaded {unloaded}\nloaded {loaded}\ncontrol {control}")
    assert (ports[4]["paced"], ports[4]["rate_bps"]) == ("link", mbps * 10**6), ports[4]
    assert (ports[5]["paced"], ports[5]["rate_bps"]) == ("link", 50 * 10**6), ports[5]
    for vl in (1, 2):
        r = vls[vl]
        assert r["delivered"] == sent[vl] and r["lost"] == 0 and r["integrity_errors"] == [0, 0], (vl, sent[vl], r)
    # The positive control: more offered than the link carries (4.9x if the sender keeps its
    # schedule, 3.5-4.5x measured under two busy loops; the load's span taken long, so this is
    # the least it was), and the excess dropped by the switch's queue, not by the link's ring.
    assert offered > mbps, f"only {offered:.0f} Mbit/s offered to a {mbps} Mbit/s link: not saturated"
    assert report["drops"]["queue_full"] > 0, "the port's queue never filled"
    assert got["wire_drops"] == 0, "the backlog built in the link, not in the switch's queues"
    ahead = 100
    assert loaded["p50"] <= 2 * unloaded["p50"] + on_wire + ahead, (unloaded, loaded)
    # A sleeping thread's wake-up is ms late at p99 on a busy machine, loaded or not (3.8-4.8 ms
    # under two busy loops, 0.5-1 ms idle), so the tail is held to what tells priority from none:
    # 50 frames on the wire (15 ms), where a frame behind the queue waits for ~1000 of them.
    assert loaded["p99"] <= 50 * on_wire, (unloaded, loaded)
    # Behind the full queue: over a hundred frames.
    assert control["p50"] > 100 * on_wire, control
    if datapath != "user" and kernel_version() >= (5, 12):
        links = report["fast_path"]["links"]
        assert links["held"] == 1 and links["kept_for_priority"] == 3 + SLOW_BACKGROUND, links
