"""os-ken's OpenFlow 1.3 switch test tool (`os_ken.tests.switch.tester`, the Ryu certification suite)
run against edgeflow, with Open vSwitch (userspace datapath) as the tester switch that injects the
frames and reports what came out.

    target (edgeflow, dpid 1)   ports 1 2 3
                                      | | |      veth pairs ef-ct<i> -- ef-cx<i>
    tester (OVS netdev, dpid 2) ports 1 2 3

    python3 -m testbed.tools.switch_conformance [--datapath user|tc|xdp] [--only REGEX] DIR...

DIR is a directory (or file) of the suite relative to its `of13/` folder, e.g. `action`,
`match/13_IPV4_SRC.json`. Prints one line per case and a summary; exits 1 if any case fails.
`run()` returns the results for tests.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from testbed.netns import sh
from testbed.switches import Edgeflow, OvsNetdev
from testbed.util import ROOT, free_port, port_open, run_dir, wait_for

OSKEN_VENV = Path(os.environ.get("EDGEFLOW_FAUCET_VENV", ROOT / ".venv-faucet"))
TARGET_DPID, TESTER_DPID = 1, 2
N_PORTS = 3


def suite_dir():
    out = subprocess.run([str(OSKEN_VENV / "bin" / "python3"), "-c",
                          "import os_ken.tests.switch as s, os; print(os.path.dirname(s.__file__))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip()) / "of13"


def _links():
    pairs = [(f"ef-ct{i}", f"ef-cx{i}") for i in range(1, N_PORTS + 1)]
    for a, b in pairs:
        sh("ip", "link", "del", a, check=False)
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for dev in (a, b):
            # Only the tool's frames: no IPv6 autoconfiguration or router solicitations of the host.
            sh("sysctl", "-qw", f"net.ipv6.conf.{dev}.disable_ipv6=1")
            sh("ip", "link", "set", dev, "up")
        # A frame the XDP fast path redirects into a veth arrives only if the peer runs NAPI.
        sh("ethtool", "-K", b, "gro", "on")
    return pairs


def _unlink(pairs):
    for a, _ in pairs:
        sh("ip", "link", "del", a, check=False)


CASE = re.compile(r"^\s{4}(\S.*?)\s+(OK|ERROR)\s*$")
TEST_FILE = re.compile(r"^((?:action|match|group|meter)\b.*?)\s*$")


def parse_log(text):
    """[(file, case, ok, detail)] from the tester's log."""
    results, current, lines = [], None, text.splitlines()
    for i, line in enumerate(lines):
        m = TEST_FILE.match(line)
        if m:
            current = m.group(1)
            continue
        m = CASE.match(line)
        if m:
            detail = ""
            if m.group(2) == "ERROR" and i + 1 < len(lines):
                detail = lines[i + 1].strip()
            results.append((current, m.group(1), m.group(2) == "OK", detail))
    return results


def run(paths, datapath=None, timeout=1800, log_name="conformance"):
    """Runs the suite's `paths` (relative to of13/) against edgeflow on `datapath`."""
    of13 = suite_dir()
    # The tool takes one directory: gather the chosen files in one of our own.
    chosen = run_dir(f"{log_name}-cases")
    for old in chosen.glob("*"):
        old.unlink()
    for p in paths:
        src = of13 / p
        files = sorted(src.rglob("*.json")) if src.is_dir() else [src]
        for f in files:
            (chosen / f"{f.parent.name}-{f.name}").symlink_to(f)
    pairs = _links()
    port = free_port()
    ctl = f"tcp:127.0.0.1:{port}"
    log_path = run_dir("logs") / f"{log_name}-{datapath or 'user'}.log"
    manager = None
    try:
        with open(log_path, "w") as log:
            manager = subprocess.Popen(
                [str(OSKEN_VENV / "bin" / "osken-manager"), "--ofp-tcp-listen-port", str(port),
                 "--test-switch-dir", str(chosen), "--test-switch-target", f"{TARGET_DPID:016x}",
                 "--test-switch-tester", f"{TESTER_DPID:016x}", "testbed.tools.osken_tester_fixes",
                 "os_ken.tests.switch.tester"],
                stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                env=dict(os.environ, PATH=f"{OSKEN_VENV / 'bin'}:{os.environ['PATH']}", PYTHONPATH=str(ROOT)))
            wait_for(lambda: port_open(port), what="osken-manager to listen")
            tester = OvsNetdev([b for _, b in pairs], controllers=[ctl], log_name=f"{log_name}-ovs")
            tester.dpid = TESTER_DPID
            with tester, Edgeflow([a for a, _ in pairs], controllers=[ctl], datapath=datapath,
                                  extra=["--dpid", f"{TARGET_DPID:x}"], log_name=f"{log_name}-edgeflow"):
                end = time.time() + timeout
                while time.time() < end and manager.poll() is None:
                    if "---  Test end  ---" in log_path.read_text(errors="replace"):
                        break
                    time.sleep(0.5)
                else:
                    if manager.poll() is None:
                        raise TimeoutError(f"the switch test tool did not finish in {timeout} s: {log_path}")
    finally:
        if manager and manager.poll() is None:
            manager.terminate()
            try:
                manager.wait(10)
            except subprocess.TimeoutExpired:
                manager.kill()
        _unlink(pairs)
    return parse_log(log_path.read_text(errors="replace")), log_path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datapath", default="user", choices=["user", "tc", "xdp"])
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    results, log_path = run(args.paths, datapath=args.datapath)
    failed = [r for r in results if not r[2]]
    for f, case, ok, detail in results:
        if not ok:
            print(f"ERROR {f}: {case}\n      {detail}")
    print(f"{len(results) - len(failed)} OK, {len(failed)} ERROR of {len(results)} ({log_path})")
    sys.exit(1 if failed or not results else 0)


if __name__ == "__main__":
    main()
