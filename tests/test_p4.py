"""mode = "p4" (docs/p4.md): the example P4 programs switch real frames between namespaces on every
datapath, their tables filled by the configuration (and at run time by `edgeflow p4`): the L2
switch forwards and floods and drops a VLAN the port does not carry; the IPv4 router routes
between two subnets, lowering the TTL (the hosts see ttl=63, so the checksum it rewrote is
right). On tc and xdp the program runs in the kernel (its generated object), which must have
decided the frames itself: the mode's `kernel_frames` counts them, and the program's own counters
and table hits include them."""

import json
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from testbed import netns
from testbed.switches import EDGEFLOW_BIN, Edgeflow, edgeflow_on
from testbed.util import ROOT, run_dir

EXAMPLES = ROOT / "examples" / "p4"


def p4_config(name, program, ports, body):
    path = run_dir("p4") / f"{name}.toml"
    text = f'mode = "p4"\n' + "".join(f'[[port]]\nname = "{p}"\nnumber = {i}\n' for i, p in enumerate(ports, 1))
    path.write_text(text + f'[p4]\nprogram = "{EXAMPLES / program}"\n' + body)
    return path


def entry(table, match, action, args=()):
    fmt = lambda v: f'"{v}"' if isinstance(v, str) else str(v)
    return (f'[[p4.entry]]\ntable = "{table}"\nmatch = [{", ".join(map(fmt, match))}]\naction = "{action}"\n'
            f'args = [{", ".join(map(fmt, args))}]\n')


