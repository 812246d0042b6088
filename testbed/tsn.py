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
