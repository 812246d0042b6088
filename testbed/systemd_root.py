"""A Debian 12 root booted with systemd as its PID 1 (`systemd-nspawn -b`), for the tests of the
unit under a real service manager (tests/init, `make test-init`). This VM's own PID 1 is not
systemd, and a qemu guest boots in minutes under TCG; a container boots in seconds and runs the
same systemd (252) a Debian 12 device does, with the unit's sandboxing, capabilities, readiness,
reload and watchdog handled by it, not by a test playing its part (tests/test_service.py).

The root is made once by `prepare` (debootstrap, during setup: tests download nothing) and
copied for each boot, so that a test's install and its journal start from a clean system."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .util import ROOT

#: The template root `prepare` makes (build/tools is kept across runs, as the other tools are).
TEMPLATE = ROOT / "build" / "tools" / "init" / "bookworm"
#: What a device running edgeflow under systemd has besides the base system.
PACKAGES = ["systemd", "systemd-sysv", "dbus", "iproute2", "iputils-ping", "procps", "kmod"]
#: The capabilities the container keeps beyond nspawn's default: those the unit grants edgeflow
#: (a unit cannot grant what its manager does not hold) and bpffs' directory creation.
CAPABILITIES = "CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN,CAP_NET_RAW,CAP_SYS_ADMIN"


def prepare(template=TEMPLATE, mirror="http://deb.debian.org/debian"):
    """debootstrap Debian 12 into `template`, once; returns it."""
    if (template / "usr/lib/systemd/systemd").exists():
        return template
    partial = template.with_name(template.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", "bookworm", str(partial),
                    mirror], check=True, capture_output=True, timeout=1800)
    # The container's console is the test's log, not a login prompt.
    (partial / "etc/systemd/system/getty.target.wants").mkdir(parents=True, exist_ok=True)
    subprocess.run(["chroot", str(partial), "systemctl", "mask", "console-getty.service", "getty@.service"],
                   check=True, capture_output=True)
    partial.rename(template)
    return template


class BootedRoot:
    """A copy of the template, with edgeflow installed by `make install`, booted in the network
    namespace `netns`. `run` executes a command inside (in every namespace of its PID 1)."""

    def __init__(self, workdir, netns, name="ef-init", template=TEMPLATE):
        self.root = Path(workdir) / "root"
        self.log_path = Path(workdir) / "console.log"
        self.netns = netns
        self.name = name
        self.template = template
        self.nspawn = None
        self.leader = None

    def copy(self):
        """The template's copy this boot runs, without edgeflow (for a package to install)."""
        subprocess.run(["cp", "-a", "--reflink=auto", str(self.template), str(self.root)], check=True)
        return self

    def install(self):
        self.copy()
        subprocess.run(["make", "-s", "-C", str(ROOT), f"DESTDIR={self.root}", "PREFIX=/usr", "install"], check=True,
                       capture_output=True, timeout=600)
        # The account the unit runs as, as the package's scripts would make it on a device.
        subprocess.run(["chroot", str(self.root), "systemd-sysusers"], check=True, capture_output=True)
        return self

    def write(self, path, text):
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def boot(self, timeout=60):
        def booted():
            state = self.run("systemctl", "is-system-running", check=False).stdout.strip()
            return state in ("running", "degraded")
        return self.start(["-b"], booted, timeout, "finish booting")

    def start(self, how, ready, timeout, what):
        """Starts the container with nspawn's arguments `how` (its init: `-b`, or a command) and
        waits until `ready()` says so, with a process of the container found to run it in."""
        log = open(self.log_path, "wb")
        # --keep-unit and --register=no: no systemd on this VM's side to make a scope or register
        # the machine with. /sys/fs/bpf is bound in, where the unit pins its fast path. nspawn's
        # own seccomp filter refuses bpf(2) to everything the container's systemd starts (EPERM,
        # whatever the capabilities) unless it is allowed by name.
        self.nspawn = subprocess.Popen(
            ["systemd-nspawn", "-q", "-D", str(self.root), "--register=no", "--keep-unit",
             f"--machine={self.name}", f"--network-namespace-path=/run/netns/{self.netns}",
             f"--capability={CAPABILITIES}", "--system-call-filter=bpf perf_event_open", "--bind=/sys/fs/bpf",
             *how],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.nspawn.poll() is not None:
                raise RuntimeError(f"systemd-nspawn ended ({self.nspawn.returncode}): {self.console()[-2000:]}")
            self.leader = self.leader or self._find_leader()
            if self.leader and ready():
                return self
            time.sleep(0.3)
        raise TimeoutError(f"the container did not {what} in {timeout} s: {self.console()[-2000:]}")

    def _find_leader(self):
        """The container's PID 1 as this VM sees it: systemd, a child of nspawn."""
        for child in Path("/proc").glob("[0-9]*"):
            try:
                stat = (child / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.nspawn.pid and stat.split("(", 1)[1].startswith("systemd)"):
                return int(child.name)
        return None

    def run(self, *cmd, check=True, timeout=60):
        return subprocess.run(["nsenter", "-t", str(self.leader), "-a", "--", *cmd], capture_output=True, text=True,
                              check=check, timeout=timeout)

    def console(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def shutdown(self, timeout=30):
        if self.nspawn and self.nspawn.poll() is None:
            # nspawn turns SIGTERM into the container's orderly poweroff.
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.nspawn.kill()
                self.nspawn.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def host_can_boot():
    """None, or why this machine cannot boot the root (what `make test-init` needs)."""
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("systemd-nspawn"):
        return "no systemd-nspawn (apt install systemd-container)"
    if not (TEMPLATE / "usr/lib/systemd/systemd").exists():
        return f"no Debian 12 root at {TEMPLATE} (scripts/test-init.sh prepare)"
    return None