def p4ctl(sw, *args):
    """`edgeflow p4` on the running switch: its answer."""
    r = subprocess.run([EDGEFLOW_BIN, "p4", "-t", sw.target, *args], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return r.stdout


def kernel_decided(sw, datapath, at_least):
    """The switch's P4 counters, once the kernel has decided `at_least` frames on tc and xdp (it
    reports at each harvest); on user, none."""
    def counters():
        return {c["name"]: c["counters"] for c in sw.stats()["mode_counters"]}["p4"]

    if datapath == "user":
        c = counters()
        assert c["kernel_frames"] == 0, c
        return c
    deadline = time.monotonic() + 10
    while (c := counters())["kernel_frames"] < at_least and time.monotonic() < deadline:
        time.sleep(0.2)
    assert c["kernel_frames"] >= at_least, (c, sw.stats()["fast_path"]["p4"], sw.log())
    return c


def test_l2_switch_program_forwards_floods_and_keeps_vlans_apart(three_hosts, datapath):
    h1, h2, h3 = three_hosts.hosts
    body = "".join(entry("L2Ingress.dmac", [vid, h.mac], "forward", [port])
                   for vid in (0, 10) for h, port in ((h1, 1), (h2, 2)))
    body += entry("L2Ingress.vlan_allowed", [1, 10], "NoAction") + entry("L2Ingress.vlan_allowed", [2, 10], "NoAction")
    body += "[[p4.group]]\nid = 1\nports = [1, 2, 3]\n"
    path = p4_config("l2", "l2_switch.p4", three_hosts.switch_ports, body)
    sw = edgeflow_on(datapath, three_hosts.hosts, [], extra=["--config", str(path)], log_name="p4-l2").start()

    def p4_counters():
        return {c["name"]: c["counters"] for c in sw.stats()["mode_counters"]}["p4"]

    try:
        # ARP floods through group 1; the replies and the pings go by the table.
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        # h3's address is in no table: frames to it flood, and it answers through h1's entry.
        assert h1.ping(h3.addr, count=3, interval=0.05)[0] == 3
        counters = kernel_decided(sw, datapath, 8)
        assert counters["frames"] >= 12 and counters["copies"] >= 12, counters
        # h1 and h2 in VLAN 10, which ports 1 and 2 carry: tagged frames go by VLAN 10's entries.
        netns.tag_interface(h1.name, "eth0", 10)
        netns.tag_interface(h2.name, "eth0", 10)
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        # h3 in VLAN 20, which port 3 does not carry: its frames go nowhere.
        netns.tag_interface(h3.name, "eth0", 20)
        before = p4_counters()["program_dropped"]
        assert h3.ping(h1.addr, count=2, interval=0.05)[0] == 0
        after = p4_counters()["program_dropped"]
        assert after >= before + 2, (before, after)
    finally:
        assert sw.stop() == 0, sw.log()


# One kernel hook (TC left out): a route is one unicast redirect, which the program does alike on
# both hooks (they differ in copying to several ports and in reading a VLAN tag, which the L2 and
# AFDX programs' tests run on both), and `the_router_decides_in_the_kernel_as_in_software` holds
# TC and XDP to the software target frame by frame (BPF_PROG_TEST_RUN).
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_ipv4_router_program_routes_between_subnets(two_hosts, datapath):
    h1, h2 = two_hosts.hosts
    gw_mac = "02:00:00:00:00:fe"
    # Hosts in two subnets behind the router; the router answers no ARP, so they know its MAC.
    for h, own, gw in ((h1, "10.0.1.2/24", "10.0.1.1"), (h2, "10.0.2.2/24", "10.0.2.1")):
        h.run("ip", "addr", "flush", "dev", "eth0")
        h.run("ip", "addr", "add", own, "dev", "eth0")
        h.run("ip", "route", "add", "default", "via", gw)
        h.run("ip", "neigh", "replace", gw, "lladdr", gw_mac, "dev", "eth0")
    # One route from the configuration; the other comes at run time, from `edgeflow p4`.
    body = entry("RouterIngress.routes", ["10.0.1.0/24"], "next_hop", [gw_mac, h1.mac, 1, 1])
    path = p4_config("router", "ipv4_router.p4", two_hosts.switch_ports, body)
    sw = edgeflow_on(datapath, two_hosts.hosts, [], extra=["--config", str(path)], log_name="p4-router").start()

    def p4(*args):
        return p4ctl(sw, *args)

    try:
        # No route to 10.0.2.0/24 yet, and none ever to 10.0.3.0/24, which the table's default
        # action drops: each ping waits its second for nothing, side by side.
        with ThreadPoolExecutor(2) as pool:
            unrouted = list(pool.map(lambda dst: h1.ping(dst, count=2, interval=0.05)[0], ["10.0.2.2", "10.0.3.1"]))
        assert unrouted == [0, 0], unrouted
        p4("insert", "RouterIngress.routes", "--match", "10.0.2.0/24", "--action", "next_hop",
           "--args", gw_mac, h2.mac, "2", "2")
        r = h1.run("ping", "-n", "-c", "3", "-i", "0.05", "-W", "1", "10.0.2.2", check=False)
        assert "3 received" in r.stdout, r.stdout + r.stderr
        assert set(re.findall(r"ttl=(\d+)", r.stdout)) == {"63"}, r.stdout
        counters = kernel_decided(sw, datapath, 6)
        assert counters["program_dropped"] >= 4, counters
        # The tables and counters read back; the route leaves again.
        entries = p4("entries", "RouterIngress.routes").splitlines()
        assert len(entries) == 2 and any(e.startswith("lpm:a000200/24 next_hop(") and "packets=3" in e for e in entries), entries
        assert p4("counter", "RouterIngress.routed", "2").strip() == "packets=3 bytes=294"
        p4("delete", "RouterIngress.routes", "--match", "10.0.2.0/24")
        assert h1.ping("10.0.2.2", count=2, interval=0.05)[0] == 0
        bad = subprocess.run([EDGEFLOW_BIN, "p4", "-t", sw.target, "insert", "RouterIngress.routes", "--match", "10.0.9.0/24",
                              "--action", "next_hop", "--args", "1"], capture_output=True, text=True, timeout=20)
        assert bad.returncode != 0 and "next_hop takes 4 argument(s), not 1" in bad.stderr, bad.stderr
    finally:
        assert sw.stop() == 0, sw.log()


def test_a_v1model_router_as_the_tutorials_write_it_routes_on_every_datapath(two_hosts, datapath):
    """A program written for BMv2's v1model, not for edgeflow: its checksums verified and
    rewritten (the hosts accept ttl=63), on tc and xdp decided in the kernel."""
    h1, h2 = two_hosts.hosts
    gw_mac = "02:00:00:00:00:fe"
    for h, own, gw in ((h1, "10.0.1.2/24", "10.0.1.1"), (h2, "10.0.2.2/24", "10.0.2.1")):
        h.run("ip", "addr", "flush", "dev", "eth0")
        h.run("ip", "addr", "add", own, "dev", "eth0")
        h.run("ip", "route", "add", "default", "via", gw)
        h.run("ip", "neigh", "replace", gw, "lladdr", gw_mac, "dev", "eth0")
    body = (entry("RouterIngress.ipv4_lpm", ["10.0.1.0/24"], "ipv4_forward", [h1.mac, 1])
            + entry("RouterIngress.ipv4_lpm", ["10.0.2.0/24"], "ipv4_forward", [h2.mac, 2]))
    path = p4_config("v1model-router", "v1model_router.p4", two_hosts.switch_ports, body)
    sw = edgeflow_on(datapath, two_hosts.hosts, [], extra=["--config", str(path)], log_name="p4-v1model").start()
    try:
        r = h1.run("ping", "-n", "-c", "3", "-i", "0.05", "-W", "1", "10.0.2.2", check=False)
        assert "3 received" in r.stdout, r.stdout + r.stderr + sw.log()
        assert set(re.findall(r"ttl=(\d+)", r.stdout)) == {"63"}, r.stdout
        kernel_decided(sw, datapath, 6)
        assert p4ctl(sw, "counter", "RouterIngress.routed", "2").strip() == "packets=3 bytes=294"
    finally:
        assert sw.stop() == 0, sw.log()


def test_compile_writes_the_kernel_back_end_and_refuses_what_does_not_fit(tmp_path):
    """`edgeflow p4 compile`: the kernel back end's C, or with -o x.o the object clang built from
    it (an ELF for BPF), without a switch; a program that does not fit is refused with why."""
    r = subprocess.run([EDGEFLOW_BIN, "p4", "compile", str(EXAMPLES / "ipv4_router.p4")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and 'SEC("tc")' in r.stdout and "p4_t_RouterIngress_routes" in r.stdout, r.stderr
    obj = tmp_path / "afdx.o"
    r = subprocess.run([EDGEFLOW_BIN, "p4", "compile", str(EXAMPLES / "afdx_switch.p4"), "-o", str(obj)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    elf = obj.read_bytes()
    assert elf[:4] == b"\x7fELF" and int.from_bytes(elf[18:20], "little") == 247, "an eBPF object (EM_BPF)"
    wide = tmp_path / "wide.p4"
    # Refused where the register is used (one the program declares and never uses is not in the kernel).
    wide.write_text((EXAMPLES / "l2_switch.p4").read_text().replace(
        "direct_counter(CounterType.packets_and_bytes) dmac_hits;",
        "direct_counter(CounterType.packets_and_bytes) dmac_hits;\n    register<bit<72>>(4) wide;").replace(
        "        dmac.apply();\n    }", "        dmac.apply();\n        wide.write(0, 72w1);\n    }"))
    r = subprocess.run([EDGEFLOW_BIN, "p4", "compile", str(wide)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and r.stderr.strip() == (
        f"edgeflow p4 compile: {wide}:91:9: register L2Ingress.wide of 72 bits does not fit the kernel back end (docs/p4.md); "
        "the program runs in userspace"), r.stderr


def test_a_device_without_clang_runs_the_object_compiled_elsewhere(two_hosts, monkeypatch):
    """The deployment docs/p4.md describes for a gateway with a few MB of flash: `edgeflow p4
    compile -o` on a build machine, the object named in `[p4] object`, and the switch (tc here)
    loads it where there is no clang (EDGEFLOW_CLANG names none); the kernel decides the frames.
    Without the object the same switch runs the program in userspace and says what to do."""
    h1, h2 = two_hosts.hosts
    obj = run_dir("p4") / "l2-prebuilt.o"
    r = subprocess.run([EDGEFLOW_BIN, "p4", "compile", str(EXAMPLES / "l2_switch.p4"), "-o", str(obj)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    body = "".join(entry("L2Ingress.dmac", [0, h.mac], "forward", [port]) for h, port in ((h1, 1), (h2, 2)))
    body += "[[p4.group]]\nid = 1\nports = [1, 2]\n"
    monkeypatch.setenv("EDGEFLOW_CLANG", "/nonexistent/clang")
    for with_object in (True, False):
        # (`object` is a key of [p4]: before the entries' tables.)
        path = p4_config(f"l2-prebuilt-{with_object}", "l2_switch.p4", two_hosts.switch_ports,
                         (f'object = "{obj}"\n' if with_object else "") + body)
        sw = edgeflow_on("tc", two_hosts.hosts, [], extra=["--config", str(path)], log_name="p4-prebuilt").start()
        try:
            assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
            if with_object:
                kernel_decided(sw, "tc", 4)
                assert "the object named in [p4] object" in sw.log(), sw.log()
            else:
                assert {c["name"]: c["counters"] for c in sw.stats()["mode_counters"]}["p4"]["kernel_frames"] == 0
                assert ("no clang here (EDGEFLOW_CLANG=/nonexistent/clang); compile the program where clang is "
                        "(edgeflow p4 compile PROGRAM -o OBJECT) and name the object in [p4] object") in sw.log()
        finally:
            assert sw.stop() == 0, sw.log()


def test_afdx_program_forwards_multicast_and_polices_a_babbler(datapath):
    """The paper's AFDX switch as a P4 program (examples/p4/afdx_switch.p4) between real end
    systems: a conforming VL to two end systems arrives whole at both (on tc a clone per output,
    on xdp a broadcast into the group's DEVMAP), and a babbler offered ten times its contract gets
    what its contract (BAG, jitter, Smax) allows over the times its frames reached the switch
    (`afdx.contract_admits`, as test_afdx.py), its refusals counted in the program's `policed`
    counter."""
    from testbed import afdx
    from testbed.afdx import AfdxNetwork, Receiver, send, vl_arg

    netns.cleanup()
    high, low = 7, 0

    def vl(vl_id, in_port, group, queue, account, bag_ms, smax, jitter_us):
        return entry("AfdxIngress.tbl_forward_virtual_link", [in_port, vl_id], "forward",
                     [group, queue, account, bag_ms * 1000, jitter_us, 64, smax])

    # The babbler's contract allows 500 µs of jitter, the most ARINC 664 part 7 lets a VL have:
    # without any, a frame that reaches the switch a few µs earlier, relative to the one admitted
    # before it, than it was sent is early and refused, and on a busy VM that happens to every
    # other admission (a frame every 1.6 ms against a BAG of exactly 10 of them).
    body = vl(30, 1, 1, high, 0, 1, 200, 2000) + vl(12, 2, 2, low, 1, 16, 200, 500)
    body += "[[p4.group]]\nid = 1\nports = [2, 3]\n[[p4.group]]\nid = 2\nports = [3]\n"
    with AfdxNetwork("ap", 3, redundant=False) as net:
        settings = Edgeflow.HOST_SETTINGS[datapath]
        if settings:
            net.set_offload(**settings)
        path = p4_config(f"afdx-{datapath}", "afdx_switch.p4", net.ports("a"), body)
        sw = edgeflow_on(datapath, [], [], extra=["--config", str(path)], log_name="p4-afdx").start()
        try:
            es = net.end_systems
            rx2, rx3 = Receiver(es[1], networks=("a",)), Receiver(es[2], networks=("a",))
            # When each of the babbler's frames reached the switch (on xdp, as it left the end
            # system: the switch's XDP program takes it before any tap on its side sees it).
            tap = afdx.IngressTap(es[1], networks=("a",), sender_side=datapath == "xdp")
            try:
                log = run_dir("afdx") / f"send-p4-babbler-{datapath}.log"
                babbler = send(es[1], [vl_arg(12, 16, 200, 1600)], 1.5, networks=("a",), log=log, background=True,
                               visible=datapath == "xdp")
                report = send(es[0], [vl_arg(30, 1, 200)], 1.5, networks=("a",), jitter_us=100)
                out, err = babbler.communicate(timeout=60)
                assert babbler.returncode == 0, err
                got2, got3 = rx2.result([report]), rx3.result([report])
                arrivals = tap.times([json.loads(out)])[0][12]
            finally:
                rx2.kill()
                rx3.kill()
                tap.kill()
            counters = kernel_decided(sw, datapath, 1000)
            policed = p4ctl(sw, "counter", "AfdxIngress.policed", "1")
            # Where a lost frame went, if one is: the ports' drop counters (rings and sends).
            ports = [{k: p[k] for k in ("name", "rx_packets", "rx_dropped", "tx_packets", "tx_dropped")}
                     for p in sw.stats()["ports"]]
        finally:
            assert sw.stop() == 0, sw.log()
    sent = report["sent"]["30"]
    assert sent >= 1000
    for got in (got2, got3):
        r = got["vls"][30]
        assert r["delivered"] == sent and r["lost"] == 0, (sent, r, ports)
    times = [t for _, t, _ in afdx.read_log(log)[12]]
    bounds = lambda ts: afdx.contract_admits(ts, 200, 16, 200, jitter_us=500)
    # Enough had to be policed for the check to mean something (a sender that falls behind on a
    # loaded machine offers less than its nominal ten times).
    assert bounds(times)[1] < len(times) * 0.75, (bounds(times), len(times))
    # The switch polices the times frames reach it, each a little later than sent, by as much as
    # the VM's scheduling takes: the contract's bounds over those times (the tap's), worked out
    # from BAG, jitter and Smax, not by running a policing algorithm again.
    assert len(arrivals) == len(times), (len(arrivals), len(times))
    fewest, most = bounds(arrivals)
    passed = got3["vls"][12]["received"][0]
    print(f"{datapath}: babbler offered {len(times)}, its contract allows {fewest}..{most}, the switch passed {passed}")
    assert fewest <= passed <= most, (passed, (fewest, most), len(times))
    # The program counts what it refused, frames as the switch sees them (without the FCS).
    refused = len(times) - passed
    assert policed.strip() == f"packets={refused} bytes={refused * (200 - 4)}", policed
    assert counters["copies"] >= 2 * sent, counters


def test_afdx_program_queue_choice_is_served_by_the_ports_scheduler():
    """The queue extern: the P4 program's queue choice (its table's `queue`) is what a scheduled
    port serves. Two links of 1518-byte frames every millisecond (12 Mbit/s each) share port 3,
    paced to 16 Mbit/s by strict priority: the high-priority one (queue 7) arrives whole, the
    low-priority one (queue 0) gets what is left. On tc, because a port has a schedule, the kernel
    holds back and the program decides every frame in userspace (a frame for that port would
    otherwise go up after ingress ran in the kernel, and be policed twice)."""
    from testbed.afdx import AfdxNetwork, Receiver, send, vl_arg

    netns.cleanup()
    with AfdxNetwork("aq", 3, redundant=False) as net:
        ports = net.ports("a")
        text = 'mode = "p4"\n'
        for i, p in enumerate(ports, 1):
            text += f'[[port]]\nname = "{p}"\nnumber = {i}\n'
        # Port 3 paced to 16 Mbit/s, its low queue short: what does not fit is dropped, not delayed.
        text += "rate_mbps = 16\n[[port.queue]]\nid = 0\nlimit_frames = 20\n"
        text += f'[p4]\nprogram = "{EXAMPLES / "afdx_switch.p4"}"\n'
        for vl, in_port, queue in ((40, 1, 7), (41, 2, 0)):
            text += entry("AfdxIngress.tbl_forward_virtual_link", [in_port, vl], "forward",
                          [3, queue, vl, 1000, 2000, 64, 1518])
        text += "[[p4.group]]\nid = 3\nports = [3]\n"
        path = run_dir("p4") / "scheduled.toml"
        path.write_text(text)
        sw = edgeflow_on("tc", [], [], extra=["--config", str(path)], log_name="p4-scheduled").start()
        try:
            es = net.end_systems
            rx = Receiver(es[2], networks=("a",))
            try:
                low = send(es[1], [vl_arg(41, 1, 1518)], 1.5, networks=("a",), background=True)
                high = send(es[0], [vl_arg(40, 1, 1518)], 1.5, networks=("a",), jitter_us=100)
                out, err = low.communicate(timeout=60)
                assert low.returncode == 0, err
                low = json.loads(out)
                got = rx.result([high, low])
            finally:
                rx.kill()
            stats = sw.stats()
            counters = {c["name"]: c["counters"] for c in stats["mode_counters"]}["p4"]
            ports = [{k: p[k] for k in ("name", "rx_packets", "rx_dropped", "tx_packets", "tx_dropped")}
                     for p in stats["ports"]]
            log = sw.log()
        finally:
            assert sw.stop() == 0, sw.log()
    sent_high, sent_low = high["sent"]["40"], low["sent"]["41"]
    assert sent_high >= 1000 and sent_low >= 1000, (high, low)
    assert got["vls"][40]["delivered"] == sent_high and got["vls"][40]["lost"] == 0, (got["vls"][40], ports)
    # 16 Mbit/s less the high link's 12.3 (1538 bytes on the wire a millisecond) would leave 30 %;
    # the pacer, sleeping on this VM's timers, loses some of the link (10 % got through here).
    low_share = got["vls"][41]["delivered"] / sent_low
    assert 0.02 < low_share < 0.5, (low_share, got["vls"][41])
    assert counters["kernel_frames"] == 0 and counters["frames"] >= sent_high + sent_low, counters
    assert "send from userspace" in log, log


def test_a_slave_controller_reads_the_program_and_the_log_filter_and_changes_neither(two_hosts):
    """OpenFlow gives a slave controller read access (1.3.5 §6.3.5), and edgeflow's own requests
    follow it: a slave reads a P4 program's tables and counters, the log filter, the report and
    the kernel's maps, and is refused with OFPBRC_IS_SLAVE when it would write a table entry or
    set the log filter, which stay as they were; a master does both."""
    from testbed.ofpeer import KERNEL_DUMP, LOG_FILTER, MODE_CONTROL, STATS_REPORT, TEST_PANIC, Conn
    is_slave = (1, 10)
    route = entry("RouterIngress.routes", ["10.0.1.0/24"], "next_hop", ["02:00:00:00:00:fe", "02:00:00:00:00:01", 1, 1])
    path = p4_config("router-roles", "ipv4_router.p4", two_hosts.switch_ports, route)
    sw = Edgeflow([], extra=["--config", str(path)], log_name="p4-roles").start()
    try:
        master, slave = Conn.connect(sw.mgmt_port), Conn.connect(sw.mgmt_port)
        assert master.set_role(2, 1) == (2, 1) and slave.set_role(3, 1) == (3, 1)
        # As `edgeflow p4 insert RouterIngress.routes --match 10.0.2.0/24 --action next_hop
        # --args 02:00:00:00:00:fe 02:00:00:00:00:02 2 2` sends it.
        insert = b"insert RouterIngress.routes next_hop 0 lpm:a000200/24 -- 2000000fe 200000002 2 2"

        def routes(conn):
            return conn.edgeflow_request(MODE_CONTROL, b"entries RouterIngress.routes")["ok"].splitlines()

        assert len(routes(slave)) == 1
        assert slave.edgeflow_request(MODE_CONTROL, insert) == is_slave
        assert slave.edgeflow_request(MODE_CONTROL, b"delete RouterIngress.routes - 0 lpm:a000100/24") == is_slave
        assert [r.split()[0] for r in routes(master)] == ["lpm:a000100/24"], "the slave changed the table"
        assert "RouterIngress.routes" in slave.edgeflow_request(MODE_CONTROL, b"tables")["ok"]
        assert slave.edgeflow_request(MODE_CONTROL, b"counter RouterIngress.routed 1") == {"ok": "packets=0 bytes=0"}

        filter_before = slave.edgeflow_request(LOG_FILTER)["filter"]
        assert slave.edgeflow_request(LOG_FILTER, b"debug") == is_slave
        assert master.edgeflow_request(LOG_FILTER) == {"filter": filter_before}, "the slave changed the log filter"

        assert slave.edgeflow_request(STATS_REPORT)["mode"] == "p4"
        assert slave.edgeflow_request(KERNEL_DUMP) == {"error": "this switch has no kernel fast path (datapath user)"}
        # Never a slave's to send, armed or not.
        assert slave.edgeflow_request(TEST_PANIC) == is_slave

        assert master.edgeflow_request(MODE_CONTROL, insert) == {"ok": "inserted"}
        assert len(routes(slave)) == 2
        assert master.edgeflow_request(LOG_FILTER, b"debug") == {"filter": "debug"}
        assert slave.edgeflow_request(LOG_FILTER) == {"filter": "debug"}
    finally:
        assert sw.stop() == 0, sw.log()
