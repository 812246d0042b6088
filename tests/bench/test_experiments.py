"""`make bench-quick`: every experiment in --quick mode, for every switch under test, and the
claims each exists to show, as ratios of the same run (results under results/quick; with `-k`,
only the experiments the selected tests read). Not part of
`make test`, whose test_bench_smoke.py runs one experiment to prove the machinery; the behaviour
these runs used to be the only check of is in test_afdx, test_tsn and test_less."""

import csv
import warnings

import pytest

from testbed import bench
from testbed.experiments import EXPERIMENTS
from testbed.experiments.common import AFXDP_FLOORS, FLOORS
from testbed.util import ROOT

# Eleven experiments on five switches: about twelve minutes here.
pytestmark = pytest.mark.timeout(2400)


def uses(*names):
    """The experiments a test reads: the session runs those its selected tests use, each once, so
    that `-k tsn` runs the tsn experiment alone (a minute or two) rather than all of them."""
    def mark(fn):
        fn.experiments = names
        return fn
    return mark


@pytest.fixture(scope="module")
def results(request):
    out = ROOT / "results" / "quick"
    wanted = {n for item in request.session.items for n in getattr(item.function, "experiments", ())}
    names = [n for n in EXPERIMENTS if n in wanted]
    # All of them: no names, as `make bench-quick` always ran (one SUMMARY.md with every section).
    assert bench.main(["--quick", "--out", str(out), *([] if len(names) == len(EXPERIMENTS) else names)]) == 0
    return out


def rows(out, name):
    with open(out / f"{name}.csv") as f:
        return list(csv.DictReader(f))


# Rate ratios say something about two switches only where each rate is the switch's own. A switch
# that dropped part of what the sender offered was at its limit: its rate is its own. One that took
# everything ran below its limit, at the sender's pace: its rate is only a floor of its own. So "A
# ahead of B" is claimed on rates where B dropped (A's rate, if A dropped nothing, only understates
# A); where neither dropped, on each switch's own time per frame (the chain's time per frame less
# that of the same frames over a bare veth: with loadgen's XDP sender a kernel switch never drops,
# since the sender's softirq carries every frame through it and on to the receiver, so its offer is
# the chain's rate). Where only A dropped, A below k × B is false and above it unproven; where
# no figure can carry a claim the test says so (`not_claimed`). `bottleneck` in each table says
# which a row is (testbed/experiments/common.py: bottleneck_of).


def not_claimed(why):
    """A claim this run's rows cannot carry: printed and in pytest's warnings summary."""
    print(f"\nnot claimed: {why}")
    warnings.warn(f"not claimed: {why}")


def own_rate(row, key="bottleneck"):
    """Whether a row's rate is the switch's own: it dropped part of the offer."""
    return row[key] == "switch"


def ratio_claim(what, row, base, k, rate="received_pps", ns="switch_ns_per_frame", limited="bottleneck"):
    """`row`'s switch forwards more than k × `base`'s: on their rates where `base` dropped part of
    the offer (a `row` that dropped nothing only understates its own), on their own times per
    frame (`ns`: the chain's less the bare veth's) where neither dropped. Where only `row` dropped,
    its rate is its own and `base`'s a floor of its own: below k × that floor the claim is false,
    above it unproven."""
    if own_rate(base, limited):
        assert float(row[rate]) > k * float(base[rate]), (what, row, base)
    elif own_rate(row, limited):
        assert float(row[rate]) > k * float(base[rate]), (what, row, base)
        not_claimed(f"{what}: the reference dropped nothing of its offer, so above {k} of it proves nothing")
    elif all(x.get(ns) not in ("", None) and float(x[ns]) > 0 for x in (row, base)):
        print(f"\n{what}: own time per frame {float(row[ns]):.0f} ns against {float(base[ns]):.0f}")
        assert float(base[ns]) > k * float(row[ns]), (what, row, base)
    else:
        not_claimed(f"{what}: neither dropped, and a chain ran at the bare veth's rate or above (no time per "
                    f"frame to compare): {row}, {base}")


@uses(*EXPERIMENTS)
def test_files_and_summary(results):
    for name in EXPERIMENTS:
        for ext in ("md", "csv", "png"):
            assert (results / f"{name}.{ext}").stat().st_size > 0, f"{name}.{ext}"
    summary = (results / "SUMMARY.md").read_text()
    assert "Measured on" in summary
    for name in EXPERIMENTS:
        assert f"## {name}" in summary


