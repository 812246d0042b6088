"""P4Runtime with p4runtime-shell, the P4 project's own client (PyPI's `p4runtime-shell`, in a venv
of its own that scripts/setup.sh makes: it pins an older P4Runtime, protobuf and grpcio than
finsy's). The shell connects as primary without pushing a pipeline, so it works from the P4Info
the switch publishes; it inserts routes for the IPv4 router example that real pings then take,
reads the entries and the program's counter back, and writes batches whose atomicity it asks for.
On user and on tc: on tc what it writes must reach the program's tables in the kernel, and the
counters it reads are the kernel's. It also writes the replication engine: a multicast group a
flooding program sends to (on tc, the kernel's copy of the groups follows) and a clone session;
and an action selector's members and group, over which a v1model ECMP program spreads flows.

Each request goes through the shell's own objects (tests/p4runtime_shell_client.py), in one
session the test talks to line by line."""

import json
from contextlib import contextmanager
import re
import subprocess
import time

import pytest

from testbed.switches import edgeflow_on
from testbed.traffic import blast, udp_frame
from testbed.util import ROOT, free_port, run_dir
from tests.test_p4 import kernel_decided, p4_config
from tests.test_p4runtime import DPID, GW_MAC, pings, routed_hosts

SHELL_PYTHON = ROOT / "build" / "tools" / "p4runtime-shell" / "bin" / "python"
CLIENT = ROOT / "tests" / "p4runtime_shell_client.py"


