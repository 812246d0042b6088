"""TSN scheduling in namespaces: edgeflow with the last host's port paced and scheduled (docs/tsn.md),
flows from the other hosts onto chosen queues, and streams of edgeflow-loadgen probes with one
receiver per flow on the last host."""

from contextlib import ExitStack

from .loadgen import LOADGEN_BIN, finish_receiver, receiving
from .switches import Edgeflow
from .util import run_dir

#: What the scheduler counts per frame beyond the frame without FCS: FCS, preamble and IFG.
WIRE_OVERHEAD = 4 + 8 + 12


def write_config(topo, name, rate_mbps, queues="", gates="", timing="sleep", cpu=None):
    """The switch's config: every host's port, the last one paced to `rate_mbps` with the given
    `[[port.queue]]` and `[port.gates]` text; the forwarding thread on CPU `cpu` if given."""
    cfg = run_dir("tsn") / f"{name}.toml"
    *others, last = topo.switch_ports
    text = f'fail_mode = "secure"\negress_timing = "{timing}"\n'
    if cpu is not None:
        text += f"egress_cpu = {cpu}\n"
    text += "".join(f'[[port]]\nname = "{p}"\n' for p in others)
    text += f'[[port]]\nname = "{last}"\nrate_mbps = {rate_mbps}\n{queues}{gates}'
    cfg.write_text(text)
    return cfg


def switch(topo, name, rate_mbps, queues="", gates="", timing="sleep", cpu=None):
    """edgeflow (OpenFlow, no controller; flows from `flows`) on `topo`'s ports."""
    cfg = write_config(topo, name, rate_mbps, queues, gates, timing, cpu)
    return Edgeflow([], extra=["--config", str(cfg)], log_name=name)


def flows(sw, queues):
    """Frames from port `in_port` go to the last port on queue `queues[in_port]`."""
    out = len(queues) + 1
    for in_port, q in queues.items():
        sw.ofctl("add-flow", f"priority=10,in_port={in_port},actions=set_queue:{q},output:{out}")


def streams(topo, specs, duration=3.0, logs=None, send_extra=None):
    """specs: [(sender host index, flow, size on the wire, frames/s[, receiver host index])], the
    receiver the last host unless given. Starts a receiver per flow (with a per-frame log for the
    flows in `logs`: {flow: path}), then every sender at once (with the arguments in `send_extra`:
    {flow: [...]}); returns {flow: receiver report}."""
    logs, send_extra = logs or {}, send_extra or {}
    with ExitStack() as stack:
        recv, senders = {}, {}
        for i, flow, size, fps, *to in specs:
            dst = topo.hosts[to[0] if to else -1]
            args = [LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket", "--flow", str(flow), "--duration",
                    str(duration + 30)]
            if flow in logs:
                args += ["--log", str(logs[flow])]
            recv[flow] = stack.enter_context(receiving(dst.popen, *args))
        for i, flow, size, fps, *to in specs:
            h, dst = topo.hosts[i], topo.hosts[to[0] if to else -1]
            senders[flow] = h.popen(LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst.mac, "--src-ip", h.addr,
                                    "--dst-ip", dst.addr, "--size", str(size), "--rate", str(fps), "--duration",
                                    str(duration), "--engine", "socket", "--flow", str(flow), *send_extra.get(flow, ()))
        reports = {}
        for flow, s in senders.items():
            reports[flow], err = s.communicate(timeout=duration + 30)
            if s.returncode != 0:
                raise RuntimeError(f"loadgen send: {err.strip()}")
        return {flow: finish_receiver(r, [reports[flow]]) for flow, r in recv.items()}


def wire_mbps(report, size):
    """A flow's rate as the scheduler counts it (`size` on the wire with FCS, plus preamble and
    IFG), in Mbit/s."""
    return report["received"] / report["duration_s"] * (size - 4 + WIRE_OVERHEAD) * 8 / 1e6


def fps_for(mbps, size):
    """Frames per second of `size` that fill `mbps` on the wire."""
    return int(mbps * 1e6 / ((size - 4 + WIRE_OVERHEAD) * 8))


def read_log(path):
    """[(seq, tx_ns, rx_ns)] from a receiver's per-frame log."""
    return [tuple(int(x) for x in line.split()) for line in open(path)]


def frame_bits(size):
    """What a frame of `size` bytes (FCS included) occupies on the wire, preamble and IFG too."""
    return (size - 4 + WIRE_OVERHEAD) * 8


def virtual_bursts(logs, sizes, rate_mbps, slopes, window):
    """The largest burst of each shaped flow on the port's *virtual* wire: over any run of its
    frames, the bits they carried beyond what its idle slope earned from the first one's start to
    the start of the frame after them. Credit-based shaping holds that to hiCredit (the credit is
    at least 0 when a frame starts and at most hiCredit), and so does any window of k frames:
    they span at least (k × frame bits − hiCredit) / idleSlope.

    The receiver's kernel stamps carry the forwarding thread's lateness (ms at p99 on a busy
    machine), which no bound of a fraction of a frame survives. The switch's scheduler does not:
    it gives every frame the start it has on a virtual wire of the port's rate (datapath
    `schedule.rs`), and while a queue holds frames the wire never idles, one frame after another in
    the order they left. So a frame's virtual start is the wire time of every frame that left
    before it, counted from the stamps' order alone: exact, whatever the thread's lateness.

    `logs`: {flow: receiver log} of *every* flow leaving the port; `sizes`: {flow: frame size,
    FCS included}; `slopes`: {shaped flow: idle slope, bit/s}; `window`: (start, end) in the
    stamps' ns, when a queue surely held frames (a best-effort stream offered more than the port
    carries into a long queue). Returns ({shaped flow: largest burst, bits}, the window's real
    span less its virtual one, s: the lateness at its ends, or an idle wire if large)."""
    departures = sorted((rx, flow) for flow, path in logs.items() for _, _, rx in read_log(path))
    rate = rate_mbps * 1e6
    v = 0.0
    sent = dict.fromkeys(slopes, 0)
    low, best = {}, dict.fromkeys(slopes, 0.0)
    ends = []
    for rx, flow in departures:
        if window[0] <= rx <= window[1]:
            ends = [ends[0] if ends else (rx, v), (rx, v)]
            if flow in slopes:
                # Bits sent before this frame less what the slope earned by its virtual start.
                x = sent[flow] - slopes[flow] * v
                if flow in low:
                    best[flow] = max(best[flow], x - low[flow])
                low[flow] = min(low.get(flow, x), x)
                sent[flow] += frame_bits(sizes[flow])
        v += frame_bits(sizes[flow]) / rate
    (rx0, v0), (rx1, v1) = ends
    return best, (rx1 - rx0) / 1e9 - (v1 - v0)
