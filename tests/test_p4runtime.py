"""P4Runtime (docs/p4.md): a real client, finsy from PyPI, drives the IPv4 router example on a
running switch. It reads the P4Info the switch publishes (no P4Info is given to it), arbitrates
for primary, writes routes that real pings then take, reads the entries and the program's
counter back, and is refused where P4Runtime says it must be: an entry inserted twice, a write
from a backup client, a switch it does not address. The switch runs on tc, so that what the
client writes must reach the program's tables in the kernel, which decides the pings, and the
counters it reads back are what the kernel counted (the userspace datapath's side of the same
tables is tests/test_p4.py's, through `edgeflow p4`)."""

import asyncio
import re

import finsy as fy
import pytest
from finsy.grpcutil import GRPCStatusCode
from finsy.p4client import P4ClientError

from testbed.switches import edgeflow_on
from testbed.util import free_port, run_dir
from tests.test_p4 import p4_config

GW_MAC = "02:00:00:00:00:fe"
DPID = 0x2A


def routed_hosts(topo):
    """Two hosts in two subnets behind the router, which answers no ARP: they know its MAC."""
    h1, h2 = topo.hosts
    for h, own, gw in ((h1, "10.0.1.2/24", "10.0.1.1"), (h2, "10.0.2.2/24", "10.0.2.1")):
        h.run("ip", "addr", "flush", "dev", "eth0")
        h.run("ip", "addr", "add", own, "dev", "eth0")
        h.run("ip", "route", "add", "default", "via", gw)
        h.run("ip", "neigh", "replace", gw, "lladdr", GW_MAC, "dev", "eth0")
    return h1, h2


def route(prefix, dst_mac, port):
    return fy.P4TableEntry(
        "routes",
        match=fy.P4TableMatch({"hdr.ipv4.dst": prefix}),
        action=fy.P4TableAction("next_hop", src=GW_MAC, dst=dst_mac, port=port, route=port),
    )


def pings(host, addr, count=3):
    r = host.run("ping", "-n", "-c", str(count), "-i", "0.05", "-W", "1", addr, check=False)
    received = re.search(r"(\d+) received", r.stdout)
    return int(received.group(1)) if received else 0, r.stdout


def test_finsy_reads_the_p4info_writes_routes_and_reads_entries_and_counters(two_hosts):
    h1, h2 = routed_hosts(two_hosts)
    port = free_port()
    path = p4_config("p4runtime", "ipv4_router.p4", two_hosts.switch_ports, "")
    sw = edgeflow_on("tc", two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}", "--p4runtime",
                                                       str(port)], log_name="p4runtime").start()
    address = f"127.0.0.1:{port}"
    options = fy.SwitchOptions(device_id=DPID, initial_election_id=20)

    async def client():
        async with fy.Switch("edgeflow", address, options) as primary:
            assert primary.is_primary
            info = primary.p4info
            routes = info.tables["routes"]
            assert routes.name == "RouterIngress.routes"
            field = routes.match_fields["hdr.ipv4.dst"]
            assert (field.bitwidth, field.match_type.name) == (32, "LPM")
            next_hop = info.actions["next_hop"]
            assert [(p.name, p.bitwidth) for p in next_hop.params] == [
                ("src", 48), ("dst", 48), ("port", 32), ("route", 32)]
            assert info.counters["routed"].size == 1024

            assert pings(h1, "10.0.2.2", count=2)[0] == 0, "no route to 10.0.2.0/24 yet"
            await primary.insert([route("10.0.1.0/24", h1.mac, 1), route("10.0.2.0/24", h2.mac, 2)])
            received, out = await asyncio.to_thread(pings, h1, "10.0.2.2")
            assert received == 3, out
            assert set(re.findall(r"ttl=(\d+)", out)) == {"63"}, out

            entries = [e async for e in primary.read(fy.P4TableEntry("routes"))]
            # finsy prints a field by the last part of its name, a value without a type as hex.
            read_back = sorted((e.match_dict(info)["dst"], e.action.args["dst"], e.action.args["port"])
                               for e in entries)
            mac = lambda h: int(h.mac.replace(":", ""), 16)
            assert read_back == [("0xa000100/24", mac(h1), 1), ("0xa000200/24", mac(h2), 2)], read_back
            # Three echo requests took route 2, three replies route 1.
            counters = {c.index: c.data.packet_count
                        async for c in primary.read(fy.P4CounterEntry("routed"))}
            assert len(counters) == 1024 and (counters[1], counters[2]) == (3, 3), (counters[1], counters[2])
            p4 = {c["name"]: c["counters"] for c in sw.stats()["mode_counters"]}["p4"]
            assert p4["kernel_frames"] >= 6, p4

            with pytest.raises(P4ClientError) as twice:
                await primary.insert([route("10.0.2.0/24", h2.mac, 2)])
            assert [e.canonical_code for e in twice.value.details.values()] == [GRPCStatusCode.ALREADY_EXISTS]

            # A second client bids lower: it is a backup, which reads but does not write.
            async with fy.Switch("backup", address, options(initial_election_id=10)) as backup:
                assert not backup.is_primary
                assert len([e async for e in backup.read(fy.P4TableEntry("routes"))]) == 2
                with pytest.raises(P4ClientError) as refused:
                    await backup.delete([route("10.0.2.0/24", h2.mac, 2)])
                assert refused.value.code == GRPCStatusCode.PERMISSION_DENIED

            await primary.delete([route("10.0.2.0/24", h2.mac, 2)])
            assert (await asyncio.to_thread(pings, h1, "10.0.2.2", 2))[0] == 0

        # A client addressing another device is told there is none.
        with pytest.raises(P4ClientError) as elsewhere:
            async with fy.Switch("elsewhere", address, options(device_id=DPID + 1)):
                pass
        assert elsewhere.value.code == GRPCStatusCode.NOT_FOUND

    try:
        asyncio.run(asyncio.wait_for(client(), timeout=60))
    finally:
        assert sw.stop() == 0, sw.log()