class Shell:
    """A p4runtime-shell session on the switch at `address`."""

    def __init__(self, address, election_id, role=None):
        assert SHELL_PYTHON.exists(), f"{SHELL_PYTHON} is missing: scripts/setup.sh installs p4runtime-shell"
        args = [str(SHELL_PYTHON), str(CLIENT), address, str(DPID), str(election_id)] + ([role] if role else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        connected = self.proc.stdout.readline()
        assert connected, f"p4runtime-shell did not connect: {self.proc.stderr.read()}"
        assert json.loads(connected) == {"ok": "connected"}, connected

    def ask(self, op, **request):
        """The session's answer: what the request returned, or {"error", "errors", "message"}."""
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"p4runtime-shell ended: {self.proc.stderr.read()}"
        reply = json.loads(line)
        return reply["ok"] if "ok" in reply else reply

    def close(self):
        self.proc.stdin.close()
        try:
            assert self.proc.wait(timeout=10) == 0, self.proc.stderr.read()
        finally:
            self.proc.kill()


def route(prefix, mac, port):
    return {"table": "RouterIngress.routes", "match": {"hdr.ipv4.dst": prefix}, "action": "RouterIngress.next_hop",
            "params": {"src": GW_MAC, "dst": mac, "port": str(port), "route": str(port)}}


def mac(host):
    return int(host.mac.replace(":", ""), 16)


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_p4runtime_shell_fills_the_routes_reads_them_and_the_counter_back(two_hosts, datapath):
    h1, h2 = routed_hosts(two_hosts)
    port = free_port()
    path = p4_config("p4runtime-shell", "ipv4_router.p4", two_hosts.switch_ports, "")
    sw = edgeflow_on(datapath, two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}",
                                                           "--p4runtime", str(port)],
                     log_name="p4runtime-shell").start()
    shell = None
    try:
        shell = Shell(f"127.0.0.1:{port}", election_id=1)
        assert shell.ask("primary") is True
        assert pings(h1, "10.0.2.2", count=1)[0] == 0, "no route to 10.0.2.0/24 yet"
        assert shell.ask("insert", entries=[route("10.0.1.0/24", h1.mac, 1), route("10.0.2.0/24", h2.mac, 2)]) is None
        received, out = pings(h1, "10.0.2.2")
        assert received == 3, out
        entries = shell.ask("entries", table="RouterIngress.routes")
        assert sorted((e[0]["hdr.ipv4.dst"], e[1], e[2]["dst"], e[2]["port"]) for e in entries) == [
            ("0xa000100/24", "RouterIngress.next_hop", mac(h1), 1),
            ("0xa000200/24", "RouterIngress.next_hop", mac(h2), 2)], entries
        # Three echo requests took route 2, three replies route 1.
        assert [shell.ask("counter", name="RouterIngress.routed", index=i)[0] for i in (1, 2)] == [3, 3]

        # All or nothing: a batch whose second update fails leaves the first one unapplied, and
        # says which update failed and that the other was rolled back. DATAPLANE_ATOMIC, where
        # no frame may see part of a batch, only where the program runs in userspace: on tc the
        # kernel's tables are written key by key after a batch.
        atomic = "DATAPLANE_ATOMIC" if datapath == "user" else "ROLLBACK_ON_ERROR"
        if datapath == "tc":
            refused = shell.ask("insert", atomicity="DATAPLANE_ATOMIC", entries=[route("10.0.3.0/24", h2.mac, 2)])
            assert refused["error"] == "UNIMPLEMENTED" and "key by key" in refused["message"], refused
        for atomicity in {"ROLLBACK_ON_ERROR", atomic}:
            refused = shell.ask("insert", atomicity=atomicity,
                                entries=[route("10.0.3.0/24", h2.mac, 2), route("10.0.2.0/24", h2.mac, 2)])
            assert refused["errors"] == [[0, "ABORTED"], [1, "ALREADY_EXISTS"]], refused
            assert len(shell.ask("entries", table="RouterIngress.routes")) == 2, atomicity
        # A batch that succeeds is applied whole.
        assert shell.ask("modify", atomicity=atomic,
                         entries=[route("10.0.2.0/24", h1.mac, 1), route("10.0.1.0/24", h2.mac, 2)]) is None
        entries = shell.ask("entries", table="RouterIngress.routes")
        assert sorted((e[0]["hdr.ipv4.dst"], e[2]["port"]) for e in entries) == [
            ("0xa000100/24", 2), ("0xa000200/24", 1)], entries

        if datapath == "tc":
            # The kernel runs an object built from the program at start: no other program
            # replaces it there, and the refusal leaves the router routing.
            refused = shell.ask("pipeline", action="VERIFY_AND_COMMIT", source=ROUTER)
            assert refused["error"] == "UNIMPLEMENTED" and "kernel" in refused["message"], refused
            assert shell.ask("entries", table="RouterIngress.routes") == entries
    finally:
        if shell is not None:
            shell.close()
        assert sw.stop() == 0, sw.log()


def test_p4runtime_shell_clients_of_two_roles_are_each_their_roles_primary(two_hosts):
    """Roles (P4Runtime §5): a controller of role "edge" and one of the default role arbitrate
    apart, both primary under the same election id, and each writes (a role without a config
    has full access); a second client of role "edge" with a lower id is that role's backup, whose
    write is refused. Roles do not depend on the datapath: user only."""
    port = free_port()
    path = p4_config("p4runtime-roles", "ipv4_router.p4", two_hosts.switch_ports, "")
    sw = edgeflow_on("user", two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}",
                                                         "--p4runtime", str(port)],
                     log_name="p4runtime-roles").start()
    address, sessions = f"127.0.0.1:{port}", []
    try:
        sessions.append(default := Shell(address, election_id=2))
        sessions.append(edge := Shell(address, election_id=2, role="edge"))
        assert (default.ask("primary"), edge.ask("primary")) == (True, True)
        assert edge.ask("insert", entries=[route("10.0.1.0/24", "02:00:00:00:00:01", 1)]) is None
        assert default.ask("insert", entries=[route("10.0.2.0/24", "02:00:00:00:00:02", 2)]) is None
        sessions.append(backup := Shell(address, election_id=1, role="edge"))
        assert backup.ask("primary") is False
        refused = backup.ask("delete", entries=[route("10.0.1.0/24", "02:00:00:00:00:01", 1)])
        assert refused["error"] == "PERMISSION_DENIED", refused
        assert sorted(e[0]["hdr.ipv4.dst"] for e in backup.ask("entries", table="RouterIngress.routes")) == [
            "0xa000100/24", "0xa000200/24"]
    finally:
        for s in sessions:
            s.close()
        assert sw.stop() == 0, sw.log()


