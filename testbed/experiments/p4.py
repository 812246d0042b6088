"""The seed paper's own system (section IV, Table I, Figures 7-8): an AFDX switch written in P4.
Here the paper's program (examples/p4/afdx_switch.p4) runs on edgeflow's P4 target against
edgeflow's native AFDX mode, on each datapath: userspace (the software target), tc and xdp (the
kernel back end, the program compiled to BPF). Two tables: the frame rate of 64-byte frames at
the generator's full speed (`p4`), and what each adds to a frame's latency against a direct
veth (`p4-processing`), beside the latencies the paper publishes for its P4 switches. A third
(`p4-v1model`) holds two v1model programs written as BMv2's users write them, an IPv4 router and
an L2 switch, against edgeflow's OpenFlow pipeline with flows that forward the same frames the
same way, on each datapath, and a fourth (`p4-v1model-processing`) the router's latency."""

import ipaddress
import random
import time

from .. import afdx, loadgen, netns
from ..afdx import VL
from ..switches import Edgeflow
from ..util import ROOT, run_dir
from .afdx import PUBLISHED
from .common import (Table, bare_chain, bottleneck_of, chain_columns, direct_pair, median, paired_latency, plot,
                     progress)

PROGRAM = ROOT / "examples" / "p4" / "afdx_switch.p4"
V1MODEL_ROUTER = ROOT / "examples" / "p4" / "v1model_router.p4"
V1MODEL_L2 = ROOT / "examples" / "p4" / "v1model_l2_switch.p4"
#: The router's routes: the receiver's /24 among routes of every length from /8 to /32 elsewhere,
#: so that a lookup passes longer prefixes before its own (the program's table holds 1 024).
ROUTES = 1000
#: The L2 switch's addresses, frames sent to each in turn (`--dst-spread`).
L2_MACS = 4000
ROUTER_MAC = "02:00:00:00:00:fe"
FIRST_L2_MAC = "02:00:00:01:00:00"
DATAPATHS = ("user", "tc", "xdp")
#: The frame-rate links: each admits 1 000 frames/s (BAG 1 ms, 1 s of jitter), so a frame sent to
#: each in turn is never policed, and the table is as large as a real network's.
RATE_VLS = 4000
#: The latency links: frames go to each in turn at 2 000/s in all, none policed.
PROCESSING_VLS = 8
HIGH_QUEUE, LOW_QUEUE = 7, 0
SRC_MAC = "02:00:00:00:01:20"  # end system 1 on network A
FIRST_VL_MAC = "03:00:00:00:00:01"


def p4_config_text(vls):
    """The same links as the AFDX mode's `config_text(vls)`, as the P4 program's table entries:
    (input port, VL id) → forward(group of its outputs, queue of its priority, its own account,
    BAG and jitter in µs, smin, smax)."""
    text = f'mode = "p4"\n\n[p4]\nprogram = "{PROGRAM}"\n'
    groups = {}
    for account, vl in enumerate(vls):
        group = groups.setdefault(tuple(vl.dests), len(groups) + 1)
        queue = HIGH_QUEUE if vl.priority == "high" else LOW_QUEUE
        args = [group, queue, account, vl.bag_ms * 1000, vl.jitter_us, vl.smin, vl.smax]
        text += ('[[p4.entry]]\ntable = "AfdxIngress.tbl_forward_virtual_link"\n'
                 f'match = [{vl.source}, {vl.id}]\naction = "forward"\nargs = {args}\n')
    for ports, group in groups.items():
        text += f"[[p4.group]]\nid = {group}\nports = {list(ports)}\n"
    return text


def configs(name, vls):
    """{"afdx": path, "p4": path}: the links as each mode reads them."""
    out = {}
    for kind, text in (("afdx", afdx.config_text(vls)), ("p4", p4_config_text(vls))):
        out[kind] = run_dir("p4") / f"{name}-{kind}.toml"
        out[kind].write_text(text)
    return out


def switch(datapath, ports, cfg, log_name):
    return Edgeflow(ports, datapath=datapath, extra=["--config", str(cfg)], log_name=log_name)


def set_hosts(hosts, datapath):
    for h in hosts:
        h.set_offload(**(Edgeflow.HOST_SETTINGS[datapath] or {"tx": "on", "gro": "off"}))


