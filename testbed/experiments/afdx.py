"""AFDX (the P4 paper's case study, section IV, and its Table I): two redundant networks, three
transmitting end systems and one receiving, a VL set with mixed BAGs and priorities, one babbling
end system at 10x its contract, and low-priority background VLs rising towards saturation. Per VL:
loss and one-way latency (min/median/p99/max) and jitter, for edgeflow's AFDX mode (user, tc,
xdp), the same VL table compiled to OpenFlow 1.3 and run on edgeflow and on Open vSwitch, the
Linux bridge as a switch that neither filters nor polices, and a direct veth pair; beside them the
latencies the paper publishes. Then the AFDX mode's frame rate against the OpenFlow fast path
(`afdx-rate`), and high-priority latency on an unpaced port behind a slow link saturated by
low-priority VLs (`afdx-priority`)."""

import time
from contextlib import ExitStack, contextmanager

from .. import afdx, loadgen, netns
from ..afdx import VL, AfdxNetwork, Receiver, send, vl_arg
from ..switches import EDGEFLOW_BIN, Edgeflow, LinuxBridge, OvsNetdev
from ..util import run_dir
from .common import (FLOORS, Table, bare_chain, bare_redirect, chain_columns, direct_pair, median, paired_latency,
                     plot, progress)

#: The paper's Table I: switch, processing latency (µs).
PUBLISHED = [
    ("Rockwell Collins AFDX switch", 5.0),
    ("HP E3800 without OpenFlow", 7.2),
    ("HP E3800 with OpenFlow", 7.7),
    ("HP E3800 with software switching (avg.)", 613.0),
    ("P4 software switch with DPDK", 24.0),
    ("P4 switch with NPU and CPU", 24.0),
    ("P4 switch with NPU, without CPU", 5.8),
    ("Switch with FPGA platform", 1.2),
]

RECEIVER = 4
#: (VL, source end system, BAG ms, frame size, priority). All go to end system 4.
FLOWS = [
    (1, 1, 1, 64, "high"),
    (2, 1, 4, 512, "low"),
    (3, 2, 2, 1518, "high"),
    (4, 2, 8, 300, "low"),
]
BABBLER = (5, 3, 2, 200)  # VL, source, BAG ms, size: offered at 10x
BACKGROUND_BASE = 100  # background VLs are 100, 101, ... from end system 3, BAG 1 ms, 1518 B
FULL_BACKGROUND = [0, 16, 64]
QUICK_BACKGROUND = [0, 16]

VARIANTS = ["edgeflow", "edgeflow-tc", "edgeflow-xdp", "edgeflow-openflow", "ovs-netdev", "linux-bridge"]


#: Virtual links of the frame-rate comparison: each admits 1000 frames/s (BAG 1 ms), so together
#: they admit more than this VM forwards, and a frame sent to each in turn is never policed.
RATE_VLS = 4000


