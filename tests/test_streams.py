"""TSN streams with real frames (docs/tsn.md, "Streams"), on every datapath:
- IEEE 802.1CB frame replication and elimination: switch X numbers a talker's stream and copies
  it onto two links to switch Y, which passes the first copy of each number to the listener and
  discards the other. One link is cut mid-stream: the listener gets every frame once.
- IEEE 802.1Qci filtering and policing: a stream's flow meter passes its committed rate green
  and its excess rate yellow (marked drop-eligible) and drops the rest; a stream gate open half
  its cycle passes half; frames over the largest SDU are dropped; each counted."""

from types import SimpleNamespace

import pytest

from testbed import netns
from testbed.less import stream
from testbed.streams import GATED_MAC, METER, bucket_passes, frer_pair, qci_switch, stream_counters


# The mode holds nothing in the kernel: each of the two upcall paths (XDP's pass, TC's redirect to
# the upcall interface) is run by one of the two tests, userspace by both.
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_a_replicated_stream_survives_a_cut_link_without_loss_or_duplicates(datapath):
    with frer_pair("fr", datapath) as (f, switches):
        talker, listener = f.hosts
        cut = f.ports["a"][1]
        sent, got = stream(talker, listener, 256, 2000, 2.0, flow=11,
                           during=lambda: netns.sh("ip", "link", "set", cut, "down"), at=1.0)
        x, y = stream_counters(switches["a"]), stream_counters(switches["b"])
    codes = f.codes
    print(f"\nFRER ({datapath}): sent {sent['sent']}, received {got['received']}, lost {got['lost']}, "
          f"duplicates {got['duplicates']}; X generated {x['generated']}; Y passed {y['passed']}, "
          f"discarded {y['discarded']}, lost {y['lost']}, out of order {y['out_of_order']}")
    assert all(c == 0 for c in codes.values()), codes
    assert got["received"] == sent["sent"] and got["lost"] == 0 and got["duplicates"] == 0, (sent, got)
    assert x["generated"] == sent["sent"] and y["passed"] == sent["sent"], (x, y)
    # Both copies arrived while both links were up (1 s of 2 at 2 000 frames/s), one after.
    assert 0.3 * sent["sent"] < y["discarded"] < 0.7 * sent["sent"], y
    assert y["lost"] == 0 and y["rogue"] == 0 and y["tagless"] == 0, y


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_streams_are_metered_gated_and_filtered_as_configured(datapath, tmp_path):
    """The metered stream is offered 10 Mbit/s: green and yellow within what the meter's two
    buckets may pass given when the frames reached it (`bucket_passes`: the receiver's stamps
    and the sequence numbers the meter dropped, so that a sender or switch that stalls moves the
    bounds instead of failing them), red the rest; frames over the largest SDU dropped; the gated
    stream half through a gate open half its cycle; each counted."""
    with qci_switch("qc", datapath) as (f, sw):
        talker, listener = f.hosts
        size, seconds = 500, 1.5
        log = tmp_path / "metered.log"
        # 10 Mbit/s offered: 4 committed (green), 2 excess (yellow), the rest red.
        sent, got = stream(talker, listener, size, 2500, seconds, flow=21, log=log)
        oversize, _ = stream(talker, listener, 1100, 200, 0.25, flow=22)
        gated_sent, gated_got = stream(talker, SimpleNamespace(mac=GATED_MAC, addr=listener.addr,
                                                               popen=listener.popen), 200, 1000, 1.0, flow=23)
        metered, gated = stream_counters(sw, "metered"), stream_counters(sw, "gated")
    green = bucket_passes(log, size, METER["cir_kbps"], METER["cbs_bytes"])
    yellow = bucket_passes(log, size, METER["eir_kbps"], METER["ebs_bytes"], first=False)
    print(f"\nQci ({datapath}): sent {sent['sent']}, received {got['received']}; green {metered['green']} "
          f"(bounds {green}), yellow {metered['yellow']} (bounds {yellow}), red {metered['red']}; "
          f"over the SDU {metered['sdu_too_large']} of {oversize['sent']}; gate passed {gated_got['received']} of "
          f"{gated_sent['sent']}, closed {gated['gate_closed']}")
    assert metered["green"] + metered["yellow"] + metered["red"] == sent["sent"], metered
    assert got["received"] == metered["green"] + metered["yellow"], (got, metered)
    assert green[0] <= metered["green"] <= green[1], (metered, green)
    assert yellow[0] <= metered["yellow"] <= yellow[1], (metered, yellow)
    assert metered["sdu_too_large"] == oversize["sent"]
    # Open 5 ms of every 10: half, give or take a window's frames.
    assert abs(gated_got["received"] - gated_sent["sent"] / 2) <= 0.05 * gated_sent["sent"], (gated_sent, gated_got)
    assert gated_got["received"] + gated["gate_closed"] == gated_sent["sent"], gated
