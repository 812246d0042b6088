"""edgeflow's systemd unit under a real systemd as PID 1 (testbed/systemd_root.py): a Debian 12
root booted in a container, edgeflow installed in it by `make install`, two hosts in namespaces
on its ports. What tests/test_service.py checks against a socket playing systemd's part is
checked here against systemd itself: that the unit starts (readiness), forwards, is sandboxed as
`systemd-analyze security` scores it, and stops; that a refused reload fails `systemctl reload`;
that a restart on tc loses no frame; and that the watchdog keeps a live switch and restarts a
silent one. `make test-init` runs these (they are not in
`make test`: the root is a setup step of its own)."""

import contextlib
import re
import shutil
import subprocess
import time

import pytest

from testbed import netns
from testbed.netns import Topology, sh
from testbed.systemd_root import BootedRoot, host_can_boot
from testbed.util import ROOT

pytestmark = pytest.mark.skipif(host_can_boot() is not None, reason=str(host_can_boot()))

#: The namespace the container's network is: the switch's two ports.
SWITCH_NS = f"{netns.PREFIX}-initsw"
#: `systemd-analyze security`'s exposure for the unit when this test was written; it may only go down.
EXPOSURE_MAX = 2.9


def config(datapath):
    return (f'datapath = "{datapath}"\nmode = "learning"\n\n'
            f'[[port]]\nname = "{netns.PREFIX}-ip1"\n\n[[port]]\nname = "{netns.PREFIX}-ip2"\n')


@contextlib.contextmanager
def two_hosts_and_a_root(tmp_path):
    """Two hosts whose switch-side interfaces are in the namespace the container's network is,
    and the container (not booted yet)."""
    topo = Topology("i")
    try:
        h1, h2 = topo.add_host(), topo.add_host()
        sh("ip", "netns", "add", SWITCH_NS)
        for h in (h1, h2):
            sh("ip", "link", "set", h.switch_side, "netns", SWITCH_NS)
            sh("ip", "-n", SWITCH_NS, "link", "set", h.switch_side, "up")
        with BootedRoot(tmp_path, SWITCH_NS) as root:
            yield h1, h2, root
    finally:
        topo.teardown()
        sh("ip", "netns", "del", SWITCH_NS, check=False)


@pytest.fixture
def hosts_and_root(tmp_path):
    with two_hosts_and_a_root(tmp_path) as (h1, h2, root):
        yield h1, h2, root.install()


def journal(root):
    return root.run("journalctl", "-u", "edgeflow", "--no-pager", "-o", "cat", check=False).stdout


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_the_unit_starts_ready_forwards_and_stops_under_systemd(hosts_and_root, datapath):
    h1, h2, root = hosts_and_root
    root.write("/etc/edgeflow/edgeflow.toml", config(datapath))
    root.boot()
    # Type=notify: `systemctl start` returns once the switch said READY=1, so it is active now,
    # not "activating", and it forwards at once.
    started = time.monotonic()
    start = root.run("systemctl", "start", "edgeflow", check=False, timeout=90)
    assert start.returncode == 0, f"{start.stderr}\n{journal(root)}"
    assert root.run("systemctl", "is-active", "edgeflow", check=False).stdout.strip() == "active", journal(root)
    status = root.run("systemctl", "show", "edgeflow", "-p", "MainPID,NRestarts,User,Type,WatchdogUSec").stdout
    assert "Type=notify" in status and "User=edgeflow" in status and "NRestarts=0" in status, status
    received, sent, _ = h1.ping(h2.addr, count=5, interval=0.2)
    assert received == sent, f"{received}/{sent} pings through the switch; {journal(root)}"
    log = journal(root)
    # systemd says "Started" of a Type=notify unit only once READY=1 came.
    assert "Started edgeflow.service" in log, log
    if datapath == "tc":
        # The fast path was pinned where the unit's ExecStartPre made room for it, as its user.
        pinned = root.run("ls", "/sys/fs/bpf/edgeflow", check=False)
        assert pinned.returncode == 0 and pinned.stdout.split(), f"{pinned.stdout}{pinned.stderr}\n{log}"
    # Sandboxed as the unit says: the score may only go down.
    security = root.run("systemd-analyze", "security", "--no-pager", "edgeflow.service", check=False).stdout
    exposure = float(security.strip().splitlines()[-1].split("exposure level for edgeflow.service:")[1].split()[0])
    assert exposure <= EXPOSURE_MAX, security[-1500:]
    stop = root.run("systemctl", "stop", "edgeflow", check=False, timeout=60)
    assert stop.returncode == 0 and root.run("systemctl", "is-active", "edgeflow", check=False).stdout.strip() == \
        "inactive", journal(root)
    print(f"{datapath}: started, forwarded and stopped in {time.monotonic() - started:.1f} s; exposure {exposure}")


