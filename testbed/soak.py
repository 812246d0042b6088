"""A soak: random flow-mod churn from a controller while traffic flows, for a set time.

Flows of every shape the churn draws — matches on ports, addresses, VLANs, IPv6, TCP; rewrites,
drops, groups, meters; added, modified, deleted strictly and by pattern — come and go, all under
one cookie so that a delete never reaches past them. None can match the protected traffic (UDP
from port 9000, which the churn never names and always excludes), so that traffic must arrive
whole, whatever the caches did meanwhile; the switch must stay up, its memory flat: once warmed
up, no more than a few bytes of resident memory per flow-mod (`growth_per_flow_mod`).

usage: python -m testbed.soak [--seconds 600] [--datapath user|tc|xdp ...]   (`make soak`)
"""

import argparse
import random
import sys
import threading
import time

from . import loadgen, netns
from .churn import Churner
from .ofpeer import osken_bytes
from .switches import edgeflow_on

CHURN_COOKIE = 0xC0FFEE
PROTECTED_SPORT, FIRST_PORT, N_PROTECTED = 9000, 10000, 100


def random_flow_mod(r):
    """One random flow-mod under the churn's cookie, matching nothing from UDP port 9000."""
    def build(p, o, dp):
        fields = {}
        shape = r.choice(["udp", "tcp", "ipv6", "arp", "l2"])
        if shape == "udp":
            fields.update(eth_type=0x800, ip_proto=17, udp_src=r.choice([7000, 7001, 53]))
            if r.random() < 0.5:
                fields["udp_dst"] = FIRST_PORT + r.randrange(N_PROTECTED)
        elif shape == "tcp":
            fields.update(eth_type=0x800, ip_proto=6, tcp_dst=r.choice([22, 80, 443, FIRST_PORT]))
        elif shape == "ipv6":
            fields.update(eth_type=0x86DD)
        elif shape == "arp":
            fields.update(eth_type=0x806, arp_op=r.choice([1, 2]))
        else:
            fields.update(eth_type=0x88B5)
        if r.random() < 0.3:
            fields["in_port"] = r.choice([1, 2, 3])
        if r.random() < 0.2:
            fields["vlan_vid"] = 0x1000 | r.choice([10, 20])
        match = p.OFPMatch(**fields)
        actions = r.choice([
            [p.OFPActionOutput(3)],
            [],
            [p.OFPActionSetField(eth_dst="02:00:00:00:00:99"), p.OFPActionOutput(2)],
            [p.OFPActionOutput(o.OFPP_CONTROLLER, 64)],
            [p.OFPActionGroup(1)],
        ])
        inst = [p.OFPInstructionActions(o.OFPIT_APPLY_ACTIONS, actions)]
        if r.random() < 0.2:
            inst.insert(0, p.OFPInstructionMeter(1))
        command = r.choice([o.OFPFC_ADD] * 4 + [o.OFPFC_MODIFY, o.OFPFC_DELETE, o.OFPFC_DELETE_STRICT])
        return p.OFPFlowMod(dp, cookie=CHURN_COOKIE, cookie_mask=0xFFFFFFFFFFFFFFFF, command=command,
                            priority=r.choice([5, 50, 500]), match=match, instructions=inst,
                            out_port=o.OFPP_ANY, out_group=o.OFPG_ANY)
    return osken_bytes(build)


def setup_bytes():
    """The group and meter the churned flows use (an ALL group to port 3, a drop meter)."""
    group = osken_bytes(lambda p, o, dp: p.OFPGroupMod(dp, o.OFPGC_ADD, o.OFPGT_ALL, 1,
                                                        [p.OFPBucket(actions=[p.OFPActionOutput(3)])]))
    meter = osken_bytes(lambda p, o, dp: p.OFPMeterMod(dp, o.OFPMC_ADD, o.OFPMF_PKTPS | o.OFPMF_BURST, 1,
                                                        [p.OFPMeterBandDrop(rate=1000, burst_size=100)]))
    return group + meter


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def growth_per_flow_mod(samples, warmup_s):
    """Bytes of resident memory gained per flow-mod once the first `warmup_s` seconds are over:
    the least-squares slope of RSS against flow-mods sent over the samples from then on
    (`samples`: (seconds into the churn, flow-mods sent, RSS in KiB)). A leak of L bytes a
    flow-mod is a slope of L; what a table of steady size allocates and frees again is none."""
    late = [(m, kib * 1024) for t, m, kib in samples if t >= warmup_s]
    if len(late) < 3 or late[-1][0] == late[0][0]:
        raise ValueError(f"too few samples after the {warmup_s} s warm-up to measure growth: {samples}")
    n = len(late)
    mean_m = sum(m for m, _ in late) / n
    mean_b = sum(b for _, b in late) / n
    return (sum((m - mean_m) * (b - mean_b) for m, b in late) / sum((m - mean_m) ** 2 for m, _ in late))