@uses("zodiac")
def test_zodiac_shows_edgeflow_beside_its_peers(results):
    """Zodiac FX's table: TCP through each switch. edgeflow in userspace is well ahead of Open
    vSwitch's userspace datapath (12-15x in full runs), the TC fast path near the Linux bridge
    (0.77-0.95 in full runs), in the same run. One quick TCP run can come out at half its usual
    rate (TC S2C 9.4 Gbit/s beside C2S 19.8 and the bridge's 16.0 in one CI run), so TC is judged
    on both directions together."""
    r = rows(results, "zodiac")
    by = {(x["switch"], x["app"], x["flow"]): float(x["mbit_s"]) for x in r}
    flows = ("C2S", "S2C")
    for flow in flows:
        # TCP has no offer to drop from: Open vSwitch's rate is its own where the same hosts carried
        # at least twice as much through the bridge in the same run (they did not hold it back).
        # Against the bridge itself the claims are floors: what the hosts carry less what a switch
        # may take off, which needs no switch at its limit.
        if by[("ovs-netdev", "none", flow)] < 0.5 * by[("linux-bridge", "none", flow)]:
            assert by[("edgeflow", "none", flow)] > 4 * by[("ovs-netdev", "none", flow)], by
        else:
            not_claimed(f"zodiac {flow}: edgeflow > 4 x Open vSwitch: Open vSwitch near what the bridge carries")
        assert by[("edgeflow-tc", "none", flow)] > 0.4 * by[("linux-bridge", "none", flow)], by
    both = lambda switch: sum(by[(switch, "none", flow)] for flow in flows)
    assert both("edgeflow-tc") > 0.6 * both("linux-bridge"), by
    # A reactive controller's flows carry the traffic as well as native mode does.
    assert by[("edgeflow", "l2-learning", "C2S")] > 0.5 * by[("edgeflow", "none", "C2S")], by
    assert {x["hosts_tx"] for x in r if x["switch"] == "ovs-netdev"} == {"off"}, "settings are recorded per row"


@uses("zynq")
def test_zynq_plausible(results):
    for x in rows(results, "zynq"):
        if float(x["offered_mbit_s"]) <= 20:
            assert float(x["loss_pct"]) < 1.0, x
            assert abs(float(x["received_mbit_s"]) - float(x["offered_mbit_s"])) < 1.0, x
    for x in rows(results, "zynq_ping"):
        assert int(x["received"]) == int(x["pings"])
        # 0.03-0.4 ms here on every switch; a switch that sent each ping the long way round (to
        # its controller, say) would be over it.
        assert 0 < float(x["rtt_avg_ms"]) < 2, x


@uses("framerate")
def test_framerate_shows_the_fast_path_ahead(results):
    """64-byte frames: XDP well above the Linux bridge (3.4-4.7x in full runs), TC above userspace
    edgeflow, userspace edgeflow above Open vSwitch's userspace datapath (2.9-3.5x), in the same
    run: on rates where the slower switch dropped part of the offer, on each one's own time per
    frame where neither did (the XDP sender's softirq carries each frame through a kernel switch,
    so XDP and the bridge take all it offers: `ratio_claim`)."""
    table = {(x["switch"], int(x["size"])): x for x in rows(results, "framerate")}
    assert {s for _, s in table} >= {64, 1518}
    for fast, slow, k in (("edgeflow-xdp", "linux-bridge", 1.5), ("edgeflow-tc", "edgeflow", 1.0),
                          ("edgeflow", "ovs-netdev", 1.5)):
        ratio_claim(f"framerate: {fast} > {k} x {slow} at 64 B", table[(fast, 64)], table[(slow, 64)], k)
    # The limit rows (the kernel's own redirect in the switch's place) are measured and each fast
    # path's share of its own taken. Only that: a quick run's two chains are a second each, seconds
    # apart, and on a shared machine their ratio moved from 0.6 to 1.95 (issue 55's 0.8 on xdp and
    # 0.9 on tc are for full runs on an idle machine, docs/fastpath.md).
    for fast, limit in (("edgeflow-tc", "tc-mirred"), ("edgeflow-xdp", "xdp-redirect")):
        assert float(table[(limit, 64)]["received_pps"]) > 0 and float(table[(fast, 64)]["of_limit"]) > 0, \
            (fast, table[(fast, 64)], table[(limit, 64)])