def test_a_refused_reload_fails_systemctl_reload_with_its_reason(hosts_and_root):
    h1, h2, root = hosts_and_root
    root.write("/etc/edgeflow/edgeflow.toml", config("user"))
    root.boot()
    assert root.run("systemctl", "start", "edgeflow", check=False, timeout=90).returncode == 0, journal(root)
    # A change only a restart can make: refused whole, the running configuration stays.
    root.write("/etc/edgeflow/edgeflow.toml", "tables = 8\n" + config("user"))
    refused = root.run("systemctl", "reload", "edgeflow", check=False, timeout=90)
    assert refused.returncode != 0, f"systemctl reload said 0 to a refused configuration\n{journal(root)}"
    assert "tables" in journal(root).split("configuration refused")[-1], journal(root)
    assert root.run("systemctl", "is-active", "edgeflow", check=False).stdout.strip() == "active", journal(root)
    received, sent, _ = h1.ping(h2.addr, count=3, interval=0.2)
    assert received == sent, f"{received}/{sent} pings after the refused reload; {journal(root)}"
    # One that can be applied live is: systemctl reload says 0.
    root.write("/etc/edgeflow/edgeflow.toml", config("user") + "\n# edited\n")
    applied = root.run("systemctl", "reload", "edgeflow", check=False, timeout=90)
    assert applied.returncode == 0, f"{applied.stderr}\n{journal(root)}"
    import json
    reloads = json.loads(root.run("edgeflow", "stats", "--json").stdout)["reloads"]
    assert (reloads["applied"], reloads["refused"], reloads["last"]["result"]) == (1, 1, "applied"), reloads


def test_systemctl_restart_loses_no_ping_on_tc(hosts_and_root):
    """The unit passes --keep-fastpath: while systemd stops the switch and starts it again, the
    kernel forwards on with what it held, and the new process takes it over."""
    h1, h2, root = hosts_and_root
    root.write("/etc/edgeflow/edgeflow.toml", config("tc"))
    root.boot()
    assert root.run("systemctl", "start", "edgeflow", check=False, timeout=90).returncode == 0, journal(root)
    # Both directions learned, and in the kernel, before the stream starts.
    assert h1.ping(h2.addr, count=3, interval=0.2)[0] == 3, journal(root)
    pid_before = root.run("systemctl", "show", "edgeflow", "-p", "MainPID", "--value").stdout.strip()
    stream = h1.popen("ping", "-n", "-i", "0.01", "-c", "400", "-W", "1", h2.addr)
    time.sleep(1.0)
    restart = root.run("systemctl", "restart", "edgeflow", check=False, timeout=90)
    out, _ = stream.communicate(timeout=60)
    assert restart.returncode == 0, journal(root)
    pid_after = root.run("systemctl", "show", "edgeflow", "-p", "MainPID", "--value").stdout.strip()
    assert pid_after not in ("0", pid_before), (pid_before, pid_after)
    sent, received = (int(x) for x in re.search(r"(\d+) packets transmitted, (\d+) received", out).groups())
    assert (sent, received) == (400, 400), f"{received}/{sent} pings across the restart\n{journal(root)}"
    assert "took over" in journal(root).lower() or "kept" in journal(root).lower(), journal(root)