def soak(datapath, seconds, rate=1000, seed=1, topo_tag="s", pool=None):
    """One soak on `datapath`: returns what it saw (flow-mods sent, frames sent and received, RSS
    after warm-up and at the end, in KiB, and `samples`: (seconds into the churn, flow-mods sent,
    RSS in KiB) about every 0.5 s). `pool`: draw that many random flow-mods before the churn and
    send them over and over, in the same order (a rate a Python encoder could not keep up with
    beside the traffic on a small machine); otherwise each is drawn as it goes."""
    r = random.Random(seed)
    mods_pool = [random_flow_mod(r) for _ in range(pool)] if pool else None
    netns.cleanup()
    with netns.Topology(topo_tag) as topo:
        h1, h2, _ = topo.add_host(), topo.add_host(), topo.add_host()
        with edgeflow_on(datapath, topo.hosts, topo.switch_ports, log_name=f"soak-{datapath}") as sw:
            sw.ofctl("del-flows")
            with Churner(sw.target) as ctl:
                ctl.install(N_PROTECTED, PROTECTED_SPORT, FIRST_PORT, 2)
                ctl.send(setup_bytes())
                ctl.barrier()
                if ctl.errors:
                    raise RuntimeError(f"soak: setup refused ({ctl.errors} errors)")
            def protected_traffic(duration):
                return loadgen.run(h1, h2, size=64, rate=20_000, duration=duration, send_engine="socket",
                                   recv_engine="socket", extra_send=["--sport", str(PROTECTED_SPORT), "--dport",
                                                                     str(FIRST_PORT), "--udp-flows", str(N_PROTECTED)])

            _, warm_got = protected_traffic(1.0)
            pid = sw.proc.pid
            rss = [rss_kib(pid)]
            mods = {"sent": 0, "errors": None}
            stop = threading.Event()
            began = time.monotonic()
            samples = [(0.0, 0, rss[0])]

            def churn():
                per_tick = max(1, rate // 100)
                with Churner(sw.target) as c:
                    next_at = time.monotonic()
                    while not stop.is_set():
                        if mods_pool:
                            at = mods["sent"]
                            c.send(b"".join(mods_pool[(at + i) % len(mods_pool)] for i in range(per_tick)))
                        else:
                            c.send(b"".join(random_flow_mod(r) for _ in range(per_tick)))
                        mods["sent"] += per_tick
                        next_at += 0.01
                        time.sleep(max(0.0, next_at - time.monotonic()))
                    c.barrier()
                    mods["errors"] = c.errors

            def watch():
                while not stop.wait(0.5):
                    rss.append(rss_kib(pid))
                    samples.append((time.monotonic() - began, mods["sent"], rss[-1]))

            threads = [threading.Thread(target=churn), threading.Thread(target=watch)]
            for t in threads:
                t.start()
            try:
                sent, got = protected_traffic(seconds)
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=60)
            rss.append(rss_kib(pid))
            samples.append((time.monotonic() - began, mods["sent"], rss[-1]))
            alive = sw.alive()
            stats = sw.stats()
    return {"datapath": datapath, "seconds": seconds, "flow_mods": mods["sent"], "errors": mods["errors"],
            "warm_lost": warm_got["lost"],
            "sent": sent["sent"], "received": got["received"], "lost": got["lost"], "alive": alive,
            "rss_start_kib": rss[0], "rss_end_kib": rss[-1], "rss_max_kib": max(rss), "samples": samples,
            "cache": next((g["counters"] for g in stats["mode_counters"] if g["name"] == "megaflow cache"), {})}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--datapath", action="append", choices=["user", "tc", "xdp"])
    a = p.parse_args(argv)
    _lock = netns.exclusive("a soak")
    ok = True
    for dp in a.datapath or ["user", "tc", "xdp"]:
        res = soak(dp, a.seconds)
        grew = res["rss_end_kib"] - res["rss_start_kib"]
        per_mod = growth_per_flow_mod(res["samples"], WARMUP_S)
        good = (res["alive"] and res["lost"] == 0 and res["errors"] == 0 and grew <= RSS_MARGIN_KIB
                and per_mod <= LEAK_BYTES_PER_FLOW_MOD)
        ok &= good
        print(f"soak {dp}: {res['seconds']:.0f} s, {res['flow_mods']} flow-mods, {res['sent']} frames sent, "
              f"{res['lost']} lost, RSS {res['rss_start_kib']} -> {res['rss_end_kib']} KiB (max {res['rss_max_kib']}), "
              f"{per_mod:.1f} bytes a flow-mod after {WARMUP_S:.0f} s, cache {res['cache']}: "
              f"{'ok' if good else 'FAILED'}", flush=True)
    return 0 if ok else 1


#: How much the switch's resident memory may grow over a soak: its caches and tables are bounded,
#: so growth past this is a leak, not load.
RSS_MARGIN_KIB = 8 * 1024
#: How long the churn runs before growth is measured: the table reaches the size at which adds and
#: deletes balance, the allocator its working set.
WARMUP_S = 3.0
#: The most resident memory a flow-mod may add once warmed up (`growth_per_flow_mod`), in bytes.
#: Measured on tc: 0.4 to 3 replaying a pool, about 5 drawing every flow-mod afresh (the table
#: still filling its space of shapes); a leak of 100 bytes a flow-mod measured 125 to 127
#: (malloc's rounding).
LEAK_BYTES_PER_FLOW_MOD = 25

if __name__ == "__main__":
    sys.exit(main())
