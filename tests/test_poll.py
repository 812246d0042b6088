"""`--poll busy`: the forwarding thread never sleeps waiting for frames (issue 55, item 2), for the
userspace datapath's latency. It forwards as `wait` does; idle, it keeps its core busy where the
waiting thread uses next to none; a value it does not know is refused."""

import subprocess
import time
from pathlib import Path

from testbed.switches import EDGEFLOW_BIN, Edgeflow


def forwarding_cpu_seconds(pid):
    """User plus system time of the switch's thread named `forwarding` (proc(5): stat fields 14, 15)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == "forwarding":
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / 100  # clock ticks, USER_HZ = 100
    raise AssertionError("no forwarding thread")


def test_busy_polling_forwards_and_never_sleeps(two_hosts):
    """On AF_PACKET rings (AF_XDP ports wait in the same loop)."""
    h1, h2 = two_hosts.hosts
    used = {}
    for poll in ("wait", "busy"):
        with Edgeflow(two_hosts.switch_ports, mode="learning", poll=poll, log_name=f"poll-{poll}") as sw:
            assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3, sw.log()
            assert f'poll="{poll}"' in sw.log() or f"poll={poll}" in sw.log(), sw.log()
            before = forwarding_cpu_seconds(sw.proc.pid)
            time.sleep(1.0)
            used[poll] = forwarding_cpu_seconds(sw.proc.pid) - before
    # However little of a core a loaded machine leaves it, a thread that never sleeps takes many
    # ticks in a second; one that sleeps in poll(2) between housekeeping takes next to none.
    assert used["wait"] <= 0.05 and used["busy"] >= 0.1, used


def test_an_unknown_poll_is_refused_with_the_choices():
    r = subprocess.run([EDGEFLOW_BIN, "run", "--port", "lo", "--poll", "spin"], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode != 0 and "--poll 'spin': expected wait or busy" in r.stderr, r.stderr
