"""TSN egress scheduling with real frames: h1 and h2 send through edgeflow to h3, whose port is
paced to a rate and scheduled (strict priority, DRR, CBS, gates). Rates and latencies are what
edgeflow-loadgen's receivers on h3 measured."""

import signal
import threading

from testbed.tsn import flows, fps_for, read_log, streams, switch, virtual_bursts, wire_mbps, write_config
from testbed.util import wait_for

RATE_MBPS = 20
SIZE = 1500  # on the wire with FCS
WIRE = SIZE - 4 + 24  # what the scheduler counts: frame, FCS, preamble, IFG
# Short queues: an overloaded queue drains in milliseconds once the senders stop, so what each
# receiver measures over its own span is the shares while all were sending.
LIMIT = "limit_frames = 20\n"
FULL = fps_for(RATE_MBPS, SIZE)  # frames per second that fill the port
# How long the streams run: 3 300 frames leave the port in 2 s, so that the rates and shares below
# are counted over thousands of frames, a frame or a window's worth at either end a few in 10 000.
STREAM_S = 2.0


def test_pacing_and_strict_priority(three_hosts):
    """A saturating best-effort stream (2x the port rate) and a small high-priority one: the port
    sends at its rate, the high-priority stream loses nothing and waits about one maximum frame on
    the wire plus the thread's wake-up, not behind the best-effort queue (200 frames, 122 ms)."""
    queues = f"[[port.queue]]\nid = 0\nlimit_frames = 200\n[[port.queue]]\nid = 7\n{LIMIT}"
    with switch(three_hosts, "tsn-strict", RATE_MBPS, queues) as sw:
        flows(sw, {1: 7, 2: 0})
        got = streams(three_hosts, [(0, 1, 200, 500), (1, 2, SIZE, 2 * FULL)], duration=STREAM_S)
        high, low = got[1], got[2]
        frame_us = WIRE * 8 / RATE_MBPS
        print(f"\nport at {RATE_MBPS} Mbit/s: best effort {wire_mbps(low, SIZE):.2f} Mbit/s on the wire, "
              f"high priority lost {high['lost']}, latency p50 {high['latency_us']['p50']:.0f} µs "
              f"p99 {high['latency_us']['p99']:.0f} µs (one frame: {frame_us:.0f} µs)")
        assert high["lost"] == 0 and high["received"] == high["sender_sent"], high
        total = wire_mbps(low, SIZE) + wire_mbps(high, 200)
        # Never above the port's rate; below it only as far as a broken shaper would be.
        assert 0.7 * RATE_MBPS < total <= RATE_MBPS * 1.02, total
        assert low["lost"] > 0.3 * low["received"], "the best-effort stream was over the rate: its queue overflowed"
        # Half the frames wait at most the best-effort frame on the wire (608 µs) and a wake-up
        # (0.36-0.48 ms measured, idle or under two busy loops).
        assert high["latency_us"]["p50"] < frame_us + 500
        # The tail is the sleeping thread's wake-up, ms late on a busy machine (5.5 ms under two
        # busy loops), so it is held to what tells priority from none: a quarter of the wait
        # behind the full best-effort queue (200 frames).
        assert high["latency_us"]["p99"] < 200 * frame_us / 4, high["latency_us"]


def drr(w2, w1):
    return (f'[[port.queue]]\nid = 2\nscheduler = "drr"\nweight = {w2}\n{LIMIT}'
            f'[[port.queue]]\nid = 1\nscheduler = "drr"\nweight = {w1}\n{LIMIT}')


def drr_share(topo):
    """h1 (queue 2) and h2 (queue 1) each offering the whole port: h1's share of what left."""
    got = streams(topo, [(0, 1, SIZE, FULL), (1, 2, SIZE, FULL)], duration=STREAM_S)
    a, b = wire_mbps(got[1], SIZE), wire_mbps(got[2], SIZE)
    print(f"\nDRR: {a:.2f} and {b:.2f} Mbit/s, share {a / (a + b):.3f}")
    return a / (a + b)


