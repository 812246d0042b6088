"""TSN streams mode in namespaces (docs/tsn.md, "Streams"): the two switches of 802.1CB replication
and elimination over two links, and one switch policing streams by 802.1Qci; what the tests and the
`tsn` experiment share."""

import contextlib
import time

from . import netns
from .switches import Edgeflow, start_all, stop_all
from .topology import Fabric, two_paths
from .util import run_dir


def offload_for(hosts, datapath):
    """The hosts' offloads as `datapath` needs them (Edgeflow.HOST_SETTINGS)."""
    if Edgeflow.HOST_SETTINGS[datapath]:
        for h in hosts:
            h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])


def stream_counters(sw, name="s1"):
    """The counters of stream `name` (`edgeflow stats`)."""
    return next(g["counters"] for g in sw.stats()["mode_counters"] if g["name"] == f"stream {name}")


@contextlib.contextmanager
def frer_pair(tag, datapath, history_length=32):
    """talker - X ==(two links)== Y - listener: X numbers stream s1 (to the listener) and copies it
    onto both links, Y passes the first copy of each number. Yields (fabric, {"a": X, "b": Y});
    the switches' exit codes are in `codes` of the fabric afterwards."""
    netns.cleanup()
    f = two_paths(tag)
    with f:
        talker, listener = f.hosts
        offload_for(f.hosts, datapath)
        # Ports: 1 the host, 2 and 3 the two links, on both switches; X is a, Y is b.
        roles = {"a": "in_ports = [1]\nout_ports = [2, 3]\ngenerate = true\n",
                 "b": f"in_ports = [2, 3]\nout_ports = [1]\nrecover = true\nhistory_length = {history_length}\n"}
        switches = {}
        try:
            for name in ("a", "b"):
                cfg = run_dir("streams") / f"frer-{tag}-{name}.toml"
                ports = "".join(f'[[port]]\nname = "{p}"\n' for p in f.ports[name])
                cfg.write_text(f'mode = "streams"\n{ports}[[stream]]\nname = "s1"\ndst = "{listener.mac}"\n'
                               f"{roles[name]}")
                switches[name] = Edgeflow([], datapath=datapath, extra=["--config", str(cfg)],
                                          log_name=f"streams-{tag}-{name}-{datapath}")
            start_all(switches.values())
            time.sleep(0.5)
            yield f, switches
        finally:
            f.codes = dict(zip(switches, stop_all(switches.values())))


#: The metered stream's flow meter: 4 Mbit/s committed, 2 excess, 3000-byte buckets.
METER = {"cir_kbps": 4000, "cbs_bytes": 3000, "eir_kbps": 2000, "ebs_bytes": 3000}
GATED_MAC = "02:00:00:00:00:77"


@contextlib.contextmanager
def qci_switch(tag, datapath):
    """talker - S - listener: stream "metered" (to the listener) through METER with a 1000-byte
    largest SDU, stream "gated" (to GATED_MAC) through a gate open 5 ms of every 10. Yields
    (fabric, switch)."""
    netns.cleanup()
    f = Fabric(tag)
    f.switch("s")
    f.host("s", "10.0.0.1/24")
    f.host("s", "10.0.0.2/24")
    with f:
        talker, listener = f.hosts
        offload_for(f.hosts, datapath)
        ports = "".join(f'[[port]]\nname = "{p}"\n' for p in f.ports["s"])
        meter = ", ".join(f"{k} = {v}" for k, v in METER.items())
        cfg = run_dir("streams") / f"qci-{tag}.toml"
        cfg.write_text(
            f'mode = "streams"\n{ports}'
            f'[[stream]]\nname = "metered"\ndst = "{listener.mac}"\nin_ports = [1]\nout_ports = [2]\n'
            f"max_sdu_bytes = 1000\nmeter = {{ {meter} }}\n"
            f'[[stream]]\nname = "gated"\ndst = "{GATED_MAC}"\nin_ports = [1]\nout_ports = [2]\n'
            "gate = { cycle_ns = 10000000, entries = [{ duration_ns = 5000000, open = true }, "
            "{ duration_ns = 5000000, open = false }] }\n")
        with Edgeflow([], datapath=datapath, extra=["--config", str(cfg)], log_name=f"streams-qci-{tag}-{datapath}") as sw:
            time.sleep(0.3)
            yield f, sw


def bucket_passes(log, size, rate_kbps, depth_bytes, first=True):
    """(fewest, most) frames of `size` bytes that one bucket of a two-rate meter (`rate_kbps`,
    `depth_bytes`; `first`: the committed one, which every frame tries first, else the excess one)
    may have passed, from the receiver's per-frame log of the frames the meter passed (their
    stamps are the meter's times give or take the µs to the receiver; a sequence number missing
    is a frame it dropped, so the log must hold every frame that passed and the sender's must all
    have reached the meter). Derived from the bucket's contract, so that what the machine does to
    the times (a stalled sender or switch leaves gaps, in which a full bucket earns nothing) moves
    the bounds with it rather than failing them:

    The bucket starts full, earns `rate` up to `depth` and a frame passes on it by spending its
    size: passed × size = depth + earned − lost − left, earned over the span of the log. Tokens
    are lost only while the bucket is full, so an upper bound on the bucket between frames bounds
    the loss: it grows by what it earns; a frame that passed on this bucket leaves it `size` lower
    and one that passed on the other (or, for the first bucket, one that found it short) leaves it
    below `size` or untouched; a dropped frame found both buckets below `size`. One frame less
    for the µs between the meter and the receiver's stamps."""
    frames = sorted((seq, rx) for seq, _, rx in _read_log(log))
    sent_first = min(tx for _, tx, _ in _read_log(log))
    rate = rate_kbps * 125 / 1e9  # bytes per ns
    bound, lost = float(depth_bytes), 0.0
    (seq0, t0), (prev_seq, prev_t) = frames[0], frames[0]
    for seq, t in frames:
        dt = max(0, t - prev_t)
        grown = bound + rate * dt
        lost += max(0.0, grown - depth_bytes)
        v = min(float(depth_bytes), grown)
        if seq > prev_seq + 1:  # dropped frames between: both buckets below `size` then
            v = min(v, size + rate * dt)
        # This frame passed: on this bucket (`size` less), or on the other, leaving this one as it
        # was (the committed bucket only when below `size`).
        bound = max(v - size, min(v, size)) if first else v
        prev_seq, prev_t = seq, t
    earned = rate * (prev_t - t0)
    fewest = int((depth_bytes + earned - lost - bound) // size) - 1
    # The most: what the bucket earned from when the first frame was sent (it reached the meter
    # after that) to when the last that passed was received (it was metered before that).
    most = int((depth_bytes + rate * (prev_t - sent_first)) // size) + 1
    return max(0, fewest), most


def _read_log(path):
    """[(seq, tx_ns, rx_ns)] from a loadgen receiver's per-frame log."""
    return [tuple(int(x) for x in line.split()) for line in open(path)]


def meter_bounds(frames, rate, size):
    """The most green and yellow frames METER may pass of `frames` frames of `size` bytes sent at
    `rate` a second: each bucket full at the start, then its rate for the stream's span."""
    span = (frames - 1) / rate
    green = (METER["cir_kbps"] * 1000 / 8 * span + METER["cbs_bytes"]) / size
    yellow = (METER["eir_kbps"] * 1000 / 8 * span + METER["ebs_bytes"]) / size
    return green, yellow