@uses("latency")
def test_latency_shows_the_fast_path_ahead(results):
    """Median latency at 10 kframes/s: the kernel fast path well under userspace edgeflow, which
    is under Open vSwitch's userspace datapath (0.29-0.39 in full runs). A quick run's 5000 frames
    per row are noisier: 1518-byte frames once came out at 0.82 of Open vSwitch's while 64-byte
    ones were at 0.54, and TC's 1518-byte frames once at 0.56 of userspace's (9.02 against 16.06
    µs) in a run where userspace was unusually quick. So each size must be under and the two
    together well under."""
    limits = (*FLOORS, *AFXDP_FLOORS.values())
    at_10k = [x for x in rows(results, "latency") if x["gap_us"] == "100" and x["switch"] not in limits]
    assert {x["switch"] for x in rows(results, "latency")} >= set(FLOORS)
    # Latency is each switch's own time per frame only where it kept up: a switch that dropped
    # frames at 10 000 a second was queueing them.
    assert all(float(x["loss_pct"]) < 0.1 for x in at_10k), at_10k
    p50 = {(x["switch"], int(x["size"])): float(x["lat_p50_us"]) for x in at_10k}
    sizes = (64, 1518)
    for fast in ("edgeflow-tc", "edgeflow-xdp"):
        fast_ratios = [p50[(fast, size)] / p50[("edgeflow", size)] for size in sizes]
        assert max(fast_ratios) < 0.75 and sum(fast_ratios) / len(sizes) < 0.5, (fast, fast_ratios, p50)
    ratios = []
    for size in sizes:
        ratios.append(p50[("edgeflow", size)] / p50[("ovs-netdev", size)])
        assert ratios[-1] < 1.0, p50
    assert sum(ratios) / len(ratios) < 0.8, (ratios, p50)


@uses("gateway")
def test_gateway_shows_throughput_and_expiry_spikes(results):
    """The home-gateway paper's two points: edgeflow's own throughput beside the bridge and Open
    vSwitch, and an RTT spike when a reactive controller's flows reach their hard timeout. The
    expiries are those the controller saw (its installs while the pings ran), the spikes those
    whose reply came just after such an install, not any RTT over the median."""
    load = {x["switch"]: float(x["mbit_s"]) for x in rows(results, "gateway")}
    # Floors against what the hosts carry through the bridge; against Open vSwitch where its rate
    # is its own (the bridge carried at least twice as much between the same hosts), as in zodiac.
    assert load["edgeflow"] > 0.4 * load["linux-bridge"], load
    if load["ovs-netdev"] < 0.5 * load["linux-bridge"]:
        assert load["edgeflow"] > 4 * load["ovs-netdev"], load
    else:
        not_claimed("gateway: edgeflow > 4 x Open vSwitch: Open vSwitch near what the bridge carries")
    assert load["edgeflow-tc"] > 0.6 * load["linux-bridge"], load
    for x in rows(results, "gateway_timeouts"):
        # Pings for three hard timeouts: the flows expired (at least) twice while they ran...
        assert int(x["expiries"]) >= 2, x
        # ...and (nearly) every expiry cost the next packet a trip to the controller.
        assert int(x["expiries_with_spike"]) >= int(x["expiries"]) - 1, x


