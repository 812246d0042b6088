"""A bare OpenFlow 1.3 peer for tests that need to see the wire: send exact bytes (including
malformed ones), read replies, act as a minimal controller. Messages with bodies are encoded by
os-ken's parser, so their bytes are those of a real controller.
"""

import json
import socket
import struct
import time

OFP_VERSION = 4
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FEATURES_REQUEST, FEATURES_REPLY = 5, 6
PACKET_IN, FLOW_REMOVED, PORT_STATUS = 10, 11, 12
MULTIPART_REQUEST, MULTIPART_REPLY = 18, 19
BARRIER_REQUEST, BARRIER_REPLY = 20, 21
ROLE_REQUEST, ROLE_REPLY = 24, 25
#: edgeflow's experimenter id ("EFLW") and its request types (`crates/datapath/src/switch/report.rs`).
EDGEFLOW_EXPERIMENTER = 0x45464C57
STATS_REPORT, LOG_FILTER, KERNEL_DUMP, MODE_CONTROL, TEST_PANIC = 1, 2, 3, 4, 0x7E57


def header(msg_type, length=8, xid=0, version=OFP_VERSION):
    return struct.pack("!BBHI", version, msg_type, length, xid)


def hello13(xid=1):
    # Hello with a version bitmap element naming 1.3 only.
    body = struct.pack("!HHI", 1, 8, 1 << OFP_VERSION)
    return header(HELLO, 8 + len(body), xid) + body


class Message:
    def __init__(self, raw):
        self.raw = raw
        self.version, self.type, self.length, self.xid = struct.unpack("!BBHI", raw[:8])
        self.body = raw[8:]

    @property
    def error(self):
        """(type, code, data) of an OFPT_ERROR."""
        assert self.type == ERROR, f"not an error: type {self.type}"
        t, c = struct.unpack("!HH", self.body[:4])
        return t, c, self.body[4:]

    def __repr__(self):
        return f"<OF type={self.type} xid={self.xid} len={self.length}>"


def edgeflow_request_bytes(exp_type, data=b"", xid=30):
    """One of edgeflow's experimenter multipart requests, as bytes ((`Conn.edgeflow_request`)
    sends one and reads its answer)."""
    body = struct.pack("!HH4xII", 0xffff, 0, EDGEFLOW_EXPERIMENTER, exp_type) + data
    return header(MULTIPART_REQUEST, 8 + len(body), xid) + body


def osken_bytes(build):
    """Serializes an os-ken message: `build(parser, ofproto, datapath)` returns it."""
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    class Datapath:
        ofproto = ofp
        ofproto_parser = parser

        def set_xid(self, msg):
            msg.xid = 7

    dp = Datapath()
    msg = build(parser, ofp, dp)
    dp.set_xid(msg)
    msg.serialize()
    return bytes(msg.buf)


def decode_osken(raw):
    """Parses a message with os-ken (raises if os-ken cannot)."""
    from os_ken.ofproto import ofproto_parser, ofproto_v1_3 as ofp, ofproto_v1_3_parser as parser

    class Datapath:
        ofproto = ofp
        ofproto_parser = parser

    version, msg_type, length, xid = ofproto_parser.header(raw)
    return ofproto_parser.msg(Datapath(), version, msg_type, length, xid, raw)


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    @classmethod
    def connect(cls, port, host="127.0.0.1", hello=True):
        """To a switch's passive listener: a TCP port, or `unix:PATH` (Open vSwitch's management
        socket)."""
        if isinstance(port, str) and port.startswith("unix:"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.connect(port[len("unix:"):])
        else:
            sock = socket.create_connection((host, port), timeout=5)
        c = cls(sock)
        if hello:
            c.send(hello13())
            m = c.recv()
            assert m.type == HELLO, m
        return c

    def send(self, raw):
        self.sock.sendall(raw)

    def recv(self, timeout=5.0, skip=(ECHO_REQUEST,)):
        """The next message, answering echo requests on the way unless told otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            while len(self.buf) >= 8:
                length = struct.unpack("!H", self.buf[2:4])[0]
                if length < 8 or len(self.buf) < length:
                    break
                raw, self.buf = self.buf[:length], self.buf[length:]
                m = Message(raw)
                if m.type == ECHO_REQUEST and ECHO_REQUEST in skip:
                    self.send(header(ECHO_REPLY, 8 + len(m.body), m.xid) + m.body)
                    continue
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no OpenFlow message")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk

    def recv_type(self, msg_type, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(timeout=max(0.01, deadline - time.monotonic()))
            if m.type == msg_type:
                return m

    def request(self, raw, reply_type=None, timeout=5.0):
        """Sends `raw` then a barrier; returns every message up to the barrier reply."""
        xid = struct.unpack("!I", raw[4:8])[0]
        self.send(raw + header(BARRIER_REQUEST, 8, xid + 1000))
        out = []
        while True:
            m = self.recv(timeout)
            if m.type == BARRIER_REPLY and m.xid == xid + 1000:
                return out
            out.append(m)

    def set_role(self, role, generation_id):
        """An OFPT_ROLE_REQUEST (2 master, 3 slave); returns the (role, generation id) granted."""
        self.send(header(ROLE_REQUEST, 24, 9) + struct.pack("!I4xQ", role, generation_id))
        return struct.unpack("!I4xQ", self.recv_type(ROLE_REPLY).body)

    def edgeflow_request(self, exp_type, data=b"", xid=30):
        """One of edgeflow's experimenter multipart requests (`datapath::switch::EXPERIMENTER`):
        its JSON answer, or the (type, code) of the error it got."""
        self.send(edgeflow_request_bytes(exp_type, data, xid))
        answer = b""
        while True:
            m = self.recv()
            if m.xid != xid:
                continue
            if m.type == ERROR:
                return m.error[:2]
            assert m.type == MULTIPART_REPLY, m
            flags, = struct.unpack("!H", m.body[2:4])
            answer += m.body[16:]  # after the multipart header, the experimenter and its type
            if not flags & 1:
                return json.loads(answer)

    def closed(self, timeout=3.0):
        """True if the peer closes the connection within `timeout`."""
        try:
            while True:
                self.recv(timeout=timeout)
        except ConnectionError:
            return True
        except (TimeoutError, socket.timeout):
            return False

    def close(self):
        self.sock.close()


class Controller:
    """Listens for the switch like a controller does and hands over the connection."""

    def __init__(self, port=0):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]

    @property
    def target(self):
        return f"tcp:127.0.0.1:{self.port}"

    def accept(self, timeout=15.0):
        self.listener.settimeout(timeout)
        sock, _ = self.listener.accept()
        c = Conn(sock)
        c.send(hello13())
        m = c.recv()
        assert m.type == HELLO, m
        return c

    def close(self):
        self.listener.close()
