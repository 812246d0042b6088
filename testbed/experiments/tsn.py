"""TSN egress scheduling (issue 13; seed 002's TSN switch has 8 queues per port picked by strict
priority, round robin, CBS and TAS). A high-priority stream's latency through a paced port as
best-effort load rises, per scheduler; and where a gated queue's frames leave within the cycle,
per timing strategy (sleep, SCHED_FIFO, busy polling), against its gate window. Then the streams
mode: 802.1Qci policing accuracy (a two-rate meter offered below, between and over its rates,
against the token-bucket bounds) and 802.1CB elimination under repeated link cuts."""

import time

from .. import netns
from ..netns import Topology
from ..switches import Edgeflow
from ..loadgen import LOADGEN_BIN, finish_receiver, start_receiver
from ..traffic import iperf3_tcp
from ..tsn import WIRE_OVERHEAD, flows, fps_for, read_log, streams, switch, wire_mbps
from ..less import stream
from ..streams import frer_pair, meter_bounds, qci_switch, stream_counters
from ..util import run_dir
from .common import Table, median, plot, progress

LATENCY_RATE = 20  # Mbit/s: a 1500-byte frame takes 608 µs
HIGH = (200, 500)  # size, frames/s on queue 7
BE_SIZE = 1500
CBS_IDLE_KBPS = 2000
SCHEDULERS = {
    "unpaced": None,  # no rate_mbps: today's switch, the veth's own speed
    "strict": "",
    "cbs": f'[[port.queue]]\nid = 7\nscheduler = "cbs"\nidleslope_kbps = {CBS_IDLE_KBPS}\n',
    "tas": None,  # gates: queue 7 alone for 200 µs of every 2 ms
}
TAS_GATES = ('[port.gates]\nclock = "realtime"\ncycle_ns = 2000000\n'
             'entries = [{ duration_ns = 200000, open = [7] }, { duration_ns = 1800000, open = [0, 1, 2, 3, 4, 5, 6] }]\n')

GATE_RATE = 100  # Mbit/s: a 200-byte frame takes 17.6 µs
#: From a sender to the switch's userspace over a veth, about (for `missed_window`).
REACH_NS = 20_000
GATE_CYCLE_US = 1000
#: The window each timing strategy is held to (the issue's targets: 50 µs with busy polling, 200 µs
#: at SCHED_FIFO); plain sleep is shown against both.
GATE_WINDOWS = [("sleep", 50), ("sleep", 200), ("fifo", 50), ("fifo", 200), ("busy", 50)]


def gates(window_us):
    return (f'[port.gates]\nclock = "realtime"\ncycle_ns = {GATE_CYCLE_US * 1000}\n'
            f'entries = [{{ duration_ns = {window_us * 1000}, open = [7] }}, '
            f'{{ duration_ns = {(GATE_CYCLE_US - window_us) * 1000}, open = [0] }}]\n')


def wire_bits(size):
    """What the scheduler counts for a frame of `size` on the wire (FCS included): preamble, SFD and
    IFG too."""
    return (size - 4 + WIRE_OVERHEAD) * 8


#: hiCredit of queue 7 as the switch derives it (802.1Q Annex L, class A: no class above it):
#: idleSlope × the largest lower-priority frame on the wire (1522 bytes by default) / port rate.
CBS_HI_CREDIT_BITS = CBS_IDLE_KBPS * 1e3 * (1522 - 4 + WIRE_OVERHEAD) * 8 / (LATENCY_RATE * 1e6)


