"""`--metrics`: a real Prometheus (Debian 12's, unpacked by scripts/setup.sh) scrapes the switch
over loopback, and what its HTTP API returns is what `edgeflow stats --json` reports, read before
and after the scrape (counters between the two, gauges equal). promtool lints the exposition."""

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from testbed.switches import Edgeflow
from testbed.util import ROOT, free_port, run_dir, wait_for

PROMETHEUS = ROOT / "build/tools/prometheus/usr/bin"


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


class Prometheus:
    def __init__(self, target, tmp):
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                          f"  - job_name: edgeflow\n    static_configs:\n      - targets: ['{target}']\n")
        self.log = open(run_dir("logs") / "prometheus.log", "w")
        self.proc = subprocess.Popen([str(PROMETHEUS / "prometheus"), f"--config.file={config}",
                                      f"--storage.tsdb.path={tmp / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, q):
        """{frozenset(labels): value} of an instant query."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            r = json.loads(get(url))
        except (urllib.error.URLError, ConnectionError):
            return {}
        assert r["status"] == "success", r
        return {frozenset((k, v) for k, v in s["metric"].items() if k not in ("job", "instance", "__name__")): float(s["value"][1])
                for s in r["data"]["result"]}

    def one(self, q):
        values = list(self.query(q).values())
        assert len(values) == 1, (q, values)
        return values[0]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


def test_prometheus_scrapes_what_stats_reports(two_hosts, tmp_path):
    h1, h2 = two_hosts.hosts
    port = free_port()
    sw = Edgeflow(two_hosts.switch_ports, datapath="tc", extra=["--metrics", str(port)], log_name="metrics").start()
    prom = None
    try:
        sw.ofctl("add-meter", "meter=1,pktps,band=type=drop,rate=100000")
        sw.ofctl("add-group", "group_id=5,type=all,bucket=output:2")
        sw.ofctl("add-flow", "priority=10,in_port=1,actions=meter:1,group:5")
        sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
        assert h1.ping(h2.addr, count=5, interval=0.1)[0] == 5

        body = get(f"http://127.0.0.1:{port}/metrics")
        lint = subprocess.run([str(PROMETHEUS / "promtool"), "check", "metrics"], input=body, capture_output=True,
                              text=True)
        assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), lint.stdout + lint.stderr
        with pytest.raises(urllib.error.HTTPError) as nope:
            get(f"http://127.0.0.1:{port}/nope")
        assert nope.value.code == 404
        # PORT alone is loopback only.
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout
        assert [l.split()[3] for l in listening.splitlines()] == [f"127.0.0.1:{port}"], listening

        prom = Prometheus(f"127.0.0.1:{port}", tmp_path)
        wait_for(lambda: prom.query('up{job="edgeflow"}') and prom.one('up{job="edgeflow"}') == 1, timeout=30,
                 interval=0.2, what="Prometheus to scrape the switch")
        before, since = sw.stats(), time.time()
        # A scrape that began after `before` was read.
        wait_for(lambda: prom.query("timestamp(edgeflow_uptime_seconds)") and
                 prom.one("timestamp(edgeflow_uptime_seconds)") > since + 0.05, timeout=10, interval=0.2,
                 what="a scrape after the report")
        q = {name: prom.query(name) for name in (
            "edgeflow_port_receive_packets_total", "edgeflow_port_transmit_bytes_total", "edgeflow_fastpath_hits_total",
            "edgeflow_fastpath_upcalls_total", "edgeflow_table_flows", "edgeflow_mode_packets_in_total",
            "edgeflow_mode_packets_total", "edgeflow_dropped_total", "edgeflow_queue_transmit_packets_total",
            "edgeflow_build_info", "edgeflow_port_up", "scrape_samples_scraped")}
        after = sw.stats()

        def between(series, labels, pick):
            got = q[series].get(frozenset(labels.items()))
            assert got is not None, (series, labels, q[series])
            lo, hi = pick(before), pick(after)
            assert lo <= got <= hi, (series, labels, lo, got, hi)
            return got

        for i, no in enumerate((1, 2)):
            between("edgeflow_port_receive_packets_total", {"port": str(no), "name": two_hosts.switch_ports[i]},
                    lambda r: r["ports"][i]["rx_packets"])
            between("edgeflow_port_transmit_bytes_total", {"port": str(no), "name": two_hosts.switch_ports[i]},
                    lambda r: r["ports"][i]["tx_bytes"])
            assert q["edgeflow_port_up"][frozenset({"port": str(no), "name": two_hosts.switch_ports[i]}.items())] == 1
        assert between("edgeflow_fastpath_hits_total", {}, lambda r: r["fast_path"]["hits"]) > 0
        between("edgeflow_fastpath_upcalls_total", {}, lambda r: r["fast_path"]["upcalls"])
        # The two flows added and native mode's own (a NORMAL flow with no controller).
        assert between("edgeflow_table_flows", {"table": "0"}, lambda r: r["tables"][0]["flows"]) == 3

        def group(r, name, key):
            return next(g["counters"][key] for g in r["mode_counters"] if g["name"] == name)

        assert between("edgeflow_mode_packets_in_total", {"meter": "1"}, lambda r: group(r, "meter 1", "packets_in")) >= 5
        assert between("edgeflow_mode_packets_total", {"group": "5"}, lambda r: group(r, "group 5", "packets")) >= 5
        for reason in before["drops"]:
            between("edgeflow_dropped_total", {"reason": reason}, lambda r: r["drops"][reason])
        between("edgeflow_queue_transmit_packets_total",
                {"port": "2", "name": two_hosts.switch_ports[1], "queue": "0"},
                lambda r: r["ports"][1]["queues"][0]["tx_packets"])
        info = q["edgeflow_build_info"]
        assert len(info) == 1 and dict(next(iter(info)))["datapath"] == "tc", info
        # Every sample of the exposition was taken in.
        samples = sum(1 for l in body.splitlines() if l and not l.startswith("#"))
        assert q["scrape_samples_scraped"][frozenset()] == pytest.approx(samples, abs=4), samples
    finally:
        if prom:
            prom.stop()
        assert sw.stop() == 0, sw.log()
