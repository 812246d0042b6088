"""P4Runtime (docs/p4.md): a real client, finsy from PyPI, drives the IPv4 router example on a
running switch. It reads the P4Info the switch publishes (no P4Info is given to it), arbitrates
for primary, writes routes that real pings then take, reads the entries and the program's
counter back, and is refused where P4Runtime says it must be: an entry inserted twice, a write
from a backup client, a switch it does not address. The switch runs on tc, so that what the
client writes must reach the program's tables in the kernel, which decides the pings, and the
counters it reads back are what the kernel counted (the userspace datapath's side of the same
tables is tests/test_p4.py's, through `edgeflow p4`).

Then arbitration under attack (docs/security.md, "P4Runtime"): a client that bid the highest id
there is and left, a backup writing with the primary's id, more streams than the switch serves."""

import asyncio
import re

import finsy as fy
import grpc
import pytest
from finsy.grpcutil import GRPCStatusCode
from finsy.p4client import P4ClientError
from finsy.p4entity import P4ValueSetMember
from finsy.proto import U128, p4r, p4r_grpc

from testbed.switches import edgeflow_on
from testbed.util import free_port, run_dir
from tests.test_p4 import kernel_decided, p4_config

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


VALUE_SET_PROGRAM = """#include <edgeflow.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }
struct h_t { eth_t eth; }
struct m_t { }
parser P(packet_in pk, out h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) blocked;
    state start { pk.extract(hdr.eth); transition select(hdr.eth.kind) { blocked: reject; default: accept; } }
}
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) {
    apply { sm.egress_port = sm.ingress_port == 1 ? 32w2 : 32w1; }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t sm) { apply { } }
control D(packet_out pk, in h_t hdr) { apply { pk.emit(hdr.eth); } }
EdgeflowSwitch(P(), I(), E(), D()) main;
"""


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_finsy_fills_a_value_set_that_the_parser_then_matches(two_hosts, datapath):
    """A parser rejects the ethertypes of its value set `blocked` (P4Runtime 9.7): empty, it
    blocks nothing; IPv4 in it, pings stop (ARP still passes); MODIFY with no members, they pass.
    On tc the kernel decides the pings, from the members the switch wrote to its map."""
    h1, _ = two_hosts.hosts
    program = run_dir("p4") / "value_set.p4"
    program.write_text(VALUE_SET_PROGRAM)
    port = free_port()
    path = p4_config("p4runtime-value-set", program, two_hosts.switch_ports, "")
    sw = edgeflow_on(datapath, two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}", "--p4runtime",
                                                           str(port)], log_name="p4runtime-value-set").start()
    options = fy.SwitchOptions(device_id=DPID, initial_election_id=20)

    async def client():
        async with fy.Switch("edgeflow", f"127.0.0.1:{port}", options) as primary:
            blocked = primary.p4info.value_sets["blocked"]
            fields = [(f.name, f.bitwidth, f.match_type.name) for f in blocked.match]
            assert (blocked.name, blocked.size, fields) == ("P.blocked", 4, [("", 16, "EXACT")])
            assert (await asyncio.to_thread(pings, h1, "10.0.0.2", 2))[0] == 2, "an empty set matches nothing"
            await primary.modify([fy.P4ValueSetEntry("blocked", members=[P4ValueSetMember(0x0800)])])
            assert (await asyncio.to_thread(pings, h1, "10.0.0.2", 2))[0] == 0, "IPv4 is rejected"
            read = [e async for e in primary.read(fy.P4ValueSetEntry("blocked", members=[]))]
            assert [[m.value for m in e.members] for e in read] == [[0x0800]], read
            await primary.modify([fy.P4ValueSetEntry("blocked", members=[])])
            assert (await asyncio.to_thread(pings, h1, "10.0.0.2", 2))[0] == 2, "its members replaced by none"
            # Six echo requests and replies passed, on tc each decided in the kernel.
            await asyncio.to_thread(kernel_decided, sw, datapath, 8)

    try:
        asyncio.run(asyncio.wait_for(client(), timeout=60))
    finally:
        assert sw.stop() == 0, sw.log()


