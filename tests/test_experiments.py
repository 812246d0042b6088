"""Every experiment in --quick mode, for every switch under test: tables well formed, numbers
plausible."""

import csv

import pytest

from testbed import bench
from testbed.experiments import EXPERIMENTS


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    assert bench.main(["--quick", "--out", str(out)]) == 0
    return out


def rows(out, name):
    with open(out / f"{name}.csv") as f:
        return list(csv.DictReader(f))


def test_files_and_summary(results):
    for name in EXPERIMENTS:
        for ext in ("md", "csv", "png"):
            assert (results / f"{name}.{ext}").stat().st_size > 0, f"{name}.{ext}"
    summary = (results / "SUMMARY.md").read_text()
    assert "Measured on" in summary
    for name in EXPERIMENTS:
        assert f"## {name}" in summary


def test_zodiac_plausible(results):
    r = rows(results, "zodiac")
    by = {(x["switch"], x["app"], x["flow"]): float(x["mbit_s"]) for x in r}
    assert by[("linux-bridge", "none", "C2S")] > 1000
    assert by[("edgeflow", "none", "C2S")] > 1000
    assert by[("edgeflow", "l2-learning", "C2S")] > 1000
    assert all(v > 50 for v in by.values()), by
    assert {x["hosts_tx"] for x in r if x["switch"] == "ovs-netdev"} == {"off"}, "settings are recorded per row"


def test_zynq_plausible(results):
    for x in rows(results, "zynq"):
        if float(x["offered_mbit_s"]) <= 20:
            assert float(x["loss_pct"]) < 1.0, x
            assert abs(float(x["received_mbit_s"]) - float(x["offered_mbit_s"])) < 1.0, x
    for x in rows(results, "zynq_ping"):
        assert int(x["received"]) == int(x["pings"])
        assert 0 < float(x["rtt_avg_ms"]) < 50


def test_framerate_plausible(results):
    r = rows(results, "framerate")
    assert {int(x["size"]) for x in r} == {64, 1518}
    for x in r:
        assert float(x["received_pps"]) > 10_000, x
        assert x["bottleneck"] in ("generator", "switch")


def test_latency_plausible(results):
    for x in rows(results, "latency"):
        assert int(x["received"]) > 0
        assert 0 < float(x["lat_min_us"]) <= float(x["lat_p50_us"]) <= float(x["lat_max_us"]) < 100_000, x


def test_gateway_plausible(results):
    load = {x["switch"]: x for x in rows(results, "gateway")}
    assert float(load["linux-bridge"]["mbit_s"]) > 1000
    assert float(load["edgeflow"]["switch_cpu_pct"]) > 0
    for x in rows(results, "gateway_timeouts"):
        assert int(x["pings"]) > 0 and float(x["rtt_max_ms"]) >= float(x["rtt_median_ms"])


def test_fastpath_plausible(results):
    r = {(x["switch"], x["pipeline"]): x for x in rows(results, "fastpath")}
    kinds = {k for k, _ in r}
    assert kinds >= {"linux-bridge", "edgeflow", "edgeflow-tc", "edgeflow-xdp"}, kinds
    for (kind, pipeline), x in r.items():
        assert float(x["tcp_gbit_s"]) > 0.5, x
        assert float(x["mpps_64"]) > 0.01, x
        if kind in ("edgeflow-tc", "edgeflow-xdp"):
            # The loadgen frame hit the kernel's cache: the program test run reports a hit's cost.
            assert 0 < float(x["fastpath_prog_ns"]) < 100_000, x
    depth = rows(results, "fastpath_depth")
    assert {x["switch"] for x in depth} >= {"edgeflow-tc", "edgeflow-xdp"}


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
        offered, admits = int(x["offered"]), int(x["account_admits"])
        arrived = [int(x["arrived_a"]), int(x["arrived_b"])]
        if x["switch"] in ("edgeflow", "edgeflow-tc", "edgeflow-xdp"):
            # Exactly what the account admits on the times the frames reached each switch (one
            # frame for float rounding at exact due times).
            at_switch = [int(x["admits_at_a"]), int(x["admits_at_b"])]
            assert all(abs(a - b) <= 1 for a, b in zip(arrived, at_switch)), x
        elif x["switch"] == "linux-bridge":
            assert arrived == [offered, offered], x
        assert admits < offered / 5, x


def test_tsn_shows_scheduling(results):
    """What the experiment exists to show: on a paced port a high-priority stream loses nothing and
    waits about one best-effort frame however heavy the best effort; pacing holds the port to its
    rate where the unpaced veth carries all; busy timing puts gated frames inside a 50 µs window."""
    lat = rows(results, "tsn")
    top = max(float(x["be_load"]) for x in lat)
    at_top = {x["scheduler"]: x for x in lat if float(x["be_load"]) == top}
    for name in ("strict", "cbs"):
        x = at_top[name]
        assert int(x["high_lost"]) == 0, x
        assert float(x["lat_p99_us"]) < 608 + 3000, x
        assert float(x["be_mbps"]) < 20 * 1.03, x
    assert float(at_top["unpaced"]["be_mbps"]) > 25, at_top["unpaced"]
    gates = {x["timing"]: x for x in rows(results, "tsn-gates")}
    assert float(gates["busy"]["in_window"]) >= 0.99, gates["busy"]
    assert all(int(x["lost"]) == 0 for x in gates.values()), gates
