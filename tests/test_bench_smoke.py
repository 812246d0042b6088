"""The benchmark machinery end to end, in seconds: one experiment (flows at scale, quick) on
edgeflow and Open vSwitch writes its table, CSV, plot and summary. The experiments' claims are
checked by `make bench-quick` (tests/bench), not here."""

import csv

from testbed import bench


def test_the_scale_experiment_measures_edgeflow_and_open_vswitch_at_ten_thousand_flows(tmp_path):
    """Issue 56's table, quick: 10 000 exact flows installed in edgeflow and in Open vSwitch, and
    new flows set up through a reactive controller with them in, every figure measured (a switch
    that refused or lost flows fails the install; a row with nothing resident over idle would be a
    measurement of nothing; one that set up no flow fails the setup measurement; what the setups
    cost each switch in CPU time is measured too, the figure a busy machine moves least)."""
    assert bench.main(["--quick", "--out", str(tmp_path), "--switches", "edgeflow,ovs-netdev", "scale"]) == 0
    with open(tmp_path / "scale.csv") as f:
        got = list(csv.DictReader(f))
    assert {(r["switch"], r["shape"], r["flows"]) for r in got} == {
        (s, "exact", "10000") for s in ("edgeflow", "ovs-netdev")}, got
    assert all(float(r["install_per_s"]) > 0 and float(r["bytes_per_flow"]) > 0 for r in got), got
    mine = next(r for r in got if r["switch"] == "edgeflow")
    # The pipeline's own figures: the exact shape is one mask.
    assert int(mine["masks"]) == 1, mine
    assert float(mine["lookup_ns"]) > 0 and float(mine["heap_bytes_per_flow"]) > 0, mine
    assert float(mine["install_ratio"]) > 0, mine
    # New flows set up through a controller, on both (the exact rows).
    assert all(float(r["setup_per_s"]) > 0 for r in got) and float(mine["setup_ratio"]) > 0, got
    assert all(float(r["setup_cpu_us"]) > 0 for r in got), got
    table = (tmp_path / "scale.md").read_text()
    assert "Memory per flow" in table and table.count("| edgeflow ") == 1, table
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "## scale" in summary and "Switches: edgeflow, ovs-netdev" in summary, summary