def bounds(frames, shaped):
    """What the mechanism allows each high-priority frame, from when the sender stamped it and
    those before it (`frames`: the receiver's per-frame log, [(seq, tx_ns, rx_ns)]).

    Queue 7 is the top class: a frame waits for at most one lower-priority frame already on the
    wire (L/C: 608 µs, one best-effort frame) and for the frames of its own class ahead of it,
    served at the class's rate R: the port's rate C under strict priority, the idle slope I under
    CBS. With b bits a frame, the frame n starts by

        ceiling(n) = max over m ≤ n of (tx(m) + (n − m) × b / R) + L / C

    (strict: the class's busy period, at C. CBS: over a period in which the queue holds frames or
    its credit is below 0, the credit is I × elapsed − bits sent, so once the frames ahead have
    gone the credit is back to 0 by (n − m) × b / I after the period began, and then at most the
    lower frame then on the wire is ahead; while waiting behind it the credit reaches at most
    I × L / C = hiCredit, so its cap takes nothing away.) With classes above, Annex L adds their
    hiCredit and frames; queue 7 has none.

    CBS also has a floor no correct shaper goes under: between the starts of frames m and n the
    credit falls by (n − m) × b and rises at most at I, from at most hiCredit to at least 0, so

        floor(n) = max over m < n of (tx(m) + ((n − m) × b − hiCredit) / I)

    A strict-priority queue, unshaped, sends a burst as fast as the port goes and breaks it as
    soon as the sender bunched two frames and the port was free. The receiver's stamps are after
    the switch sent (never before the start it was given), so the floor needs no allowance; the
    ceiling does: the switch's wake-up, the veth hops. Returns ([rx − ceiling(n)] in µs, how many
    frames arrived under the CBS floor, how many had a floor after their own send: the frames a
    CBS must hold for credit). `shaped`: queue 7 is CBS, else strict priority. The floor is
    counted on every row, so that the rows without CBS show what it catches."""
    b = wire_bits(HIGH[0])
    port = LATENCY_RATE * 1e6
    rate = CBS_IDLE_KBPS * 1e3 if shaped else port
    lower_ns = wire_bits(BE_SIZE) / port * 1e9
    per_frame_ns = b / rate * 1e9
    idle = CBS_IDLE_KBPS * 1e3
    cbs_ns, hi_ns = b / idle * 1e9, CBS_HI_CREDIT_BITS / idle * 1e9
    over, under, held = [], 0, 0
    run = run_cbs = None  # max over m ≤ n of tx(m) + (n − m) × per-frame time, at R and at I
    for _, tx, rx in sorted(frames, key=lambda f: f[1]):  # in the order they were sent
        floor = None if run_cbs is None else run_cbs + cbs_ns - hi_ns
        run = tx if run is None else max(run + per_frame_ns, tx)
        run_cbs = tx if run_cbs is None else max(run_cbs + cbs_ns, tx)
        over.append((rx - (run + lower_ns)) / 1000)
        if floor is not None and floor > tx:
            held += 1
            under += rx < floor
    return over, under, held


def latency_runs(topo, loads, seconds, table):
    limit = "[[port.queue]]\nid = 0\nlimit_frames = 50\n"
    runs = [(name, load, False) for name in SCHEDULERS for load in loads]
    # At the top load, strict priority and CBS again with the high-priority frames sent in
    # back-to-back pairs (every other frame held and sent right after the next: the same 500 a
    # second): CBS must space each pair by its credit, strict priority sends it at the port's rate.
    runs += [(name, max(loads), True) for name in ("strict", "cbs")]
    for name, load, pairs in runs:
        progress(f"tsn: {name}, best effort at {load:.0%} of the port" + (", high priority in pairs" if pairs else ""))
        if name == "unpaced":
            sw = Edgeflow(topo.switch_ports, fail_mode="secure", log_name="tsn-bench")
        elif name == "tas":
            sw = switch(topo, "tsn-bench", LATENCY_RATE, limit, TAS_GATES)
        else:
            sw = switch(topo, "tsn-bench", LATENCY_RATE, limit + SCHEDULERS[name])
        label = name + ("-pairs" if pairs else "")
        with sw:
            flows(sw, {1: 7, 2: 0})
            specs = [(0, 1, *HIGH)]
            if load > 0:
                specs.append((1, 2, BE_SIZE, max(1, int(fps_for(LATENCY_RATE, BE_SIZE) * load))))
            log = run_dir("tsn") / f"latency-{label}-{load:g}.log"
            got = streams(topo, specs, duration=seconds, logs={1: log},
                          send_extra={1: ["--swap-every", "2"]} if pairs else None)
        h = got[1]
        lat = h["latency_us"]
        scheduled = name in ("strict", "cbs")
        over, under, held = bounds(read_log(log), name == "cbs")
        over.sort()
        q = lambda p: round(over[min(len(over) - 1, int(p * len(over)))], 1) if over and scheduled else None
        table.add(scheduler=label, be_load=load, high_sent=h["received"] + h["lost"], high_lost=h["lost"],
                  lat_p50_us=lat["p50"], lat_p99_us=lat["p99"], lat_max_us=lat["max"],
                  over_bound_p99_us=q(0.99), over_bound_max_us=q(1.0), held_by_cbs=held, under_cbs_floor=under,
                  be_mbps=wire_mbps(got[2], BE_SIZE) if 2 in got else 0.0)