def frame_rate(seconds, rounds):
    """64-byte frames at the generator's full speed (its XDP engine), from one host to another, on
    tc and xdp: edgeflow's AFDX mode with RATE_VLS links (each frame addressed to the next link, in
    a BAG-1-ms, 1-second-jitter contract) against its OpenFlow mode with one flow, in_port=1 to
    port 2, on the same frames. The two alternate `rounds` times and the medians are compared: on
    this VM the generator, the switch's kernel path and the receiver share two CPUs, and one pair
    of runs swings by ±15 %. The target: AFDX ≥ 0.9× OpenFlow.

    Each round also sends the same frames over a bare veth: a kernel switch drops none of them
    (the sender's XDP run carries each through it), so the rate is the whole chain's, and the
    switch's own time per frame is what the chain takes beyond the bare veth (`bare_chain`)."""
    table = Table("afdx-rate", "AFDX mode's frame rate against the OpenFlow fast path (64 B)",
                  ["datapath", "switch", "runs", "offered_pps", "received_pps", "loss_pct", "bottleneck",
                   "ratio_to_openflow", "bare_pps", "switch_ns_per_frame", "core_ratio_to_openflow", "policed"],
                  note=f"edgeflow-loadgen XDP sender at full speed, {rounds} runs of {seconds:g} s per switch, "
                       "alternating; medians. XDP receiver; frames carry AFDX addresses (end system 1 on network "
                       f"A, VLs 1-{RATE_VLS} in turn). `afdx`: {RATE_VLS} VLs 1 → 2 decided in the kernel; "
                       "`openflow`: one flow in_port=1 → output 2. The sender shares its CPU with the kernel path "
                       "its frames take, so the rate reflects the whole path's cost per frame. `bottleneck`: "
                       "`switch` where it dropped part of the offer, else `generator` (the chain's pace). "
                       "`bare_pps`: the same frames over a bare veth in the same rounds; `switch_ns_per_frame` = "
                       "1/received − 1/bare where nothing was dropped; `core_ratio_to_openflow`: OpenFlow's time "
                       "per frame over this one's.")
    vls = [VL(v, 1, [2], bag_ms=1, smin=64, smax=128, jitter_us=1_000_000) for v in range(1, RATE_VLS + 1)]
    cfg = run_dir("afdx") / "rate.toml"
    cfg.write_text(afdx.config_text(vls))
    dst = "03:00:00:00:00:01"
    src = "02:00:00:00:01:20"
    send_args = dict(size=64, rate=0, duration=seconds, send_engine="xdp", dst_mac=dst,
                     extra_send=["--src-mac", src, "--dst-spread", str(RATE_VLS)])
    netns.cleanup()
    with bare_chain("abare") as (bare_src, bare_dst), netns.Topology("aq") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        for h in topo.hosts:
            h.set_offload(tx="on", gro="off")
        loadgen.prepare_xdp_sender(h1)
        for datapath in ("tc", "xdp"):
            if Edgeflow.HOST_SETTINGS[datapath]:
                for h in topo.hosts:
                    h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
            got = {"openflow": [], "afdx": []}
            bare = []
            for i in range(rounds):
                progress(f"afdx: frame rate, bare veth, run {i + 1} of {rounds}")
                bare.append(loadgen.run(bare_src, bare_dst, **send_args)[1]["pps"])
                for kind in got:
                    progress(f"afdx: frame rate, {kind} on {datapath}, run {i + 1} of {rounds}")
                    if kind == "openflow":
                        sw = Edgeflow(topo.switch_ports, datapath=datapath, fail_mode="secure",
                                      log_name=f"afdx-rate-of-{datapath}")
                    else:
                        sw = Edgeflow(topo.switch_ports, datapath=datapath, extra=["--config", str(cfg)],
                                      log_name=f"afdx-rate-{datapath}")
                    with sw:
                        if kind == "openflow":
                            sw.ofctl("add-flow", "in_port=1,actions=output:2")
                        time.sleep(0.3)
                        sent, recv = loadgen.run(h1, h2, **send_args)
                        policed = 0
                        if kind == "afdx":
                            policed = sum(g["counters"]["policed"] for g in sw.stats()["mode_counters"]
                                          if g["name"] != "switch")
                    loss = 100.0 * (1 - recv["received"] / max(sent["sent"], 1))
                    got[kind].append((sent["achieved_pps"], recv["pps"], policed, loss))
            for kind, runs in got.items():
                # A run that delivered nothing is a failed run, not a rate: against an OpenFlow
                # baseline of 0 any AFDX rate would read as ahead of it.
                dead = [r for r in runs if r[1] <= 0]
                if dead:
                    raise RuntimeError(f"afdx frame rate: {kind} on {datapath} delivered nothing in "
                                       f"{len(dead)} of {len(runs)} runs")
            if min(bare) <= 0:
                raise RuntimeError("afdx frame rate: the bare veth delivered nothing in a run")
            bare_pps = median(bare)
            rows = {}
            for kind, runs in got.items():
                received, loss = median([r[1] for r in runs]), median([r[3] for r in runs])
                rows[kind] = table.add(datapath=datapath, switch=kind, runs=rounds,
                                       **chain_columns(median([r[0] for r in runs]), received, loss, bare_pps),
                                       policed=sum(r[2] for r in runs))
            for row in rows.values():
                row["ratio_to_openflow"] = row["received_pps"] / rows["openflow"]["received_pps"]
                mine, of = row["switch_ns_per_frame"], rows["openflow"]["switch_ns_per_frame"]
                row["core_ratio_to_openflow"] = round(of / mine, 3) if mine and of else None
    return table


