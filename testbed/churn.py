"""Flow churn as a production controller makes it: many flows installed, then a steady stream of
flow-mods that touch none of them, over an OpenFlow connection of its own (the switch's passive
listener: edgeflow's `ptcp:`, Open vSwitch's bridge management socket).

The messages are OpenFlow 1.3 bytes built here (one flow shape, so encoded once and patched): at
thousands per second a Python encoder would be the bottleneck, not the switch.
"""

import socket
import struct
import threading
import time

OFP_VERSION = 4
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FLOW_MOD, BARRIER_REQUEST, BARRIER_REPLY = 14, 20, 21
ADD, DELETE, DELETE_STRICT = 0, 3, 4
OFPP_ANY, OFPG_ANY, NO_BUFFER = 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF


def _oxm(field, value, width):
    return struct.pack("!HBB", 0x8000, field << 1, width) + value.to_bytes(width, "big")


def _flow_mod(command, fields, out_port, priority, xid):
    """A FLOW_MOD in table 0 of OXM `fields` (encoded) with `actions=output:<out_port>`."""
    match = struct.pack("!HH", 1, 4 + len(fields)) + fields
    match += b"\0" * (-len(match) % 8)
    output = struct.pack("!HHIH6x", 0, 16, out_port, 0xFFFF)
    apply = struct.pack("!HH4x", 4, 8 + len(output)) + output
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, command, 0, 0, priority, NO_BUFFER, OFPP_ANY, OFPG_ANY, 0)
    body += match + apply
    return struct.pack("!BBHI", OFP_VERSION, FLOW_MOD, 8 + len(body), xid) + body


def flow_mod(command, udp_src, udp_dst, out_port, priority=100, xid=0):
    """`udp,tp_src=<udp_src>,tp_dst=<udp_dst> actions=output:<out_port>` in table 0 (without
    `tp_dst` when `udp_dst` is None)."""
    fields = _oxm(5, 0x0800, 2) + _oxm(10, 17, 1) + _oxm(15, udp_src, 2)
    if udp_dst is not None:
        fields += _oxm(16, udp_dst, 2)
    return _flow_mod(command, fields, out_port, priority, xid)


def prefix_flow_mod(net, mask, out_port, priority, xid=0):
    """`ip,nw_dst=<net>/<mask> actions=output:<out_port>` in table 0 (ADD)."""
    fields = _oxm(5, 0x0800, 2) + struct.pack("!HBBII", 0x8000, 12 << 1 | 1, 8, net, mask)
    return _flow_mod(ADD, fields, out_port, priority, xid)