def frame_rate(seconds, rounds):
    """64-byte frames at the generator's full speed (its XDP engine), addressed to RATE_VLS links
    in turn, through the native AFDX mode and the P4 program alternately, `rounds` times per
    datapath; medians (one pair of runs on this VM swings by ±15 %).

    Each round also sends the same frames over a bare veth (`bare_chain`): on tc and xdp the
    switch drops nothing, because the sender's XDP run carries each frame through the switch's
    kernel program and on to the receiver in its own softirq, so the offered rate is itself the
    chain's (5.3-6.9 Mpps bare, 2.7-4.2 through a switch here) and a ratio of two such rates
    mixes the generator's own cost into both. Taking the bare chain's time per frame out leaves
    the switch's (`switch_ns_per_frame`). Where the switch dropped part of the offer (userspace)
    the received rate is the switch's own."""
    table = Table("p4", "The paper's P4 AFDX switch against edgeflow's AFDX mode: frame rate (64 B)",
                  ["datapath", "switch", "runs", "offered_pps", "received_pps", "loss_pct", "bottleneck",
                   "ratio_to_afdx", "bare_pps", "switch_ns_per_frame", "core_ratio_to_afdx", "kernel_share"],
                  note=f"edgeflow-loadgen XDP sender at full speed, {rounds} runs of {seconds:g} s per switch, "
                       f"alternating; medians. XDP receiver. {RATE_VLS} VLs 1 → 2 (BAG 1 ms, 1 s jitter: none "
                       "policed), frames from end system 1 on network A to each VL in turn. `afdx`: the native "
                       "mode; `p4`: examples/p4/afdx_switch.p4 (software target on user, the kernel back end on "
                       "tc and xdp). `bottleneck`: `switch` where it dropped part of the offer, so that "
                       "`received_pps` is its own rate; `generator` where it dropped nothing: on tc and xdp the "
                       "sender's XDP run carries every frame through the switch's kernel program, so the offer "
                       "is the rate of sender, switch and receiver on one core. `bare_pps`: the same frames over "
                       "a bare veth, in the same rounds; `switch_ns_per_frame` = 1/received − 1/bare for rows "
                       "that dropped nothing (the switch's own time per frame); `core_ratio_to_afdx`: the native "
                       "mode's time per frame over this one's, the ratio of the rates each would forward with a "
                       "core to itself. `kernel_share`: of the frames the p4 program decided, the share the "
                       "kernel did.")
    vls = [VL(v, 1, [2], bag_ms=1, smin=64, smax=128, jitter_us=1_000_000) for v in range(1, RATE_VLS + 1)]
    cfg = configs("rate", vls)
    send_args = dict(size=64, rate=0, duration=seconds, send_engine="xdp", dst_mac=FIRST_VL_MAC,
                     extra_send=["--src-mac", SRC_MAC, "--dst-spread", str(RATE_VLS)])
    netns.cleanup()
    with bare_chain("pbare") as (bare_src, bare_dst), netns.Topology("pq") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        loadgen.prepare_xdp_sender(h1)
        for datapath in DATAPATHS:
            set_hosts(topo.hosts, datapath)
            got = {"afdx": [], "p4": []}
            bare = []
            for i in range(rounds):
                progress(f"p4: frame rate, bare veth, run {i + 1} of {rounds}")
                sent, recv = loadgen.run(bare_src, bare_dst, **send_args)
                bare.append(recv["pps"])
                for kind in got:
                    progress(f"p4: frame rate, {kind} on {datapath}, run {i + 1} of {rounds}")
                    with switch(datapath, topo.switch_ports, cfg[kind], f"p4-rate-{kind}-{datapath}") as sw:
                        time.sleep(0.3)
                        sent, recv = loadgen.run(h1, h2, **send_args)
                        kernel = decided = 0
                        if kind == "p4":
                            p4 = {g["name"]: g["counters"] for g in sw.stats()["mode_counters"]}["p4"]
                            kernel, decided = p4["kernel_frames"], p4["frames"]
                    loss = 100.0 * (1 - recv["received"] / max(sent["sent"], 1))
                    got[kind].append((sent["achieved_pps"], recv["pps"], kernel, decided, loss))
            for kind, runs in got.items():
                if any(r[1] <= 0 for r in runs):
                    raise RuntimeError(f"p4 frame rate: {kind} on {datapath} delivered nothing in a run")
            if min(bare) <= 0:
                raise RuntimeError("p4 frame rate: the bare veth delivered nothing in a run")
            bare_pps = median(bare)
            rows = {}
            for kind, runs in got.items():
                received, loss = median([r[1] for r in runs]), median([r[4] for r in runs])
                rows[kind] = table.add(datapath=datapath, switch=kind, runs=rounds,
                                       **chain_columns(median([r[0] for r in runs]), received, loss, bare_pps),
                                       kernel_share=sum(r[2] for r in runs) / max(1, sum(r[3] for r in runs)))
            for row in rows.values():
                row["ratio_to_afdx"] = row["received_pps"] / rows["afdx"]["received_pps"]
                mine, native = row["switch_ns_per_frame"], rows["afdx"]["switch_ns_per_frame"]
                row["core_ratio_to_afdx"] = round(native / mine, 3) if mine and native else None
    return table


