"""`--metrics`: a real Prometheus (Debian 12's, unpacked by scripts/setup.sh) scrapes switches
over loopback (OpenFlow with a controller, AFDX, LESS, all on tc), and what its HTTP API returns
is what `edgeflow stats --json` reports, read before and after the scrape (each sample between the
two). promtool lints the exposition."""

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from testbed.switches import EDGEFLOW_BIN, Edgeflow
from testbed.util import ROOT, free_port, run_dir, wait_for

PROMETHEUS = ROOT / "build/tools/prometheus/usr/bin"


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


class Prometheus:
    """Scrapes each of `targets` ({job: address}) every 200 ms."""

    def __init__(self, targets, tmp):
        self.port = free_port()
        config = tmp / "prometheus.yml"
        text = "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\nscrape_configs:\n"
        for job, target in targets.items():
            text += f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
        config.write_text(text)
        self.log = open(run_dir("logs") / "prometheus.log", "w")
        self.proc = subprocess.Popen([str(PROMETHEUS / "prometheus"), f"--config.file={config}",
                                      f"--storage.tsdb.path={tmp / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def raw(self, q):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            r = json.loads(get(url))
        except (urllib.error.URLError, ConnectionError):
            return []
        assert r["status"] == "success", r
        return r["data"]["result"]

    def query(self, q):
        """{frozenset(labels): value} of an instant query."""
        return {frozenset((k, v) for k, v in s["metric"].items() if k not in ("job", "instance", "__name__")):
                float(s["value"][1]) for s in self.raw(q)}

    def one(self, q):
        values = list(self.query(q).values())
        assert len(values) == 1, (q, values)
        return values[0]

    def job(self, job):
        """{(name, frozenset(labels)): value} of every series of `job`'s last scrape."""
        return {(s["metric"]["__name__"], frozenset((k, v) for k, v in s["metric"].items()
                                                    if k not in ("job", "instance", "__name__"))): float(s["value"][1])
                for s in self.raw(f'{{job="{job}"}}')}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


SAMPLE = re.compile(r'^([a-z_0-9]+)(?:\{(.*)\})? (\S+)$')

# Where the report's mode counters, kernel figures and channel events are exported (the table
# of docs/metrics.md, written out again here so that the scrape is held to the documented names):
# (group kind, key) -> (family, labels). `id` stands for the group's id (a VL's, a meter's).
AFDX_VL_DROPS = {"bad_source", "wrong_port", "undersize", "oversize", "policed", "wrong_network", "bad_ethertype",
                 "bad_ip"}
LESS_DROPS = {"truncated", "too_many_labels", "port_zero", "bad_ttl", "not_ip", "unknown_port", "no_route",
              "budget_spent", "no_host", "multicast", "not_less"}


def mode_series(group, key):
    """(family, labels) of a mode counter of the report's group `group`."""
    kind, _, id_ = group.partition(" ")
    fixed = {
        ("megaflow cache", "entries"): ("edgeflow_megaflow_cache_entries", {}),
        ("megaflow cache", "flushes"): ("edgeflow_megaflow_cache_flushes_total", {}),
        ("mac table", "addresses"): ("edgeflow_mac_table_addresses", {}),
        ("switch", "not_stream"): ("edgeflow_tsn_dropped_frames_total", {"reason": key}),
        ("labels", "backtracked"): ("edgeflow_less_rerouted_frames_total", {"case": key}),
        ("labels", "hellos_sent"): ("edgeflow_less_hellos_sent_total", {}),
        ("labels", "protocol_in"): ("edgeflow_less_protocol_received_frames_total", {}),
        ("labels", "protocol_bad"): ("edgeflow_less_protocol_refused_frames_total", {"reason": "bad"}),
        ("labels", "protocol_on_edge_port"): ("edgeflow_less_protocol_refused_frames_total", {"reason": "edge_port"}),
        ("labels", "hosts_over_port_limit"): ("edgeflow_less_over_limit_total", {"limit": "hosts_per_port"}),
        ("labels", "host_queries_over_limit"): ("edgeflow_less_over_limit_total", {"limit": "host_queries"}),
        ("labels", "query_origins_over_limit"): ("edgeflow_less_over_limit_total", {"limit": "query_origins"}),
        ("labels", "arp_replies"): ("edgeflow_less_neighbour_replies_total", {"protocol": "arp"}),
        ("labels", "nd_replies"): ("edgeflow_less_neighbour_replies_total", {"protocol": "nd"}),
        ("fabric", "neighbours_silenced"): ("edgeflow_less_neighbours_silenced_total", {}),
        ("fabric", "announcement_frames"): ("edgeflow_less_announcement_frames", {}),
        ("vl", "frames_in"): ("edgeflow_afdx_vl_received_frames_total", {"vl": id_}),
        ("vl", "bytes_in"): ("edgeflow_afdx_vl_received_bytes_total", {"vl": id_}),
        ("vl", "frames_out"): ("edgeflow_afdx_vl_sent_frames_total", {"vl": id_}),
        ("meter", "packets_in"): ("edgeflow_meter_packets_total", {"meter": id_}),
        ("meter", "bytes_in"): ("edgeflow_meter_bytes_total", {"meter": id_}),
        ("meter", "band_packets"): ("edgeflow_meter_band_packets_total", {"meter": id_}),
        ("meter", "band_bytes"): ("edgeflow_meter_band_bytes_total", {"meter": id_}),
        ("group", "packets"): ("edgeflow_group_packets_total", {"group": id_}),
        ("group", "bytes"): ("edgeflow_group_bytes_total", {"group": id_}),
    }
    if (group, key) in fixed:
        return fixed[group, key]
    if (kind, key) in fixed and id_:
        return fixed[kind, key]
    if group == "megaflow cache" and key in ("retired", "expired", "evicted"):
        return "edgeflow_megaflow_cache_removed_total", {"reason": key}
    if group == "mac table" and key.startswith("evicted_"):
        return "edgeflow_mac_table_evicted_total", {"reason": key.removeprefix("evicted_")}
    if group == "switch" and key in ("bad_destination", "unknown_vl"):
        return "edgeflow_afdx_dropped_frames_total", {"reason": key}
    if kind == "vl" and key in AFDX_VL_DROPS:
        return "edgeflow_afdx_dropped_frames_total", {"vl": id_, "reason": key}
    if group == "labels" and key in ("shifted", "popped", "delivered", "pushed", "local"):
        return "edgeflow_less_forwarded_frames_total", {"action": key}
    if group == "labels" and key.startswith("rerouted_"):
        return "edgeflow_less_rerouted_frames_total", {"case": key.removeprefix("rerouted_")}
    if group == "labels" and key in LESS_DROPS:
        return "edgeflow_less_dropped_frames_total", {"reason": key}
    if group == "fabric" and key in ("addresses", "root", "neighbours", "hosts"):
        return f"edgeflow_less_{key}", {}
    raise AssertionError(f"no family for {group!r} {key!r}: the test's table or docs/metrics.md is behind")


def fastpath_series(section, key):
    if section == "labels":
        if key == "ports_marked_down":
            return "edgeflow_fastpath_ports_marked_down_total", {}
        return "edgeflow_fastpath_less_frames_total", {"action": key}
    return {"held": ("edgeflow_fastpath_afdx_links", {}),
            "kept_for_priority": ("edgeflow_fastpath_afdx_links_kept_for_priority", {}),
            "decided": ("edgeflow_fastpath_afdx_frames_total", {}),
            "up": ("edgeflow_fastpath_afdx_sent_up_frames_total", {})}[key]


CHANNEL = {
    "fail_open_entered": ("edgeflow_fail_open_entered_total", {}),
    "sessions": ("edgeflow_openflow_sessions_started_total", {}),
    "sessions_ended": ("edgeflow_openflow_sessions_ended_total", {}),
    "connections_refused": ("edgeflow_openflow_connections_refused_total", {"reason": "too_many_connections"}),
    "handshakes_refused": ("edgeflow_openflow_connections_refused_total", {"reason": "too_many_handshakes"}),
    "handshakes_failed": ("edgeflow_openflow_handshakes_failed_total", {}),
    "requests_too_big": ("edgeflow_openflow_messages_refused_total", {"reason": "too_big"}),
    "malformed": ("edgeflow_openflow_messages_refused_total", {"reason": "malformed"}),
    "packet_ins_limited": ("edgeflow_openflow_packet_ins_limited_total", {}),
    "async_dropped_packet_in": ("edgeflow_openflow_async_messages_dropped_total", {"kind": "packet_in"}),
    "async_dropped_flow_removed": ("edgeflow_openflow_async_messages_dropped_total", {"kind": "flow_removed"}),
    "async_dropped_port_status": ("edgeflow_openflow_async_messages_dropped_total", {"kind": "port_status"}),
    "slow_readers_dropped": ("edgeflow_openflow_slow_readers_closed_total", {}),
    "p4runtime_slow_readers_dropped": ("edgeflow_p4runtime_slow_readers_closed_total", {}),
}


def channel_series(key):
    if key in CHANNEL:
        return CHANNEL[key]
    assert key.startswith("p4runtime_"), key
    return f"edgeflow_{key}_total", {}


def registry():
    """{family: (type, label names)} as `edgeflow metrics-families` prints the registry."""
    out = subprocess.run([EDGEFLOW_BIN, "metrics-families"], capture_output=True, text=True, check=True).stdout
    families = {}
    for line in out.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        families[cells[0].strip("`")] = (cells[1], set(re.findall(r"`(\w+)`", cells[2])))
    return families


def check_families(body, families):
    """An exposition's families: each typed once, with all its samples under that TYPE line, each
    in the registry with its type, and each sample's labels among the family's own."""
    typed = []
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in typed, f"{name} typed twice"
            assert families.get(name, (None,))[0] == kind, (name, kind, families.get(name))
            typed.append(name)
        elif line and not line.startswith("#"):
            name, labels, _ = SAMPLE.match(line).groups()
            assert typed and typed[-1] == name, f"{line!r} is not under its family's TYPE line ({typed[-1:]})"
            names = set(re.findall(r'(\w+)="', labels or ""))
            assert names <= families[name][1], (line, families[name][1])
    return typed


def exposition(body):
    """{(name, frozenset(labels)): value} of an exposition's samples."""
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, labels, value = SAMPLE.match(line).groups()
            out[name, frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or ""))] = float(value)
    return out


