"""AFDX mode with real frames: end systems (edgeflow-loadgen es-send / es-recv) on two redundant
networks, one edgeflow switch per network, on every datapath. Conforming VLs lose nothing; a VL
offered at 2x and 10x its contract gets what the account-based algorithm, run offline on the send
times, admits; every kind of bad frame is dropped and counted under its reason; taking network A
down mid-stream loses no frame at the receiver."""

import contextlib
import time

from testbed import afdx, netns
from testbed.afdx import VL, AfdxNetwork, Receiver, send, vl_arg
from testbed.switches import Edgeflow
from testbed.util import run_dir


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
            cfg = net.write_config(vls, n)
            sw = Edgeflow(net.ports(n), datapath=datapath, extra=["--config", str(cfg)],
                          log_name=f"afdx-{net.tag}-{n}-{datapath}")
            switches[n] = sw.start()
        yield switches
    finally:
        codes = {n: sw.stop() for n, sw in switches.items()}
    assert all(c == 0 for c in codes.values()), codes


def vl_counters(sw):
    """{"switch": {...}, 10: {...}, ...} from the switch's report."""
    out = {}
    for g in sw.stats()["mode_counters"]:
        name = g["name"]
        out["switch" if name == "switch" else int(name.split()[1])] = g["counters"]
    return out


def test_conforming_links_lose_nothing_and_babblers_get_their_contract(datapath):
    netns.cleanup()
    # The conforming VLs' tolerance covers what this VM adds on the way to the switch: the
    # sender's own lateness (a SCHED_OTHER process: up to ~1 ms) and veth delivery in softirq.
    vls = [
        VL(10, 1, [3], bag_ms=2, smax=300, jitter_us=2000),
        VL(20, 2, [3], bag_ms=1, smax=64, jitter_us=2000, priority="high"),
        VL(11, 1, [3], bag_ms=4, smax=1518, jitter_us=500),  # offered at 2x
        VL(12, 2, [3], bag_ms=2, smax=1000, jitter_us=500, police="byte"),  # 500 B frames at 10x
    ]
    conforming = {1: [vl_arg(10, 2, 300)], 2: [vl_arg(20, 1, 64)]}
    babbling = {1: [vl_arg(11, 4, 1518, 2000)], 2: [vl_arg(12, 2, 500, 100)]}
    with AfdxNetwork("af", 3) as net, afdx_switches(net, vls, datapath) as sws:
        es = net.end_systems

        def phase(extra, seconds, tag):
            rx = Receiver(es[2])
            try:
                logs = {i: run_dir("afdx") / f"send-{tag}-{i}-{datapath}.log" for i in (1, 2)}
                procs = [send(es[i - 1], conforming[i] + extra.get(i, []), seconds, jitter_us=100, log=logs[i],
                              seed=i, background=True) for i in (1, 2)]
                for p in procs:
                    _, err = p.communicate(timeout=seconds + 60)
                    assert p.returncode == 0, err
                got = rx.result()
            finally:
                rx.kill()
            sent = {}
            for i in (1, 2):
                sent.update(afdx.read_log(logs[i]))
            return got, sent

        quiet, quiet_sent = phase({}, 1.0, "quiet")
        loaded, sent = phase(babbling, 2.0, "babble")
        counters = {n: vl_counters(sw) for n, sw in sws.items()}

    for got, offered in ((quiet, quiet_sent), (loaded, sent)):
        for vl in (10, 20):
            r = got["vls"][vl]
            assert r["delivered"] == len(offered[vl]) and r["lost"] == 0, (vl, r, {n: c[vl] for n, c in counters.items()})
            assert r["delivered_twice"] == 0 and r["integrity_errors"] == [0, 0], (vl, r)
            # Both networks carried every frame: one copy delivered, the other removed.
            assert r["received"] == [len(offered[vl])] * 2 and r["duplicates_removed"] == len(offered[vl]), r
    for n in ("a", "b"):
        assert counters[n][10]["policed"] == 0 and counters[n][20]["policed"] == 0, counters[n]

    # The babblers get what the standard's algorithm admits on their send times, within one frame,
    # on each network; the switch's own counters agree with what arrived.
    for vl, contract in ((11, vls[2]), (12, vls[3])):
        frames = sent[vl]
        admitted = afdx.police_offline([t for _, t, _ in frames], [s for _, _, s in frames], contract.bag_ms,
                                       contract.smax, contract.jitter_us, by_bytes=contract.police == "byte")
        assert admitted < len(frames) * 0.6, (vl, admitted, len(frames))
        for k, n in enumerate(("a", "b")):
            arrived = loaded["vls"][vl]["received"][k]
            assert abs(arrived - admitted) <= 1, (vl, n, arrived, admitted, len(frames))
            c = counters[n][vl]
            assert c["frames_out"] == arrived and c["policed"] == c["frames_in"] - arrived, (vl, n, c)

    # The conforming high-priority VL's latency is not moved by the babblers.
    before, during = quiet["vls"][20]["latency_us"], loaded["vls"][20]["latency_us"]
    assert during["p50"] <= 2 * before["p50"] + 50, (before, during)