def first_window_end(t, cycle, window):
    """The end of the first window (the first `window` ns of every `cycle`) to close after `t`."""
    end = t - t % cycle + window
    return end if end > t else end + cycle


def gate_runs(topo, seconds, table, timelines):
    for timing, window in GATE_WINDOWS:
        progress(f"tsn: gate window {window} µs every {GATE_CYCLE_US} µs, timing {timing}, {seconds:g} s")
        log = run_dir("tsn") / f"gate-{timing}-{window}.log"
        with switch(topo, "tsn-gates-bench", GATE_RATE, "[[port.queue]]\nid = 0\nlimit_frames = 50\n", gates(window),
                    timing=timing) as sw:
            flows(sw, {1: 7, 2: 0})
            got = streams(topo, [(0, 1, 200, 1000), (1, 2, 1500, fps_for(GATE_RATE * 0.6, 1500))],
                          duration=seconds, logs={1: log})
        frames = read_log(log)
        cycle = GATE_CYCLE_US * 1000
        # A frame sent this late in a window cannot reach the switch and finish in it.
        reach = REACH_NS + int((200 - 4 + WIRE_OVERHEAD) * 8 * 1000 / GATE_RATE)
        offsets = sorted((rx % cycle) / 1000 for _, _, rx in frames)
        inside = sum(1 for o in offsets if o < window)
        q = lambda p: offsets[min(len(offsets) - 1, int(p * len(offsets)))] if offsets else 0.0
        table.add(timing=timing, window_us=window, frames=len(frames), lost=got[1]["lost"],
                  outside=len(frames) - inside, in_window=inside / max(1, len(frames)),
                  missed_window=sum(1 for _, tx, rx in frames
                                    if rx > first_window_end(tx + reach, cycle, window * 1000)),
                  offset_p50_us=q(0.5),
                  offset_p99_us=q(0.99), offset_p999_us=q(0.999), offset_max_us=offsets[-1] if offsets else 0.0)
        if window == 50:
            timelines[timing] = [((rx - frames[0][2]) / 1e6, (rx % cycle) / 1000) for _, _, rx in frames[:400]]


def idle_runs(topo, seconds, table, rounds=1):
    """What scheduling adds to an idle port: the high-priority stream alone through the port
    unpaced, then paced (strict priority) with each timing strategy, then unpaced again. On an idle
    port a frame's start on the virtual wire is its arrival, so the difference is the scheduler's
    own cost. This VM's latency moves by 2x between minutes: each round compares a paced run with
    the mean of the unpaced runs around it, and the rounds' medians are reported."""
    order = (("unpaced", None), ("strict", "sleep"), ("strict", "busy"), ("unpaced", None))
    p50s = {k: [] for k in order[:3]}
    p99s = {k: [] for k in order[:3]}
    added = {k: [] for k in order[1:3]}
    for r in range(rounds):
        got = []
        for name, timing in order:
            progress(f"tsn: idle port, {name}" + (f", timing {timing}" if timing else "") + f", round {r + 1}")
            if timing is None:
                sw = Edgeflow(topo.switch_ports, fail_mode="secure", log_name="tsn-idle-bench")
            else:
                sw = switch(topo, "tsn-idle-bench", LATENCY_RATE, timing=timing)
            with sw:
                flows(sw, {1: 7, 2: 0})
                got.append(streams(topo, [(0, 1, *HIGH)], duration=seconds)[1]["latency_us"])
        base = (got[0]["p50"] + got[3]["p50"]) / 2
        for k, lat in zip(order, got):
            p50s[order[0] if k[1] is None else k].append(lat["p50"])
            p99s[order[0] if k[1] is None else k].append(lat["p99"])
            if k[1] is not None:
                added[k].append(lat["p50"] - base)
    for (name, timing) in order[:3]:
        table.add(scheduler=name, timing=timing or "-", rounds=rounds, lat_p50_us=median(p50s[(name, timing)]),
                  lat_p99_us=median(p99s[(name, timing)]),
                  added_p50_us=median(added[(name, timing)]) if timing else 0.0)