#: Links of the processing table: frames go to each in turn, at 2 000/s in all, 250/s each
#: (BAG 1 ms admits 1 000/s): none is policed.
PROCESSING_VLS = 8


def processing(sizes, seconds, rounds, senders):
    """What the AFDX mode adds to a frame's latency in the kernel (the issue's "over a direct veth
    pair"), measured as LESS's processing table is: loadgen frames at 2 000/s, each run through
    the switch paired with one over a direct veth just before it, with each of loadgen's
    `senders` (see testbed/experiments/less.py: `xdp` hands the port a frame as a NIC driver
    does; `socket` as a packet socket does, which a veth copies before XDP may see it)."""
    table = Table("afdx-processing", "AFDX processing latency through one switch (µs), against a direct veth",
                  ["datapath", "sender", "size", "rounds", "through_p50_us", "through_p99_us", "direct_p50_us",
                   "processing_us", "lost"],
                  note=f"edgeflow-loadgen frames at 2000/s to {PROCESSING_VLS} VLs in turn (BAG 1 ms each: none "
                       "policed), end system 1 on network A, socket receiver; `direct`: the same frames over one "
                       "veth, run just before each run through the switch; medians of the rounds, "
                       "`processing_us` the median of their differences. tc-mirred / xdp-redirect: no switch, the "
                       "kernel's own redirect in its place, frames unchanged: the floor under TC and XDP.")
    vls = [VL(v, 1, [2], bag_ms=1, smin=64, smax=1518, jitter_us=1000) for v in range(1, PROCESSING_VLS + 1)]
    cfg = run_dir("afdx") / "processing.toml"
    cfg.write_text(afdx.config_text(vls))
    extra = ["--src-mac", "02:00:00:00:01:20", "--dst-spread", str(PROCESSING_VLS)]
    netns.cleanup()
    direct_src, direct_dst = direct_pair("adir")

    def stream(src, dst, size, sender):
        return loadgen.run(src, dst, size=size, rate=2000, duration=seconds / rounds, send_engine=sender,
                           recv_engine="socket", dst_mac="03:00:00:00:00:01", extra_send=extra)[1]
    def rows(datapath, h1, h2):
        for size in sizes:
            progress(f"afdx: processing through one switch, {datapath}, {size} B")
            for sender in senders:
                def direct():
                    # The sink receives as it does through the switch: with NAPI (GRO on) where
                    # XDP frames arrive.
                    on = sender == "xdp" or "xdp" in datapath
                    netns.sh("ip", "netns", "exec", direct_dst.name, "ethtool", "-K", "eth0", "gro", "on" if on else "off")
                    return stream(direct_src, direct_dst, size, sender)
                table.add(datapath=datapath, sender=sender, size=size,
                          **paired_latency(direct, lambda: stream(h1, h2, size, sender), rounds))
    try:
        with netns.Topology("ap") as topo:
            h1, h2 = topo.add_host(), topo.add_host()
            loadgen.prepare_xdp_sender(h1)
            for datapath in ("tc", "xdp"):
                for h in topo.hosts:
                    h.set_offload(**(Edgeflow.HOST_SETTINGS[datapath] or {"tx": "on", "gro": "off"}))
                with Edgeflow(topo.switch_ports, datapath=datapath, extra=["--config", str(cfg)],
                              log_name=f"afdx-processing-{datapath}"):
                    time.sleep(0.3)
                    rows(datapath, h1, h2)
            for floor in FLOORS:
                h2.set_offload(gro="on" if floor == "xdp-redirect" else "off")
                with bare_redirect(floor, *topo.switch_ports):
                    rows(floor, h1, h2)
    finally:
        for h in (direct_src, direct_dst):
            netns.sh("ip", "netns", "del", h.name, check=False)
    return table


def vl_table(n_background):
    # Conforming VLs get a tolerance covering this VM's path jitter (docs/afdx.md).
    vls = [VL(v, src, [RECEIVER], bag_ms=bag, smax=max(size, 64), jitter_us=2000, priority=prio)
           for v, src, bag, size, prio in FLOWS]
    v, src, bag, size = BABBLER
    vls.append(VL(v, src, [RECEIVER], bag_ms=bag, smax=size, jitter_us=500))
    vls += [VL(BACKGROUND_BASE + i, 3, [RECEIVER], bag_ms=1, smax=1518, jitter_us=2000)
            for i in range(n_background)]
    return vls


