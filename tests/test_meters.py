"""Meters police real traffic at the configured rate — in userspace, and as token buckets in the
kernel fast path, where the policed flow must stay.

Each test runs on userspace and on one kernel hook, not both: TC and XDP share one meter
(bpf/fp_meter.h), which datapath's BPF_PROG_TEST_RUN test `a_meter_drops_past_its_burst_and_says_so`
runs on both hooks. Drop bands run on XDP here; DSCP remark bands, which the kernel leaves to
userspace (the flow must still reach it there), on TC."""

import re

import pytest

DROP_DATAPATHS = ["user", "xdp"]

from testbed import loadgen
from testbed.switches import edgeflow_on
from testbed.traffic import iperf3_udp

LENGTH = 1400
FRAME = LENGTH + 8 + 20 + 14  # a meter counts whole frames; iperf3 reports UDP payload


def policed_in_kernel(sw, datapath, dropping):
    """After the switch stopped: with a fast path, the kernel carried and policed the traffic."""
    totals = sw.fastpath_totals()
    if datapath == "user":
        return
    assert totals["hits"] >= 1000, totals
    assert (totals["drops"] > 0) == dropping, totals


def metered(sw, meter):
    sw.ofctl("del-flows")
    sw.ofctl("add-meter", meter)
    sw.ofctl("add-flow", "priority=10,in_port=1,actions=meter:1,output:2")
    sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")


@pytest.mark.parametrize("datapath", DROP_DATAPATHS)
def test_kbps_meter_rate(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        metered(sw, "meter=1,kbps,burst,band=type=drop,rate=20000,burst_size=100")
        r = iperf3_udp(h1, h2, rate_bps=50e6, length=LENGTH, seconds=4)
        expected = 20e6 * LENGTH / FRAME
        print(f"\nkbps meter at 20 Mbit/s, offered 50 Mbit/s: received {r['received_bps'] / 1e6:.2f} Mbit/s payload "
              f"(expected {expected / 1e6:.2f})")
        # Never above the rate (a token bucket cannot pass more than it earns, plus its burst);
        # below it only by what a broken meter would lose, not what a slow machine does.
        assert r["received_bps"] <= expected * 1.03 and r["received_bps"] > 0.8 * expected, r
        # The meter's statistics count every packet offered, whichever datapath policed it (and
        # the host's own few frames on port 1, ARP).
        stats = sw.ofctl("meter-stats")
        offered = int(re.search(r"packet_in_count:(\d+)", stats).group(1))
        assert r["sent_packets"] <= offered <= r["sent_packets"] + 20, (r, stats)
    policed_in_kernel(sw, datapath, dropping=True)


@pytest.mark.parametrize("datapath", DROP_DATAPATHS)
def test_pktps_meter_rate(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        metered(sw, "meter=1,pktps,burst,band=type=drop,rate=2000,burst_size=20")
        r = iperf3_udp(h1, h2, rate_bps=5000 * 100 * 8, length=100, seconds=4)
        print(f"\npktps meter at 2000 pps, offered 5000 pps: received {r['received_pps']:.0f} pps")
        assert 0.8 * 2000 < r["received_pps"] <= 2000 * 1.03 + 20 / 4, r
    policed_in_kernel(sw, datapath, dropping=True)


@pytest.mark.parametrize("datapath", DROP_DATAPATHS)
def test_meter_below_rate_passes_everything(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        metered(sw, "meter=1,kbps,band=type=drop,rate=20000")
        r = iperf3_udp(h1, h2, rate_bps=10e6, length=LENGTH, seconds=2)
        assert r["lost_percent"] < 0.5
    policed_in_kernel(sw, datapath, dropping=False)


def band_packets(sw):
    stats = sw.ofctl("meter-stats")
    return int(re.search(r"0:\s*packet_count:(\d+)", stats).group(1)), stats


# Both units in userspace, where remark bands run on every datapath; with the fast path (TC) one
# unit shows that the kernel leaves a remarking flow's frames to userspace, as it does for either.
@pytest.mark.parametrize("datapath, unit", [("user", "pktps"), ("tc", "kbps")])
def test_dscp_remark_band_remarks_the_excess_and_only_it(two_hosts, datapath, unit):
    """AF21 frames (1500 B) at twice a remark band's rate: what exceeds it leaves as AF22, the rest
    as AF21, and the band counts exactly what it remarked; at half the rate nothing is remarked."""
    h1, h2 = two_hosts.hosts
    fps, size = 2000, 1500
    frame_bits = (size - 4) * 8  # the meter counts the frame without its FCS
    rate = 1000 if unit == "pktps" else fps * frame_bits // 2 // 1000
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        # Two seconds over the rate; one under it, where the band has nothing to remark.
        for offered, seconds in ((fps, 2.0), (fps // 4, 1.0)):
            metered(sw, f"meter=1,{unit},band=type=dscp_remark,rate={rate},prec_level=1")
            sent, got = loadgen.run(h1, h2, size=size, rate=offered, duration=seconds, send_engine="socket",
                                    recv_engine="socket", extra_send=["--dscp", "18"])
            assert got["lost"] == 0 and got["received"] == sent["sent"], (sent, got)
            remarked, kept = got["dscp"].get("20", 0), got["dscp"].get("18", 0)
            assert remarked + kept == got["received"], got["dscp"]
            band, stats = band_packets(sw)
            # The band passes its rate over the span the frames arrived in, plus at most the
            # 100 ms its bucket holds (no burst configured): what it remarks is at least the rest.
            # A sender that paused would let the bucket fill: it may pass less than the rate, so
            # remark more, but not by a tenth of the span.
            per_s = 1000 if unit == "pktps" else rate * 1000 / frame_bits
            expected = max(0.0, got["received"] - per_s * (got["duration_s"] + 0.1))
            most = got["received"] - per_s * got["duration_s"] * 0.9
            print(f"\n{datapath} {unit} band at {rate}, offered {offered} fps: remarked {remarked} of "
                  f"{got['received']} (expected {expected:.0f}), band counted {band}")
            assert band == remarked, stats
            if offered < fps:
                assert remarked == 0
            else:
                assert expected - 2 <= remarked <= most, (remarked, expected, most)
            sw.ofctl("del-meters")
