"""edgeflow as a service: `make install` and `make uninstall`, and the switch under a service
manager's protocol as its systemd unit runs it (docs/deploy.md). A socket this test binds plays
systemd's part: NOTIFY_SOCKET for readiness, the watchdog (fed while the forwarding thread
answers, silent while it is stuck), reload and stop; RUNTIME_DIRECTORY for the management
socket; JOURNAL_STREAM naming the switch's stderr. The switch runs as nobody holding exactly the
capabilities the unit grants, on the tc fast path."""

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from testbed.netns import sh
from testbed.switches import EDGEFLOW_BIN
from testbed.util import ROOT, free_port, run_dir, wait_for

UNIT = ROOT / "packaging" / "systemd" / "edgeflow.service"
#: The watchdog period the test's manager gives the switch (systemd's WatchdogSec=).
WATCHDOG_S = 0.5


def unit_capabilities():
    line = next(l for l in UNIT.read_text().splitlines() if l.startswith("AmbientCapabilities="))
    return [c.removeprefix("CAP_").lower() for c in line.split("=", 1)[1].split()]


def test_install_puts_everything_in_place_and_uninstall_removes_it(tmp_path):
    dest = tmp_path / "root"
    make = ["make", "-s", "-C", str(ROOT), f"DESTDIR={dest}", "PREFIX=/usr"]
    subprocess.run([*make, "install"], check=True, capture_output=True, timeout=600)
    installed = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    for want in ["usr/bin/edgeflow", "usr/share/man/man1/edgeflow.1",
                 "usr/share/man/man1/edgeflow-run.1", "usr/share/man/man1/edgeflow-log-level.1",
                 "usr/share/bash-completion/completions/edgeflow", "usr/share/zsh/vendor-completions/_edgeflow",
                 "usr/share/fish/vendor_completions.d/edgeflow.fish", "etc/edgeflow/edgeflow.toml",
                 "etc/edgeflow/edgeflow.toml.example", "usr/lib/systemd/system/edgeflow.service",
                 "usr/lib/sysusers.d/edgeflow.conf"]:
        assert want in installed, installed
    # What a device's flash holds: the switch without its debug info, and no test rig's tools.
    assert "usr/bin/edgeflow-loadgen" not in installed, installed
    sections = subprocess.run(["readelf", "-S", "-W", str(dest / "usr/bin/edgeflow")], capture_output=True, text=True,
                              check=True).stdout
    assert ".debug_info" not in sections and ".symtab" not in sections, "the installed switch is not stripped"
    # The man page is the parser's: every flag of `edgeflow run --help` is on it.
    page = subprocess.run(["man", "-l", str(dest / "usr/share/man/man1/edgeflow-run.1")], capture_output=True,
                          text=True, env={**os.environ, "MANWIDTH": "200"}, check=True).stdout
    flags = set(re.findall(r"--[a-z][a-z0-9-]+", subprocess.run([EDGEFLOW_BIN, "run", "--help"], capture_output=True,
                                                                  text=True).stdout))
    assert len(flags) > 20 and flags <= set(re.findall(r"--[a-z][a-z0-9-]+", page)), flags - set(page.split())
    # So are the completions: bash completes a subcommand and a flag.
    completion = dest / "usr/share/bash-completion/completions/edgeflow"
    for words, want in ((["edgeflow", "log"], "log-level"), (["edgeflow", "run", "--data"], "--datapath")):
        script = (f"source {completion}; COMP_WORDS=({' '.join(words)}); COMP_CWORD={len(words) - 1}; "
                  f"COMP_LINE='{' '.join(words)}'; COMP_POINT=${{#COMP_LINE}}; "
                  f"_edgeflow edgeflow {words[-1]} {words[-2]}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
        assert want in out, (words, out)
    # The unit as systemd reads it: no warning at all (the binary's path is the staged one here).
    unit = (dest / "usr/lib/systemd/system/edgeflow.service").read_text()
    assert "ExecStart=/usr/bin/edgeflow run --keep-fastpath --config /etc/edgeflow/edgeflow.toml" in unit
    staged = tmp_path / "edgeflow.service"
    staged.write_text(unit.replace("/usr/bin/edgeflow", str(dest / "usr/bin/edgeflow")))
    verify = subprocess.run(["systemd-analyze", "verify", "--man=no", str(staged)], capture_output=True, text=True)
    assert verify.returncode == 0 and not (verify.stdout + verify.stderr).strip(), verify.stdout + verify.stderr
    # The example the unit starts from is a config edgeflow accepts.
    check = subprocess.run([str(dest / "usr/bin/edgeflow"), "check-config", str(dest / "etc/edgeflow/edgeflow.toml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr

    # A second install keeps an edited config; uninstall removes everything else, and the
    # config only while it is the example.
    config = dest / "etc/edgeflow/edgeflow.toml"
    config.write_text(config.read_text() + "\n# edited\n")
    subprocess.run([*make, "install"], check=True, capture_output=True, timeout=600)
    assert config.read_text().endswith("# edited\n")
    subprocess.run([*make, "uninstall"], check=True, capture_output=True)
    assert [p for p in dest.rglob("*") if p.is_file()] == [config]
    config.unlink()
    subprocess.run([*make, "install"], check=True, capture_output=True, timeout=600)
    subprocess.run([*make, "uninstall"], check=True, capture_output=True)
    assert [p for p in dest.rglob("*") if p.is_file()] == []


class FakeManager:
    """What systemd is to a Type=notify service: a datagram socket whose messages are kept."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o777)
        self.messages = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            with self.lock:
                self.messages.append((time.monotonic(), data.decode()))

    def seen(self, prefix, since=0.0):
        with self.lock:
            return [m for t, m in self.messages if t >= since and m.startswith(prefix)]


@contextlib.contextmanager
def frozen_thread(pid, name):
    """Stops the thread called `name` of process `pid` while the others run on, as a thread stuck
    in a loop or a system call would be: alone in a threaded cgroup (v2) that is frozen. SIGSTOP
    cannot do it, stopping every thread of the process. On the way out the thread is thawed and
    the process goes back where it was."""
    mount = next((l.split()[1] for l in open("/proc/self/mounts") if l.split()[2] == "cgroup2"), None)
    assert mount, "no cgroup2 hierarchy mounted: a thread cannot be frozen alone"
    tid = next(int(t) for t in os.listdir(f"/proc/{pid}/task")
               if Path(f"/proc/{pid}/task/{t}/comm").read_text().strip() == name)
    home = next(l.split(":", 2)[2].strip() for l in open(f"/proc/{pid}/cgroup") if l.startswith("0::"))
    domain = Path(mount) / f"ef-freeze-{pid}"
    stuck = domain / "stuck"
    domain.mkdir()
    try:
        (domain / "cgroup.procs").write_text(str(pid))
        stuck.mkdir()
        (stuck / "cgroup.type").write_text("threaded")
        (stuck / "cgroup.threads").write_text(str(tid))
        (stuck / "cgroup.freeze").write_text("1")
        wait_for(lambda: "frozen 1" in (stuck / "cgroup.events").read_text(), timeout=5, what=f"thread {name} frozen")
        yield
    finally:
        if stuck.exists():
            (stuck / "cgroup.freeze").write_text("0")
        if Path(f"/proc/{pid}").exists():
            (Path(mount + home) / "cgroup.procs").write_text(str(pid))
        for d in (stuck, domain):
            if d.exists():
                d.rmdir()


class Stderr:
    """The switch's stderr, a stream socket as journald's is; its lines are kept."""

    def __init__(self):
        self.ours, self.theirs = socket.socketpair()
        st = os.fstat(self.theirs.fileno())
        self.journal_stream = f"{st.st_dev}:{st.st_ino}"
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.ours.makefile("r", errors="replace"):
            self.lines.append(line.rstrip("\n"))

    def text(self):
        return "\n".join(self.lines)


def test_under_a_service_manager(two_hosts):
    # Not pytest's tmp_path: nobody cannot reach into root's 0700 directory of them.
    tmp_path = Path(tempfile.mkdtemp(prefix="ef-service-"))
    h1, h2 = two_hosts.hosts
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    shutil.chown(runtime, "nobody", "nogroup")
    os.chmod(tmp_path, 0o755)
    manager = FakeManager(tmp_path / "notify")
    stderr = Stderr()
    port = free_port()
    # Where the kept fast path is pinned: a directory of the service's user, as the unit makes
    # one (this machine's /sys/fs/bpf lets anyone through; systemd's is bound in, see the unit).
    bpf_dir = Path(f"/sys/fs/bpf/ef-service-{os.getpid()}")
    bpf_dir.mkdir()
    shutil.chown(bpf_dir, "nobody", "nogroup")
    caps = ",".join(f"+{c}" for c in unit_capabilities())
    env = {"PATH": os.environ["PATH"], "NOTIFY_SOCKET": str(tmp_path / "notify"),
           "WATCHDOG_USEC": str(int(WATCHDOG_S * 1e6)), "RUNTIME_DIRECTORY": str(runtime),
           "JOURNAL_STREAM": stderr.journal_stream, "EDGEFLOW_BPF_DIR": str(bpf_dir)}
    args = [x for p in two_hosts.switch_ports for x in ("--port", p)] + ["--keep-fastpath"]
    proc = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", f"--inh-caps={caps}",
                             f"--ambient-caps={caps}", EDGEFLOW_BIN, "run", *args, "--datapath", "tc", "--dpid", "e5",
                             "--listen", f"ptcp:{port}"], env=env, stdout=stderr.theirs, stderr=stderr.theirs)
    stderr.theirs.close()
    log = run_dir("logs") / "service.log"
    mgmt = runtime / "00000000000000e5.mgmt"
    tool_env = {**os.environ, "RUNTIME_DIRECTORY": str(runtime), "EDGEFLOW_BPF_DIR": str(bpf_dir)}

    def edgeflow(*a, check=True):
        return subprocess.run([EDGEFLOW_BIN, *a], capture_output=True, text=True, env=tool_env, timeout=10,
                              check=check)

    try:
        # Ready once its ports are open, its fast path is loaded and its sockets are bound: the
        # management socket is in the runtime directory systemd gave it by then.
        ready = wait_for(lambda: proc.poll() is not None or manager.seen("READY=1"), timeout=20,
                         what="READY=1")
        assert proc.poll() is None, stderr.text()
        assert ready[0].startswith("READY=1\nSTATUS=switching 2 ports, datapath tc"), ready
        assert mgmt.is_socket()
        for flow in ("priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"):
            sh("ovs-ofctl", "-O", "OpenFlow13", "add-flow", f"unix:{mgmt}", flow)
        assert h1.ping(h2.addr, count=3, interval=0.1)[0] == 3
        report = json.loads(edgeflow("stats", "--json").stdout)
        assert report["datapath"] == "tc" and report["fast_path"]["hits"] > 0, report["fast_path"]

        # The watchdog hears from it every half period while the forwarding thread answers.
        since = time.monotonic()
        wait_for(lambda: len(manager.seen("WATCHDOG=1", since)) >= 3, timeout=5, what="three watchdog pings")
        # And only then: with the forwarding thread stuck (the rest of the process running on,
        # saying that it has no answer), the manager hears nothing for longer than the watchdog's
        # period, which is what makes systemd restart the switch. A ping whose answer came just
        # before the thread stopped may still arrive in the first moments. (Asked every half
        # period, waited for half a period: the first "no answer" comes within a period.)
        with frozen_thread(proc.pid, "forwarding"):
            frozen_at, said = time.monotonic(), len(stderr.lines)
            silent_from = frozen_at + 0.1
            time.sleep(0.1 + WATCHDOG_S * 1.2)
            thawed_at = time.monotonic()
        with manager.lock:
            late = [t - frozen_at for t, m in manager.messages if silent_from <= t <= thawed_at and m == "WATCHDOG=1"]
        assert late == [] and thawed_at - silent_from > WATCHDOG_S, (late, thawed_at - frozen_at)
        wait_for(lambda: any("the forwarding thread did not answer" in l for l in stderr.lines[said:]),
                 timeout=5, what="the watchdog saying that it had no answer")
        wait_for(lambda: manager.seen("WATCHDOG=1", thawed_at), timeout=5, what="the watchdog again, thawed")

        # Lines as journald wants them: a priority, no time stamp, no colour.
        assert all(re.match(r"<[3-7]>", l) for l in stderr.lines), stderr.text()
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", stderr.text()) and "\x1b[" not in stderr.text()
        assert any(l.startswith("<6>") and "starting" in l for l in stderr.lines), stderr.text()

        # The log filter changes while it runs: a debug event shows only while debug is on.
        def probe(shown):
            """A connection closed before its hello: logged at debug. The switch's hello is read
            first, so that the close is a FIN, not a reset (unread data), which is a warning.
            Its lines once `shown` are there; half a second for lines that must not be."""
            before = len(stderr.lines)
            with socket.create_connection(("127.0.0.1", port)) as c:
                c.settimeout(5)
                head = c.recv(8, socket.MSG_WAITALL)
                length = int.from_bytes(head[2:4], "big")
                assert len(c.recv(length - 8, socket.MSG_WAITALL)) == length - 8
            found = lambda: [l for l in stderr.lines[before:] if "before its hello" in l]
            if shown:
                return wait_for(found, timeout=5, what="the probe's debug line")
            time.sleep(0.5)
            return found()

        assert edgeflow("log-level").stdout.strip() == "info"
        assert probe(shown=False) == []
        assert edgeflow("log-level", "debug").stdout.strip() == "debug"
        assert [l[:3] for l in probe(shown=True)] == ["<7>"]
        bad = edgeflow("log-level", "info,agent=loud", check=False)
        assert bad.returncode != 0 and "log filter 'info,agent=loud'" in bad.stderr, bad.stderr
        assert edgeflow("log-level", "info").stdout.strip() == "info"
        assert probe(shown=False) == []

        # Reload: RELOADING=1 with its monotonic time, then READY=1 again.
        since = time.monotonic()
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: manager.seen("READY=1", since), timeout=10, what="READY=1 after the reload")
        reloading = manager.seen("RELOADING=1", since)
        assert len(reloading) == 1 and re.fullmatch(r"RELOADING=1\nMONOTONIC_USEC=\d+", reloading[0]), reloading

        # The flows in the kernel again (the reload emptied it), for it to forward when stopped.
        assert h1.ping(h2.addr, count=2, interval=0.1)[0] == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert manager.seen("STOPPING=1")
        assert not mgmt.exists(), "the management socket is removed on exit"
        # What it kept, pinned as that user with those capabilities, is there for the next run
        # and goes with `stop --clean`.
        kept = bpf_dir / "00000000000000e5"
        assert {"ef_megaflows", "record"} <= set(os.listdir(kept)) and kept.stat().st_uid == pwd.getpwnam("nobody").pw_uid
        assert h1.ping(h2.addr, count=2, interval=0.1)[0] == 2, "the kernel forwards while the switch is stopped"
        cleaned = edgeflow("stop", "--clean", "e5")
        assert "switch 00000000000000e5: removed" in cleaned.stdout and not kept.exists(), cleaned
    finally:
        # Stopped (and reaped) first: `edgeflow stop` waits for the process to leave /proc, which
        # a child of this test does only once waited for.
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        edgeflow("stop", "--clean", "e5", check=False)
        shutil.rmtree(bpf_dir, ignore_errors=True)
        log.write_text(stderr.text())
        manager.sock.close()
        shutil.rmtree(tmp_path, ignore_errors=True)


#: linux/capability.h's numbers of the capabilities the unit names.
CAPABILITY_BITS = {"net_admin": 12, "net_raw": 13, "sys_admin": 21, "sys_nice": 23, "perfmon": 38, "bpf": 39}


def test_a_switch_started_as_root_runs_as_its_user_with_only_the_units_capabilities(two_hosts):
    """procd starts every service as root, and grants capabilities only through ujail: `--user`
    has the switch become that user itself before it opens anything, keeping the capabilities
    the systemd unit grants (the same four, for the tc fast path), in every thread, with no way
    to gain more. It then forwards through the kernel as the unit's switch does."""
    tmp_path = Path(tempfile.mkdtemp(prefix="ef-user-"))
    os.chmod(tmp_path, 0o755)
    h1, h2 = two_hosts.hosts
    nobody = pwd.getpwnam("nobody")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    shutil.chown(runtime, "nobody", "nogroup")
    bpf_dir = Path(f"/sys/fs/bpf/ef-user-{os.getpid()}")
    bpf_dir.mkdir()
    shutil.chown(bpf_dir, "nobody", "nogroup")
    env = {**os.environ, "RUNTIME_DIRECTORY": str(runtime), "EDGEFLOW_BPF_DIR": str(bpf_dir)}
    args = [x for p in two_hosts.switch_ports for x in ("--port", p)]
    mgmt = runtime / "00000000000000e6.mgmt"
    proc = subprocess.Popen([EDGEFLOW_BIN, "run", *args, "--datapath", "tc", "--dpid", "e6", "--keep-fastpath",
                             "--user", "nobody"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    def stats():
        r = subprocess.run([EDGEFLOW_BIN, "stats", "--json", "e6"], env=env, capture_output=True, text=True, timeout=10)
        return r.returncode == 0 and json.loads(r.stdout)

    try:
        # Up once its management socket answers: its threads are running by then.
        wait_for(lambda: proc.poll() is not None or stats(), timeout=20, what="the switch to answer")
        assert proc.poll() is None, proc.stdout.read()
        want = sum(1 << CAPABILITY_BITS[c] for c in unit_capabilities())
        tasks = list(Path(f"/proc/{proc.pid}/task").iterdir())
        assert len(tasks) > 1, "the switch's threads are each looked at"
        for task in tasks:
            status = dict(l.split(":", 1) for l in (task / "status").read_text().splitlines())
            ids = {k: status[k].split() for k in ("Uid", "Gid", "Groups")}
            assert ids == {"Uid": [str(nobody.pw_uid)] * 4, "Gid": [str(nobody.pw_gid)] * 4,
                           "Groups": [str(nobody.pw_gid)]}, (task, ids)
            caps = {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")}
            assert caps == {"CapEff": want, "CapPrm": want, "CapBnd": want, "CapInh": 0, "CapAmb": 0}, (task, caps)
            assert status["NoNewPrivs"].strip() == "1", task
        for flow in ("priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"):
            sh("ovs-ofctl", "-O", "OpenFlow13", "add-flow", f"unix:{mgmt}", flow)
        assert h1.ping(h2.addr, count=3, interval=0.1)[0] == 3
        report = stats()
        assert report["datapath"] == "tc" and report["fast_path"]["hits"] > 0, report["fast_path"]
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0, out
        assert f"running as user=nobody uid={nobody.pw_uid}" in out and "CAP_BPF" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run([EDGEFLOW_BIN, "stop", "--clean", "e6"], env=env, capture_output=True, timeout=10)
        shutil.rmtree(bpf_dir, ignore_errors=True)
        shutil.rmtree(tmp_path, ignore_errors=True)
    # A user that does not exist is refused at start, by name.
    bad = subprocess.run([EDGEFLOW_BIN, "run", "--port", "lo", "--user", "ef-no-such-user"], capture_output=True,
                         text=True, timeout=10)
    assert bad.returncode == 2 and "--user ef-no-such-user: no such user" in bad.stdout + bad.stderr, bad


def test_openwrt_uci_config_renders_to_a_config_the_switch_accepts(tmp_path):
    """The shipped /etc/config/edgeflow through `edgeflow uci`, as the procd script renders it,
    then `check-config --json` on the result; a bad value is refused at its UCI line."""
    openwrt = ROOT / "packaging" / "openwrt"
    assert subprocess.run(["sh", "-n", str(openwrt / "edgeflow.init")]).returncode == 0
    rendered = subprocess.run([EDGEFLOW_BIN, "uci", str(openwrt / "edgeflow.config")], capture_output=True,
                              text=True, check=True).stdout
    toml = tmp_path / "edgeflow.toml"
    toml.write_text(rendered)
    effective = json.loads(subprocess.run([EDGEFLOW_BIN, "check-config", "--json", str(toml)], capture_output=True,
                                          text=True, check=True).stdout)
    assert effective["datapath"] == "user" and effective["mode"] == "openflow" and effective["fail_mode"] == "secure"
    assert effective["controllers"] == ["tcp:192.168.1.10:6653"]
    assert effective["listen"] == ["ptcp:6634:127.0.0.1"] and effective["metrics"] == "127.0.0.1:9108"
    assert [(p["name"], p["number"]) for p in effective["port"]] == [("lan1", 1), ("lan2", 2), ("lan3", 3)]
    assert effective["tables"] == 64, "defaults are written out"
    assert effective["keep_fastpath"] is True, "procd's respawn keeps the kernel fast path forwarding"

    bad = tmp_path / "edgeflow"
    bad.write_text((openwrt / "edgeflow.config").read_text().replace("option datapath 'user'", "option datapath 'dpdk'"))
    line = next(i for i, l in enumerate(bad.read_text().splitlines(), 1) if "'dpdk'" in l)
    r = subprocess.run([EDGEFLOW_BIN, "uci", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith(f"edgeflow: {bad}:{line}: "), r.stderr


def test_a_panic_ends_the_process_for_its_supervisor_to_restart(two_hosts, monkeypatch):
    """A panic on the forwarding thread ends the process at once, with status 101 and the thread
    and the panic in its log, where the agent used to answer on with nothing forwarding until a
    watchdog's period ran out. The request that panics it is armed only by EDGEFLOW_TEST_PANIC=1
    in the environment the switch starts in: without it the same request is an unknown one and
    the switch forwards on; a slave may not send it either way. The unit and the procd script
    start again a process that ends so."""
    from testbed.ofpeer import TEST_PANIC, Conn, edgeflow_request_bytes
    from testbed.switches import Edgeflow
    h1, h2 = two_hosts.hosts
    unarmed = Edgeflow(two_hosts.switch_ports, log_name="panic-unarmed").start()
    try:
        assert Conn.connect(unarmed.mgmt_port).edgeflow_request(TEST_PANIC) == (1, 3), "OFPBRC_BAD_EXPERIMENTER"
        time.sleep(0.5)
        assert unarmed.alive() and h1.ping(h2.addr, count=1)[0] == 1
    finally:
        assert unarmed.stop() == 0, unarmed.log()

    monkeypatch.setenv("EDGEFLOW_TEST_PANIC", "1")
    sw = Edgeflow(two_hosts.switch_ports, log_name="panic").start()
    try:
        assert "EDGEFLOW_TEST_PANIC=1: a controller (master or equal) can crash this switch" in sw.log()
        slave = Conn.connect(sw.mgmt_port)
        assert slave.set_role(3, 1) == (3, 1)
        assert slave.edgeflow_request(TEST_PANIC) == (1, 10), "OFPBRC_IS_SLAVE"
        assert sw.alive() and h1.ping(h2.addr, count=1)[0] == 1
        equal = Conn.connect(sw.mgmt_port)
        asked = time.monotonic()
        equal.send(edgeflow_request_bytes(TEST_PANIC))
        status = sw.proc.wait(timeout=10)
        took = time.monotonic() - asked
    finally:
        sw.stop()
    log = sw.log()
    print(f"\nthe process ended {took * 1000:.0f} ms after the request, status {status}")
    assert status == 101 and took < 3, (status, took, log[-3000:])
    assert re.search(r"thread 'forwarding' panicked at crates/datapath/src/switch/control\.rs:\d+:\d+: "
                     r"the test panic was requested \(EDGEFLOW_TEST_PANIC armed it\); ending the process", log), log[-3000:]
    # Both supervisors start it again: a non-zero status is a failure to systemd (the unit counts
    # no other status as success), and procd respawns whatever ends.
    unit = UNIT.read_text()
    assert re.search(r"^Restart=on-failure$", unit, re.M) and "SuccessExitStatus" not in unit, unit
    init = (ROOT / "packaging" / "openwrt" / "edgeflow.init").read_text()
    assert re.search(r"^\s*procd_set_param respawn\b", init, re.M), init



def test_syslog_lines_carry_their_priority(two_hosts, tmp_path):
    """Under procd (OpenWrt) stderr reaches logd as daemon.err, every line alike:
    `EDGEFLOW_SYSLOG=/dev/log` sends each line as a syslog datagram with its own priority
    (daemon facility: info 30, warning 28), which logd ranks. A socket here plays /dev/log."""
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "log"
    log.bind(str(path))
    log.settimeout(10)
    config = tmp_path / "edgeflow.toml"
    ports = "".join(f'[[port]]\nname = "{p}"\n' for p in two_hosts.switch_ports)
    config.write_text(f'mode = "learning"\n{ports}')
    sw = subprocess.Popen([EDGEFLOW_BIN, "run", "--config", str(config)], env={**os.environ, "EDGEFLOW_SYSLOG": str(path)},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A SIGHUP while it starts (a reload just after `systemctl start`): it ended the process.
    time.sleep(0.05)
    sw.send_signal(signal.SIGHUP)
    try:
        lines = []

        def seen(prefix, text, poke=None):
            deadline = time.monotonic() + 15
            while not any(l.startswith(prefix) and text in l for l in lines):
                assert time.monotonic() < deadline, f"no {prefix}...{text} in {lines}"
                if poke:
                    poke()
                try:
                    lines.append(log.recv(65536).decode())
                except TimeoutError:
                    if not poke:
                        raise
            return True

        assert seen(f"<30>edgeflow[{sw.pid}]: ", "starting"), lines
        # A configuration only a restart can apply: refused, a warning. SIGHUP until it is read
        # (one may come before the reload handler, which a starting switch ignores).
        config.write_text(f'tables = 8\nmode = "learning"\n{ports}')
        log.settimeout(0.5)
        assert seen(f"<28>edgeflow[{sw.pid}]: ", "configuration refused", poke=lambda: sw.send_signal(signal.SIGHUP)), lines
        assert sw.poll() is None, "the switch ended on a SIGHUP"
    finally:
        sw.terminate()
        _, err = sw.communicate(timeout=10)
        log.close()
    # Nothing of it went to stderr, which procd would have logged again as errors.
    assert "starting" not in err and "refused" not in err, err
