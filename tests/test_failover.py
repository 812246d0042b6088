"""Fast failover: two switches joined by two links; a link goes down under traffic and the group
moves to the other link in the datapath, without a controller: in userspace, and with the kernel
fast path (TC and XDP), whose cached decisions a port change must replace."""

import re
import time

import pytest

from testbed import netns
from testbed.netns import sh
from testbed.switches import Edgeflow
from testbed.traffic import iperf3_tcp


def program(sw):
    sw.ofctl("del-flows")
    sw.ofctl("add-group", "group_id=1,type=fast_failover,bucket=watch_port:2,output:2,bucket=watch_port:3,output:3")
    sw.ofctl("add-flow", "priority=10,in_port=1,actions=group:1")
    sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
    sw.ofctl("add-flow", "priority=10,in_port=3,actions=output:1")


# One kernel hook: userspace chooses the live bucket (pipeline's xlate) and rewrites the kernel's
# entry when a carrier changes; both hooks read that one entry. XDP here.
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_fast_failover_keeps_traffic_flowing(datapath):
    netns.cleanup()
    topo = netns.Topology("x")
    links = [("ef-xa2", "ef-xb2"), ("ef-xa3", "ef-xb3")]
    try:
        h1 = topo.add_host("10.0.0.1/24")
        h2 = topo.add_host("10.0.0.2/24")
        for h in (h1, h2):
            if Edgeflow.HOST_SETTINGS[datapath]:
                h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
        for a, b in links:
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            sh("ip", "link", "set", a, "up")
            sh("ip", "link", "set", b, "up")
        with Edgeflow([h1.switch_side, "ef-xa2", "ef-xa3"], log_name=f"ff-a-{datapath}", datapath=datapath) as a, \
                Edgeflow([h2.switch_side, "ef-xb2", "ef-xb3"], log_name=f"ff-b-{datapath}", datapath=datapath) as b:
            program(a)
            program(b)
            assert h1.ping(h2.addr, count=3)[0] == 3

            # 200 pings at 5 ms intervals; the primary link goes down 0.5 s in, and half a second
            # of pings after it shows whether the group moved (none come back if it did not).
            interval = 0.005
            pinger = h1.popen("ping", "-n", "-c", "200", "-i", str(interval), "-W", "1", h2.addr)
            time.sleep(0.5)
            sh("ip", "link", "set", "ef-xa2", "down")
            out, _ = pinger.communicate(timeout=30)
            sent, received = map(int, re.search(r"(\d+) packets transmitted, (\d+) received", out).groups())
            lost = sent - received
            interruption_ms = lost * interval * 1000
            print(f"\nfast failover ({datapath}): {lost} of {sent} pings lost at {interval * 1000:.0f} ms intervals "
                  f"-> interruption about {interruption_ms:.0f} ms")
            assert interruption_ms <= 50, out
            stats = a.ofctl("dump-group-stats")
            assert re.search(r"bucket1:packet_count=[1-9]", stats), stats

            # A TCP stream keeps going across a failback and a second failure (0.7 and 1.2 s into
            # it, iperf3 starting 0.3 s after the flap's clock), and for 0.8 s after them.
            sh("ip", "link", "set", "ef-xa2", "up")
            time.sleep(0.5)

            def flap():
                time.sleep(1.0)
                sh("ip", "link", "set", "ef-xb3", "down")  # the backup fails at the far end...
                time.sleep(0.5)
                sh("ip", "link", "set", "ef-xb2", "down")  # ...then the primary too, briefly
                sh("ip", "link", "set", "ef-xb3", "up")
            import threading
            t = threading.Thread(target=flap)
            t.start()
            bps = iperf3_tcp(h1, h2, seconds=2)
            t.join()
            assert bps > 1e8, f"{bps / 1e9:.2f} Gbit/s across link failures"
        if datapath != "user":
            # The kernel carried the traffic, not userspace behind it.
            totals = a.fastpath_totals()
            assert totals["hits"] > 10 * totals["upcalls"] + 1000, totals
    finally:
        topo.teardown()
        for a, _ in links:
            sh("ip", "link", "del", a, check=False)
