"""The home-gateway report: TCP throughput and the CPU load it costs, per switch; and the RTT
spikes a reactive controller causes when flows reach their hard timeout."""

import statistics

import time

from .. import netns
from ..switches import pid_cpu_seconds
from ..traffic import iperf3_tcp
from ..switches import DEFAULT_SWITCHES
from ..util import run_dir
from .common import Table, plot, progress, switch_under_test


def system_busy():
    """(busy, total) jiffies across all CPUs."""
    vals = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def run(out, quick=False, switches=DEFAULT_SWITCHES):
    seconds = 2 if quick else 10
    hard = 2 if quick else 10
    watch = 3 * hard
    load = Table("gateway", "TCP throughput and CPU load",
                 ["switch", "mbit_s", "switch_cpu_pct", "system_cpu_pct", "hosts_tx"],
                 note=(f"iperf3 TCP, {seconds} s, native mode. switch_cpu_pct: the switch's own process "
                       "(100% = one core); system_cpu_pct: all cores, everything (hosts' TCP stacks too)."))
    spikes = Table("gateway_timeouts", "RTT around flow hard timeouts with a reactive controller",
                   ["switch", "hard_timeout_s", "pings", "rtt_median_ms", "rtt_max_ms", "expiries",
                    "expiries_with_spike", "other_spikes"],
                   note=(f"L2-learning app (os-ken) installing flows with hard_timeout={hard}s; ping every 50 ms for "
                         f"{watch} s. A spike is an RTT over 3× the median. `expiries`: the times the controller "
                         "installed the flows again while the pings ran (from its own log: each follows an expiry); "
                         "`expiries_with_spike`: those with a spike whose reply came within 100 ms after the "
                         "install (the first packet after an expiry goes to the controller); `other_spikes`: "
                         "spikes at no expiry, the machine's noise."))
    series = {}
    netns.cleanup()
    with netns.Topology("g") as topo:
        h1, h2 = topo.add_host(), topo.add_host()
        for kind in switches:
            with switch_under_test(kind, topo.hosts, topo.switch_ports) as (sw, settings):
                progress(f"gateway: {kind} TCP and CPU")
                pids = sw.cpu_pids()
                cpu0 = sum(pid_cpu_seconds(p) for p in pids)
                busy0, total0 = system_busy()
                t0 = time.monotonic()
                bps = iperf3_tcp(h1, h2, seconds=seconds)
                wall = time.monotonic() - t0
                busy1, total1 = system_busy()
                cpu1 = sum(pid_cpu_seconds(p) for p in pids)
                load.add(switch=kind, mbit_s=bps / 1e6,
                         switch_cpu_pct=100.0 * (cpu1 - cpu0) / wall if pids else None,
                         system_cpu_pct=100.0 * (busy1 - busy0) / max(total1 - total0, 1) * (os_cpus()),
                         hosts_tx=settings.get("hosts_tx", "on"))
            if kind == "linux-bridge":
                continue
            installs = run_dir("gateway") / f"installs-{kind}.txt"
            installs.unlink(missing_ok=True)
            env = {"EF_L2_HARD_TIMEOUT": str(hard), "EF_L2_IDLE_TIMEOUT": "0", "EF_L2_INSTALL_LOG": str(installs)}
            with switch_under_test(kind, topo.hosts, topo.switch_ports, "l2-learning", app_env=env):
                progress(f"gateway: {kind} RTT over {watch} s of hard timeouts")
                rtts = ping_series(h1, h2.addr, watch)
            if not rtts:
                raise RuntimeError(f"gateway: no ping through {kind} got an answer")
            series[kind] = [(t - rtts[0][0], r) for t, r in rtts]
            values = [r for _, r in rtts]
            med = statistics.median(values)
            spiked = [t for t, r in rtts if r > 3 * med]
            # Both directions' flows go in within milliseconds of each other: one expiry each.
            expiries = expiry_times([float(x) for x in installs.read_text().split()], rtts[0][0], rtts[-1][0])
            at_expiry = [e for e in expiries if any(0 <= t - e <= 0.1 for t in spiked)]
            noise = [t for t in spiked if not any(0 <= t - e <= 0.1 for e in expiries)]
            spikes.add(switch=kind, hard_timeout_s=hard, pings=len(values), rtt_median_ms=med, rtt_max_ms=max(values),
                       expiries=len(expiries), expiries_with_spike=len(at_expiry), other_spikes=len(noise))
    load.write(out)
    spikes.write(out)

    def draw(plt):
        fig = plt.gcf()
        a1 = fig.add_subplot(1, 2, 1)
        a1.bar([r["switch"] for r in load.rows], [r["mbit_s"] for r in load.rows])
        a1.set_ylabel("TCP throughput (Mbit/s)")
        a1.set_yscale("log")
        a1.tick_params(axis="x", labelsize=7)
        a2 = fig.add_subplot(1, 2, 2)
        for kind, rtts in series.items():
            a2.plot([t for t, _ in rtts], [r for _, r in rtts], label=kind, linewidth=0.8)
        a2.set_xlabel("time (s)")
        a2.set_ylabel("RTT (ms)")
        a2.set_yscale("log")
        a2.set_title(f"RTT, flows expiring every {hard} s")
        a2.legend(fontsize=7)
    plot(out / "gateway.png", draw)
    return [load, spikes]


def os_cpus():
    import os
    return os.cpu_count() or 1


def ping_series(host, dst, seconds):
    """(time of the reply, CLOCK_REALTIME seconds; RTT ms) for pings every 50 ms."""
    count = int(seconds / 0.05)
    r = host.run("ping", "-n", "-D", "-c", str(count), "-i", "0.05", "-W", "1", dst, check=False, timeout=seconds + 30)
    out = []
    for line in r.stdout.splitlines():
        if "time=" not in line or not line.startswith("["):
            continue
        out.append((float(line[1:line.index("]")]), float(line.split("time=")[1].split()[0])))
    return out


def expiry_times(installs, start, end):
    """The controller's installs between `start` and `end`, those within 0.5 s of each other taken
    as one (the two directions' flows, learned from one exchange)."""
    out = []
    for t in sorted(installs):
        if start <= t <= end and (not out or t - out[-1] > 0.5):
            out.append(t)
    return out



