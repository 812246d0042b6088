"""The benchmark machinery end to end, in a minute: one experiment (frame rate against frame size,
quick) on edgeflow and the Linux bridge writes its table, CSV, plot and summary. The experiments'
claims are checked by `make bench-quick` (tests/bench), not here."""

import csv

from testbed import bench


def test_one_experiment_on_edgeflow_and_a_peer_writes_its_results(tmp_path):
    assert bench.main(["--quick", "--out", str(tmp_path), "--switches", "edgeflow,linux-bridge", "framerate"]) == 0
    with open(tmp_path / "framerate.csv") as f:
        got = list(csv.DictReader(f))
    assert {(r["switch"], r["size"]) for r in got} == {(s, z) for s in ("edgeflow", "linux-bridge")
                                                       for z in ("64", "1518")}, got
    # Measured, not filled in: every switch forwarded frames of every size.
    assert all(float(r["received_pps"]) > 0 and float(r["offered_pps"]) > 0 for r in got), got
    table = (tmp_path / "framerate.md").read_text()
    assert "Forwarded frame rate" in table and table.count("| edgeflow ") == 2, table
    assert (tmp_path / "framerate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (tmp_path / "SUMMARY.md").read_text()
    assert "## framerate" in summary and "Switches: edgeflow, linux-bridge" in summary, summary
