"""A reactive OpenFlow 1.3 controller as fast as plain Python goes, for measuring how many new
flows a switch sets up a second (issue 56): a table-miss flow to itself, and for every packet-in
of a UDP frame a flow-mod for that flow (UDP source and destination port, out the other port)
and a packet-out of the frame; other frames only cross, by packet-out. Two ports, 1 and 2. The switch connects to it (`target`); Open vSwitch and edgeflow
are driven by the same bytes."""

import socket
import struct
import threading
import time

from .churn import ADD, NO_BUFFER, OFP_VERSION, _oxm, flow_mod

HELLO, ECHO_REQUEST, ECHO_REPLY, PACKET_IN = 0, 2, 3, 10
PACKET_OUT, FLOW_MOD, BARRIER_REQUEST, BARRIER_REPLY = 13, 14, 20, 21
OFPP_CONTROLLER, OFPCML_NO_BUFFER = 0xFFFFFFFD, 0xFFFF


def table_miss_to_controller(xid=2):
    """`priority=0 actions=CONTROLLER:65535` in table 0: whole frames, unbuffered (Open vSwitch
    buffers none, so neither does edgeflow here: both answer with the frame in a packet-out)."""
    match = struct.pack("!HH4x", 1, 4)
    output = struct.pack("!HHIH6x", 0, 16, OFPP_CONTROLLER, OFPCML_NO_BUFFER)
    apply = struct.pack("!HH4x", 4, 8 + len(output)) + output
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, ADD, 0, 0, 0, NO_BUFFER, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    body += match + apply
    return struct.pack("!BBHI", OFP_VERSION, FLOW_MOD, 8 + len(body), xid) + body


def packet_out(in_port, out_port, frame, xid=0):
    action = struct.pack("!HHIH6x", 0, 16, out_port, 0)
    body = struct.pack("!IIH6x", NO_BUFFER, in_port, len(action)) + action + frame
    return struct.pack("!BBHI", OFP_VERSION, PACKET_OUT, 8 + len(body), xid) + body


def udp_ports(frame):
    """(source, destination) of an untagged IPv4 UDP frame, else None."""
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    at = 14 + (frame[14] & 0x0F) * 4
    return struct.unpack("!HH", frame[at:at + 4]) if len(frame) >= at + 4 else None


def in_port_of(match):
    """The IN_PORT field of a packet-in's OXM match (the first field the switches put there)."""
    at = 4
    end = struct.unpack("!H", match[2:4])[0]
    while at + 4 <= end:
        oxm_class, field, length = struct.unpack("!H", match[at:at + 2])[0], match[at + 2] >> 1, match[at + 3]
        if oxm_class == 0x8000 and field == 0:
            return struct.unpack("!I", match[at + 4:at + 8])[0]
        at += 4 + length
    return None


class Reactive:
    """Listens for one switch; `setups` counts the UDP flows it answered, `first`/`last` when the
    first packet-in came and the last answer went (time.monotonic())."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.target = f"tcp:127.0.0.1:{self.listener.getsockname()[1]}"
        self.setups = 0
        self.first = self.last = None
        self.ready = threading.Event()
        self.closed = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._session(conn)
            except OSError:
                pass
            finally:
                conn.close()

    def _session(self, conn):
        conn.sendall(struct.pack("!BBHI", OFP_VERSION, HELLO, 16, 1) + struct.pack("!HHI", 1, 8, 1 << OFP_VERSION))
        conn.sendall(table_miss_to_controller() + struct.pack("!BBHI", OFP_VERSION, BARRIER_REQUEST, 8, 3))
        # The controller must outrun the switches it measures: on two cores it shares with the
        # switch, the sender and the receiver, it set the pace (some 95 000 setups a second) once
        # edgeflow's setups got cheaper. So each setup's flow-mod is a template with its ports
        # written in, and messages are read in place (no slice copies but the frame's).
        templates = {}
        for out_port in (1, 2):
            t = flow_mod(ADD, 0, 0, out_port, priority=100)
            templates[out_port] = (t, t.index(_oxm(15, 0, 2)) + 4)
        unpack_from = struct.unpack_from
        buf = bytearray()
        while not self.closed:
            chunk = conn.recv(1 << 20)
            if not chunk:
                return
            buf += chunk
            out = []
            at = 0
            end = len(buf)
            while end - at >= 8:
                typ, length, xid = unpack_from("!xBHI", buf, at)
                if end - at < length:
                    break
                start, at = at, at + length
                if typ == PACKET_IN:
                    # buffer_id, total_len, reason, table_id, cookie; then the match and 2 bytes.
                    match_len = unpack_from("!H", buf, start + 26)[0]
                    frame_at = start + 24 + (match_len + 7) // 8 * 8 + 2
                    # Both switches put IN_PORT first; anything else is read field by field.
                    if unpack_from("!I", buf, start + 28)[0] == 0x80000004:
                        in_port = unpack_from("!I", buf, start + 32)[0]
                    else:
                        in_port = in_port_of(bytes(buf[start + 24:start + 24 + match_len]))
                    if in_port not in (1, 2):
                        continue
                    out_port = 3 - in_port
                    frame = bytes(buf[frame_at:start + length])
                    ports = udp_ports(frame)
                    if ports is None:
                        # ARP, pings, IPv6's own: across, without a flow (the bench's warm-up).
                        out.append(packet_out(in_port, out_port, frame))
                        continue
                    if self.first is None:
                        self.first = time.monotonic()
                    template, port_at = templates[out_port]
                    fm = bytearray(template)
                    struct.pack_into("!H", fm, port_at, ports[0])
                    struct.pack_into("!H", fm, port_at + 6, ports[1])
                    out.append(fm)
                    out.append(packet_out(in_port, out_port, frame))
                    self.setups += 1
                elif typ == ECHO_REQUEST:
                    out.append(struct.pack("!BBHI", OFP_VERSION, ECHO_REPLY, length, xid) + buf[start + 8:start + length])
                elif typ == BARRIER_REPLY and xid == 3:
                    self.ready.set()
            del buf[:at]
            if out:
                conn.sendall(b"".join(out))
                if self.setups:
                    self.last = time.monotonic()

    def close(self):
        self.closed = True
        self.listener.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