def routes(receiver_ip, n):
    """(prefix, length) pairs: the receiver's /24 and n-1 random others of /8 to /32 outside 10/8,
    the same every run."""
    r = random.Random(53)
    own = ipaddress.ip_network(f"{receiver_ip}/24", strict=False)
    found = {(int(own.network_address), 24)}
    while len(found) < n:
        length = r.randint(8, 32)
        first = r.choice([o for o in range(11, 224) if o != 127])
        addr = (first << 24 | r.getrandbits(24)) & ~((1 << (32 - length)) - 1) & 0xFFFFFFFF
        found.add((addr, length))
    return sorted(found, key=lambda p: (-p[1], p[0]))


def v1model_configs(receiver, sender_mac):
    """{("router"|"l2", "p4"|"openflow"): config path or flow file}: each program's entries and
    the OpenFlow flows that forward alike. Router: an LPM route per prefix (OpenFlow: a flow of
    the prefix's length as priority), each rewriting the MACs and lowering the TTL; routes not the
    receiver's lead back out of port 1. L2: an exact entry per address to port 2 (OpenFlow: a
    `dl_dst` flow), and a flood for the rest (P4: multicast group 1)."""
    out = {}
    head = 'mode = "p4"\n'
    text, flows = head + f'[p4]\nprogram = "{V1MODEL_ROUTER}"\n', []
    own = int(ipaddress.ip_address(receiver.addr)) >> 8 << 8
    for addr, length in routes(receiver.addr, ROUTES):
        port, mac = (2, receiver.mac) if (addr, length) == (own, 24) else (1, sender_mac)
        prefix = f"{ipaddress.ip_address(addr)}/{length}"
        text += (f'[[p4.entry]]\ntable = "RouterIngress.ipv4_lpm"\nmatch = ["{prefix}"]\n'
                 f'action = "ipv4_forward"\nargs = ["{mac}", {port}]\n')
        flows.append(f"priority={length},ip,nw_dst={prefix},actions=mod_dl_src:{ROUTER_MAC},mod_dl_dst:{mac},"
                     f"dec_ttl,output:{port}")
    out[("router", "p4")], out[("router", "openflow")] = text, "\n".join(flows) + "\n"
    text = head + f'[p4]\nprogram = "{V1MODEL_L2}"\n[[p4.group]]\nid = 1\nports = [1, 2]\n'
    flows = ["priority=0,actions=FLOOD"]
    first = int(FIRST_L2_MAC.replace(":", ""), 16)
    for i in range(L2_MACS):
        mac = ":".join(f"{first + i:012x}"[k:k + 2] for k in range(0, 12, 2))
        text += f'[[p4.entry]]\ntable = "L2Ingress.dmac"\nmatch = ["{mac}"]\naction = "forward"\nargs = [2]\n'
        flows.append(f"priority=10,dl_dst={mac},actions=output:2")
    out[("l2", "p4")], out[("l2", "openflow")] = text, "\n".join(flows) + "\n"
    paths = {}
    for (program, kind), body in out.items():
        paths[(program, kind)] = run_dir("p4") / f"v1model-{program}-{kind}.{'toml' if kind == 'p4' else 'flows'}"
        paths[(program, kind)].write_text(body)
    return paths