@uses("fastpath")
def test_fastpath_shows_kernel_ahead_of_userspace(results):
    """The fast-path experiment's claims, as ratios of the same run: the kernel paths ahead of
    userspace for 64-byte frames where userspace dropped part of the offer (its rate is its own),
    TC near the bridge for TCP (against what the hosts carry through the bridge: a floor, which
    needs no switch at its limit), XDP above the bridge for 64 B on each one's own time per frame
    (neither drops a frame of the XDP sender's: the chain's time less the bare veth's)."""
    r = {(x["switch"], x["pipeline"]): x for x in rows(results, "fastpath")}
    kinds = {k for k, _ in r}
    assert kinds >= {"linux-bridge", "edgeflow", "edgeflow-tc", "edgeflow-xdp"}, kinds
    bridge = r[("linux-bridge", "(learning bridge)")]
    for pipeline in {p for k, p in r if k == "edgeflow"}:
        for fast in ("edgeflow-tc", "edgeflow-xdp"):
            ratio_claim(f"fastpath: {fast} > 1.3 x userspace ({pipeline})", r[(fast, pipeline)],
                        r[("edgeflow", pipeline)], 1.3, rate="mpps_64", limited="bottleneck_64")
            # The loadgen frame hit the kernel's cache: the program test run reports a hit's cost
            # (100-130 ns here; a miss that went up, or a lookup walking every mask, is several
            # times that).
            assert 0 < float(r[(fast, pipeline)]["fastpath_prog_ns"]) < 1000, r[(fast, pipeline)]
        assert float(r[("edgeflow-tc", pipeline)]["tcp_vs_bridge"]) > 0.6, r[("edgeflow-tc", pipeline)]
        ratio_claim(f"fastpath: XDP > 1.5 x the bridge ({pipeline})", r[("edgeflow-xdp", pipeline)], bridge, 1.5,
                    rate="mpps_64", limited="bottleneck_64")
    depth = rows(results, "fastpath_depth")
    assert {x["switch"] for x in depth} >= {"edgeflow-tc", "edgeflow-xdp"}


@uses("afdx")
def test_afdx_shows_policing_and_priority(results):
    """What the experiment exists to show: the AFDX switches lose no conforming frame and hold a
    babbler to exactly what the account admits; the Linux bridge, which does not police, lets all
    of it through."""
    per_vl = rows(results, "afdx")
    assert {x["switch"] for x in per_vl} >= {"direct", "edgeflow", "edgeflow-tc", "edgeflow-xdp",
                                            "edgeflow-openflow", "ovs-netdev", "linux-bridge"}
    for x in per_vl:
        if x["switch"] in ("edgeflow", "edgeflow-tc", "edgeflow-xdp") and x["background_vls"] == "0":
            assert int(x["lost"]) == 0, x
    for x in rows(results, "afdx-policing"):
        offered = int(x["offered"])
        arrived = [int(x["arrived_a"]), int(x["arrived_b"])]
        if x["switch"] in ("edgeflow", "edgeflow-tc", "edgeflow-xdp"):
            # What the contract allows over the times the frames reached each switch (bounds from
            # BAG, jitter and Smax, not a policing algorithm), which is a fraction of the 10x offered.
            for got, contract in zip(arrived, (x["contract_a"], x["contract_b"])):
                fewest, most = map(int, contract.split("-"))
                assert fewest <= got <= most and most < offered / 5, x
        elif x["switch"] == "linux-bridge":
            assert arrived == [offered, offered], x
    # The frame-rate comparison ran with every link in the kernel: contracts that admit every frame
    # police none, and AFDX frames did not fall back to userspace (which forwards several times
    # fewer). The 0.9x target itself is a benchmark figure (`make bench`), not checked here. The
    # ratio is on rates where both modes dropped part of the offer, else on each one's own time
    # per frame (the XDP sender's offer is the chain's rate: a kernel switch drops nothing of it).
    rate = {(x["datapath"], x["switch"]): x for x in rows(results, "afdx-rate")}
    assert set(rate) == {(d, s) for d in ("tc", "xdp") for s in ("openflow", "afdx")}, rate
    for d in ("tc", "xdp"):
        x, of = rate[(d, "afdx")], rate[(d, "openflow")]
        assert int(x["policed"]) == 0, x
        ratio_claim(f"afdx-rate on {d}: AFDX > 0.5 x OpenFlow", x, of, 0.5)
    # On a port behind a 100 Mbit/s link that nothing in the config paces, saturated by
    # low-priority VLs: paced to its link by default, a high-priority VL loses nothing and waits
    # about the low-priority frame on the wire (123 µs) and what the pacer hands the interface
    # ahead (100 µs) more than unloaded, on every datapath;
    # the low-priority control waits behind the switch's full queue, and the link's ring drops
    # nothing. Unpaced (as before), the backlog is in the link's ring and the high-priority VL
    # waits there for ~100 ms and loses frames. test_afdx.py holds the ratio to the unloaded
    # latency to its bound; this checks the experiment's rows.
    slow = {(x["datapath"], x["pacing"]): x for x in rows(results, "afdx-priority")
            if x["timing"] == "sleep" and x["link_mbps"] == "100"}
    assert {("user", "link"), ("tc", "link"), ("xdp", "link"), ("user", "none")} <= set(slow), slow
    for d in ("user", "tc", "xdp"):
        x = slow[(d, "link")]
        assert int(x["loaded_lost"]) == 0 and int(x["link_ring_drops"]) == 0 and int(x["queue_full"]) > 0, x
        assert float(x["added_p50_us"]) < 123 + 100 + 500, x
        assert float(x["control_p50_us"]) > 10 * float(x["loaded_p50_us"]), x
        if d != "user":
            assert (int(x["kernel_held"]), int(x["kept_for_priority"])) == (1, 19), x
    before = slow[("user", "none")]
    assert float(before["loaded_p50_us"]) > 10_000 and int(before["link_ring_drops"]) > 0, before
    # At 500 Mbit/s with busy timing the frame on the wire is 25 µs and the pacer runs ahead 1 µs:
    # the 2x its unloaded latency holds (0.7-1.6 in single runs).
    fast = next(x for x in rows(results, "afdx-priority") if x["link_mbps"] == "500" and x["timing"] == "busy")
    assert int(fast["loaded_lost"]) == 0 and int(fast["queue_full"]) > 0, fast
    assert float(fast["ratio_to_unloaded"]) <= 2, fast


