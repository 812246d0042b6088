"""Meters police real traffic at the configured rate (within 5%) — in userspace, and as token
buckets in the kernel fast path (TC and XDP), where the policed flow must stay."""

import re

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


def test_kbps_meter_rate(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        metered(sw, "meter=1,kbps,burst,band=type=drop,rate=20000,burst_size=100")
        r = iperf3_udp(h1, h2, rate_bps=50e6, length=LENGTH, seconds=4)
        expected = 20e6 * LENGTH / FRAME
        print(f"\nkbps meter at 20 Mbit/s, offered 50 Mbit/s: received {r['received_bps'] / 1e6:.2f} Mbit/s payload "
              f"(expected {expected / 1e6:.2f})")
        assert abs(r["received_bps"] - expected) / expected < 0.05
        # The meter's statistics count every packet offered, whichever datapath policed it.
        stats = sw.ofctl("meter-stats")
        offered = int(re.search(r"packet_in_count:(\d+)", stats).group(1))
        assert offered >= 0.95 * 50e6 * 4 / 8 / LENGTH, stats
    policed_in_kernel(sw, datapath, dropping=True)


def test_pktps_meter_rate(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        metered(sw, "meter=1,pktps,burst,band=type=drop,rate=2000,burst_size=20")
        r = iperf3_udp(h1, h2, rate_bps=5000 * 100 * 8, length=100, seconds=4)
        print(f"\npktps meter at 2000 pps, offered 5000 pps: received {r['received_pps']:.0f} pps")
        assert abs(r["received_pps"] - 2000) / 2000 < 0.05
    policed_in_kernel(sw, datapath, dropping=True)


def test_meter_below_rate_passes_everything(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    with edgeflow_on(datapath, two_hosts.hosts, two_hosts.switch_ports, log_name="meter") as sw:
        metered(sw, "meter=1,kbps,band=type=drop,rate=20000")
        r = iperf3_udp(h1, h2, rate_bps=10e6, length=LENGTH, seconds=2)
        assert r["lost_percent"] < 0.5
    policed_in_kernel(sw, datapath, dropping=False)