def v1model_switch(kind, datapath, topo, paths, program, name):
    """The v1model program `program` on `datapath` (`kind` "p4"), or the OpenFlow pipeline there
    with the flows that forward alike (`kind` "openflow", installed once it listens)."""
    if kind == "p4":
        return switch(datapath, topo.switch_ports, paths[(program, kind)], name)
    return Edgeflow(topo.switch_ports, datapath=datapath, fail_mode="secure", log_name=name)


def v1model_rate(seconds, rounds):
    """64-byte frames at the generator's full speed through each v1model program and through
    the OpenFlow pipeline's equivalent flows, alternately, `rounds` times per datapath; medians.
    Userspace: the software target against the OpenFlow userspace pipeline; tc and xdp: the
    kernel back end against the OpenFlow fast path, where the generator bounds the chain and the
    switch's own time per frame (`chain_columns`) is what compares them."""
    table = Table("p4-v1model", "v1model programs against the OpenFlow pipeline's same forwarding: frame rate (64 B)",
                  ["program", "datapath", "switch", "runs", "offered_pps", "received_pps", "loss_pct", "bottleneck",
                   "ratio_to_openflow", "bare_pps", "switch_ns_per_frame", "core_ratio_to_openflow",
                   "kernel_share"],
                  note=f"edgeflow-loadgen XDP sender at full speed, {rounds} runs of {seconds:g} s per switch, "
                       "alternating; medians. XDP receiver. `router`: examples/p4/v1model_router.p4 with "
                       f"{ROUTES} LPM routes of /8 to /32 (the frames' destination under a /24, routes of every "
                       "longer length beside it), each frame's MACs rewritten, TTL lowered and checksum rewritten; "
                       "`openflow`: one flow per route, its prefix length as priority, mod_dl_src, mod_dl_dst, "
                       f"dec_ttl, output. `l2`: examples/p4/v1model_l2_switch.p4 with {L2_MACS} addresses, the "
                       "frames sent to each in turn; `openflow`: a dl_dst flow per address over a flood. On tc "
                       "and xdp the P4 program is the kernel back end's and the OpenFlow flows the fast path's. "
                       "`bare_pps`, `switch_ns_per_frame` as in the `p4` table; `core_ratio_to_openflow`: the "
                       "OpenFlow switch's time per frame over the program's. `kernel_share`: of the frames the "
                       "program decided, the share the kernel did.")
    netns.cleanup()
    with bare_chain("pvbare") as (bare_src, bare_dst), netns.Topology("pv") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        loadgen.prepare_xdp_sender(h1)
        paths = v1model_configs(h2, h1.mac)
        sends = {"router": dict(dst_mac=ROUTER_MAC, extra_send=[]),
                 "l2": dict(dst_mac=FIRST_L2_MAC, extra_send=["--dst-spread", str(L2_MACS)])}
        for datapath in DATAPATHS:
            set_hosts(topo.hosts, datapath)
            for program, send in sends.items():
                got = {"openflow": [], "p4": []}
                bare = []
                for i in range(rounds):
                    progress(f"p4: v1model {program}, bare veth, run {i + 1} of {rounds}")
                    bare.append(loadgen.run(bare_src, bare_dst, size=64, rate=0, duration=seconds,
                                            send_engine="xdp", **send)[1]["pps"])
                    for kind in got:
                        progress(f"p4: v1model {program}, {kind} on {datapath}, run {i + 1} of {rounds}")
                        name = f"p4-v1model-{program}-{kind}-{datapath}"
                        with v1model_switch(kind, datapath, topo, paths, program, name) as sw:
                            if kind == "openflow":
                                sw.ofctl("add-flows", str(paths[(program, kind)]))
                            time.sleep(0.3)
                            sent, recv = loadgen.run(h1, h2, size=64, rate=0, duration=seconds, send_engine="xdp",
                                                     **send)
                            kernel = decided = 0
                            if kind == "p4":
                                p4 = {g["name"]: g["counters"] for g in sw.stats()["mode_counters"]}["p4"]
                                kernel, decided = p4["kernel_frames"], p4["frames"]
                        loss = 100.0 * (1 - recv["received"] / max(sent["sent"], 1))
                        got[kind].append((sent["achieved_pps"], recv["pps"], loss, kernel, decided))
                for kind, runs in got.items():
                    if any(r[1] <= 0 for r in runs):
                        raise RuntimeError(f"p4 v1model: {program} {kind} on {datapath} delivered nothing in a run")
                if min(bare) <= 0:
                    raise RuntimeError("p4 v1model: the bare veth delivered nothing in a run")
                rows = {}
                for kind, runs in got.items():
                    rows[kind] = table.add(
                        program=program, datapath=datapath, switch=kind, runs=rounds,
                        **chain_columns(median([r[0] for r in runs]), median([r[1] for r in runs]),
                                        median([r[2] for r in runs]), median(bare)),
                        kernel_share=(round(sum(r[3] for r in runs) / max(1, sum(r[4] for r in runs)), 4)
                                      if kind == "p4" else None))
                for row in rows.values():
                    row["ratio_to_openflow"] = round(row["received_pps"] / rows["openflow"]["received_pps"], 3)
                    mine, theirs = row["switch_ns_per_frame"], rows["openflow"]["switch_ns_per_frame"]
                    row["core_ratio_to_openflow"] = round(theirs / mine, 3) if mine and theirs else None
    return table


