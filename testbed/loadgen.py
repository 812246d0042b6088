"""Drives edgeflow-loadgen between two hosts and collects both ends' reports.

A receiver is started with `start_receiver`, which returns once it says it is ready (its socket
open, its program attached), and ended with `finish_receiver`, which hands it the senders'
reports: it stops as soon as every frame they sent is in, or once nothing more arrives for a
moment (what is still missing then was lost). No fixed sleeps before, no idle timeouts after."""

import json
import os
import select
import signal
import subprocess
import time
from contextlib import contextmanager

from .netns import sh
from .util import ROOT, TIMEOUT_SCALE

LOADGEN_BIN = os.environ.get("EDGEFLOW_LOADGEN", str(ROOT / "target" / "release" / "edgeflow-loadgen"))
READY = "edgeflow-loadgen: ready"


def start_receiver(popen, *args, timeout=20):
    """Starts `edgeflow-loadgen ARGS` (recv or es-recv) with `popen` (a Host's or an end system's),
    told to end when its standard input closes; returns the process once it is ready."""
    # Frames still on their way when the senders are done get 0.1 s (the receiver's default) to
    # arrive, more in an emulated guest, where the switch takes that long over one.
    settle = ["--settle", str(0.1 * TIMEOUT_SCALE)] if TIMEOUT_SCALE != 1 else []
    # A receiver told to end on its standard input listens at most `--duration`: a bound, which
    # stretches as the testbed's waits do. In an emulated guest a test's senders (each a process
    # that takes seconds to start there) outlasted an AFDX receiver's 60 s, and its last frames
    # went unheard.
    args = list(args)
    if "--duration" in args[:-1]:
        at = args.index("--duration") + 1
        args[at] = str(float(args[at]) * TIMEOUT_SCALE)
    proc = popen(*args, "--end-on-stdin", *settle, stdin=subprocess.PIPE)
    said = []
    timeout *= TIMEOUT_SCALE
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            raise TimeoutError(f"{' '.join(map(str, args[:2]))} not ready after {timeout} s: {''.join(said)}")
        readable, _, _ = select.select([proc.stderr], [], [], left)
        if not readable:
            continue
        line = proc.stderr.readline()
        if READY in line:
            return proc
        if not line:
            proc.wait()
            raise RuntimeError(f"{' '.join(map(str, args[:2]))} exited before it was ready "
                               f"({proc.returncode}): {''.join(said).strip()}")
        said.append(line)


@contextmanager
def receiving(popen, *args, timeout=20):
    """`start_receiver` as a context: the receiver is killed on the way out if it still runs (a
    failure before `finish_receiver`)."""
    proc = start_receiver(popen, *args, timeout=timeout)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def finish_receiver(proc, reports=(), timeout=60):
    """Tells a receiver its senders are done, giving it their reports (dicts or JSON lines), and
    returns its own report, parsed."""
    lines = "".join((r if isinstance(r, str) else json.dumps(r)).strip() + "\n" for r in reports)
    try:
        out, err = proc.communicate(input=lines, timeout=timeout * TIMEOUT_SCALE)
    finally:
        if proc.poll() is None:
            proc.kill()
    if proc.returncode != 0:
        raise RuntimeError(f"loadgen receiver exited with {proc.returncode}: {err.strip()}")
    return json.loads(out)


def run(sender, receiver, size=64, rate=0, gap_ns=None, duration=1.0, send_engine="auto", recv_engine="xdp",
        extra_send=(), flow=1, dst_mac=None, recv_log=None):
    """Sends from `sender` to `receiver` (Hosts) and returns (sender report, receiver report).
    `dst_mac`: the frames' destination instead of the receiver's MAC; `recv_log`: a file for the
    receiver's line per frame (socket engine)."""
    log = ["--log", str(recv_log)] if recv_log else []
    with receiving(receiver.popen, LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", recv_engine, "--flow",
                   str(flow), "--duration", str(duration + 30), *log) as recv:
        args = [LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", dst_mac or receiver.mac, "--src-ip", sender.addr,
                "--dst-ip", receiver.addr, "--size", str(size), "--duration", str(duration), "--engine", send_engine,
                "--flow", str(flow)]
        args += ["--gap-ns", str(gap_ns)] if gap_ns else ["--rate", str(rate)]
        s = sender.run(*args, *extra_send, timeout=duration + 60)
        sent = json.loads(s.stdout)
        return sent, finish_receiver(recv, [sent])


@contextmanager
def streaming(sender, receiver, rate, duration, size=200, flow=1):
    """A stream of numbered frames from `sender` to `receiver` (Hosts, socket engines) while the
    body runs: yields `finish(stop=False)`, which waits for the sender and returns (sender report,
    receiver report), so that something can be done to the switch in between. With `stop`, the
    sender stops now (SIGINT: it reports what it sent) rather than at the end of `duration`: a
    stream that must outlast something whose length is not known runs until it is over."""
    with receiving(receiver.popen, LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket", "--flow", str(flow),
                   "--duration", str(duration + 57)) as recv:
        proc = sender.popen(LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", receiver.mac, "--src-ip",
                            sender.addr, "--dst-ip", receiver.addr, "--size", str(size), "--rate", str(rate),
                            "--duration", str(duration), "--engine", "socket", "--flow", str(flow))

        def finish(stop=False):
            if stop:
                proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=duration + 30)
            return json.loads(out), finish_receiver(recv, [out])

        try:
            yield finish
        finally:
            if proc.poll() is None:
                proc.kill()


def prepare_xdp_sender(sender):
    """Frames sent by the XDP engine enter the peer interface only if it runs NAPI (GRO on)."""
    sh("ethtool", "-K", sender.switch_side, "gro", "on", check=False)
    return {"gro_on_switch_port": "on"}


def bottleneck(sent, received):
    """Who limited the rate: the generator (everything sent arrived) or the path (switch/receiver)."""
    if sent["sent"] == 0:
        return "none"
    lost = 1 - received["received"] / sent["sent"]
    return "generator" if lost < 0.001 else "switch"
