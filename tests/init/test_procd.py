"""edgeflow's OpenWrt package under OpenWrt's own service manager (testbed/procd_root.py): procd,
ubus, logd and uci built from OpenWrt's sources, the .ipk installed as opkg installs it (its
postinst is OpenWrt's default_postinst), the switch's ports named as the package's UCI config
names them (lan1..lan3, in the container's own namespace). What the issue asks of procd:
the switch runs as its user with only the capabilities its configuration needs; keep_fastpath in
UCI keeps a restart from losing frames on tc; logd gets each line with its own priority; and a
refused configuration fails `/etc/init.d/edgeflow reload` with its reason while the switch runs
on. `make test-init` runs these (not `make test`: the root and the userland are a setup step of
their own)."""

import contextlib
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from testbed import netns
from testbed.netns import Topology, sh
from testbed.procd_root import ProcdRoot, host_can_run
from testbed.util import ROOT

pytestmark = pytest.mark.skipif(host_can_run() is not None, reason=str(host_can_run()))

#: The namespace the container's network is: the switch's ports, under the package's names.
SWITCH_NS = f"{netns.PREFIX}-procdsw"
#: linux/capability.h's numbers: what the tc fast path needs, and so all the switch keeps.
TC_CAPABILITIES = (1 << 12) | (1 << 13) | (1 << 38) | (1 << 39)  # NET_ADMIN, NET_RAW, PERFMON, BPF