def unscheduled_runs(topo, seconds, table, rounds=1):
    """The issue's "an unscheduled port's throughput unchanged": TCP between the first two hosts,
    whose ports have no schedule, first with no schedule anywhere and then with the third host's
    port paced and gated and carrying a gated stream, with each timing strategy. The switch is the
    learning switch (standalone), so that TCP finds its way without flows. Each round compares a
    scheduled run with the mean of the unscheduled runs before and after it."""
    gated = (f'rate_mbps = {GATE_RATE}\n[port.gates]\nclock = "realtime"\ncycle_ns = 1000000\n'
             'entries = [{ duration_ns = 500000, open = [0, 1, 2, 3, 4, 5, 6] }, '
             '{ duration_ns = 500000, open = [7] }]\n')
    order = (("none", "sleep"), ("gated", "sleep"), ("gated", "busy"), ("none", "sleep"))
    got = {k: [] for k in order[:3]}
    ratios = {k: [] for k in order[1:3]}
    for r in range(rounds):
        bps = []
        for name, timing in order:
            progress(f"tsn: unscheduled port, third port {name}, timing {timing}, round {r + 1}")
            cfg = run_dir("tsn") / "tsn-unscheduled.toml"
            ports = "".join(f'[[port]]\nname = "{p}"\n' for p in topo.switch_ports)
            cfg.write_text(f'fail_mode = "standalone"\negress_timing = "{timing}"\n' + ports
                           + (gated if name == "gated" else ""))
            with Edgeflow([], extra=["--config", str(cfg)], log_name="tsn-unscheduled-bench"):
                a, b, c = topo.hosts
                a.run("ping", "-c", "1", "-W", "1", b.addr, check=False)
                background = None
                if name == "gated":
                    background = start_receiver(c.popen, LOADGEN_BIN, "recv", "--iface", "eth0", "--engine", "socket",
                                                "--flow", "9", "--duration", str(seconds + 30))
                    sender = b.popen(LOADGEN_BIN, "send", "--iface", "eth0", "--dst-mac", c.mac, "--src-ip", b.addr,
                                     "--dst-ip", c.addr, "--size", "200", "--rate", "1000", "--duration",
                                     str(seconds + 1), "--engine", "socket", "--flow", "9")
                try:
                    bps.append(iperf3_tcp(a, b, seconds=seconds))
                finally:
                    if background is not None:
                        report, _ = sender.communicate(timeout=seconds + 30)
                        finish_receiver(background, [report])
        base = (bps[0] + bps[3]) / 2
        for k, v in zip(order, bps):
            got[order[0] if k[0] == "none" else k].append(v)
            if k[0] == "gated":
                ratios[k].append(v / base)
    for k in order[:3]:
        table.add(third_port=k[0], timing=k[1] if k[0] == "gated" else "-", rounds=rounds,
                  tcp_gbps=median(got[k]) / 1e9, of_unscheduled=median(ratios[k]) if k in ratios else 1.0)


#: Offered to the metered stream (4 Mbit/s committed, 2 excess): below, between, over both.
QCI_OFFERED_MBPS = [2, 5, 8, 12, 20]
QCI_SIZE = 500


def qci_runs(table, datapaths, seconds):
    """The metered stream at each offered rate: green, yellow and red against the meter's bounds."""
    for dp in datapaths:
        with qci_switch("qx", dp) as (f, sw):
            talker, listener = f.hosts
            for mbps in QCI_OFFERED_MBPS:
                progress(f"tsn: qci, {dp}, {mbps} Mbit/s")
                rate = int(mbps * 1e6 / 8 / QCI_SIZE)
                before = stream_counters(sw, "metered")
                sent, got = stream(talker, listener, QCI_SIZE, rate, seconds, flow=31)
                after = stream_counters(sw, "metered")
                green, yellow, red = (after[k] - before[k] for k in ("green", "yellow", "red"))
                bound_green, bound_yellow = meter_bounds(sent["sent"], rate, QCI_SIZE)
                want_green = min(sent["sent"], bound_green)
                want_yellow = min(sent["sent"] - want_green, bound_yellow)
                table.add(datapath=dp, offered_mbps=mbps, sent=sent["sent"], green=green,
                          want_green=round(want_green), yellow=yellow, want_yellow=round(want_yellow), red=red,
                          received=got["received"],
                          passed_of_want=round((green + yellow) / (want_green + want_yellow), 4))
                time.sleep(0.1)


