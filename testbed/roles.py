"""Controller roles and asynchronous configuration with many flows installed (issue 56, item 4):
three controllers the switch connects to, as an ONOS or Faucet pair with a standby runs. A is
master, B equal, C slave; B asks for no flow-removed messages (OFPT_SET_ASYNC). A installs the
flows (each with OFPFF_SEND_FLOW_REM); C, a slave, is refused a flow-mod; C then takes the master
role (a newer generation), which makes A a slave: A is refused, and a request with A's stale
generation is refused too. C deletes every flow: C, the master, gets one flow-removed per flow;
B (equal, but it asked for none) and A (now a slave, which gets none by default) get nothing.

Every count is checked exactly; the times are what the experiment reports (`testbed/experiments/
scale.py`, its `roles` table)."""

import socket
import struct
import threading
import time
from collections import Counter

from .churn import ADD, DELETE, NO_BUFFER, OFPG_ANY, OFPP_ANY, encode_flows
from .ofpeer import (BARRIER_REPLY, BARRIER_REQUEST, ECHO_REPLY, ECHO_REQUEST, ERROR, FLOW_REMOVED, OFP_VERSION,
                     ROLE_REPLY, ROLE_REQUEST, Controller, header)

SET_ASYNC = 28
MASTER, SLAVE = 2, 3
#: ofp_error_type / code: BAD_REQUEST IS_SLAVE, ROLE_REQUEST_FAILED STALE.
IS_SLAVE, STALE = (1, 10), (11, 0)
#: Where a FLOW_MOD's flags sit: header 8, cookie and mask 16, table, command, two timeouts,
#: priority, buffer, out_port and out_group 20.
FLAGS_AT = 44
SEND_FLOW_REM = 1


class Peer:
    """One controller connection, read by a thread that counts what arrives (a million
    flow-removed messages are counted, not decoded) and keeps errors, role replies and barriers."""

    def __init__(self, conn):
        self.sock = conn.sock
        self.sock.settimeout(None)
        self.buf = conn.buf
        self.lock = threading.Lock()
        self.counts = Counter()
        self.errors = []  # (xid, type, code)
        self.replies = {}  # xid -> (type, body, monotonic time)
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def _read(self):
        buf = self.buf
        while True:
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            at, seen = 0, Counter()
            while len(buf) - at >= 8:
                _, typ, length, xid = struct.unpack_from("!BBHI", buf, at)
                if len(buf) - at < length:
                    break
                if typ == FLOW_REMOVED:
                    seen[typ] += 1
                elif typ == ECHO_REQUEST:
                    self.send(header(ECHO_REPLY, length, xid) + buf[at + 8:at + length])
                else:
                    seen[typ] += 1
                    body = buf[at + 8:at + length]
                    with self.changed:
                        if typ == ERROR:
                            self.errors.append((xid, *struct.unpack_from("!HH", body)))
                        self.replies[xid] = (typ, body, time.monotonic())
                at += length
            buf = buf[at:]
            with self.changed:
                self.counts.update(seen)
                self.changed.notify_all()

    def wait(self, what, timeout):
        with self.changed:
            if not self.changed.wait_for(what, timeout):
                raise TimeoutError(f"roles: waited {timeout} s")

    def barrier(self, xid, timeout=600):
        self.send(header(BARRIER_REQUEST, 8, xid))
        self.wait(lambda: self.replies.get(xid, (None,))[0] == BARRIER_REPLY, timeout)

    def set_role(self, role, generation, xid):
        """Sends a role request; returns (reply type, its body's role or error code, seconds)."""
        t0 = time.monotonic()
        self.send(header(ROLE_REQUEST, 24, xid) + struct.pack("!I4xQ", role, generation))
        self.wait(lambda: xid in self.replies, 60)
        typ, body, at = self.replies[xid]
        value = struct.unpack_from("!I", body)[0] if typ == ROLE_REPLY else struct.unpack_from("!HH", body)
        return typ, value, at - t0

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def set_async_no_flow_removed():
    """OFPT_SET_ASYNC: the defaults (spec §6.1.1) but no flow-removed message in any role."""
    masks = struct.pack("!IIIIII", 0b011, 0, 0b111, 0b111, 0, 0)
    return header(SET_ASYNC, 8 + len(masks), 7) + masks