def test_drr_shares_by_weight(three_hosts):
    with switch(three_hosts, "tsn-drr", RATE_MBPS, drr(3, 1)) as sw:
        flows(sw, {1: 2, 2: 1})
        share = drr_share(three_hosts)
        # 3:1, not the even split of a broken scheduler (a paused sender moves it a little).
        assert abs(share - 0.75) < 0.08, share


def test_schedule_changes_at_runtime_without_loss(three_hosts):
    """SIGHUP applies a changed schedule to the running switch: a stream below the port's rate
    loses nothing across the change, and the new weights hold after it."""
    with switch(three_hosts, "tsn-reload", RATE_MBPS, drr(3, 1)) as sw:
        flows(sw, {1: 2, 2: 1})
        write_config(three_hosts, "tsn-reload", RATE_MBPS, drr(1, 1))
        timer = threading.Timer(1.0, lambda: sw.proc.send_signal(signal.SIGHUP))
        timer.start()
        steady = streams(three_hosts, [(0, 1, SIZE, FULL // 2)], duration=2.0)[1]
        timer.join()
        assert steady["lost"] == 0 and steady["received"] == steady["sender_sent"], steady
        assert "configuration applied: egress of" in sw.log(), sw.log()
        share = drr_share(three_hosts)
        assert abs(share - 0.5) < 0.08, share
        # A configuration with an error is refused and the running one stays.
        write_config(three_hosts, "tsn-reload", RATE_MBPS, drr(0, 1))
        sw.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration refused" in sw.log(), timeout=5, what="the refusal")
        assert "weight must be above 0" in sw.log(), sw.log()
        assert abs(drr_share(three_hosts) - 0.5) < 0.08


# The shaped classes' frames and best effort's differ in size: with one size for all and idle
# slopes that divide the port's rate, a class's credit would come back to 0 exactly as a frame
# ends, it would never wait behind one, and its bursts would never use the hiCredit its bound is
# about. Both are below the 1522 bytes hiCredit is derived for, so the bound has room to spare.
CBS_SIZE, BE_SIZE = 1400, 1300
# Best effort offered twice the port into a long queue: the port never idles while the streams
# run, which `virtual_bursts` needs (a sender would have to stall for a tenth of a second).
BE_QUEUE = "limit_frames = 100\n"
BE_FULL = 2 * fps_for(RATE_MBPS, BE_SIZE)
#: hiCredit's largest frame on the wire: 1522 bytes with preamble and IFG.
MAX_FRAME_BITS = 12336


def busy_window(best_effort_log):
    """When the port surely had best effort waiting: from 0.2 s after its first frame left (its
    queue fills in 50 ms) to when its sender sent its last."""
    log = read_log(best_effort_log)
    return log[0][2] + 200_000_000, max(tx for _, tx, _ in log)


def test_cbs_holds_its_idle_slope(three_hosts, tmp_path):
    """A credit-based shaped queue (5 Mbit/s) offered twice its idle slope, best effort offered
    twice the port: the shaped stream gets its idle slope and never more, and its bursts stay
    within hiCredit (idleSlope × the largest lower frame / rate) on the scheduler's virtual wire,
    where the thread's lateness does not reach. The bursts reach 0.8 of hiCredit, so a bound that
    left hiCredit out would fail."""
    queues = (f'[[port.queue]]\nid = 5\nscheduler = "cbs"\nidleslope_kbps = 5000\n{LIMIT}'
              f'[[port.queue]]\nid = 0\n{BE_QUEUE}')
    with switch(three_hosts, "tsn-cbs", RATE_MBPS, queues) as sw:
        flows(sw, {1: 5, 2: 0})
        logs = {1: tmp_path / "shaped.log", 2: tmp_path / "best.log"}
        got = streams(three_hosts, [(0, 1, CBS_SIZE, fps_for(10, CBS_SIZE)), (1, 2, BE_SIZE, BE_FULL)], duration=2.0,
                      logs=logs)
    shaped, best = wire_mbps(got[1], CBS_SIZE), wire_mbps(got[2], BE_SIZE)
    idle = 5e6
    hi_credit = MAX_FRAME_BITS * idle / (RATE_MBPS * 1e6)
    bursts, drift = virtual_bursts(logs, {1: CBS_SIZE, 2: BE_SIZE}, RATE_MBPS, {1: idle}, busy_window(logs[2]))
    print(f"\nCBS at 5 Mbit/s: shaped {shaped:.3f} Mbit/s, best effort {best:.2f} Mbit/s; largest burst "
          f"{bursts[1]:.0f} bits (hiCredit {hi_credit:.0f}); real span less virtual {drift * 1e3:.2f} ms")
    # The shaped queue never above its idle slope, the port never above its rate.
    assert 0.8 * 5 < shaped <= 5 * 1.02, shaped
    assert 0.7 * RATE_MBPS < shaped + best <= RATE_MBPS * 1.02, (shaped, best)
    # Within hiCredit, and using it: a frame that waited behind a best-effort one starts with the
    # credit it earned meanwhile (at most idleSlope × 528 µs, 2 640 bits, here).
    assert 0 < bursts[1] <= hi_credit, (bursts, hi_credit, drift)


def test_two_cbs_classes_hold_their_slopes_within_annex_l_bounds(tmp_path):
    """Class A (queue 6, 4 Mbit/s) and class B (queue 5, 6 Mbit/s) on one 20 Mbit/s port, each
    offered twice its slope, best effort filling the rest: each class gets its idle slope and its
    bursts stay within its own hiCredit, B's counting A above it as 802.1Q Annex L does. B's
    bursts go past the hiCredit class A's formula would give it (they wait behind a frame of A and
    one of best effort), so a switch, or a bound, that left A's interference out would fail."""
    from testbed import netns
    with netns.Topology("tc2") as topo:
        for _ in range(4):
            topo.add_host()
        queues = "".join(f'[[port.queue]]\nid = {q}\nscheduler = "cbs"\nidleslope_kbps = {kbps}\n{LIMIT}'
                         for q, kbps in ((6, 4000), (5, 6000)))
        with switch(topo, "tsn-cbs2", RATE_MBPS, f"{queues}[[port.queue]]\nid = 0\n{BE_QUEUE}") as sw:
            flows(sw, {1: 6, 2: 5, 3: 0})
            logs = {f: tmp_path / f"flow{f}.log" for f in (1, 2, 3)}
            got = streams(topo, [(0, 1, CBS_SIZE, fps_for(8, CBS_SIZE)), (1, 2, CBS_SIZE, fps_for(12, CBS_SIZE)),
                                 (2, 3, BE_SIZE, BE_FULL)], duration=2.0, logs=logs)
    a, b = wire_mbps(got[1], CBS_SIZE), wire_mbps(got[2], CBS_SIZE)
    best = wire_mbps(got[3], BE_SIZE)
    rate, frame = RATE_MBPS * 1e6, MAX_FRAME_BITS
    hi = {1: frame * 4e6 / rate, 2: 6e6 * (frame / (rate - 4e6) + frame / rate)}
    b_as_class_a = frame * 6e6 / rate
    bursts, drift = virtual_bursts(logs, {1: CBS_SIZE, 2: CBS_SIZE, 3: BE_SIZE}, RATE_MBPS, {1: 4e6, 2: 6e6},
                                   busy_window(logs[3]))
    print(f"\nCBS classes on {RATE_MBPS} Mbit/s: A {a:.3f}, B {b:.3f}, best effort {best:.2f} Mbit/s; largest "
          f"burst A {bursts[1]:.0f} bits (hiCredit {hi[1]:.0f}), B {bursts[2]:.0f} (hiCredit {hi[2]:.0f}, "
          f"{b_as_class_a:.0f} without A's interference); real span less virtual {drift * 1e3:.2f} ms")
    assert 0.8 * 4 < a <= 4 * 1.02 and 0.8 * 6 < b <= 6 * 1.02, (a, b)
    assert 0.7 * RATE_MBPS < a + b + best <= RATE_MBPS * 1.02, (a, b, best)
    for f in (1, 2):
        assert 0 < bursts[f] <= hi[f], (f, bursts, hi, drift)
    assert bursts[2] > b_as_class_a, (bursts, b_as_class_a)


#: How late past its window a gated frame may arrive. The gate lets a frame start only where it can
#: finish (datapath's `gates_let_frames_start_only_where_they_can_finish`); what it cannot stop is
#: the thread being preempted between that check and the send, which on a busy 2-core VM is
#: milliseconds at the tail. A gate that did nothing would put 40 % of the frames past it.
LATE_NS = 1_000_000


def in_window(offsets, window_ns, late_ns=0):
    """The share of arrival offsets (ns into the cycle) inside the first `window_ns`, or at most
    `late_ns` after it."""
    return sum(1 for o in offsets if o < window_ns + late_ns) / len(offsets)


def test_gate_open_half_the_cycle_passes_half_the_rate(three_hosts, tmp_path):
    # Queue 0 may send in the first 5 ms of every 10 ms, queue 7 in the rest (nothing on it).
    gates = ('[port.gates]\nclock = "realtime"\ncycle_ns = 10000000\n'
             'entries = [{ duration_ns = 5000000, open = [0] }, { duration_ns = 5000000, open = [7] }]\n')
    with switch(three_hosts, "tsn-gates", RATE_MBPS, f"[[port.queue]]\nid = 0\n{LIMIT}", gates) as sw:
        flows(sw, {1: 0, 2: 0})
        log = tmp_path / "gated.log"
        got = streams(three_hosts, [(0, 1, SIZE, FULL)], duration=STREAM_S, logs={1: log})
        rate = wire_mbps(got[1], SIZE)
        # 5 ms windows hold floor(5 ms / 608 µs) = 8 frames: 8 per 10 ms.
        expected = 8 * WIRE * 8 / 10e-3 / 1e6
        # The receiver's kernel stamps (CLOCK_REALTIME, as the gates) modulo the cycle: a frame
        # leaves only while its gate is open, and the gate lets none start that cannot finish.
        offsets = [rx % 10_000_000 for _, _, rx in read_log(log)]
        inside, late = in_window(offsets, 5_000_000), in_window(offsets, 5_000_000, LATE_NS)
        print(f"\ngate open 50 %: {rate:.2f} Mbit/s (expected {expected:.2f}), {inside:.2%} inside the window, "
              f"{late:.2%} within {LATE_NS / 1e6:.0f} ms after it")
        assert 0.7 * expected < rate <= expected * 1.02, rate
        assert late >= 0.99, (inside, late)


def test_a_gated_port_leaves_an_unscheduled_port_alone(three_hosts, tmp_path):
    """h1 sends to h3, whose port is paced and gated (queue 0 open in the first 5 ms of every
    10 ms), and to h2, whose port is neither: h3's frames leave only in the window, h2's at any
    time of the cycle, and neither stream loses a frame."""
    h1, h2, h3 = three_hosts.hosts
    gates = ('[port.gates]\nclock = "realtime"\ncycle_ns = 10000000\n'
             'entries = [{ duration_ns = 5000000, open = [0] }, { duration_ns = 5000000, open = [7] }]\n')
    with switch(three_hosts, "tsn-unscheduled", RATE_MBPS, "[[port.queue]]\nid = 0\n", gates) as sw:
        sw.ofctl("add-flow", f"priority=10,in_port=1,dl_dst={h3.mac},actions=set_queue:0,output:3")
        sw.ofctl("add-flow", f"priority=10,in_port=1,dl_dst={h2.mac},actions=output:2")
        # Flow id = the receiver's switch port.
        logs = {i: tmp_path / f"flow{i}.log" for i in (2, 3)}
        got = streams(three_hosts, [(0, 2, 200, 1000, 1), (0, 3, 200, 1000, 2)], duration=2.0, logs=logs)
    inside = {}
    for i, received in got.items():
        assert received["received"] == received["sender_sent"] and received["lost"] == 0, (i, received)
        offsets = [rx % 10_000_000 for _, _, rx in read_log(logs[i])]
        inside[i] = in_window(offsets, 5_000_000, LATE_NS if i == 3 else 0)
    print(f"\nshare of frames arriving in queue 0's window: gated port {inside[3]:.2%} (or within "
          f"{LATE_NS / 1e6:.0f} ms after it), unscheduled port {inside[2]:.2%}")
    assert inside[3] >= 0.99, inside
    # Sent evenly over the cycle, the unscheduled port's frames arrive in both halves of it.
    assert 0.3 < inside[2] < 0.7, inside