#: What the forwarding thread's wake-up (`sleep` timing: ~90 µs median, milliseconds at p99 on this
#: VM, docs/tsn.md) and the veth hops add past the latest start a scheduler allows a frame, at p99:
#: the same allowance test_tsn.py gives strict priority.
WAKE_TAIL_US = 3000


@uses("tsn")
def test_tsn_shows_scheduling(results):
    """What the experiment exists to show: on a paced port a high-priority stream loses nothing and
    waits what its scheduler allows however heavy the best effort: one best-effort frame on the
    wire and its own frames ahead of it, at the port's rate under strict priority and at the idle
    slope under CBS (802.1Q Annex L's bound for the top class, computed per frame from when the
    sender sent it and those before it: `bounds` in testbed/experiments/tsn.py), plus the
    thread's wake-up; and no frame under CBS leaves before its credit allows. Pacing holds the port
    to its rate where the unpaced veth carries all; busy timing puts gated frames inside a 50 µs
    window.

    The bound was a flat 608 + 3000 µs. A sender that falls behind on a busy machine catches up
    with a burst, which CBS spreads at the idle slope (880 µs a 200-byte frame at 2 Mbit/s): one
    CBS run measured p99 3 752 µs with nothing wrong. A scheduler that put queue 7 behind the best
    effort (50 frames, 30 ms: 28.7 ms over the bound at p99 when broken so on purpose) is over the
    per-frame bound; a queue 7 that was not shaped at all is under the floor wherever the sender
    bunched frames. The `-pairs` rows bunch them on purpose (back-to-back pairs): there CBS must
    hold frames for credit, and the same floor applied to strict priority in the same run shows
    it catches an unshaped queue."""
    lat = rows(results, "tsn")
    for x in lat:
        print(f"tsn {x['scheduler']} at {x['be_load']}: p99 {x['lat_p99_us']} µs, over its bound p99 "
              f"{x['over_bound_p99_us'] or '-'} max {x['over_bound_max_us'] or '-'} µs; {x['held_by_cbs']} "
              f"frames bunched, {x['under_cbs_floor']} under CBS's floor")
    by = {x["scheduler"]: x for x in lat}
    for x in lat:
        if x["scheduler"] in ("strict", "cbs", "strict-pairs", "cbs-pairs"):
            assert int(x["high_lost"]) == 0, x
            assert float(x["over_bound_p99_us"]) < WAKE_TAIL_US, x
        if x["scheduler"] in ("cbs", "cbs-pairs"):
            assert int(x["under_cbs_floor"]) == 0, x
    assert int(by["cbs-pairs"]["held_by_cbs"]) > 0, by["cbs-pairs"]
    assert int(by["strict-pairs"]["under_cbs_floor"]) > 0, by["strict-pairs"]
    top = max(float(x["be_load"]) for x in lat)
    at_top = {x["scheduler"]: x for x in lat if float(x["be_load"]) == top}
    for name in ("strict", "cbs", "strict-pairs", "cbs-pairs"):
        assert float(at_top[name]["be_mbps"]) < 20 * 1.03, at_top[name]
    assert float(at_top["unpaced"]["be_mbps"]) > 25, at_top["unpaced"]
    gates = {(x["timing"], int(x["window_us"])): x for x in rows(results, "tsn-gates")}
    # A frame the switch picks up too late for its window waits for the next one; what still
    # leaves outside is a vCPU preempted between the check and the send (0 to 2 of 20 000 frames
    # in long runs; before that check, 13 of 1000 once in CI).
    assert float(gates[("busy", 50)]["in_window"]) >= 0.99, gates[("busy", 50)]
    assert all(int(x["lost"]) == 0 for x in gates.values()), gates
    idle = rows(results, "tsn-idle")
    assert {(x["scheduler"], x["timing"]) for x in idle} == {("unpaced", "-"), ("strict", "sleep"), ("strict", "busy")}
    # A gated, busy third port leaves TCP between the other two where it was (0.97-1.13 in one
    # run; a quick run's 1 s of TCP moves by ±15 % on this VM).
    unscheduled = rows(results, "tsn-unscheduled")
    assert all(float(x["of_unscheduled"]) > 0.7 for x in unscheduled), unscheduled
    # Streams: the two-rate meter passes what its buckets allow (0.999-1.000 in a full run), and
    # replication loses and duplicates nothing across link cuts.
    qci = rows(results, "tsn-qci")
    assert qci and all(0.98 <= float(x["passed_of_want"]) <= 1.01 for x in qci), qci
    frer = rows(results, "tsn-frer")
    assert frer and all(int(x["lost"]) == 0 and int(x["duplicates"]) == 0 for x in frer), frer