def test_prometheus_scrapes_what_stats_reports(two_hosts, tmp_path):
    """Three switches on tc, one Prometheus: an OpenFlow switch with a controller (standalone
    fail mode), meters and groups; an AFDX switch with a virtual link in use; a LESS root with a
    host. What the switch exposes for the controller session and fail-open is read while the
    controller is there, and scraped once it has been gone long enough for the switch to learn on
    its own; every counter group of the three modes, the kernel's link and label figures, and every
    channel counter, are scraped under their documented families (docs/metrics.md) and held to the
    reports. AFDX drop reasons come as labels of one family, and each exposition types each family
    once, with only the families and labels `edgeflow metrics-families` lists."""
    from testbed.afdx import LOADGEN_BIN, VL, config_text
    from testbed.ofpeer import Controller
    from testbed.switches import start_all, stop_all

    h1, h2 = two_hosts.hosts
    of_ports = two_hosts.switch_ports
    h3, h4, h5 = (two_hosts.add_host() for _ in range(3))
    metrics = {job: free_port() for job in ("edgeflow", "afdx", "less")}
    afdx_toml, less_toml = tmp_path / "afdx.toml", tmp_path / "less.toml"
    afdx_toml.write_text(config_text([VL(10, 1, [2], bag_ms=2, smax=300, jitter_us=500)],
                                     ports=[h3.switch_side, h4.switch_side]))
    less_toml.write_text(f'mode = "less"\n[[port]]\nname = "{h5.switch_side}"\n[less]\nroot = true\n')
    ctl = Controller()
    sw = Edgeflow(of_ports, controllers=[ctl.target], fail_mode="standalone", datapath="tc",
                  extra=["--metrics", str(metrics["edgeflow"]), "--fail-open-delay", "1"], log_name="metrics")
    others = {job: Edgeflow([], datapath="tc", extra=["--config", str(path), "--metrics", str(metrics[job])],
                            log_name=f"metrics-{job}") for job, path in (("afdx", afdx_toml), ("less", less_toml))}
    switches = {"edgeflow": sw, **others}
    # Prometheus first: it takes seconds to start, while the switches start and carry traffic.
    prom = Prometheus({job: f"127.0.0.1:{port}" for job, port in metrics.items()}, tmp_path)
    try:
        start_all(switches.values())
        c = ctl.accept()
        sw.ofctl("add-meter", "meter=1,pktps,band=type=drop,rate=100000")
        sw.ofctl("add-group", "group_id=5,type=all,bucket=output:2")
        sw.ofctl("add-flow", "priority=10,in_port=1,actions=meter:1,group:5")
        sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
        assert h1.ping(h2.addr, count=5, interval=0.1)[0] == 5

        # With its controller: one session open (the report counts the `stats` asking for it too),
        # not failed open.
        before = sw.stats()
        body = get(f"http://127.0.0.1:{metrics['edgeflow']}/metrics")
        after = sw.stats()
        exposed = exposition(body)
        for r in (before, after):
            assert r["channel"]["sessions"] - r["channel"]["sessions_ended"] >= 2, r["channel"]
            assert r["channel"]["fail_open"] is False and r["channel"]["fail_open_entered"] == 0, r["channel"]
        assert exposed["edgeflow_controller_sessions", frozenset()] == 1, body
        assert exposed["edgeflow_fail_open", frozenset()] == 0, body
        assert exposed["edgeflow_controller_connected", frozenset({("target", ctl.target)})] == 1, body
        # Without it the switch learns on its own, after a few seconds (the rest runs meanwhile).
        c.close()
        ctl.close()

        lint = subprocess.run([str(PROMETHEUS / "promtool"), "check", "metrics"], input=body, capture_output=True,
                              text=True)
        assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), lint.stdout + lint.stderr
        with pytest.raises(urllib.error.HTTPError) as nope:
            get(f"http://127.0.0.1:{metrics['edgeflow']}/nope")
        assert nope.value.code == 404
        # PORT alone is loopback only.
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{metrics['edgeflow']}"], capture_output=True,
                                   text=True).stdout
        assert [l.split()[3] for l in listening.splitlines()] == [f"127.0.0.1:{metrics['edgeflow']}"], listening

        # An AFDX virtual link in use (a frame every 2 ms for 0.2 s), and a host behind the LESS root.
        es = h3.run(LOADGEN_BIN, "es-send", "--iface-a", "eth0", "--es", "3", "--vl", "10:2:200", "--duration", "0.2")
        vl_sent = json.loads(es.stdout)["sent"]["10"]
        assert vl_sent >= 50, es.stdout
        h5.run("ping", "-c", "1", "-W", "0.2", "10.0.0.9", check=False)

        for job in metrics:
            wait_for(lambda: prom.query(f'up{{job="{job}"}}') and prom.one(f'up{{job="{job}"}}') == 1, timeout=30,
                     interval=0.1, what=f"Prometheus to scrape {job}")
        wait_for(lambda: sw.stats()["channel"]["fail_open"], timeout=10, what="the switch to fail open")
        before, since = {job: s.stats() for job, s in switches.items()}, time.time()
        # A scrape of each that began after its report was read.
        for job in metrics:
            at = f'timestamp(edgeflow_uptime_seconds{{job="{job}"}})'
            wait_for(lambda: prom.query(at) and prom.one(at) > since + 0.05, timeout=10, interval=0.05,
                     what=f"a scrape of {job} after the report")
        scraped = {job: prom.job(job) for job in metrics}
        after = {job: s.stats() for job, s in switches.items()}
        body = get(f"http://127.0.0.1:{metrics['edgeflow']}/metrics")

        def between(job, series, labels, pick):
            got = scraped[job].get((series, frozenset(labels.items())))
            assert got is not None, (job, series, labels, sorted(k for k in scraped[job] if k[0] == series))
            lo, hi = sorted((pick(before[job]), pick(after[job])))
            assert lo <= got <= hi, (job, series, labels, lo, got, hi)
            return got

        for i, no in enumerate((1, 2)):
            between("edgeflow", "edgeflow_port_receive_packets_total", {"port": str(no), "name": of_ports[i]},
                    lambda r: r["ports"][i]["rx_packets"])
            between("edgeflow", "edgeflow_port_transmit_bytes_total", {"port": str(no), "name": of_ports[i]},
                    lambda r: r["ports"][i]["tx_bytes"])
            assert between("edgeflow", "edgeflow_port_up", {"port": str(no), "name": of_ports[i]},
                           lambda r: r["ports"][i]["up"]) == 1
        assert between("edgeflow", "edgeflow_fastpath_hits_total", {}, lambda r: r["fast_path"]["hits"]) > 0
        between("edgeflow", "edgeflow_fastpath_upcalls_total", {}, lambda r: r["fast_path"]["upcalls"])
        # The two flows added (with a controller there is no NORMAL flow of native mode's).
        assert between("edgeflow", "edgeflow_table_flows", {"table": "0"}, lambda r: r["tables"][0]["flows"]) == 2

        def group(r, name, key):
            return next(g["counters"][key] for g in r["mode_counters"] if g["name"] == name)

        assert between("edgeflow", "edgeflow_meter_packets_total", {"meter": "1"},
                       lambda r: group(r, "meter 1", "packets_in")) >= 5
        assert between("edgeflow", "edgeflow_group_packets_total", {"group": "5"},
                       lambda r: group(r, "group 5", "packets")) >= 5
        for reason in before["edgeflow"]["drops"]:
            between("edgeflow", "edgeflow_dropped_total", {"reason": reason}, lambda r: r["drops"][reason])
        between("edgeflow", "edgeflow_queue_transmit_packets_total", {"port": "2", "name": of_ports[1], "queue": "0"},
                lambda r: r["ports"][1]["queues"][0]["tx_packets"])

        # The controller gone: failed open, once; no session open at the scrape (the reports
        # count their own). Every channel counter as the reports have it.
        assert between("edgeflow", "edgeflow_fail_open", {}, lambda r: r["channel"]["fail_open"]) == 1
        assert scraped["edgeflow"]["edgeflow_controller_connected", frozenset({("target", ctl.target)})] == 0
        assert between("edgeflow", "edgeflow_controller_sessions", {},
                       lambda r: r["channel"]["sessions"] - r["channel"]["sessions_ended"] - 1) == 0
        for key in before["edgeflow"]["channel"]:
            if key != "fail_open":
                between("edgeflow", *channel_series(key), lambda r: r["channel"][key])
        assert scraped["edgeflow"]["edgeflow_fail_open_entered_total", frozenset()] == 1

        # Every counter of every group of each mode's (OpenFlow's megaflow cache, MAC table,
        # meter and group; AFDX; LESS) and the kernel's figures for the AFDX links and LESS
        # labels it decides (tc), each under its documented family.
        for job in metrics:
            for g in before[job]["mode_counters"]:
                for key in g["counters"]:
                    between(job, *mode_series(g["name"], key), lambda r: group(r, g["name"], key))
            info = [dict(k[1]) for k in scraped[job] if k[0] == "edgeflow_build_info"]
            assert [(i["mode"], i["datapath"]) for i in info] == [(job if job != "edgeflow" else "openflow", "tc")], info
        for job, section in (("afdx", "links"), ("less", "labels")):
            assert before[job]["fast_path"][section], (job, before[job]["fast_path"])
            for key in before[job]["fast_path"][section]:
                between(job, *fastpath_series(section, key), lambda r: r["fast_path"][section][key])
        assert between("afdx", "edgeflow_afdx_vl_sent_frames_total", {"vl": "10"},
                       lambda r: group(r, "vl 10", "frames_out")) == vl_sent
        assert between("afdx", "edgeflow_fastpath_afdx_frames_total", {},
                       lambda r: r["fast_path"]["links"]["decided"]) == vl_sent
        assert between("less", "edgeflow_less_hosts", {}, lambda r: group(r, "fabric", "hosts")) == 1

        # AFDX drop reasons are labels of one family: the switch's (no VL) and each VL's, every
        # one the report has, and no family of the scrape is named after one.
        afdx_drops = {dict(labels).get("reason"): dict(labels).get("vl")
                      for name, labels in scraped["afdx"] if name == "edgeflow_afdx_dropped_frames_total"}
        assert afdx_drops == {**{r: "10" for r in AFDX_VL_DROPS}, "bad_destination": None, "unknown_vl": None}, \
            afdx_drops
        assert not [name for name, _ in scraped["afdx"] if any(r in name for r in AFDX_VL_DROPS | {"unknown_vl"})]

        # Each exposition: every family typed once, its samples under it, each family and its
        # labels the registry's (so that one name never mixes vl= and meter= series).
        families = registry()
        for job, port in metrics.items():
            typed = check_families(get(f"http://127.0.0.1:{port}/metrics"), families)
            assert "edgeflow_build_info" in typed and "process_open_fds" in typed, typed

        info = [dict(k[1]) for k in scraped["edgeflow"] if k[0] == "edgeflow_build_info"]
        assert [i["datapath"] for i in info] == ["tc"], info
        # The process's own figures, and a start time that stays put (the report's).
        assert scraped["edgeflow"]["edgeflow_start_time_seconds", frozenset()] == pytest.approx(
            before["edgeflow"]["start_time_s"], abs=1e-3)
        assert 1e6 < scraped["edgeflow"]["process_resident_memory_bytes", frozenset()] < 1e9
        assert scraped["edgeflow"]["process_open_fds", frozenset()] >= 3
        # Every sample of the exposition was taken in.
        samples = sum(1 for l in body.splitlines() if l and not l.startswith("#"))
        assert scraped["edgeflow"]["scrape_samples_scraped", frozenset()] == pytest.approx(samples, abs=4), samples
    finally:
        prom.stop()
        assert stop_all(switches.values()) == [0, 0, 0], [s.log()[-2000:] for s in switches.values()]