ROUTER = (ROOT / "examples" / "p4" / "ipv4_router.p4").read_text()
# The router without its TTL decrement (and the checksum update that follows it): the same
# tables, actions and counter, so the same P4Info, and pings that arrive with ttl=64, not 63.
KEEPS_TTL = re.sub(r"hdr\.ipv4\.ttl = hdr\.ipv4\.ttl - 1;.*?sum\[31:16\];", "", ROUTER, flags=re.S)


def ttls(host, addr):
    received, out = pings(host, addr, count=1)
    return set(re.findall(r"ttl=(\d+)", out)) if received else None


def test_p4runtime_shell_replaces_the_program_and_a_refused_one_leaves_the_old_running(two_hosts):
    """SetForwardingPipelineConfig with the P4 program's source as the device config, on user:
    a source that does not compile, or a P4Info that does not describe it, is refused and the
    router goes on routing with its entries; VERIFY changes nothing; VERIFY_AND_SAVE then COMMIT
    and VERIFY_AND_COMMIT put the program that keeps the TTL in place without a restart (its
    tables start empty); RECONCILE_AND_COMMIT brings the router back with the entries and the
    counter kept."""
    assert KEEPS_TTL != ROUTER
    h1, h2 = routed_hosts(two_hosts)
    port = free_port()
    path = p4_config("p4runtime-pipeline", "ipv4_router.p4", two_hosts.switch_ports, "")
    sw = edgeflow_on("user", two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}",
                                                         "--p4runtime", str(port)],
                     log_name="p4runtime-pipeline").start()
    shell = None
    routes = [route("10.0.1.0/24", h1.mac, 1), route("10.0.2.0/24", h2.mac, 2)]
    try:
        shell = Shell(f"127.0.0.1:{port}", election_id=1)
        assert shell.ask("insert", entries=routes) is None
        assert ttls(h1, "10.0.2.2") == {"63"}

        broken = shell.ask("pipeline", action="VERIFY_AND_COMMIT", source=ROUTER.replace("apply {", "apply ", 1))
        assert broken["error"] == "INVALID_ARGUMENT" and "the program" in broken["message"], broken
        l2 = (ROOT / "examples" / "p4" / "l2_switch.p4").read_text()
        other = shell.ask("pipeline", action="VERIFY_AND_COMMIT", source=l2)
        assert other["error"] == "INVALID_ARGUMENT" and "does not describe the program" in other["message"], other
        assert shell.ask("pipeline", action="VERIFY", source=KEEPS_TTL) is None
        assert ttls(h1, "10.0.2.2") == {"63"}, "the router runs on, its routes kept"

        # Saved: reads and writes address the saved program, the running one routes on.
        assert shell.ask("device_config") == "", "the configuration's program: no source handed back"
        assert shell.ask("pipeline", action="VERIFY_AND_SAVE", source=KEEPS_TTL) is None
        assert shell.ask("device_config") == KEEPS_TTL
        assert shell.ask("entries", table="RouterIngress.routes") == []
        assert shell.ask("insert", entries=routes) is None
        assert ttls(h1, "10.0.2.2") == {"63"}
        assert shell.ask("pipeline", action="COMMIT") is None
        assert ttls(h1, "10.0.2.2") == {"64"}, "the saved program runs, with the routes written to it"
        assert shell.ask("pipeline", action="COMMIT")["error"] == "NOT_FOUND", "nothing saved any more"

        # Back to the router, the forwarding state kept: routes and the counter.
        counted = shell.ask("counter", name="RouterIngress.routed", index=2)[0]
        assert shell.ask("pipeline", action="RECONCILE_AND_COMMIT", source=ROUTER) is None
        assert shell.ask("device_config") == ROUTER
        assert ttls(h1, "10.0.2.2") == {"63"}
        assert shell.ask("counter", name="RouterIngress.routed", index=2)[0] == counted + 1

        # VERIFY_AND_COMMIT, as the shell sends it from files: a fresh program, its tables empty.
        assert shell.ask("pipeline", action="VERIFY_AND_COMMIT", source=KEEPS_TTL) is None
        assert shell.ask("entries", table="RouterIngress.routes") == []
        assert shell.ask("insert", entries=routes) is None
        assert ttls(h1, "10.0.2.2") == {"64"}
    finally:
        if shell is not None:
            shell.close()
        assert sw.stop() == 0, sw.log()