def v1model_processing(seconds, rounds):
    """What the v1model router adds to a frame's latency on each datapath, against the OpenFlow
    pipeline forwarding alike and a direct veth: loadgen frames at 2 000/s (XDP sender, socket
    receiver), as `processing` measures the AFDX program."""
    table = Table("p4-v1model-processing",
                  "The v1model router against the OpenFlow pipeline's same forwarding: processing latency (µs)",
                  ["program", "datapath", "switch", "size", "rounds", "through_p50_us", "through_p99_us",
                   "direct_p50_us", "processing_us", "lost"],
                  note="edgeflow-loadgen 64-byte frames at 2000/s through examples/p4/v1model_router.p4 (its "
                       f"{ROUTES} routes) and through the OpenFlow flows that route alike; `direct`: the same "
                       "frames over one veth, run just before each run through the switch; medians of the rounds, "
                       "`processing_us` the median of their differences. Beside the seed paper's 24 µs for a P4 "
                       "software switch on DPDK.")
    netns.cleanup()
    direct_src, direct_dst = direct_pair("pvdir")
    try:
        with netns.Topology("pw") as topo:
            h1, h2 = topo.add_host(), topo.add_host()
            loadgen.prepare_xdp_sender(h1)
            netns.sh("ip", "netns", "exec", direct_dst.name, "ethtool", "-K", "eth0", "gro", "on")
            paths = v1model_configs(h2, h1.mac)

            def stream(src, dst):
                return loadgen.run(src, dst, size=64, rate=2000, duration=seconds / rounds, send_engine="xdp",
                                   recv_engine="socket", dst_mac=ROUTER_MAC)[1]

            for datapath in DATAPATHS:
                set_hosts(topo.hosts, datapath)
                for kind in ("openflow", "p4"):
                    name = f"p4-v1model-processing-{kind}-{datapath}"
                    with v1model_switch(kind, datapath, topo, paths, "router", name) as sw:
                        if kind == "openflow":
                            sw.ofctl("add-flows", str(paths[("router", kind)]))
                        time.sleep(0.3)
                        progress(f"p4: v1model router processing, {kind} on {datapath}")
                        table.add(program="router", datapath=datapath, switch=kind, size=64,
                                  **paired_latency(lambda: stream(direct_src, direct_dst), lambda: stream(h1, h2),
                                                   rounds))
    finally:
        for h in (direct_src, direct_dst):
            netns.sh("ip", "netns", "del", h.name, check=False)
    return table


