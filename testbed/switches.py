"""Switches under test, started and stopped by the testbed."""

import json
import os
import re
import signal
import subprocess
import time

from .netns import sh
from .util import ROOT, free_port, port_open, run_dir, wait_for

EDGEFLOW_BIN = os.environ.get("EDGEFLOW_BIN", str(ROOT / "target" / "release" / "edgeflow"))


class Edgeflow:
    """The edgeflow daemon on a set of interfaces, with a management listener for ovs-ofctl. One
    class for every datapath and mode: `datapath` is "user" (or None), "tc" or "xdp"; `io`
    "af_xdp" moves the userspace datapath's frames through AF_XDP sockets; `mode` and `portmap`
    pick a forwarding mode other than OpenFlow. It is ready when its OpenFlow listener
    accepts connections."""

    supports_controllers = True

    #: What the hosts must be set to for each datapath (none: offloads stay on). XDP on veth
    #: carries no checksum offload and no GSO, and a frame redirected into a veth arrives only if
    #: the peer runs NAPI: the hosts turn transmit offload off and GRO on.
    HOST_SETTINGS = {"user": {}, "tc": {}, "xdp": {"tx": "off", "gro": "on"},
                     # What an AF_XDP port receives comes through XDP too: no checksum offload.
                     "af_xdp": {"tx": "off"}}

    def __init__(self, ports, controllers=(), fail_mode=None, extra=(), log_name="edgeflow", datapath=None,
                 mode=None, portmap=(), program=None, io=None, poll=None):
        #: The command that is the switch: this machine's build, or another's (a cross-built
        #: binary behind qemu-user, say).
        self.program = list(program or [EDGEFLOW_BIN])
        self.ports = list(ports)
        self.controllers = list(controllers)
        self.fail_mode = fail_mode
        self.extra = list(extra)
        self.datapath = None if datapath in (None, "user") else datapath
        # EDGEFLOW_IO=af_xdp runs every userspace-datapath switch of a test run on AF_XDP ports
        # (hosts set for it by edgeflow_on; those a test starts itself keep their offloads).
        self.io = io or (os.environ.get("EDGEFLOW_IO") if self.datapath is None else None)
        self.mode = mode
        self.poll = poll
        self.portmap = list(portmap)
        self.mgmt_port = free_port()
        self.log_path = run_dir("logs") / f"{log_name}.log"
        self.proc = None
        self._asked = None

    def command(self):
        cmd = self.program + ["run", "--listen", f"ptcp:{self.mgmt_port}:127.0.0.1"]
        for p in self.ports:
            cmd += ["--port", p]
        for c in self.controllers:
            cmd += ["--controller", c]
        if self.fail_mode:
            cmd += ["--fail-mode", self.fail_mode]
        if self.datapath:
            cmd += ["--datapath", self.datapath]
        if self.io:
            cmd += ["--io", self.io]
        if self.poll:
            cmd += ["--poll", self.poll]
        if self.mode:
            cmd += ["--mode", self.mode]
        for a, b in self.portmap:
            cmd += ["--portmap", f"{a}:{b}"]
        return cmd + self.extra

    @property
    def name(self):
        if self.io == "af_xdp":
            return "edgeflow-afxdp" + ("-busy" if self.poll == "busy" else "")
        if self.poll == "busy":
            return "edgeflow-busy"
        return f"edgeflow-{self.datapath}" if self.datapath else "edgeflow"

    @property
    def host_settings(self):
        return self.HOST_SETTINGS[self.io if self.io == "af_xdp" else self.datapath or "user"]

    def stats(self):
        """The running switch's report (`edgeflow stats --json`)."""
        r = subprocess.run([EDGEFLOW_BIN, "stats", "--json", self.target], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"edgeflow stats: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def kernel_flows(self):
        """What the kernel fast path holds (`edgeflow dump-flows --kernel --json`)."""
        r = subprocess.run([EDGEFLOW_BIN, "dump-flows", "--kernel", "--json", self.target], capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"edgeflow dump-flows: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def start(self):
        return self.launch().ready()

    def launch(self):
        """Starts the process without waiting for it: a fabric's switches load their programs
        side by side (`start_all`)."""
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT)
        self._asked = None
        return self

    def ready(self):
        """Waits until the launched switch listens, or exits. A minute: the wait ends as soon as
        either happens, and loading the fast path's programs (the verifier's pass) inside an
        emulated guest on a busy machine took over the old 10 s."""
        wait_for(lambda: self.proc.poll() is not None or port_open(self.mgmt_port), timeout=60,
                 what="edgeflow to listen")
        if self.proc.poll() is not None:
            raise RuntimeError(f"edgeflow exited with {self.proc.returncode}: {self.log()}")
        return self

    def stop(self, clean=True):
        """SIGTERM, and the exit status (0 means a clean shutdown). A switch that keeps its kernel
        fast path (`--keep-fastpath`) leaves it forwarding; with `clean`, what it kept is removed
        too (`edgeflow stop --clean`), so that no test leaves programs or maps behind."""
        if self.proc is None:
            return None
        self.ask_to_stop()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        code, self.proc = self.proc.returncode, None
        if clean:
            self.clean_kept()
        return code

    def ask_to_stop(self):
        """SIGTERM without waiting: a fabric's switches shut down side by side (`stop_all`)."""
        if self.proc is not None and self.proc.poll() is None and self._asked is not self.proc:
            self.proc.send_signal(signal.SIGTERM)
            self._asked = self.proc

    def kill(self):
        """SIGKILL: the daemon gets no say in what it leaves behind."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._log.close()
            self.proc = None

    def dpid(self):
        """The datapath id the switch said it started with."""
        found = re.findall(r'dpid="?([0-9a-f]{16})', self.log())
        return found[0] if found else None

    def clean_kept(self):
        """Removes the kernel state a `--keep-fastpath` switch left (none: nothing to do)."""
        dpid = self.dpid()
        if dpid and "keep_fastpath=true" in self.log():
            subprocess.run([EDGEFLOW_BIN, "stop", "--clean", dpid], capture_output=True, timeout=30)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu_pids(self):
        return [self.proc.pid] if self.proc else []

    def log(self):
        return self.log_path.read_text() if self.log_path.exists() else ""

    def fastpath_totals(self):
        """The kernel fast path's counters (hits, misses, upcalls, slow, drops, entries), as the
        daemon logs them when it stops; None for a userspace switch or one still running."""
        found = re.findall(r"fast path totals (.*)", self.log())
        if not found:
            return None
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", found[-1])}

    def bpf_programs(self):
        """{program name: [program ids]} of the BPF programs the daemon holds (from its fds)."""
        found = {}
        if not self.alive():
            return found
        fd_dir = f"/proc/{self.proc.pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                if os.readlink(f"{fd_dir}/{fd}") != "anon_inode:bpf-prog":
                    continue
                info = open(f"/proc/{self.proc.pid}/fdinfo/{fd}").read()
            except OSError:
                continue
            m = re.search(r"prog_id:\s+(\d+)", info)
            if not m:
                continue
            show = sh("bpftool", "-j", "prog", "show", "id", m.group(1), check=False).stdout
            try:
                name = json.loads(show).get("name", "")
            except ValueError:
                continue
            found.setdefault(name, []).append(int(m.group(1)))
        return found

    @property
    def target(self):
        return f"tcp:127.0.0.1:{self.mgmt_port}"

    def ofctl(self, *args, check=True):
        """ovs-ofctl against the management listener; returns stdout (with check=False, stdout and
        stderr, where ovs-ofctl reports an error reply)."""
        opts = [a for a in args if a.startswith("-")]
        rest = [a for a in args if not a.startswith("-")]
        r = sh("ovs-ofctl", "-O", "OpenFlow13", *opts, rest[0], self.target, *rest[1:], check=False, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout if check else r.stdout + r.stderr

    def flows(self, table=None):
        out = self.ofctl("dump-flows", *([f"table={table}"] if table is not None else []))
        return [l.strip() for l in out.splitlines() if "actions=" in l]

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, *exc):
        # A switch that crashed or did not shut down cleanly fails the test that ran it (unless
        # that test is failing already).
        code = self.stop()
        if exc_type is None and code not in (0, None):
            raise RuntimeError(f"edgeflow exited with status {code}:\n{self.log()[-3000:]}")


def start_all(switches):
    """Starts several switches side by side: each loads its programs while the others do (a
    six-switch fabric's took 3 s one after another on tc). Returns them."""
    for sw in switches:
        sw.launch()
    for sw in switches:
        sw.ready()
    return switches


def stop_all(switches):
    """Stops several switches side by side: their exit statuses, in order."""
    for sw in switches:
        sw.ask_to_stop()
    return [sw.stop() for sw in switches]


def pid_cpu_seconds(pid):
    """User + system CPU time of a process, in seconds (from /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


class LinuxBridge:
    """The kernel's bridge (MAC learning, no OpenFlow): the reference point."""

    name = "linux-bridge"
    host_settings = {}
    supports_controllers = False

    def __init__(self, ports, controllers=(), fail_mode=None, extra=(), log_name=None, dev="ef-br0"):
        if controllers:
            raise ValueError("the Linux bridge takes no controller")
        self.ports = list(ports)
        self.dev = dev

    def start(self):
        sh("ip", "link", "add", self.dev, "type", "bridge")
        sh("ip", "link", "set", self.dev, "type", "bridge", "stp_state", "0", "forward_delay", "0")
        for p in self.ports:
            sh("ip", "link", "set", p, "master", self.dev)
        sh("ip", "link", "set", self.dev, "up")
        return self

    def stop(self):
        sh("ip", "link", "del", self.dev, check=False)
        return 0

    def cpu_pids(self):
        return []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class OvsNetdev:
    """Open vSwitch from Debian with the userspace datapath (datapath_type=netdev), run from a
    private directory: its own ovsdb-server and ovs-vswitchd, nothing machine-wide."""

    name = "ovs-netdev"
    # OVS's userspace datapath does not complete partial checksums: TCP needs this on the hosts.
    host_settings = {"tx": "off"}
    supports_controllers = True

    def __init__(self, ports, controllers=(), fail_mode=None, extra=(), log_name="ovs", bridge="ef-ovsbr"):
        self.ports = list(ports)
        self.controllers = list(controllers)
        # Without a controller, standalone is what makes OVS a plain learning switch (its native mode).
        self.fail_mode = fail_mode or ("secure" if self.controllers else "standalone")
        self.dpid = None
        self.bridge = bridge
        self.dir = run_dir(log_name)
        self.env = dict(os.environ, OVS_RUNDIR=str(self.dir / "run"), OVS_DBDIR=str(self.dir / "db"),
                        OVS_LOGDIR=str(self.dir / "log"))

    def _run(self, *cmd, check=True):
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
        return r.stdout

    def start(self):
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)
        for d in ("run", "db", "log"):
            (self.dir / d).mkdir(parents=True)
        run, db, log = self.env["OVS_RUNDIR"], self.env["OVS_DBDIR"], self.env["OVS_LOGDIR"]
        self._run("ovsdb-tool", "create", f"{db}/conf.db", "/usr/share/openvswitch/vswitch.ovsschema")
        self._run("ovsdb-server", f"{db}/conf.db", f"--remote=punix:{run}/db.sock", f"--pidfile={run}/ovsdb-server.pid",
                  f"--log-file={log}/ovsdb-server.log", "--detach", "--no-chdir")
        self._run("ovs-vsctl", "--no-wait", "init")
        self._run("ovs-vswitchd", f"unix:{run}/db.sock", f"--pidfile={run}/ovs-vswitchd.pid",
                  f"--log-file={log}/ovs-vswitchd.log", "--detach", "--no-chdir")
        cmd = ["ovs-vsctl", "add-br", self.bridge, "--", "set", "bridge", self.bridge, "datapath_type=netdev",
               "protocols=OpenFlow13", f"fail_mode={self.fail_mode}"]
        for i, p in enumerate(self.ports, 1):
            cmd += ["--", "add-port", self.bridge, p, "--", "set", "interface", p, f"ofport_request={i}"]
        if self.dpid is not None:
            cmd += ["--", "set", "bridge", self.bridge, f"other-config:datapath-id={self.dpid:016x}"]
        self._run(*cmd)
        # Back-to-back experiments change flows quickly; keep the datapath cache from lingering.
        self._run("ovs-vsctl", "set", "Open_vSwitch", ".", "other_config:max-idle=100")
        if self.controllers:
            self._run("ovs-vsctl", "set-controller", self.bridge, *self.controllers)
        wait_for(lambda: (self.dir / "run" / f"{self.bridge}.mgmt").exists(), what="OVS bridge")
        return self

    def add_bridge(self, bridge, ports):
        """A second bridge on the same daemons (one ovs-vswitchd per machine: its userspace
        datapath owns a kernel device of a fixed name). Returns its ovs-ofctl target."""
        cmd = ["ovs-vsctl", "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev",
               "protocols=OpenFlow13", f"fail_mode={self.fail_mode}"]
        for i, p in enumerate(ports, 1):
            cmd += ["--", "add-port", bridge, p, "--", "set", "interface", p, f"ofport_request={i}"]
        self._run(*cmd)
        self.extra_bridges = getattr(self, "extra_bridges", []) + [bridge]
        wait_for(lambda: (self.dir / "run" / f"{bridge}.mgmt").exists(), what=f"OVS bridge {bridge}")
        return f"unix:{self.dir / 'run' / (bridge + '.mgmt')}"

    def stop(self):
        for bridge in getattr(self, "extra_bridges", []):
            self._run("ovs-vsctl", "--if-exists", "del-br", bridge, check=False)
        self._run("ovs-vsctl", "--if-exists", "del-br", self.bridge, check=False)
        # With OVS_RUNDIR set, `-t NAME` finds the daemon's control socket through its pidfile.
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pidfile = self.dir / "run" / f"{daemon}.pid"
            pid = int(pidfile.read_text()) if pidfile.exists() else None
            self._run("ovs-appctl", "-t", daemon, "exit", check=False)
            for _ in range(50):
                if pid is None or not os.path.exists(f"/proc/{pid}"):
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        return 0

    def cpu_pids(self):
        pid = self.dir / "run" / "ovs-vswitchd.pid"
        return [int(pid.read_text())] if pid.exists() else []

    @property
    def target(self):
        return f"unix:{self.dir / 'run' / (self.bridge + '.mgmt')}"

    def ofctl(self, *args, check=True):
        opts = [a for a in args if a.startswith("-")]
        rest = [a for a in args if not a.startswith("-")]
        r = sh("ovs-ofctl", "-O", "OpenFlow13", *opts, rest[0], self.target, *rest[1:], check=False, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError(f"ovs-ofctl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout if check else r.stdout + r.stderr

    def flows(self, table=None):
        out = self.ofctl("dump-flows", *([f"table={table}"] if table is not None else []))
        return [l.strip() for l in out.splitlines() if "actions=" in l]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class Variant:
    """A switch class with some arguments fixed: a name in SWITCHES (edgeflow on one datapath)."""

    def __init__(self, cls, **fixed):
        self.cls, self.fixed = cls, fixed
        self.supports_controllers = cls.supports_controllers
        setting = "af_xdp" if fixed.get("io") == "af_xdp" else fixed.get("datapath") or "user"
        self.host_settings = cls.HOST_SETTINGS[setting]

    def __call__(self, ports, **kw):
        return self.cls(ports, **{**self.fixed, **kw})


SWITCHES = {
    "edgeflow": Variant(Edgeflow, datapath="user"),
    "edgeflow-tc": Variant(Edgeflow, datapath="tc"),
    "edgeflow-xdp": Variant(Edgeflow, datapath="xdp"),
    # The userspace datapath on AF_XDP sockets instead of AF_PACKET rings (not in the defaults yet).
    "edgeflow-afxdp": Variant(Edgeflow, datapath="user", io="af_xdp"),
    # The userspace datapath busy-polling its rings (--poll busy: a core kept busy; not a default).
    "edgeflow-busy": Variant(Edgeflow, datapath="user", poll="busy"),
    "edgeflow-afxdp-busy": Variant(Edgeflow, datapath="user", io="af_xdp", poll="busy"),
    "linux-bridge": LinuxBridge,
    "ovs-netdev": OvsNetdev,
}
DEFAULT_SWITCHES = ("edgeflow", "edgeflow-tc", "edgeflow-xdp", "ovs-netdev", "linux-bridge")


def edgeflow_on(datapath, hosts, ports, **kw):
    """An edgeflow switch with `datapath` ("user", "tc" or "xdp") on `ports`, the hosts set the
    way that datapath needs them."""
    setting = datapath or "user"
    if setting == "user" and os.environ.get("EDGEFLOW_IO") == "af_xdp":
        setting = "af_xdp"
    for h in hosts:
        if Edgeflow.HOST_SETTINGS[setting]:
            h.set_offload(**Edgeflow.HOST_SETTINGS[setting])
    kw["log_name"] = f"{kw.get('log_name', 'edgeflow')}-{datapath or 'user'}"
    return Edgeflow(ports, datapath=datapath, **kw)


def learn_across(kind, fabric):
    """Builds `fabric` (testbed.topology), puts a switch of `kind` on each of its switches,
    learning on its own (no controller), and returns how many of two pings from its first host
    reach its last. Open vSwitch runs one bridge per switch on one daemon (its userspace datapath
    is one per machine). Learning across several switches takes a moment: up to five tries.
    edgeflow's switches, which need nothing of each other to start, start and stop side by side
    (`start_all`, `stop_all`); one that does not stop cleanly fails the run, as in `with Edgeflow`."""
    from contextlib import ExitStack
    with fabric, ExitStack() as stack:
        ovs = None
        edgeflows = []
        for name in fabric.switches:
            ports = fabric.ports[name]
            if kind == "linux-bridge":
                stack.enter_context(LinuxBridge(ports, dev=f"ef-br{name}"))
            elif kind == "ovs-netdev" and ovs is not None:
                ovs.add_bridge(f"ef-ovs{name}", ports)
            elif kind == "ovs-netdev":
                ovs = stack.enter_context(OvsNetdev(ports, log_name=f"topo-ovs-{name}", bridge=f"ef-ovs{name}"))
            else:
                datapath = kind.split("-")[1] if "-" in kind else "user"
                edgeflows.append(edgeflow_on(datapath, fabric.hosts, ports, log_name=f"topo-{kind}-{name}"))
        if edgeflows:
            def stop_edgeflows(exc_type, *exc):
                codes = stop_all(edgeflows)
                if exc_type is None and any(c not in (0, None) for c in codes):
                    raise RuntimeError(f"edgeflow exited with {codes}:\n" + "\n".join(s.log()[-2000:] for s in edgeflows))
            stack.push(stop_edgeflows)
            start_all(edgeflows)
        first, last = fabric.hosts[0], fabric.hosts[-1]
        received = 0
        for _ in range(5):
            received = first.ping(last.addr, count=2, interval=0.2)[0]
            if received:
                break
            time.sleep(0.5)
        return received