# Arbitration under attack. These clients speak P4Runtime message by message (grpcio with finsy's
# compiled schema), each on a TCP connection of its own as separate processes would be: what a
# hostile or broken client sends is not what a polite library would.

MAX_ELECTION_ID = 2**128 - 1
STREAM_LIMIT = 16  # p4runtime::server::MAX_STREAMS, docs/p4.md
OK, ALREADY_EXISTS = GRPCStatusCode.OK, GRPCStatusCode.ALREADY_EXISTS


class StreamEnded(Exception):
    """The switch ended a client's stream, with this status."""

    def __init__(self, code, details):
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


class RawClient:
    """One StreamChannel on its own connection. gRPC shares a connection between channels of one
    process that have the same arguments; a local subchannel pool gives this one its own."""

    def __init__(self, address, stream=True, credentials=None):
        options = [("grpc.use_local_subchannel_pool", 1)]
        self.channel = (grpc.aio.insecure_channel(address, options=options) if credentials is None
                        else grpc.aio.secure_channel(address, credentials, options=options))
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self.stream = self.stub.StreamChannel() if stream else None

    async def bid(self, election_id):
        """Sends a MasterArbitrationUpdate and returns the switch's answer."""
        update = p4r.MasterArbitrationUpdate(device_id=DPID, election_id=U128.encode(election_id))
        try:
            await self.stream.write(p4r.StreamMessageRequest(arbitration=update))
        except grpc.aio.AioRpcError as e:
            # A write on a call the switch has just ended may fail in grpcio itself (INTERNAL),
            # the switch's status lost: refused() reads it without writing.
            raise StreamEnded(e.code(), e.details()) from None
        return await self.told()

    async def refused(self, wait):
        """The status the switch ended this stream with, if it did within `wait` seconds of
        its opening, without a write."""
        ended = asyncio.ensure_future(self.stream.code())
        done, _ = await asyncio.wait([ended], timeout=wait)
        return (ended.result(), await self.stream.details()) if done else None

    async def told(self):
        """The next arbitration update on the stream: (status code, election id)."""
        try:
            msg = await asyncio.wait_for(self.stream.read(), timeout=5)
        except grpc.aio.AioRpcError as e:
            raise StreamEnded(e.code(), e.details()) from None
        if msg is grpc.aio.EOF:
            raise StreamEnded(await self.stream.code(), await self.stream.details())
        a = msg.arbitration
        return GRPCStatusCode(a.status.code), U128.decode(a.election_id)

    async def schema(self):
        reply = await self.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
            device_id=DPID, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE))
        return fy.P4Schema(reply.config.p4info)

    async def insert(self, election_id, entry, schema):
        """Writes one entry with `election_id`; the call's status code."""
        request = p4r.WriteRequest(device_id=DPID, election_id=U128.encode(election_id),
                                   updates=[p4r.Update(type=p4r.Update.INSERT, entity=entry.encode(schema))])
        try:
            await self.stub.Write(request)
        except grpc.aio.AioRpcError as e:
            return GRPCStatusCode.from_status_code(e.code())
        return OK

    async def routes(self, schema):
        """The prefixes the routes table holds."""
        table = fy.P4TableEntry("routes").encode(schema)
        found = []
        async for reply in self.stub.Read(p4r.ReadRequest(device_id=DPID, entities=[table])):
            found += [fy.P4TableEntry.decode(e, schema).match_dict(schema)["dst"] for e in reply.entities]
        return sorted(found)

    async def close(self):
        if self.stream is not None:
            self.stream.cancel()
        await self.channel.close()