def test_the_watchdog_keeps_a_live_switch_and_restarts_a_silent_one(hosts_and_root):
    """With the watchdog period cut to 2 s (a drop-in), a switch that pings it stays up past
    several periods; one that goes silent (stopped whole here: tests/test_service.py freezes the
    forwarding thread alone, which a container's cgroups do not allow) is killed and restarted by
    systemd, and forwards again."""
    h1, h2, root = hosts_and_root
    root.write("/etc/edgeflow/edgeflow.toml", config("user"))
    root.write("/etc/systemd/system/edgeflow.service.d/watchdog.conf", "[Service]\nWatchdogSec=2s\nRestartSec=0.5s\n")
    root.boot()
    assert root.run("systemctl", "start", "edgeflow", check=False, timeout=90).returncode == 0, journal(root)
    show = lambda *p: dict(l.split("=", 1) for l in root.run("systemctl", "show", "edgeflow", "-p", ",".join(p)).stdout.split("\n") if "=" in l)
    time.sleep(5)
    alive = show("NRestarts", "MainPID", "WatchdogUSec")
    assert alive["NRestarts"] == "0" and alive["WatchdogUSec"] == "2s", (alive, journal(root))
    # MainPID is a number in the container's PID namespace: the signal is sent from inside.
    root.run("kill", "-STOP", alive["MainPID"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        now = show("NRestarts", "MainPID", "ActiveState")
        if now["NRestarts"] == "1" and now["ActiveState"] == "active" and now["MainPID"] not in ("0", alive["MainPID"]):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"not restarted: {now}\n{journal(root)}")
    assert "watchdog timeout" in journal(root).lower(), journal(root)
    assert h1.ping(h2.addr, count=3, interval=0.2)[0] == 3, journal(root)


def test_the_debian_package_installs_runs_and_removes_under_systemd(tmp_path):
    """`make package`'s amd64 .deb, installed by dpkg into the booted Debian 12 root: the account
    is made, systemd knows the unit (not enabled: a switch needs its ports first), it starts and
    forwards; an edited config survives a reinstall; remove stops it and keeps the config, purge
    takes that too."""
    out = tmp_path / "packages"
    deb = subprocess.run(["scripts/package.sh", "deb", "amd64", "target/release/edgeflow", str(out)], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout.strip()
    with two_hosts_and_a_root(tmp_path) as (h1, h2, root):
        root.copy().boot()
        shutil.copy(deb, root.root / "var/tmp/edgeflow.deb")
        installed = root.run("dpkg", "-i", "/var/tmp/edgeflow.deb", check=False, timeout=120)
        assert installed.returncode == 0, installed.stdout + installed.stderr
        assert root.run("getent", "passwd", "edgeflow", check=False).returncode == 0
        assert root.run("systemctl", "is-enabled", "edgeflow", check=False).stdout.strip() == "disabled"
        root.write("/etc/edgeflow/edgeflow.toml", config("tc"))
        assert root.run("systemctl", "start", "edgeflow", check=False, timeout=90).returncode == 0, journal(root)
        assert h1.ping(h2.addr, count=3, interval=0.2)[0] == 3, journal(root)
        again = root.run("dpkg", "-i", "--force-confold", "/var/tmp/edgeflow.deb", check=False, timeout=120)
        assert again.returncode == 0, again.stdout + again.stderr
        assert (root.root / "etc/edgeflow/edgeflow.toml").read_text() == config("tc"), "the edited config went"
        assert root.run("dpkg", "-r", "edgeflow", check=False, timeout=120).returncode == 0
        assert root.run("systemctl", "is-active", "edgeflow", check=False).stdout.strip() == "inactive"
        assert not (root.root / "usr/bin/edgeflow").exists()
        assert (root.root / "etc/edgeflow/edgeflow.toml").exists(), "remove keeps the config"
        assert root.run("dpkg", "-P", "edgeflow", check=False, timeout=120).returncode == 0
        assert not (root.root / "etc/edgeflow/edgeflow.toml").exists(), "purge removes the config"