def test_bad_frames_are_dropped_and_counted_per_reason(datapath):
    netns.cleanup()
    vls = [VL(10, 1, [3], bag_ms=2, smin=100, smax=300, jitter_us=500)]
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
            # A source MAC outside the end-system format (bits under the interface id set).
            bad_src = json_of(es[0].run(afdx.LOADGEN_BIN, "send", "--iface", "net_a", "--src-mac", "02:00:00:00:01:21",
                                        "--dst-mac", "03:00:00:00:00:0a", "--size", "200", "--rate", "200",
                                        "--count", "40", "--engine", "socket"))["sent"]
            good = send(es[0], [vl_arg(10, 2, 200)], **one)["sent"]["10"]
            got = rx.result()
        finally:
            rx.kill()
        c = vl_counters(sw)
        drops = sw.stats()["drops"]
    assert min(wrong_port, undersize, oversize, unknown, bad_dst, bad_src, good) >= 20
    assert got["vls"].keys() == {10} and got["vls"][10]["delivered"] == good and got["other_frames"] == 0, got
    assert c[10]["wrong_port"] == wrong_port
    assert c[10]["undersize"] == undersize
    assert c[10]["oversize"] == oversize
    assert c[10]["bad_source"] == bad_src
    assert c[10]["policed"] == 0 and c[10]["frames_out"] == good
    assert c["switch"] == {"unknown_vl": unknown, "bad_destination": bad_dst}, c["switch"]
    assert drops["filtered"] == wrong_port + undersize + oversize + bad_src + unknown + bad_dst, drops


def json_of(completed):
    import json
    return json.loads(completed.stdout)


def test_network_a_down_mid_stream_loses_no_frame(datapath):
    netns.cleanup()
    vls = [VL(10, 1, [2], bag_ms=1, smax=200, jitter_us=500, priority="high")]
    with AfdxNetwork("ar", 2) as net, afdx_switches(net, vls, datapath):
        es = net.end_systems
        rx = Receiver(es[1])
        try:
            log = run_dir("afdx") / f"send-failover-{datapath}.log"
            p = send(es[0], [vl_arg(10, 1, 200)], 2.0, jitter_us=100, log=log, background=True)
            time.sleep(0.8)
            netns.sh("ip", "link", "set", es[1].ports["a"], "down")
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            got = rx.result()["vls"][10]
        finally:
            rx.kill()
    sent = len(afdx.read_log(log)[10])
    assert got["delivered"] == sent and got["lost"] == 0 and got["delivered_twice"] == 0, (sent, got)
    a, b = got["received"]
    assert b == sent and 0.2 * sent < a < 0.7 * sent, (sent, got)