@contextmanager
def switches_for(variant, net, vls):
    """A switch per network running the VL table as `variant` does."""
    with ExitStack() as stack:
        ovs = None
        for n in net.networks:
            ports = net.ports(n)
            if variant.startswith("edgeflow") and variant != "edgeflow-openflow":
                datapath = variant.split("-")[1] if "-" in variant else "user"
                if Edgeflow.HOST_SETTINGS[datapath]:
                    net.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
                cfg = net.write_config(vls, f"bench-{n}", network=n)
                stack.enter_context(Edgeflow(ports, datapath=datapath, extra=["--config", str(cfg)],
                                             log_name=f"bench-afdx-{variant}-{n}"))
            elif variant in ("edgeflow-openflow", "ovs-netdev"):
                cfg = net.write_config(vls, f"bench-{n}")
                script = run_dir("afdx") / f"bench-{n}.sh"
                script.write_text(netns.sh(EDGEFLOW_BIN, "afdx", "compile", str(cfg), "--network", n).stdout)
                if variant == "ovs-netdev" and ovs is not None:
                    target = ovs.add_bridge(f"ef-afdx{n}", ports)
                else:
                    if variant == "ovs-netdev":
                        sw = ovs = OvsNetdev(ports, fail_mode="secure", log_name="bench-ovs-afdx", bridge=f"ef-afdx{n}")
                    else:
                        sw = Edgeflow(ports, fail_mode="secure", log_name=f"bench-afdx-openflow-{n}")
                    stack.enter_context(sw)
                    target = sw.target
                netns.sh("sh", str(script), target)
            else:
                stack.enter_context(LinuxBridge(ports, dev=f"ef-afdxbr{n}"))
        yield


def run_load(net, n_background, seconds, sender_side=False):
    """One run: every end system transmits, end system 4 receives on A and B. Returns (receiver
    report, {VL: send times}, {network: babbler's arrival times at that switch}). `sender_side`:
    the babbler's frames are tapped as its end system sends them (an XDP switch takes them before
    any tap on its side), the babbler sending through its qdisc so that the tap sees them."""
    es = net.end_systems
    rx = Receiver(es[RECEIVER - 1])
    tap = afdx.IngressTap(es[BABBLER[1] - 1], networks=net.networks, sender_side=sender_side)
    try:
        by_source = {}
        for v, src, bag, size, _ in FLOWS:
            by_source.setdefault(src, []).append(vl_arg(v, bag, size))
        v, src, bag, size = BABBLER
        by_source.setdefault(src, []).append(vl_arg(v, bag, size, bag * 100))
        by_source[3] += [vl_arg(BACKGROUND_BASE + i, 1, 1518) for i in range(n_background)]
        logs = {s: run_dir("afdx") / f"bench-send-{s}.log" for s in by_source}
        procs = [send(es[s - 1], vls, seconds, jitter_us=100, log=logs[s], seed=s, background=True,
                      visible=sender_side and s == BABBLER[1]) for s, vls in by_source.items()]
        for p in procs:
            _, err = p.communicate(timeout=seconds + 60)
            if p.returncode != 0:
                raise RuntimeError(f"es-send: {err.strip()}")
        got = rx.result()
        arrivals = {n: by_vl.get(BABBLER[0], []) for n, by_vl in tap.times().items()}
    finally:
        rx.kill()
        tap.kill()
    sent = {}
    for log in logs.values():
        sent.update(afdx.read_log(log))
    return got, sent, arrivals


#: The slow-port comparison: end system 4 behind a link of SLOW_MBPS, offered about twice it by
#: SLOW_BACKGROUND low-priority VLs of 1518 B every 1 ms; and behind a link of FAST_MBPS, offered
#: 1.2 times it (as much as the sender makes here) by FAST_BACKGROUND.
SLOW_MBPS, SLOW_BACKGROUND = 100, 16
FAST_MBPS, FAST_BACKGROUND = 500, 50