def p4runtime_switch(topo):
    """The IPv4 router on the userspace datapath (what a write does to frames is the first test's),
    serving P4Runtime on a free loopback port."""
    port = free_port()
    path = p4_config("p4runtime-arbitration", "ipv4_router.p4", topo.switch_ports, "")
    sw = edgeflow_on("user", topo.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}", "--p4runtime",
                                                    str(port)], log_name="p4runtime-arbitration").start()
    return sw, f"127.0.0.1:{port}"


def p4runtime_counters(sw):
    return {k: v for k, v in sw.stats()["channel"].items() if k.startswith("p4runtime_")}


def run_clients(sw, scenario):
    try:
        asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    finally:
        assert sw.stop() == 0, sw.log()


def test_a_primary_that_bid_the_highest_id_and_left_locks_nobody_out(two_hosts):
    """A client that bids the largest election id there is and disconnects: the controller left
    connected becomes primary under its own id and writes. (A server that kept the highest id
    ever seen would leave every controller a backup until one bid that id again: one whose id
    comes from its own election never does.)"""
    sw, address = p4runtime_switch(two_hosts)

    async def scenario():
        controller = RawClient(address)
        try:
            schema = await controller.schema()
            assert await controller.bid(20) == (OK, 20)
            stranger = RawClient(address)
            assert await stranger.bid(MAX_ELECTION_ID) == (OK, MAX_ELECTION_ID)
            assert await controller.told() == (ALREADY_EXISTS, MAX_ELECTION_ID)
            # The stranger is primary: the controller's write is refused (the control).
            entry = route("10.0.1.0/24", "02:00:00:00:00:01", 1)
            assert await controller.insert(20, entry, schema) == GRPCStatusCode.PERMISSION_DENIED
            await stranger.close()
            assert await controller.told() == (OK, 20), "the controller left connected is primary again"
            assert await controller.insert(20, entry, schema) == OK
            assert await controller.routes(schema) == ["0xa000100/24"]
            # A controller connecting later with a lower id than any seen is a backup of it.
            late = RawClient(address)
            assert await late.bid(5) == (ALREADY_EXISTS, 20)
            await late.close()
        finally:
            await controller.close()

    run_clients(sw, scenario)


def test_a_backup_cannot_write_with_the_primarys_election_id(two_hosts):
    """P4Runtime tells every backup the primary's election id (clients need it to take over), and
    names the writer of a Write by its election id alone. So the switch also requires a Write or
    SetForwardingPipelineConfig to come on the primary's own connection: a backup, or a client
    with no stream at all, presenting the primary's id is refused, and counted."""
    sw, address = p4runtime_switch(two_hosts)

    async def scenario():
        primary, streamless = RawClient(address), RawClient(address, stream=False)
        backup = None
        try:
            schema = await primary.schema()
            assert await primary.bid(20) == (OK, 20)
            backup = RawClient(address)
            status, told = await backup.bid(10)
            assert (status, told) == (ALREADY_EXISTS, 20), "a backup is told the primary's id, as P4Runtime says"
            denied, entry = GRPCStatusCode.PERMISSION_DENIED, route("10.0.2.0/24", "02:00:00:00:00:02", 2)
            assert await backup.insert(10, entry, schema) == denied
            assert await backup.insert(told, entry, schema) == denied
            assert await streamless.insert(told, entry, schema) == denied
            cookie = p4r.ForwardingPipelineConfig.Cookie(cookie=7)
            pipeline = p4r.SetForwardingPipelineConfigRequest(
                device_id=DPID, election_id=U128.encode(told),
                action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                config=p4r.ForwardingPipelineConfig(p4info=schema.p4info, cookie=cookie))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await backup.stub.SetForwardingPipelineConfig(pipeline)
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert await backup.routes(schema) == [], "nothing a refused write carried reached the table"
            # The primary's own write, with the same id, on its own connection.
            assert await primary.insert(20, entry, schema) == OK
            assert await backup.routes(schema) == ["0xa000200/24"]
            await primary.stub.SetForwardingPipelineConfig(pipeline)
        finally:
            for c in (primary, backup, streamless):
                if c is not None:
                    await c.close()
        assert p4runtime_counters(sw)["p4runtime_writes_refused"] == 4

    run_clients(sw, scenario)