@pytest.fixture(scope="module")
def ipk(tmp_path_factory):
    """The x86_64 .ipk of this build: the package make package makes for a device, with this
    machine's binary in it."""
    out = tmp_path_factory.mktemp("ipk")
    return subprocess.run(["scripts/package.sh", "ipk", "x86_64", "target/release/edgeflow", str(out)], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def ports_and_root(tmp_path):
    """Two hosts on lan1 and lan2, lan3 a veth whose far end stays in the switch's namespace, and
    the root (not started)."""
    topo = Topology("p")
    try:
        h1, h2 = topo.add_host(), topo.add_host()
        sh("ip", "netns", "add", SWITCH_NS)
        for h, name in ((h1, "lan1"), (h2, "lan2")):
            sh("ip", "link", "set", h.switch_side, "netns", SWITCH_NS)
            sh("ip", "-n", SWITCH_NS, "link", "set", h.switch_side, "name", name)
        sh("ip", "-n", SWITCH_NS, "link", "add", "lan3", "type", "veth", "peer", "name", f"{netns.PREFIX}-lan3p")
        for name in ("lan1", "lan2", "lan3", f"{netns.PREFIX}-lan3p", "lo"):
            sh("ip", "-n", SWITCH_NS, "link", "set", name, "up")
        with ProcdRoot(tmp_path, SWITCH_NS) as root:
            yield h1, h2, root
    finally:
        sh("ip", "netns", "del", SWITCH_NS, check=False)  # the switch sides with it
        topo.teardown()
        # The kept fast path the package's switch pinned in the bpffs the container shares.
        sh("rm", "-rf", "/sys/fs/bpf/edgeflow", check=False)


@pytest.fixture
def installed(tmp_path, ipk):
    with ports_and_root(tmp_path) as (h1, h2, root):
        root.copy().boot()
        result = root.install_ipk(ipk)
        assert result.returncode == 0, result.stdout + result.stderr
        yield h1, h2, root, result


def instance(root):
    """procd's view of the switch's instance: `ubus call service list`."""
    listing = json.loads(root.run("ubus", "call", "service", "list", '{"name":"edgeflow"}').stdout or "{}")
    return listing.get("edgeflow", {}).get("instances", {}).get("instance1", {})


def wait_running(root, other_than=None, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = instance(root)
        if now.get("running") and now.get("pid") != other_than and stats(root):
            return now
        time.sleep(0.2)
    raise AssertionError(f"the switch is not running under procd: {instance(root)}\n{root.logread()[-3000:]}")


def stats(root):
    answer = root.run("edgeflow", "stats", "--json", check=False)
    return answer.returncode == 0 and json.loads(answer.stdout)


def uci(root, *changes):
    """`uci set` (or `uci delete`, for a change without a value) of the main section's options, then commit."""
    for change in changes:
        if "=" in change:
            root.run("uci", "set", f"edgeflow.main.{change}")
        else:
            root.run("uci", "delete", f"edgeflow.main.{change}")
    root.run("uci", "commit", "edgeflow")


def test_the_ipk_installs_and_procd_runs_the_switch_as_its_user(installed):
    h1, h2, root, result = installed
    # default_postinst made the package's account and enabled the service, and procd started it.
    account = root.run("getent", "passwd", "edgeflow", check=False).stdout.split(":")
    assert len(account) > 3, result.stdout + result.stderr
    assert (root.root / "etc/rc.d/S95edgeflow").is_symlink(), result.stdout + result.stderr
    running = wait_running(root)
    assert running["command"][-2:] == ["--user", "edgeflow"], running
    # Every thread as the user, with the tc fast path's four capabilities and no way to more.
    tasks = root.run("sh", "-c", f"for t in /proc/{running['pid']}/task/*; do cat $t/status; echo =; done").stdout
    threads = [dict(l.split(":", 1) for l in block.strip().splitlines()) for block in tasks.split("=\n") if block.strip()]
    assert len(threads) > 1, tasks
    for status in threads:
        assert status["Uid"].split() == [account[2]] * 4, status["Uid"]
        caps = {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")}
        assert caps == {"CapEff": TC_CAPABILITIES, "CapPrm": TC_CAPABILITIES, "CapBnd": TC_CAPABILITIES,
                        "CapInh": 0, "CapAmb": 0}, (status["Name"], caps)
        assert status["NoNewPrivs"].strip() == "1"
    # The package's config as shipped: tc, secure, a controller not there.
    report = stats(root)
    assert report["datapath"] == "tc" and len(report["ports"]) == 3, report
    # logd has each line at the priority the switch gave it, not all of them as daemon.err.
    log = root.logread()
    assert re.search(r"daemon\.info edgeflow\[\d+\]: forwarding ports=3", log), log[-3000:]
    assert re.search(r"daemon\.warn edgeflow\[\d+\]: cannot connect", log), log[-3000:]
    assert not re.search(r"daemon\.err edgeflow", log), log[-3000:]


def test_a_restart_under_procd_loses_no_ping_on_tc_with_keep_fastpath(installed):
    """keep_fastpath '1' (the package's UCI default) renders to the switch's keep_fastpath: while
    procd stops the switch and starts it again, the kernel forwards on with what it held."""
    h1, h2, root, _ = installed
    # The learning mode takes no controllers: while the package's one is listed, `edgeflow uci`
    # refuses the config by its line, and the reason reaches logd.
    uci(root, "mode=learning")
    root.run("/etc/init.d/edgeflow", "restart", check=False, timeout=60)
    assert re.search(r"daemon\.err edgeflow: (edgeflow: )?/etc/config/edgeflow:\d+: mode 'learning' takes no controllers",
                     root.logread()), root.logread()[-3000:]
    uci(root, "controller")
    assert root.run("/etc/init.d/edgeflow", "restart", check=False, timeout=60).returncode == 0
    before = wait_running(root)
    assert stats(root)["mode"] == "learning", stats(root)
    assert h1.ping(h2.addr, count=3, interval=0.2)[0] == 3, root.logread()[-3000:]
    stream = h1.popen("ping", "-n", "-i", "0.01", "-c", "400", "-W", "1", h2.addr)
    time.sleep(1.0)
    restart = root.run("/etc/init.d/edgeflow", "restart", check=False, timeout=60)
    out, _ = stream.communicate(timeout=60)
    assert restart.returncode == 0, restart.stdout + restart.stderr
    after = wait_running(root, other_than=before["pid"])
    sent, received = (int(x) for x in re.search(r"(\d+) packets transmitted, (\d+) received", out).groups())
    log = root.logread()
    assert (sent, received) == (400, 400), f"{received}/{sent} pings across the restart\n{log[-3000:]}"
    assert after["pid"] != before["pid"]
    assert re.search(r"took over|kept", log, re.IGNORECASE), log[-3000:]


def test_a_refused_config_fails_the_reload_with_its_reason_and_the_switch_runs_on(installed):
    h1, h2, root, _ = installed
    running = wait_running(root)
    # A value UCI cannot render: refused before the switch is asked.
    uci(root, "datapath=warp")
    bad = root.run("/etc/init.d/edgeflow", "reload", check=False, timeout=60)
    assert bad.returncode != 0 and "datapath" in bad.stdout + bad.stderr, (bad.returncode, bad.stdout, bad.stderr)
    # One only a restart can make: rendered, then refused by the switch, with its reason.
    uci(root, "datapath=user")
    refused = root.run("/etc/init.d/edgeflow", "reload", check=False, timeout=60)
    assert refused.returncode != 0 and "datapath" in refused.stdout + refused.stderr, \
        (refused.returncode, refused.stdout, refused.stderr)
    assert instance(root)["pid"] == running["pid"] and stats(root)["datapath"] == "tc"
    assert stats(root)["reloads"]["refused"] == 1, stats(root)["reloads"]
    # One it can apply live, through procd's own reload trigger: the config.change event a UCI
    # commit by `reload_config` sends. procd runs `/etc/init.d/edgeflow reload` itself.
    uci(root, "datapath=tc", "controller=tcp:192.168.1.11:6653")
    root.run("ubus", "call", "service", "event", '{"type":"config.change","data":{"package":"edgeflow"}}')
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and stats(root)["reloads"]["applied"] < 1:
        time.sleep(0.2)
    assert stats(root)["reloads"]["applied"] == 1, (stats(root)["reloads"], root.logread()[-3000:])
    assert instance(root)["pid"] == running["pid"]
