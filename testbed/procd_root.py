"""OpenWrt's service manager, procd, running edgeflow's .ipk in a container, for the procd half of
`make test-init` (tests/init/test_procd.py). No procd runs on this VM and no OpenWrt kernel boots
here, so the container is the Debian 12 root of the systemd tests (testbed/systemd_root.py) with
OpenWrt's userland laid over it, as scripts/openwrt-userland.sh builds it from OpenWrt's sources:
ubusd, procd, logd and logread, uci, jshn, validate_data and the base-files scripts every init
script sources (rc.common, functions.sh, procd.sh, uci.sh). /bin/sh is busybox's ash, the shell
those scripts are written for (procd.sh uses `let`, which dash lacks).

procd is not the container's PID 1: as PID 1 it would run OpenWrt's boot (preinit, inittab,
hotplug), which needs an OpenWrt image. Started by any other PID it is the service manager alone,
on ubus: `/etc/init.d/edgeflow start` talks to it exactly as on a device (`ubus call service
set`), it forks, respawns, signals and logs the switch, and logd keeps the log logread reads."""

import shutil
import subprocess
from pathlib import Path

from .systemd_root import TEMPLATE, BootedRoot
from .util import ROOT

#: What scripts/openwrt-userland.sh builds (build/tools is kept across runs).
USERLAND = ROOT / "build" / "tools" / "init" / "openwrt"

#: Run by the container's stub init: ubus, then logd on /dev/log, then procd in the foreground
#: (-S: its own log on stdout, the container's console; a device's goes to the kernel's log).
START = """#!/bin/sh
unset NOTIFY_SOCKET  # nspawn's, for its payload; no service on a device is given one
mkdir -p /var/run/ubus /run/lock /tmp/.uci /var/etc /var/state
/sbin/ubusd -s /var/run/ubus/ubus.sock &
while [ ! -S /var/run/ubus/ubus.sock ]; do sleep 0.1; done
/sbin/logd &
while ! /bin/ubus -t 1 list log >/dev/null 2>&1; do sleep 0.1; done
exec /sbin/procd -S
"""

#: What opkg does with a package on a device, which this root has no opkg for: its files to /,
#: its control files and file list to opkg's info directory, then its postinst (OpenWrt's
#: default_postinst: the package's Require-User accounts, `enable` and `start` of its init script).
OPKG_INSTALL = """set -e
rm -rf /var/tmp/ipk && mkdir -p /var/tmp/ipk/control /usr/lib/opkg/info
cd /var/tmp/ipk
tar -xzf "$1"
tar -C control -xzf control.tar.gz
tar -C / -xzf data.tar.gz
for f in control conffiles postinst prerm; do cp "control/$f" "/usr/lib/opkg/info/edgeflow.$f"; done
tar -tzf data.tar.gz | sed -n 's|^\\./\\(.*[^/]\\)$|/\\1|p' > /usr/lib/opkg/info/edgeflow.list
exec /usr/lib/opkg/info/edgeflow.postinst
"""


class ProcdRoot(BootedRoot):
    """A copy of the Debian template with OpenWrt's userland over it, started in the network
    namespace `netns`: procd, not systemd, manages what runs in it. `run` executes a command in
    every namespace of procd."""

    def __init__(self, workdir, netns, name="ef-procd", template=TEMPLATE, userland=USERLAND):
        super().__init__(workdir, netns, name=name, template=template)
        self.userland = userland

    def copy(self):
        super().copy()
        # Over the root's own directories; /sbin, /bin and /lib are links into /usr there.
        laid = subprocess.run(f"tar -C {self.userland} --exclude=./done -cf - . | "
                              f"tar -C {self.root} --keep-directory-symlink -xf -", shell=True, capture_output=True)
        assert laid.returncode == 0, laid.stderr
        shutil.copy(shutil.which("busybox"), self.root / "usr/bin/busybox")
        (self.root / "usr/bin/sh").unlink()
        (self.root / "usr/bin/sh").symlink_to("busybox")
        subprocess.run(["ldconfig", "-r", str(self.root)], check=True)
        self.write("/sbin/openwrt-start", START)
        (self.root / "sbin/openwrt-start").chmod(0o755)
        self.write("/usr/lib/opkg/install.sh", OPKG_INSTALL)
        return self

    def boot(self, timeout=60):
        # A stub init as PID 1 (--as-pid2), the start script and then procd under it.
        return self.start(["--as-pid2", "/sbin/openwrt-start"],
                          lambda: self.run("ubus", "-t", "1", "list", "service", check=False).returncode == 0,
                          timeout, "have procd on ubus")

    def _find_leader(self):
        """procd as this VM sees it: a process named procd descended from this nspawn."""
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if (proc / "comm").read_text().strip() != "procd":
                    continue
                pid = int(proc.name)
                while pid > 1:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    pid = int(stat.rsplit(")", 1)[1].split()[1])
                    if pid == self.nspawn.pid:
                        return int(proc.name)
            except (OSError, ValueError):
                continue
        return None

    def install_ipk(self, ipk):
        """Installs the package as opkg would, its postinst included; returns that run."""
        shutil.copy(ipk, self.root / "var/tmp/edgeflow.ipk")
        return self.run("sh", "/usr/lib/opkg/install.sh", "/var/tmp/edgeflow.ipk", check=False, timeout=120)

    def logread(self):
        return self.run("logread", check=False).stdout


def host_can_run():
    """None, or why this machine cannot run the root (what the procd tests need)."""
    from .systemd_root import host_can_boot
    why = host_can_boot()
    if why:
        return why
    if not (USERLAND / "done").exists():
        return f"no OpenWrt userland at {USERLAND} (scripts/test-init.sh prepare)"
    if not shutil.which("busybox"):
        return "no busybox (apt install busybox)"
    return None