def encode_flows(shape, n, out_port, sport=9000, first_dport=10000, priority=100):
    """`n` ADD flow-mods of one shape, as bytes to send at once (encoded before any timing starts):
    `exact`, flow i from UDP port `sport` + i / 65536 to `first_dport` + i mod 65536 (what
    `edgeflow-loadgen send --udp-flows` sends); `prefix`, IPv4 destination prefixes of lengths 16
    to 32 at priority = length, 17 to a group whose top 16 bits are its number (the same flows as
    crates/pipeline/examples/scale.rs installs)."""
    out = bytearray()
    if shape == "exact":
        template = flow_mod(ADD, 0, 0, out_port, priority)
        at = template.index(_oxm(15, 0, 2)) + 4
        for i in range(n):
            m = bytearray(template)
            m[at:at + 2] = ((sport + (i >> 16)) & 0xFFFF).to_bytes(2, "big")
            m[at + 6:at + 8] = ((first_dport + i) & 0xFFFF).to_bytes(2, "big")
            out += m
    elif shape == "prefix":
        template = bytearray(prefix_flow_mod(0, 0, out_port, 0))
        at = template.index(struct.pack("!HBB", 0x8000, 12 << 1 | 1, 8)) + 4
        prio = template.index(struct.pack("!IIIH", NO_BUFFER, OFPP_ANY, OFPG_ANY, 0)) - 2
        for i in range(n):
            length, group = 16 + i % 17, i // 17
            base = (group << 16 | ((group * 2654435761) & 0xFFFFFFFF) >> 16) & 0xFFFFFFFF
            mask = (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF
            template[at:at + 8] = struct.pack("!II", base & mask, mask)
            template[prio:prio + 2] = length.to_bytes(2, "big")
            out += template
    else:
        raise ValueError(f"churn: no flow shape {shape!r}")
    return bytes(out)


class Churner:
    """One OpenFlow connection to a switch's passive listener (`tcp:HOST:PORT` or `unix:PATH`)."""

    def __init__(self, target, timeout=30):
        kind, _, rest = target.partition(":")
        if kind == "unix":
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(rest)
        elif kind == "tcp":
            host, _, port = rest.rpartition(":")
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            raise ValueError(f"churn: no passive target {target!r}")
        self.sock.settimeout(None)
        self.lock = threading.Lock()
        self.errors = 0
        self.barriers = {}
        self.xid = 100
        self.closed = False
        self.send(struct.pack("!BBHI", OFP_VERSION, HELLO, 16, 1) + struct.pack("!HHI", 1, 8, 1 << OFP_VERSION))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def _read(self):
        buf = b""
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while len(buf) >= 8:
                _, typ, length, xid = struct.unpack("!BBHI", buf[:8])
                if len(buf) < length:
                    break
                msg, buf = buf[:length], buf[length:]
                if typ == ECHO_REQUEST:
                    self.send(struct.pack("!BBHI", OFP_VERSION, ECHO_REPLY, length, xid) + msg[8:])
                elif typ == ERROR:
                    self.errors += 1
                elif typ == BARRIER_REPLY and xid in self.barriers:
                    self.barriers[xid].set()

    def barrier(self, timeout=120):
        """Sends a barrier and waits for its reply: everything sent before it is in effect."""
        self.xid += 1
        done = self.barriers[self.xid] = threading.Event()
        self.send(struct.pack("!BBHI", OFP_VERSION, BARRIER_REQUEST, 8, self.xid))
        if not done.wait(timeout):
            raise RuntimeError(f"churn: no barrier reply within {timeout} s")

    def install(self, n, sport, first_dport, out_port, priority=100):
        """`n` flows, all to `out_port`, as `edgeflow-loadgen send --udp-flows` sends them: flow i
        from UDP port `sport` + i / 65536 to `first_dport` + i mod 65536; returns once the switch
        has them all."""
        self.send(encode_flows("exact", n, out_port, sport, first_dport, priority))
        self.barrier()

    def churn(self, rate, seconds, sport, first_dport, n_ports, out_port, priority=100, stop=None, strict=True):
        """`rate` flow-mods a second for `seconds` (or until `stop`, an Event, is set): each of
        `n_ports` flows from UDP port `sport` to `first_dport` onwards added, then deleted
        (strictly), in turn. Not `strict`: flows `udp,tp_src=<sport + k>` (any destination; k below
        `n_ports`; `first_dport` unused) at `priority`, each deleted in turn by a non-strict delete
        of that match. Flows installed with a destination port too have a mask that covers the
        delete's: the switch must tell them apart by their values, not by their shape. Returns the flow-mods sent and the rate the switch
        took them at (up to the reply to a barrier after the last one)."""
        if strict:
            add = flow_mod(ADD, sport, 0, out_port, priority)
            delete = flow_mod(DELETE_STRICT, sport, 0, out_port, priority)
            at = add.index(_oxm(16, 0, 2)) + 4
        else:
            add = flow_mod(ADD, 0, None, out_port, priority)
            delete = flow_mod(DELETE, 0, None, out_port, priority)
            at, first_dport = add.index(_oxm(15, 0, 2)) + 4, sport
        tick = 0.01
        per_tick = max(1, round(rate * tick))
        sent = 0
        start = time.monotonic()
        deadline = start + seconds
        next_at = start
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            batch = bytearray()
            for _ in range(per_tick):
                port = first_dport + (sent // 2) % n_ports
                m = bytearray(add if sent % 2 == 0 else delete)
                m[at:at + 2] = (port & 0xFFFF).to_bytes(2, "big")
                batch += m
                sent += 1
            self.send(bytes(batch))
            next_at += tick
            time.sleep(max(0.0, next_at - time.monotonic()))
        self.barrier()
        return sent, sent / (time.monotonic() - start)

    def close(self):
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Background:
    """`Churner.churn` in a thread, for the length of a `with` block; `.result` after it."""

    def __init__(self, churner, rate, sport, first_dport, n_ports, out_port, seconds=3600, strict=True, priority=100):
        self.result = None
        self.error = None
        self.args = (rate, seconds, sport, first_dport, n_ports, out_port)
        self.options = {"strict": strict, "priority": priority}
        self.churner = churner
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.result = self.churner.churn(*self.args, stop=self.stopping, **self.options)
        except Exception as e:  # raised again by stop()
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self

    def stop(self):
        """Ends the churn (at its next tick) and returns (flow-mods sent, rate the switch took)."""
        self.stopping.set()
        self.thread.join(timeout=180)
        if self.error:
            raise self.error
        return self.result

    def __exit__(self, *exc):
        if self.thread.is_alive():
            self.stop()