LEARNING = "v1model_learning_switch.p4"
CPU_PORT = 255  # the program's CPU_PORT, and [p4] cpu_port

# Waits for the first frame from `src` on eth0 and prints it in hex ("ready" once it listens).
CATCH = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind(("eth0", 0)); s.settimeout(5)
print("ready", flush=True)
src = bytes.fromhex(sys.argv[1])
while True:
    f = s.recv(4096)
    if f[6:12] == src:
        print(f.hex(), flush=True)
        break
"""


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_p4runtime_shell_receives_packet_ins_and_digests_and_sends_packet_outs(two_hosts, datapath):
    """The stream channel's packets and digests (P4Runtime §16, §17) with the learning switch:
    a frame to an unknown MAC reaches the shell as a packet-in whose metadata names the port it
    came in on; each unknown source MAC is a digest, in a list the shell acks, no second list
    being sent before that ack; and a packet-out leaves on the port its metadata names. A
    packet-out with metadata the header lacks, or an ack naming no digest, is refused with a
    stream error that carries it back, and the packet goes nowhere. On tc
    the kernel sends these frames up (a digest, the CPU port it has no interface for)."""
    h1, h2 = two_hosts.hosts
    port = free_port()
    path = p4_config("p4runtime-packet-io", LEARNING, two_hosts.switch_ports, f"cpu_port = {CPU_PORT}\n")
    sw = edgeflow_on(datapath, two_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}",
                                                           "--p4runtime", str(port)],
                     log_name=f"p4runtime-packet-io-{datapath}").start()
    shell, catches = None, []
    try:
        shell = Shell(f"127.0.0.1:{port}", election_id=1)
        assert shell.ask("digest_entry", digest="learn_t", max_timeout_ns=0, max_list_size=1,
                         ack_timeout_ns=10 ** 10) is None
        to_nobody = udp_frame(h1.mac, "02:00:00:00:00:99", "10.0.0.1", "10.0.0.99")
        blast(h1, to_nobody, 1, 1)
        assert shell.ask("packet_in", timeout=5) == {"payload": to_nobody.hex(),
                                                    "metadata": {"ingress_port": 1, "pad": 0}}
        first = shell.ask("digest_list", timeout=5)
        assert first is not None and (first["digest"], first["data"]) == ("learn_t", [[mac(h1), 1]]), first

        # Not acked: h2's digest waits, while its packet-in comes at once.
        blast(h2, udp_frame(h2.mac, "02:00:00:00:00:99", "10.0.0.2", "10.0.0.99"), 1, 1)
        assert shell.ask("packet_in", timeout=5)["metadata"]["ingress_port"] == 2
        assert shell.ask("digest_list", timeout=0.3) is None, "a second list before the first's ack"
        assert shell.ask("digest_ack", digest="learn_t", list_id=first["list_id"]) is None
        second = shell.ask("digest_list", timeout=5)
        assert second is not None and second["data"] == [[mac(h2), 2]], second
        assert second["list_id"] != first["list_id"]
        assert shell.ask("digest_ack", digest="learn_t", list_id=second["list_id"]) is None

        # A known destination: forwarded where the program runs (on tc, in the kernel, which
        # sends a frame up for its digest), and the new source still a digest.
        assert shell.ask("insert", entries=[{"table": "LearnIngress.dmac", "match": {"hdr.ethernet.dst": h2.mac},
                                             "action": "LearnIngress.forward", "params": {"port": "2"}}]) is None
        forwarded = udp_frame("02:00:00:00:00:55", h2.mac, "10.0.0.55", "10.0.0.2")
        catches.append(catch := h2.popen("python3", "-c", CATCH, "020000000055"))
        assert catch.stdout.readline().strip() == "ready", catch.stderr.read()
        blast(h1, forwarded, 1, 1)
        assert catch.stdout.readline().strip() == forwarded.hex(), catch.stderr.read()
        third = shell.ask("digest_list", timeout=5)
        assert third is not None and third["data"] == [[0x020000000055, 1]], third

        catches.append(catch := h2.popen("python3", "-c", CATCH, "020000000077"))
        assert catch.stdout.readline().strip() == "ready", catch.stderr.read()
        # Metadata the packet_out header lacks (id 9): the packet goes nowhere, and the stream
        # error says why and carries it back (§16.4); the next one, right, is the first h2 gets.
        refused = udp_frame("02:00:00:00:00:77", h2.mac, "10.0.0.76", "10.0.0.2")
        assert shell.ask("packet_out_raw", payload=refused.hex(), metadata=[[1, 2], [9, 0]]) is None
        error = shell.ask("stream_error", timeout=5)
        assert error is not None and (error["code"], error["about"], error["carried"]) == \
            ("INVALID_ARGUMENT", "packet_out", {"payload": refused.hex(), "metadata": [1, 9]}), error
        sent = udp_frame("02:00:00:00:00:77", h2.mac, "10.0.0.77", "10.0.0.2")
        assert shell.ask("packet_out", payload=sent.hex(), metadata={"egress_port": "2"}) is None
        assert catch.stdout.readline().strip() == sent.hex(), catch.stderr.read()
        # An ack naming a digest the program lacks is refused the same way.
        assert shell.ask("digest_ack", digest=0x7fff_0001, list_id=5) is None
        error = shell.ask("stream_error", timeout=5)
        assert error is not None and (error["code"], error["about"], error["carried"]) == \
            ("INVALID_ARGUMENT", "digest_list_ack", {"digest_id": 0x7fff_0001, "list_id": 5}), error
    finally:
        for c in catches:
            c.kill()
        if shell is not None:
            shell.close()
        assert sw.stop() == 0, sw.log()


# A v1model program that floods every frame to multicast group 1: which hosts get it is the
# replication engine's alone.
FLOOD = """#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers_t { ethernet_t ethernet; }
struct metadata_t { }
parser FloodParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}
control FloodVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }
control FloodIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { standard_metadata.mcast_grp = 1; }
}
control FloodEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}
control FloodCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }
control FloodDeparser(packet_out packet, in headers_t hdr) { apply { packet.emit(hdr.ethernet); } }
V1Switch(FloodParser(), FloodVerify(), FloodIngress(), FloodEgress(), FloodCompute(), FloodDeparser()) main;
"""

# Prints the last address byte (the tag) and the length of each frame from `src` that eth0
# receives, and "quiet" after each half second without one.
CATCH_TAGS = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)); s.bind(("eth0", 0)); s.settimeout(0.5)
print("ready", flush=True)
src = bytes.fromhex(sys.argv[1])
while True:
    try:
        f = s.recv(4096)
    except socket.timeout:
        print("quiet", flush=True)
        continue
    if f[6:12] == src and len(f) > 33:
        print(f[33], len(f), flush=True)
"""
TAGGED_SRC = "02:00:00:00:00:77"