def slow_port_priority(seconds, rounds, cases):
    """High-priority latency on a port that nothing in the config paces, under saturating
    low-priority load (issue 34, item 4; `afdx.priority_on_slow_port`): end system 4 is behind a
    SLOW_MBPS link, whose far end (the receiver) carries frames one after another at that speed
    and loses them past a ring of 1000. `cases`: (link Mbit/s, datapath, pacing, egress_timing). Pacing
    `link` is the default: the port paced to its link, the backlog in its queues; `none` is as
    before (`pace_to_link_speed = false`), the backlog in the link's ring. Medians over `rounds`."""
    on_wire = (1518 + 20) * 8 / SLOW_MBPS
    table = Table("afdx-priority", f"AFDX: high-priority latency on an unpaced port behind a {SLOW_MBPS} or "
                  f"{FAST_MBPS} Mbit/s link, saturated by low-priority VLs",
                  ["link_mbps", "datapath", "pacing", "timing", "runs", "unloaded_p50_us", "unloaded_p99_us", "loaded_p50_us",
                   "loaded_p99_us", "added_p50_us", "ratio_to_unloaded", "loaded_lost", "control_p50_us",
                   "link_ring_drops", "queue_full", "kernel_held", "kept_for_priority"],
                  note=f"{rounds} run(s) of {seconds:g} s per row, medians of the per-run medians and p99s. VL 1 "
                       "(high, 64 B) alone, then VL 2 (high) and VL 3 (low, `control`) while end system 2 offers "
                       f"{SLOW_BACKGROUND * 1538 * 8 / 1000:.0f} Mbit/s of 1518-byte low-priority VLs to a {SLOW_MBPS} "
                       f"Mbit/s link ({FAST_BACKGROUND * 1538 * 8 / 1000:.0f} to a {FAST_MBPS} Mbit/s one). Latency is to the "
                       "frame's last bit at the far end of the link. `pacing`: `link` (the default: the port paced to "
                       "its link's speed) or `none` (`pace_to_link_speed = false`, as before); `timing`: the switch's "
                       "`egress_timing`, which sets how far ahead the pacer hands the interface frames to cover its "
                       "wake-ups (sleep 100 µs, fifo 40, busy 1). A low-priority frame "
                       f"already on the wire takes {on_wire:.0f} µs at {SLOW_MBPS} Mbit/s, which no priority takes back: "
                       "`added_p50_us` is what "
                       "load adds. `link_ring_drops`: frames the link's ring had no room for; `queue_full`: frames the "
                       "switch's queues had no room for; `kernel_held`/`kept_for_priority`: links the kernel decides, "
                       "and links kept in userspace because their port needs priority.")
    runs = {}
    for i in range(rounds):
        for mbps, datapath, pacing, timing in cases:
            progress(f"afdx: {mbps} Mbit/s port, {datapath}, pacing {pacing}, {timing} timing, run {i + 1} of {rounds}")
            netns.cleanup()
            n_background = SLOW_BACKGROUND if mbps == SLOW_MBPS else FAST_BACKGROUND
            got, sent, report = afdx.priority_on_slow_port(datapath, mbps, n_background, seconds,
                                                           pace_to_link=pacing == "link", tag="bq", timing=timing)
            links = (report["fast_path"] or {}).get("links") or {}
            vls = got["vls"]
            runs.setdefault((mbps, datapath, pacing, timing), []).append(dict(
                u50=vls[1]["latency_us"]["p50"], u99=vls[1]["latency_us"]["p99"],
                l50=vls[2]["latency_us"]["p50"], l99=vls[2]["latency_us"]["p99"], lost=sent[2] - vls[2]["delivered"],
                c50=vls[3]["latency_us"]["p50"], wire=got["wire_drops"], full=report["drops"]["queue_full"],
                held=links.get("held", "-"),
                kept=links.get("kept_for_priority", "-")))
    for (mbps, datapath, pacing, timing), rs in runs.items():
        m = {k: median([r[k] for r in rs]) for k in ("u50", "u99", "l50", "l99", "c50")}
        table.add(link_mbps=mbps, datapath=datapath, pacing=pacing, timing=timing, runs=len(rs), unloaded_p50_us=m["u50"], unloaded_p99_us=m["u99"],
                  loaded_p50_us=m["l50"], loaded_p99_us=m["l99"], added_p50_us=m["l50"] - m["u50"],
                  ratio_to_unloaded=m["l50"] / max(m["u50"], 1e-9), loaded_lost=sum(r["lost"] for r in rs),
                  control_p50_us=m["c50"], link_ring_drops=sum(r["wire"] for r in rs),
                  queue_full=sum(r["full"] for r in rs),
                  kernel_held=rs[-1]["held"], kept_for_priority=rs[-1]["kept"])
    return table