def processing(sizes, seconds, rounds):
    """What each switch adds to a frame's latency, as `afdx-processing` measures it: loadgen
    frames at 2 000/s (XDP sender, socket receiver), each run through the switch paired with one
    over a direct veth just before it."""
    table = Table("p4-processing", "The paper's P4 AFDX switch against edgeflow's AFDX mode: processing latency (µs)",
                  ["datapath", "switch", "size", "rounds", "through_p50_us", "through_p99_us", "direct_p50_us",
                   "processing_us", "lost"],
                  note=f"edgeflow-loadgen frames at 2000/s to {PROCESSING_VLS} VLs in turn (BAG 1 ms each: none "
                       "policed), XDP sender, socket receiver; `direct`: the same frames over one veth, run just "
                       "before each run through the switch; medians of the rounds, `processing_us` the median of "
                       "their differences. The paper's Table I: a P4 software switch with DPDK 24 µs, a P4 switch "
                       "on an NPU 5.8 µs (24 with its CPU), an FPGA 1.2 µs.")
    vls = [VL(v, 1, [2], bag_ms=1, smin=64, smax=1518, jitter_us=1000) for v in range(1, PROCESSING_VLS + 1)]
    cfg = configs("processing", vls)
    extra = ["--src-mac", SRC_MAC, "--dst-spread", str(PROCESSING_VLS)]
    netns.cleanup()
    direct_src, direct_dst = direct_pair("pdir")

    def stream(src, dst, size):
        return loadgen.run(src, dst, size=size, rate=2000, duration=seconds / rounds, send_engine="xdp",
                           recv_engine="socket", dst_mac=FIRST_VL_MAC, extra_send=extra)[1]

    try:
        with netns.Topology("pp") as topo:
            h1, h2 = topo.add_host(), topo.add_host()
            loadgen.prepare_xdp_sender(h1)
            netns.sh("ip", "netns", "exec", direct_dst.name, "ethtool", "-K", "eth0", "gro", "on")
            for datapath in DATAPATHS:
                set_hosts(topo.hosts, datapath)
                for kind in ("afdx", "p4"):
                    with switch(datapath, topo.switch_ports, cfg[kind], f"p4-processing-{kind}-{datapath}"):
                        time.sleep(0.3)
                        for size in sizes:
                            progress(f"p4: processing, {kind} on {datapath}, {size} B")
                            table.add(datapath=datapath, switch=kind, size=size,
                                      **paired_latency(lambda: stream(direct_src, direct_dst, size),
                                                       lambda: stream(h1, h2, size), rounds))
    finally:
        for h in (direct_src, direct_dst):
            netns.sh("ip", "netns", "del", h.name, check=False)
    return table


def run(out, quick, switches):
    del switches  # the comparison is edgeflow's two ways of running AFDX, not a switch list
    rate = frame_rate(0.5 if quick else 2.0, 3 if quick else 5)
    v1model = v1model_rate(0.5 if quick else 2.0, 3 if quick else 5)
    proc = processing([64, 1518], 0.6 if quick else 1.5, 1 if quick else 3)
    v1model_proc = v1model_processing(0.6 if quick else 1.5, 1 if quick else 3)
    published = Table("p4-published", "The paper's Table I: AFDX processing latency (µs)", ["switch", "latency_us"],
                      note="As published (seed paper, Table I); not measured here.")
    for name, lat in PUBLISHED:
        published.add(switch=name, latency_us=lat)
    for t in (rate, v1model, proc, v1model_proc, published):
        t.write(out)

    def draw(plt):
        fig = plt.gcf()
        left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        for i, kind in enumerate(("afdx", "p4")):
            rows = [r for r in rate.rows if r["switch"] == kind]
            left.bar([DATAPATHS.index(r["datapath"]) + 0.4 * i for r in rows], [r["received_pps"] / 1e3 for r in rows],
                     width=0.4, label=kind)
            rows = [r for r in proc.rows if r["switch"] == kind and r["size"] == 64]
            right.bar([DATAPATHS.index(r["datapath"]) + 0.4 * i for r in rows], [r["processing_us"] for r in rows],
                      width=0.4, label=kind)
        for ax, label in ((left, "received (kframes/s, 64 B)"), (right, "processing latency (µs, 64 B)")):
            ax.set_xticks([x + 0.2 for x in range(len(DATAPATHS))])
            ax.set_xticklabels(DATAPATHS)
            ax.set_ylabel(label)
            ax.legend(fontsize=7)
        for lat, style, name in ((24.0, "--", "P4 + DPDK, paper"), (5.8, ":", "P4 on NPU, paper")):
            right.axhline(lat, color="grey", linestyle=style, linewidth=1, label=name)
        right.legend(fontsize=7)
        fig.suptitle("AFDX: the paper's P4 program on edgeflow against its AFDX mode")
    plot(out / "p4.png", draw)
    return [rate, v1model, proc, v1model_proc, published]