@uses("less")
def test_less_shows_labels_and_reroutes(results):
    """LESS: frames cross one switch on every datapath and stack type with nothing lost, the kernel
    datapaths well under userspace's processing time; a link taken down mid-stream on six switches
    loses at most a few frames per case while the rest take their detours (Fig. 6b), fewer than an
    os-ken controller rerouting the same paths on port-status loses."""
    lat = rows(results, "less")
    assert {(x["datapath"], x["stack"]) for x in lat} == {(d, s) for d in ("user", "tc", "xdp")
                                                         for s in ("delete", "shift-1", "shift-2")} | {
        ("tc-mirred", "shift-1"), ("xdp-redirect", "shift-1")}
    assert all(int(x["lost"]) == 0 for x in lat), lat

    def p50(dp):
        mine = sorted(float(x["through_p50_us"]) for x in lat if x["datapath"] == dp)
        return mine[len(mine) // 2]
    assert p50("xdp") < p50("user"), (p50("xdp"), p50("user"))
    # Fig. 5b with loadgen's XDP sender: the XDP fast path pops labels at several times the rate
    # userspace does, at every size (2.5 against 0.5-0.7 Mframes/s here).
    # Where userspace dropped part of the offer (its rate is its own; XDP's, if it dropped nothing,
    # only understates XDP's).
    table = {(x["datapath"], x["size"]): x for x in rows(results, "less-throughput")}
    tput = {k: float(x["kfps"]) for k, x in table.items()}
    for (dp, size), kfps in tput.items():
        if dp == "xdp":
            if own_rate(table[("user", size)]):
                assert kfps > 2 * tput[("user", size)], tput
            else:
                not_claimed(f"less-throughput: XDP > 2 x userspace at {size} B: userspace dropped nothing")
    rr = rows(results, "less-reroute")
    assert {(x["switch"], x["datapath"], x["case"]) for x in rr} == (
        {("less", d, c) for d in ("user", "xdp") for c in "abc"}
        | {(f"openflow-{m}", "user", c) for m in ("failover", "reactive") for c in "abc"})
    for x in rr:
        # Every switch carried the stream on during the failure. A bound on what is lost holds for
        # the switches that reroute by themselves; os-ken rerouting on port-status (the baseline)
        # loses what its reaction time costs, 431 frames once in CI on a loaded machine.
        assert float(x["during_fraction"]) >= 0.9, x
        assert x["switch"] == "openflow-reactive" or int(x["lost"]) < 200, x
        # The first frame on a detour came after the link went, and (for the switches that
        # reroute by themselves) within 50 ms of it: 0.4-9 ms here.
        bound = 500_000 if x["switch"] == "openflow-reactive" else 50_000
        assert 0 < float(x["first_rerouted_us"]) < bound, x
    # Rerouting where the failure is beats asking a controller: the same failures lose more frames
    # while os-ken recomputes the paths than while LESS switches take their detours.
    lost = lambda switch: sum(int(x["lost"]) for x in rr if (x["switch"], x["datapath"]) == (switch, "user"))
    assert lost("openflow-reactive") > lost("less"), (lost("openflow-reactive"), lost("less"))
    # Recovery: the kernel takes the first frame after a failure round it (detours planned
    # ahead, the port marked down by the carrier guard): 56-125 µs at p99 over 30 runs a case in a
    # full run; a quick run's three are held to 1 ms. No frame dies looping.
    rec = rows(results, "less-recovery")
    assert {(x["datapath"], x["case"]) for x in rec} == {("xdp", c) for c in "abc"}, rec
    assert all(float(x["first_p99_us"]) < 1000 and int(x["looped"]) == 0 for x in rec), rec


@uses("churn")
def test_churn_leaves_untouched_flows_alone(results):
    """Issue 32's benchmark, quick: 10 000 flows carrying frames as fast as the sender goes, 5 000
    unrelated flow-mods a second, with strict deletes and (issue 51) with non-strict deletes that
    must find their flow under a mask the 10 000 flows' covers. edgeflow revalidates instead of
    flushing: no entry is retired and every datapath keeps at least 0.9 of its rate (0.95 is the
    target of the full run, 0.97-1.03 in quick runs here; one sample each here, so a slow second of
    the VM is allowed for). Open
    vSwitch, revalidating every datapath flow on each change, kept 0.4 of its own in the same run.
    "Its rate" is the switch's own: the received rate where it dropped part of the offer
    (userspace, Open vSwitch), its own time per frame where it took everything (tc, xdp)."""
    r = {x["switch"]: x for x in rows(results, "churn") if x["deletes"] == "strict"}
    loose = {x["switch"]: x for x in rows(results, "churn") if x["deletes"] == "non-strict"}

    def kept(x):
        # Its own rate kept where it dropped part of the offer; where it took everything (the
        # kernel datapaths: the XDP sender's softirq carries each frame through them) the chain's
        # rate would hide what churn costs the switch behind the sender's own time per frame, so
        # the switch's own time per frame, the bare veth's taken out.
        return float(x["ratio"]) if own_rate(x) else (float(x["core_ratio"]) if x["core_ratio"] else None)
    for kind, x in [(k, t[k]) for t in (r, loose) for k in ("edgeflow", "edgeflow-tc", "edgeflow-xdp")]:
        assert float(x["churn_taken_per_s"]) > 4500, x
        if kept(x) is None:
            not_claimed(f"churn: {kind} kept 0.9 of its rate: it dropped nothing and ran at the bare veth's rate")
        else:
            assert kept(x) >= 0.9, x
        assert int(x["retired"]) == 0, x
        if kind != "edgeflow":
            assert int(x["kernel_retired"]) == 0, x
    mine = [kept(r[k]) for k in ("edgeflow", "edgeflow-tc", "edgeflow-xdp") if kept(r[k]) is not None]
    if own_rate(r["ovs-netdev"]):
        assert min(mine) > float(r["ovs-netdev"]["ratio"]), r
    else:
        not_claimed("churn: edgeflow keeps more than Open vSwitch: Open vSwitch dropped nothing of its offer")


#: How many times native AFDX's own time per frame the P4 program may take in the kernel. The
#: generated program copies the frame's first 256 bytes to a per-CPU buffer and reads fields bit by
#: bit where bpf/fp_afdx.h reads three in place: 1.3-1.4x native's time on tc and 2.1-2.4x on xdp
#: in three quick runs here. Native's own time on xdp is some 100-120 ns out of a chain of 300, so
#: ±10 % on the bare veth's ~190 ns moves it by ±20 %: 4x leaves that room. A P4 frame decided in
#: userspace costs several times a kernel one (the `user` rows); one that fell back there would
#: also drop frames, and fail on its rate.
P4_COST_TIMES = 4


@uses("p4")
def test_p4_runs_the_papers_program_in_the_kernel(results):
    """The paper's P4 AFDX switch against edgeflow's AFDX mode: on tc and xdp the program decides
    in the kernel (nearly every frame the p4 runs received was the kernel's), and what it costs a
    frame there stays within reach of the native mode's. Neither drops a frame of the XDP
    sender's: its softirq carries each frame through the switch, so the offer is the chain's rate
    (one quick run offered 0.56 Mpps to P4 and 1.30 to native and got all; a bare veth carries
    5-7 Mpps here, a kernel switch in the path 1-4). The claim is on each one's own time per frame, the chain's less the bare
    veth's: P4's within P4_COST_TIMES of native's. Latency rows for every datapath and switch."""
    rate = {(x["datapath"], x["switch"]): x for x in rows(results, "p4")}
    assert set(rate) == {(d, s) for d in ("user", "tc", "xdp") for s in ("afdx", "p4")}, rate
    assert float(rate[("user", "p4")]["kernel_share"]) == 0, rate[("user", "p4")]
    for d in ("tc", "xdp"):
        x = rate[(d, "p4")]
        assert float(x["kernel_share"]) > 0.99, x
        ratio_claim(f"p4 on {d}: P4 within {P4_COST_TIMES}x native AFDX's time per frame", x, rate[(d, "afdx")],
                    1 / P4_COST_TIMES)
    proc = {(x["datapath"], x["switch"], x["size"]) for x in rows(results, "p4-processing")}
    assert proc == {(d, s, z) for d in ("user", "tc", "xdp") for s in ("afdx", "p4") for z in ("64", "1518")}, proc


#: Issue 53's measure for the software target (the P4 program compiled to closures, its tables
#: looked up by tuple space): at least half the rate of the same forwarding written by hand.
#: Quick runs here gave 0.8-0.9 of native AFDX, 0.77 of the OpenFlow router, 1.2 of its L2.
P4_USER_AT_LEAST = 0.5


@uses("p4")
def test_p4_in_userspace_forwards_at_half_the_hand_written_rate_or_better(results):
    """On the userspace datapath, where the software target runs the program: the paper's AFDX
    program against the native AFDX mode, and a v1model IPv4 router (1 000 LPM routes) and L2
    switch (4 000 addresses) against the OpenFlow pipeline with flows that forward alike, each at
    P4_USER_AT_LEAST of the other's rate or more (ratios of one run, medians of its rounds)."""
    rate = {(x["datapath"], x["switch"]): x for x in rows(results, "p4")}
    ratio_claim(f"p4 on user: the AFDX program at {P4_USER_AT_LEAST} of native AFDX", rate[("user", "p4")],
                rate[("user", "afdx")], P4_USER_AT_LEAST)
    v1 = {(x["program"], x["switch"]): x for x in rows(results, "p4-v1model") if x["datapath"] == "user"}
    assert set(v1) == {(p, s) for p in ("router", "l2") for s in ("openflow", "p4")}, v1
    for program in ("router", "l2"):
        ratio_claim(f"p4 on user: the v1model {program} at {P4_USER_AT_LEAST} of the OpenFlow pipeline's",
                    v1[(program, "p4")], v1[(program, "openflow")], P4_USER_AT_LEAST)


#: Issue 53's measure for the kernel back end: a v1model program compiled to BPF costs a frame at
#: most 1/0.9 of what the OpenFlow fast path's entries cost doing the same forwarding.
P4_KERNEL_AT_LEAST = 0.9


@uses("p4")
def test_v1model_programs_in_the_kernel_keep_up_with_the_openflow_fast_path(results):
    """On tc and xdp the v1model router and L2 switch decide every frame in the kernel, and each
    forwards at P4_KERNEL_AT_LEAST of the OpenFlow fast path's rate doing the same forwarding (on
    their own times per frame where the generator bounds both chains); the router's latency is
    measured on every datapath."""
    v1 = {(x["program"], x["datapath"], x["switch"]): x for x in rows(results, "p4-v1model")}
    assert set(v1) == {(p, d, s) for p in ("router", "l2") for d in ("user", "tc", "xdp")
                       for s in ("openflow", "p4")}, v1
    for program in ("router", "l2"):
        for d in ("tc", "xdp"):
            x = v1[(program, d, "p4")]
            assert float(x["kernel_share"]) > 0.99, x
            ratio_claim(f"p4 on {d}: the v1model {program} at {P4_KERNEL_AT_LEAST} of the OpenFlow fast path's",
                        x, v1[(program, d, "openflow")], P4_KERNEL_AT_LEAST)
    proc = {(x["datapath"], x["switch"]) for x in rows(results, "p4-v1model-processing")}
    assert proc == {(d, s) for d in ("user", "tc", "xdp") for s in ("openflow", "p4")}, proc