def direct_latency(seconds, settings=None):
    """Two end systems on one veth pair (no switch): the floor every switch adds to. `settings`:
    offloads for both ends (an XDP switch's end systems run with GRO on, whose NAPI receive costs
    them 1-2 µs a frame: the floor that switch adds to)."""
    netns.cleanup()
    a, b = "ef-afdxd1", "ef-afdxd2"
    for ns in (a, b):
        netns.sh("ip", "netns", "add", ns)
    try:
        netns.sh("ip", "link", "add", "net_a", "netns", a, "type", "veth", "peer", "name", "net_a", "netns", b)
        for ns in (a, b):
            netns.sh("ip", "-n", ns, "link", "set", "net_a", "up")
            for k, v in (settings or {}).items():
                netns.sh("nsenter", f"--net=/run/netns/{ns}", "ethtool", "-K", "net_a", k, v, check=False)
        src, dst = afdx.EndSystem(1, a), afdx.EndSystem(2, b)
        rx = Receiver(dst, networks=("a",))
        try:
            send(src, [vl_arg(1, 1, 64), vl_arg(3, 2, 1518)], seconds, networks=("a",), jitter_us=100)
            return rx.result()["vls"]
        finally:
            rx.kill()
    finally:
        for ns in (a, b):
            netns.sh("ip", "netns", "del", ns, check=False)


