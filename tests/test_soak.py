"""The soak in short (`make soak` runs it for 10 minutes per datapath): 5 s of random flow-mod
churn (1 000/s, every shape, groups and meters, add, modify and delete) while frames flow on
flows the churn never touches, on every datapath. The switch stays up, refuses none of the
flow-mods, loses none of those frames, and its memory stays flat."""

import pytest

from testbed.soak import RSS_MARGIN_KIB, soak

pytestmark = pytest.mark.timeout(180)


def test_random_churn_leaves_untouched_traffic_whole_and_memory_flat(datapath):
    res = soak(datapath, seconds=5)
    assert res["alive"], res
    assert res["flow_mods"] >= 3_250 and res["errors"] == 0, res
    assert res["warm_lost"] == 0 and res["sent"] > 80_000, res
    assert res["lost"] == 0 and res["received"] == res["sent"], res
    assert res["rss_end_kib"] - res["rss_start_kib"] <= RSS_MARGIN_KIB, res