def test_a_scrape_loop_does_not_slow_forwarding(two_hosts):
    """50 scrapes a second of a switch whose kernel cache holds 15 000 entries take nothing from the
    frames its forwarding thread carries: a stream of 40 000 frames/s that the full cache sends up
    to userspace is delivered as well (≥ 0.95 as many) with the scrapes as without. A scrape reads
    the cache's entries back only if they were last read 100 ms ago or more, and a reading is a
    few batched calls. (Before, each scrape read every entry with a call of its own, ~18 ms of the
    thread: 76 scrapes were answered in 2 s and the stream kept 0.57 of its frames, against 0.91
    without them, itself cut by the thread's own reading every 100 ms.)"""
    import threading
    from testbed import loadgen
    from testbed.churn import Churner

    cached, up_rate = 15_000, 40_000
    h1, h2 = two_hosts.hosts
    port = free_port()
    extra = ["--metrics", f"127.0.0.1:{port}", "--fastpath-entries", str(cached)]
    with Edgeflow(two_hosts.switch_ports, datapath="tc", extra=extra) as sw:
        sw.ofctl("del-flows")
        with Churner(sw.target) as ctl:
            ctl.install(cached, 9000, 10_000, 2)
            ctl.install(100, 7000, 10_000, 2)

        def stream(sport, flows, rate, seconds):
            sent, got = loadgen.run(h1, h2, size=64, rate=rate, duration=seconds, send_engine="socket",
                                    recv_engine="socket",
                                    extra_send=["--sport", str(sport), "--dport", "10000", "--udp-flows", str(flows)])
            return got["received"] / sent["sent"]

        # Every one of the cached flows once in the kernel: its cache is full.
        stream(9000, cached, 40_000, 2 * cached / 40_000 + 0.1)
        fast = sw.stats()["fast_path"]
        assert fast["entries"] == cached, fast
        quiet = stream(7000, 100, up_rate, 2.0)
        stop, scrapes = threading.Event(), []

        def scrape_loop():
            due = time.monotonic()
            while not stop.is_set():
                if "edgeflow_build_info" in get(f"http://127.0.0.1:{port}/metrics"):
                    scrapes.append(time.monotonic())
                due += 0.02
                time.sleep(max(0.0, due - time.monotonic()))
        scraper = threading.Thread(target=scrape_loop)
        scraper.start()
        try:
            scraped = stream(7000, 100, up_rate, 2.0)
        finally:
            stop.set()
            scraper.join()
        print(f"\ndelivered without scrapes: {quiet:.3f}; with {len(scrapes)} scrapes in the stream's 2 s: "
              f"{scraped:.3f}")
        assert len(scrapes) >= 90, f"{len(scrapes)} scrapes answered in 2 s"
        assert quiet > 0.9, "the stream itself is within the switch's means"
        assert scraped >= 0.95 * quiet, (scraped, quiet)