def frer_runs(table, datapaths, repeats, seconds=1.5):
    """The replicated stream, one of its two links cut halfway through and restored, `repeats`
    times (the links in turn)."""
    for dp in datapaths:
        totals = dict(sent=0, received=0, lost=0, duplicates=0, discarded=0, y_lost=0, out_of_order=0)
        with frer_pair("fx", dp) as (f, switches):
            talker, listener = f.hosts
            for i in range(repeats):
                progress(f"tsn: frer, {dp}, cut {i + 1}/{repeats}")
                cut = f.ports["a"][1 + i % 2]
                before = stream_counters(switches["b"])
                sent, got = stream(talker, listener, 256, 2000, seconds, flow=32,
                                   during=lambda: netns.sh("ip", "link", "set", cut, "down"), at=seconds / 2)
                netns.sh("ip", "link", "set", cut, "up")
                after = stream_counters(switches["b"])
                totals["sent"] += sent["sent"]
                totals["received"] += got["received"]
                totals["lost"] += got["lost"]
                totals["duplicates"] += got["duplicates"]
                for k, col in (("discarded", "discarded"), ("lost", "y_lost"), ("out_of_order", "out_of_order")):
                    totals[col] += after[k] - before[k]
                time.sleep(0.3)
        table.add(datapath=dp, cuts=repeats, **totals)