def with_send_flow_rem(data):
    """`data`'s flow-mods, each asking for a flow-removed message."""
    out = bytearray(data)
    at = 0
    while at < len(out):
        length = struct.unpack_from("!H", out, at + 2)[0]
        struct.pack_into("!H", out, at + FLAGS_AT, SEND_FLOW_REM)
        at += length
    return bytes(out)


def delete_all(xid):
    """A FLOW_MOD DELETE of every flow of every table (empty match)."""
    match = struct.pack("!HH4x", 1, 4)
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0xFF, DELETE, 0, 0, 0, NO_BUFFER, OFPP_ANY, OFPG_ANY, 0) + match
    return header(14, 8 + len(body), xid) + body


def one_flow(xid):
    """A flow-mod a slave must be refused (BAD_REQUEST/IS_SLAVE)."""
    data = bytearray(encode_flows("exact", 1, 2, sport=1, first_dport=1))
    struct.pack_into("!I", data, 4, xid)
    return bytes(data)


class Controllers:
    """Three controller endpoints the switch is started with (`targets`), then `accept`ed."""

    def __init__(self):
        self.listeners = [Controller() for _ in range(3)]
        self.peers = []

    @property
    def targets(self):
        return [c.target for c in self.listeners]

    def accept(self):
        self.peers = [Peer(c.accept(timeout=60)) for c in self.listeners]
        return self.peers

    def close(self):
        for p in self.peers:
            p.close()
        for c in self.listeners:
            c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run(peers, n):
    """The sequence above on `n` flows; returns its figures, after checking every count."""
    a, b, c = peers
    assert a.set_role(MASTER, 1, 11)[:2] == (ROLE_REPLY, MASTER)
    assert c.set_role(SLAVE, 1, 12)[:2] == (ROLE_REPLY, SLAVE)
    b.send(set_async_no_flow_removed())
    b.barrier(13)
    flows = with_send_flow_rem(encode_flows("exact", n, 2))
    t0 = time.monotonic()
    a.send(flows)
    a.barrier(14)
    install_s = time.monotonic() - t0
    assert not a.errors, f"roles: the master's flows were refused: {a.errors[:3]}"
    # A slave may not change the table.
    c.send(one_flow(15))
    c.barrier(16)
    assert [e[1:] for e in c.errors if e[0] == 15] == [IS_SLAVE], c.errors
    # C takes over with a newer generation: A becomes a slave.
    typ, role, takeover_s = c.set_role(MASTER, 2, 17)
    assert (typ, role) == (ROLE_REPLY, MASTER)
    a.send(one_flow(18))
    a.barrier(19)
    assert [e[1:] for e in a.errors if e[0] == 18] == [IS_SLAVE], a.errors
    typ, code, _ = a.set_role(MASTER, 1, 20)
    assert (typ, code) == (ERROR, STALE), (typ, code)
    # Every flow removed: the master hears of each, the others of none.
    t0 = time.monotonic()
    c.send(delete_all(21))
    c.barrier(22)
    c.wait(lambda: c.counts[FLOW_REMOVED] >= n, 600)
    delete_s = time.monotonic() - t0
    for p in (a, b):
        p.barrier(23)  # after the deletes: anything sent for them has arrived
    removed = [p.counts[FLOW_REMOVED] for p in (a, b, c)]
    assert removed == [0, 0, n], removed
    return dict(install_per_s=round(n / install_s), takeover_ms=round(takeover_s * 1000, 2),
                delete_per_s=round(n / delete_s), removed_master=removed[2], removed_equal=removed[1],
                removed_slave=removed[0])