def run(out, quick=False, switches=None):
    seconds = 0.6 if quick else 3.0
    loads = QUICK_BACKGROUND if quick else FULL_BACKGROUND
    wanted = {"edgeflow", "edgeflow-tc", "edgeflow-xdp", "ovs-netdev", "linux-bridge"}
    if switches is not None:
        wanted = set(switches)
    variants = [v for v in VARIANTS if v in wanted or (v == "edgeflow-openflow" and "edgeflow" in wanted)]
    per_vl = Table("afdx", "AFDX: per-VL loss, one-way latency and jitter (µs), two redundant networks",
                   ["switch", "background_vls", "vl", "priority", "bag_ms", "size", "sent", "delivered", "lost",
                    "lat_min_us", "lat_p50_us", "lat_p99_us", "lat_max_us", "jitter_us"],
                   note=f"edgeflow-loadgen es-send/es-recv, {seconds} s per run; background VLs are 1518 B "
                        "every 1 ms each, low priority, to the same receiver. `edgeflow` is the AFDX mode; "
                        "`edgeflow-openflow` and `ovs-netdev` run `edgeflow afdx compile`'s program; the Linux "
                        "bridge neither filters nor polices. `direct` is one veth pair, no switch; `direct-gro` the same "
                        "with the end systems set as edgeflow-xdp's are (GRO on, tx checksum off).")
    policing = Table("afdx-policing", "AFDX: a babbler at 10x its contract (BAG 2 ms, 200 B, J 0.5 ms)",
                     ["switch", "background_vls", "offered", "account_admits", "contract_a", "contract_b",
                      "arrived_a", "arrived_b"],
                     note="`account_admits`: part 7's algorithm run offline on the send times; `contract_a/b`: the "
                          "fewest and most frames the contract allows over the times the frames reached each switch "
                          "(afdx.contract_admits: from BAG, jitter and Smax, no policing code; times from a tap "
                          "beside the switch's socket, or for edgeflow-xdp, whose XDP program runs before any tap "
                          "there, on the babbler's own interfaces as it sends).")
    published = Table("afdx-published", "Processing latency published in the P4 paper (Table I)",
                      ["switch", "latency_us"], note="From the paper; measured on hardware with a network analyser.")
    for name, lat in PUBLISHED:
        published.add(switch=name, latency_us=lat)

    for name, settings in (("direct", None), ("direct-gro", Edgeflow.HOST_SETTINGS["xdp"])):
        progress(f"afdx: {name} veth pair")
        for v, r in sorted(direct_latency(seconds, settings).items()):
            lat = r["latency_us"]
            per_vl.add(switch=name, background_vls=0, vl=v, priority="-", bag_ms={1: 1, 3: 2}[v],
                       size={1: 64, 3: 1518}[v], sent=r["delivered"] + r["lost"], delivered=r["delivered"],
                       lost=r["lost"], lat_min_us=lat["min"], lat_p50_us=lat["p50"], lat_p99_us=lat["p99"],
                       lat_max_us=lat["max"], jitter_us=r["jitter_us"])
    netns.cleanup()
    with AfdxNetwork("bx", RECEIVER) as net:
        for variant in variants:
            for n_bg in loads:
                vls = vl_table(max(loads))
                progress(f"afdx: {variant}, {n_bg} background VLs")
                with switches_for(variant, net, vls):
                    time.sleep(0.2)
                    got, sent, arrivals = run_load(net, n_bg, seconds, sender_side=variant == "edgeflow-xdp")
                for v, src, bag, size, prio in FLOWS:
                    r = got["vls"].get(v)
                    if r is None:
                        continue
                    lat = r["latency_us"]
                    per_vl.add(switch=variant, background_vls=n_bg, vl=v, priority=prio, bag_ms=bag, size=size,
                               sent=len(sent[v]), delivered=r["delivered"], lost=len(sent[v]) - r["delivered"],
                               lat_min_us=lat["min"], lat_p50_us=lat["p50"], lat_p99_us=lat["p99"],
                               lat_max_us=lat["max"], jitter_us=r["jitter_us"])
                v, _, bag, size = BABBLER
                times = [t for _, t, _ in sent[v]]
                r = got["vls"].get(v, {"received": [0, 0]})
                at = ["-".join(map(str, afdx.contract_admits(a, size, bag, size, 500))) if a else "" for a in
                      (arrivals.get(0, []), arrivals.get(1, []))]
                policing.add(switch=variant, background_vls=n_bg, offered=len(times),
                             account_admits=afdx.police_offline(times, [size] * len(times), bag, size, 500),
                             contract_a=at[0], contract_b=at[1], arrived_a=r["received"][0],
                             arrived_b=r["received"][1])
    rate = frame_rate(0.5 if quick else 2.0, 3 if quick else 5)
    slow_cases = [(SLOW_MBPS, d, "link", "sleep") for d in ("user", "tc", "xdp")]
    slow_cases += [(SLOW_MBPS, "user", "none", "sleep"), (FAST_MBPS, "user", "link", "busy")]
    if not quick:
        slow_cases += [(SLOW_MBPS, "user", "link", t) for t in ("fifo", "busy")]
        slow_cases += [(SLOW_MBPS, d, "none", "sleep") for d in ("tc", "xdp")]
        slow_cases += [(FAST_MBPS, d, "link", t) for d in ("user", "tc", "xdp") for t in ("sleep", "busy")
                       if (d, t) != ("user", "busy")]
    paced = slow_port_priority(0.6 if quick else 2.0, 1 if quick else 3, slow_cases)
    proc = processing([64, 1518], 0.6 if quick else 1.5, 1 if quick else 3, ("xdp",) if quick else ("xdp", "socket"))
    for t in (per_vl, policing, published, rate, paced, proc):
        t.write(out)

    def draw(plt):
        rows = [r for r in per_vl.rows if r["vl"] == 1]
        names = list(dict.fromkeys(r["switch"] for r in rows))
        width = 0.8 / len(loads)
        for li, n_bg in enumerate(loads):
            xs = [r for r in rows if r["background_vls"] == n_bg and (r["switch"] != "direct" or li == 0)]
            plt.bar([names.index(r["switch"]) + width * li for r in xs], [r["lat_p50_us"] for r in xs], width=width,
                    label=f"{n_bg} background VLs")
        for label, lat, style in (("P4 software switch (DPDK), paper", 24.0, "--"),
                                  ("Rockwell Collins AFDX switch, paper", 5.0, ":"),
                                  ("FPGA switch, paper", 1.2, "-.")):
            plt.axhline(lat, color="grey", linestyle=style, linewidth=1, label=label)
        plt.xticks(range(len(names)), names, rotation=30, fontsize=7)
        plt.yscale("log")
        plt.ylabel("median one-way latency (µs)")
        plt.title("AFDX: VL 1 (high priority, 64 B, BAG 1 ms)")
        plt.legend(fontsize=7)
    plot(out / "afdx.png", draw)
    return [per_vl, policing, published, rate, paced, proc]