def test_streams_past_the_limit_are_refused_and_counted(two_hosts):
    """At most STREAM_LIMIT StreamChannel clients at once: one more is refused with
    RESOURCE_EXHAUSTED at once and counted, and a place freed is taken again."""
    sw, address = p4runtime_switch(two_hosts)

    async def scenario():
        clients = []
        try:
            for i in range(STREAM_LIMIT):
                clients.append(RawClient(address))
                assert await clients[-1].bid(100 + i) == (OK, 100 + i)
            extra = RawClient(address)
            refused = await extra.refused(wait=5)
            await extra.close()
            assert refused is not None, f"a stream past {STREAM_LIMIT} was served"
            code, details = refused
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and f"at most {STREAM_LIMIT}" in details, refused
            assert p4runtime_counters(sw)["p4runtime_streams_refused"] == 1
            await clients.pop(0).close()
            # The departed client was a backup; the switch may see its stream end a moment after.
            for _ in range(20):
                again = RawClient(address)
                clients.append(again)
                if await again.refused(wait=0.2) is None:
                    try:
                        assert await again.bid(1) == (ALREADY_EXISTS, 100 + STREAM_LIMIT - 1)
                        break
                    except StreamEnded:
                        pass  # refused after all, later than the wait
                await clients.pop().close()
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("a freed place was never taken again")
        finally:
            for c in clients:
                await c.close()

    run_clients(sw, scenario)


def test_p4runtime_over_tls_serves_only_clients_its_ca_signed(two_hosts, tmp_path):
    """`--p4runtime tls:PORT` serves with the switch's certificate and asks each client for one:
    a controller whose certificate the switch's CA signed reads the P4Info, becomes primary and
    writes a route it reads back, all over TLS (its writes are let in by its stream's
    connection, which the server must still see through TLS); a client with another CA's
    certificate, one with none and one speaking plaintext get nothing, and the switch's log says
    why."""
    from tests.test_tls import pki, switch_tls, logged
    keys, _ = pki(tmp_path)
    port = free_port()
    path = p4_config("p4runtime-tls", "ipv4_router.p4", two_hosts.switch_ports, "")
    sw = edgeflow_on("user", two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}", "--p4runtime",
                                                         f"tls:{port}", *switch_tls(keys)],
                     log_name="p4runtime-tls").start()
    address = f"127.0.0.1:{port}"
    ca = keys["ca"].read_bytes()

    def signed_by(name):
        key, cert = keys[name]
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key.read_bytes(),
                                            certificate_chain=cert.read_bytes())

    async def refused(credentials):
        client = RawClient(address, stream=False, credentials=credentials)
        try:
            await asyncio.wait_for(client.schema(), timeout=10)
        except grpc.aio.AioRpcError as e:
            return e.code()
        finally:
            await client.close()
        return "served"

    async def scenario():
        controller = RawClient(address, credentials=signed_by("ctl"))
        try:
            schema = await controller.schema()
            assert await controller.bid(7) == (OK, 7)
            assert await controller.insert(7, route("10.0.2.0/24", "02:00:00:00:00:02", 2), schema) == OK
            assert await controller.routes(schema) == ["0xa000200/24"]
        finally:
            await controller.close()
        assert await refused(signed_by("stranger")) == grpc.StatusCode.UNAVAILABLE
        assert await refused(grpc.ssl_channel_credentials(root_certificates=ca)) == grpc.StatusCode.UNAVAILABLE
        assert await refused(None) == grpc.StatusCode.UNAVAILABLE

    run_clients(sw, scenario)
    assert logged(sw, "TLS handshake refused"), sw.log()