def run(out, quick=False, switches=()):
    seconds = 1.0 if quick else 4.0
    # The gate targets are about 99.9 %: a full run sends 20 000 gated frames per strategy.
    gate_seconds = 1.0 if quick else 20.0
    loads = [0.0, 1.5] if quick else [0.0, 0.25, 0.5, 0.9, 1.5]
    lat = Table("tsn", f"A high-priority stream (200 B, 500/s, queue 7) through a {LATENCY_RATE} Mbit/s port as "
                       "best effort (1500 B, queue 0) rises",
                ["scheduler", "be_load", "high_sent", "high_lost", "lat_p50_us", "lat_p99_us", "lat_max_us",
                 "over_bound_p99_us", "over_bound_max_us", "held_by_cbs", "under_cbs_floor", "be_mbps"],
                note="`be_load`: offered best effort as a fraction of the port's rate. `unpaced`: no `rate_mbps` "
                     "(the veth's own speed, nothing to schedule). cbs: queue 7 shaped to 2 Mbit/s. tas: queue 7 "
                     "alone for 200 µs of every 2 ms. One 1500-byte frame takes 608 µs on the wire. "
                     "`over_bound`: per frame, its arrival after the latest start the scheduler allows it (one "
                     "best-effort frame on the wire, and its own class's frames sent before it at the port's "
                     "rate under strict priority, at the idle slope under CBS: `bounds` in "
                     "testbed/experiments/tsn.py), so the wake-up and the veth hops; p99 and max. `held_by_cbs`: "
                     "frames the sender bunched so closely that a 2 Mbit/s CBS must hold them for credit; "
                     "`under_cbs_floor`: of those, frames that arrived before that credit allows (0 for a working "
                     "CBS; on the other rows, what a missing shaper shows). `-pairs`: the high-priority "
                     "frames sent in back-to-back pairs, 250 pairs a second.")
    gate_table = Table("tsn-gates", f"Where queue 7's frames arrive within a {GATE_CYCLE_US} µs cycle whose first "
                                    f"`window_us` are its window ({GATE_RATE} Mbit/s port, best effort at 60 %)",
                       ["timing", "window_us", "frames", "lost", "outside", "in_window", "missed_window", "offset_p50_us",
                        "offset_p99_us", "offset_p999_us", "offset_max_us"],
                       note="Offsets are the receiver's kernel timestamps modulo the cycle (CLOCK_REALTIME, as the "
                            "gates): they include the veth hop after the switch. `in_window`: the fraction received "
                            "inside the window; `outside`: how many were not. `missed_window`: frames received "
                            "after the end of the first window they could have finished in (sent at least 20 µs "
                            "plus their time on the wire before it closed): the switch picked them up too late, "
                            "and they waited for the next window rather than leave after the gate closed. "
                            "1000 gated frames a second, "
                            f"{gate_seconds:g} s per row. Targets: busy ≥ 99.9 % inside 50 µs, fifo inside 200 µs.")
    idle = Table("tsn-idle", f"What the scheduler adds to an idle {LATENCY_RATE} Mbit/s port (200 B, 500/s, "
                             "nothing else)",
                 ["scheduler", "timing", "rounds", "lat_p50_us", "lat_p99_us", "added_p50_us"],
                 note="`added_p50_us`: per round, the paced run's median against the mean of the unpaced runs "
                      "before and after it; the median over rounds. Target: ≤ 5 µs with busy.")
    unscheduled = Table("tsn-unscheduled", "TCP between two ports without a schedule, while the third port is "
                                           f"paced to {GATE_RATE} Mbit/s, gated (1 ms cycle) and carries 1000 "
                                           "frames/s, against no schedule anywhere",
                        ["third_port", "timing", "rounds", "tcp_gbps", "of_unscheduled"],
                        note="Learning switch, userspace datapath. `of_unscheduled`: per round, the run's throughput "
                             "over the mean of the unscheduled runs before and after it; the median over rounds. "
                             "Target: unchanged.")
    timelines = {}
    netns.cleanup()
    with Topology("tb") as topo:
        for _ in range(3):
            topo.add_host()
        latency_runs(topo, loads, seconds, lat)
        gate_runs(topo, gate_seconds, gate_table, timelines)
        idle_runs(topo, seconds, idle, rounds=1 if quick else 5)
        unscheduled_runs(topo, seconds, unscheduled, rounds=1 if quick else 3)
    qci = Table("tsn-qci", f"802.1Qci flow meter accuracy: {QCI_SIZE}-byte frames offered to a stream metered "
                           "at 4 Mbit/s committed and 2 Mbit/s excess (3000-byte buckets, colour-blind, uncoupled)",
                ["datapath", "offered_mbps", "sent", "green", "want_green", "yellow", "want_yellow", "red",
                 "received", "passed_of_want"],
                note="want: what the two token buckets allow of the frames sent (each full at the start, then "
                     "its rate over the stream's span; green first, yellow of the rest). passed_of_want: (green + "
                     "yellow) / (want_green + want_yellow). received: the listener's count (green and yellow pass; "
                     "yellow marked drop-eligible). The streams mode runs in userspace on every datapath.")
    frer = Table("tsn-frer", "802.1CB replication and elimination under link cuts: a stream numbered and copied onto "
                             "two links by X, the first copy of each number passed by Y; one link cut halfway "
                             "through each run and restored, the two links in turn",
                 ["datapath", "cuts", "sent", "received", "lost", "duplicates", "discarded", "y_lost",
                  "out_of_order"],
                 note="256-byte frames at 2000/s, 1.5 s a run. received, lost, duplicates: at the listener "
                      "(loadgen's sequence numbers). discarded, y_lost, out_of_order: Y's recovery counters "
                      "(history length 32). Target: nothing lost, nothing duplicated.")
    qci_runs(qci, ["user"] if quick else ["user", "xdp"], 1.0 if quick else 3.0)
    frer_runs(frer, ["user"] if quick else ["user", "xdp"], 2 if quick else 10)
    for t in (lat, gate_table, idle, unscheduled, qci, frer):
        t.write(out)

    def draw(plt):
        ax1 = plt.subplot(1, 2, 1)
        for name in SCHEDULERS:
            rows = [r for r in lat.rows if r["scheduler"] == name]
            ax1.plot([r["be_load"] for r in rows], [r["lat_p99_us"] for r in rows], marker="o", label=name)
        ax1.set_xlabel("best-effort load (fraction of port rate)")
        ax1.set_ylabel("high-priority p99 latency (µs)")
        ax1.set_yscale("log")
        ax1.legend(fontsize=8)
        ax2 = plt.subplot(1, 2, 2)
        for timing, pts in timelines.items():
            ax2.scatter([p[0] for p in pts], [p[1] for p in pts], s=4, label=timing)
        ax2.axhspan(0, 50, color="green", alpha=0.15, label="queue 7's window")
        ax2.set_xlabel("time (ms)")
        ax2.set_ylabel(f"arrival within the {GATE_CYCLE_US} µs cycle (µs)")
        ax2.legend(fontsize=8)

    plot(out / "tsn.png", draw)
    return [lat, gate_table, idle, unscheduled, qci, frer]