def next_frame(catch):
    """The tag and length of the next frame the host received from TAGGED_SRC, within 5 s (the
    "quiet" lines printed while the test did other things read at once)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        line = catch.stdout.readline().strip()
        assert line, catch.stderr.read()
        if line != "quiet":
            tag, length = line.split()
            return int(tag), int(length)
    return None, None


def next_tag(catch):
    return next_frame(catch)[0]


def quiet(catch):
    """Whether the host received nothing more before half a second passed without a frame."""
    return catch.stdout.readline().strip() == "quiet"


@contextmanager
def shell_on_a_program(three_hosts, datapath, name, source, body=""):
    """`source` (a P4 program) on a switch of `datapath` between the three hosts, with a P4Runtime
    port, p4runtime-shell connected as primary, and h2's and h3's tag catchers ready: yields
    (switch, shell, h2's catcher, h3's). All of it goes at the end, the switch checked to stop
    cleanly."""
    program = run_dir("p4") / f"{name}.p4"
    program.write_text(source)
    port = free_port()
    path = p4_config(f"p4runtime-{name}-{datapath}", str(program), three_hosts.switch_ports, body)
    sw = edgeflow_on(datapath, three_hosts.hosts, [], extra=["--config", str(path), "--dpid", f"{DPID:x}",
                                                             "--p4runtime", str(port)],
                     log_name=f"p4runtime-{name}-{datapath}").start()
    shell, catches = None, []
    try:
        shell = Shell(f"127.0.0.1:{port}", election_id=1)
        for h in three_hosts.hosts[1:]:
            catches.append(catch := h.popen("python3", "-c", CATCH_TAGS, TAGGED_SRC.replace(":", "")))
            assert catch.stdout.readline().strip() == "ready", catch.stderr.read()
        yield (sw, shell, *catches)
    finally:
        for c in catches:
            c.kill()
        if shell is not None:
            shell.close()
        assert sw.stop() == 0, sw.log()


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_p4runtime_shell_writes_a_multicast_group_that_the_program_floods_to(three_hosts, datapath):
    """The replication engine written with p4runtime-shell (P4Runtime §9.5): a program that
    floods to group 1 sends h1's frames nowhere until the shell inserts the group, then to
    exactly its members' hosts; a MODIFY changes them, a DELETE sends the frames nowhere again,
    and reads give back what was written. Each frame is tagged; a host's catcher sees frames in
    order, so its next tag being a later one means the ones between never arrived. On tc the
    kernel's replication engine follows the writes (it decides the frames), and a group of more
    copies than its verdict holds (16) goes up and userspace sends every copy, none cut."""
    h1 = three_hosts.hosts[0]
    with shell_on_a_program(three_hosts, datapath, "flood", FLOOD) as (sw, shell, at2, at3):

        def send(tag):
            blast(h1, udp_frame(TAGGED_SRC, "ff:ff:ff:ff:ff:ff", "10.0.0.1", f"10.0.0.{tag}"), 1, 1)

        send(10)  # no group 1 yet
        assert shell.ask("groups", id=0) == []
        assert shell.ask("group", kind="insert", id=1, replicas=[[2, 0], [3, 0]]) is None
        refused = shell.ask("group", kind="insert", id=1, replicas=[[2, 0]])
        assert refused["error"] == "UNKNOWN" and refused["errors"] == [[0, "ALREADY_EXISTS"]], refused
        assert shell.ask("groups", id=0) == [[1, [[2, 0], [3, 0]]]]
        send(11)
        assert (next_tag(at2), next_tag(at3)) == (11, 11), "tag 10 went nowhere, 11 to both members"

        assert shell.ask("group", kind="modify", id=1, replicas=[[3, 0]]) is None
        assert shell.ask("groups", id=1) == [[1, [[3, 0]]]]
        send(12)
        assert next_tag(at3) == 12
        assert shell.ask("group", kind="delete", id=1) is None
        assert shell.ask("groups", id=0) == []
        refused = shell.ask("group", kind="delete", id=1)
        assert refused["errors"] == [[0, "NOT_FOUND"]], refused
        send(13)
        if datapath == "tc":
            kernel_decided(sw, datapath, 4)  # 10 to 13
            sent_up = sw.stats()["fast_path"]["p4"]
            assert (sent_up["sent_up_misfit"], sent_up["sent_up_no_kernel_port"]) == (0, 0), \
                f"the kernel decided every frame by the groups written: {sent_up}"

        # 17 copies to h2 (one per instance) and one to h3: more than the kernel's verdict
        # holds, so on tc the frame goes up and userspace sends them all.
        many = [[2, i] for i in range(17)] + [[3, 0]]
        assert shell.ask("group", kind="insert", id=1, replicas=many) is None
        send(14)
        assert [next_tag(at2) for _ in range(17)] == [14] * 17, "12 and 13 never reached h2"
        assert next_tag(at3) == 14, "13 never reached h3"
        assert quiet(at2) and quiet(at3), "no copy more"
        if datapath == "tc":
            assert sw.stats()["fast_path"]["p4"]["sent_up_misfit"] >= 1, sw.stats()["fast_path"]["p4"]
        else:
            kernel_decided(sw, datapath, 0)


def test_p4runtime_shell_writes_a_clone_session_that_clone_sends_to(three_hosts):
    """A clone session written with p4runtime-shell: the flooding program that also clones each
    frame to session 5 (`clone(CloneType.I2E, 5)`) sends h1's frames to group 1's h2, and a copy
    to the session's h3, cut to its packet_length_bytes, only while the session is there. User
    only: a program that calls clone does not fit the kernel, so on tc it runs in userspace too."""
    h1 = three_hosts.hosts[0]
    source = FLOOD.replace("apply { standard_metadata.mcast_grp = 1; }",
                           "apply { standard_metadata.mcast_grp = 1; clone(CloneType.I2E, 32w5); }")
    with shell_on_a_program(three_hosts, "user", "flood_clone", source,
                            "[[p4.group]]\nid = 1\nports = [2]\n") as (_, shell, at2, at3):
        frame = lambda tag: udp_frame(TAGGED_SRC, "ff:ff:ff:ff:ff:ff", "10.0.0.1", f"10.0.0.{tag}")
        full = len(frame(0))

        blast(h1, frame(20), 1, 1)  # no session 5: no clone
        assert next_frame(at2) == (20, full)
        assert shell.ask("session", kind="insert", id=5, replicas=[[3, 0]], cos=2, packet_length_bytes=40) is None
        assert shell.ask("sessions", id=0) == [[5, [[3, 0]], 2, 40]]
        refused = shell.ask("session", kind="insert", id=5, replicas=[[3, 0]], cos=8)
        assert refused["errors"] == [[0, "ALREADY_EXISTS"]], refused
        blast(h1, frame(21), 1, 1)
        assert next_frame(at2) == (21, full)
        assert next_frame(at3) == (21, 40), "tag 20 was not cloned, 21 was, cut to 40 bytes"
        assert shell.ask("session", kind="delete", id=5) is None
        blast(h1, frame(22), 1, 1)
        assert next_frame(at2) == (22, full)
        assert quiet(at3), "no clone once the session is deleted"


# A v1model ECMP program: frames from 10.0.0.1 take a member of the group the control plane
# names, picked by a CRC-16 of the IPv4 destination; frames from other sources take the member
# their entry names.
ECMP = """#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<8> version_ihl; bit<8> tos; bit<16> length; bit<16> id; bit<16> fragment;
    bit<8> ttl; bit<8> protocol; bit<16> checksum; bit<32> src; bit<32> dst;
}
struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata_t { }
parser EcmpParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.ethernet); packet.extract(hdr.ipv4); transition accept; }
}
control EcmpVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }
control EcmpIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action to(bit<9> port) { standard_metadata.egress_spec = port; }
    action drop() { mark_to_drop(standard_metadata); }
    action_selector(HashAlgorithm.crc16, 32w16, 32w16) paths;
    table ecmp {
        key = { hdr.ipv4.src : exact; hdr.ipv4.dst : selector; }
        actions = { to; drop; }
        default_action = drop();
        implementation = paths;
    }
    apply { ecmp.apply(); }
}
control EcmpEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply { }
}
control EcmpCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }
control EcmpDeparser(packet_out packet, in headers_t hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); }
}
V1Switch(EcmpParser(), EcmpVerify(), EcmpIngress(), EcmpEgress(), EcmpCompute(), EcmpDeparser()) main;
"""


def send_in_order(host, frames):
    """Sends `frames` from `host` raw, one after the other, from one process."""
    script = ("import socket\n"
              "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('eth0', 0))\n"
              f"for f in {[f.hex() for f in frames]!r}: s.send(bytes.fromhex(f))\n")
    host.run("python3", "-c", script, timeout=30)


def tags_before(catch, marker):
    """The tags a host received before `marker`, in order (frames reach a host in order)."""
    tags = []
    while (tag := next_tag(catch)) != marker:
        assert tag is not None, f"marker {marker} never came; before it: {tags}"
        tags.append(tag)
    return tags


def test_p4runtime_shell_writes_an_action_selectors_members_and_group_that_spread_flows(three_hosts):
    """Action profiles with p4runtime-shell (P4Runtime §9.2): an ECMP program's selector gets two
    members (to h2's port, to h3's) and a group of both, and the entry for h1's source names the
    group; h1's 24 flows (one per IPv4 destination, each frame tagged with it) then spread over
    both hosts, each flow to exactly one, and sent again each goes where it went. Entries from
    two other sources name one member each: their frames mark the end of each round at each
    host. Reads give back what was written, and deleting a member the group holds is refused
    with FAILED_PRECONDITION. User only: the kernel back end refuses action selectors, so on tc
    the program runs in userspace too."""
    h1 = three_hosts.hosts[0]
    with shell_on_a_program(three_hosts, "user", "ecmp", ECMP) as (_, shell, at2, at3):
        profile, table = "EcmpIngress.paths", "EcmpIngress.ecmp"
        for member, port in [(1, 2), (2, 3)]:
            assert shell.ask("member", kind="insert", profile=profile, id=member, action="EcmpIngress.to",
                             params={"port": str(port)}) is None
        assert shell.ask("profile_group", kind="insert", profile=profile, id=7, members=[[1, 1], [2, 1]]) is None
        assert shell.ask("indirect", kind="insert", table=table, match={"hdr.ipv4.src": "10.0.0.1"}, group=7) is None
        for src, member in [("10.0.0.98", 1), ("10.0.0.99", 2)]:
            assert shell.ask("indirect", kind="insert", table=table, match={"hdr.ipv4.src": src},
                             member=member) is None
        assert shell.ask("members", profile=profile) == [[1, "EcmpIngress.to", {"port": 2}],
                                                         [2, "EcmpIngress.to", {"port": 3}]]
        assert shell.ask("profile_groups", profile=profile) == [[7, [[1, 1], [2, 1]]]]
        refused = shell.ask("member", kind="delete", profile=profile, id=1, action="EcmpIngress.to",
                            params={"port": "2"})
        assert refused["error"] == "FAILED_PRECONDITION" or refused["errors"] == [[0, "FAILED_PRECONDITION"]], refused

        flows = range(10, 34)
        frame = lambda src, tag: udp_frame(TAGGED_SRC, "ff:ff:ff:ff:ff:ff", src, f"10.0.1.{tag}")
        rounds = []
        for _ in range(2):
            send_in_order(h1, [frame("10.0.0.1", t) for t in flows] + [frame("10.0.0.98", 200),
                                                                     frame("10.0.0.99", 201)])
            rounds.append((tags_before(at2, 200), tags_before(at3, 201)))
        (to2, to3), again = rounds
        assert sorted(to2 + to3) == list(flows), f"each flow to exactly one member: h2 {to2}, h3 {to3}"
        assert to2 and to3, f"both members take some of the {len(flows)} flows: h2 {to2}, h3 {to3}"
        assert again == (to2, to3), "a flow goes where it went before"
