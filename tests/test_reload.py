"""SIGHUP applies a changed configuration without a restart: a port joins and later leaves, the
controller changes, while a stream between two ports that stay loses nothing (sequence numbers)
and the installed flows stay; a change only a restart can make is refused whole, with the reason,
and the running configuration stays (docs/deploy.md#reload)."""

import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from testbed import loadgen
from testbed.switches import Edgeflow
from testbed.util import run_dir, wait_for


class Listener:
    """Where a controller would listen: it says hello, then reads; which connections came, and which
    closed."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.accepted, self.closed = 0, 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._drain, args=(c,), daemon=True).start()

    def _drain(self, c):
        c.sendall(bytes([4, 0, 0, 8, 0, 0, 0, 1]))  # an OpenFlow 1.3 hello: the session begins
        while c.recv(4096):
            pass
        self.closed += 1


def config(ports, controller, extra=""):
    text = f'dpid = "0xe7"\ncontrollers = ["tcp:127.0.0.1:{controller.port}"]\n{extra}'
    return text + "".join(f'\n[[port]]\nname = "{p}"\nnumber = {i}\n' for i, p in ports)


@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_sighup_adds_and_removes_a_port_and_changes_the_controller_without_loss(three_hosts, datapath):
    h1, h2, h3 = three_hosts.hosts
    p1, p2, p3 = three_hosts.switch_ports
    for h in three_hosts.hosts:
        if Edgeflow.HOST_SETTINGS[datapath]:
            h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
    old, new = Listener(), Listener()
    path = run_dir("reload") / f"edgeflow-{datapath}.toml"
    path.write_text(config([(1, p1), (2, p2)], old))
    sw = Edgeflow([], datapath=datapath, extra=["--config", str(path)], log_name=f"reload-{datapath}").start()

    def hangup(text, outcome):
        seen = len(re.findall(outcome, sw.log()))
        path.write_text(text)
        sw.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(re.findall(outcome, sw.log())) > seen, timeout=10, what=outcome)

    try:
        wait_for(lambda: old.accepted >= 1, what="the first controller's connection")
        sw.ofctl("add-flow", "priority=10,in_port=1,actions=output:2")
        sw.ofctl("add-flow", "priority=10,in_port=2,actions=output:1")
        # 60 s only bounds a run that hangs: the stream stops half a second after the last reload,
        # however long the reloads took.
        with loadgen.streaming(h1, h2, rate=5000, duration=60) as finish:
            time.sleep(0.8)
            # A third port, and another controller, while the stream runs.
            hangup(config([(1, p1), (2, p2), (3, p3)], new), "configuration applied")
            wait_for(lambda: new.accepted >= 1 and old.closed >= 1, what="the controller to change")
            # A change only a restart makes: refused whole, port 3 stays.
            hangup(config([(1, p1), (2, p2)], new, "tables = 8\n"), "configuration refused")
            time.sleep(0.5)
            sent, got = finish(stop=True)
        # 0.8 s before the reloads and 0.5 s after them at least: 6 500 frames if the sender keeps
        # its rate.
        assert sent["sent"] > 5_000 and got["received"] == sent["sent"] and got["lost"] == 0, (sent, got)
        assert "tables changed, which takes a restart" in sw.log()

        report = sw.stats()
        assert [p["name"] for p in report["ports"]] == [p1, p2, p3], report["ports"]
        if datapath != "user":
            # The reload emptied the kernel's copy of the flows; the stream's next frame put its
            # entry back (it did not stay in userspace for good).
            assert report["fast_path"]["upcalls"] < 100, report["fast_path"]
        flows = [f for f in sw.flows() if "priority=10" in f]
        assert len(flows) == 2, flows
        # The new port forwards, through the kernel too.
        sw.ofctl("add-flow", "priority=20,in_port=1,ip,nw_dst=" + h3.addr + ",actions=output:3")
        sw.ofctl("add-flow", "priority=20,in_port=1,arp,arp_tpa=" + h3.addr + ",actions=output:3")
        sw.ofctl("add-flow", "priority=20,in_port=3,actions=output:1")
        assert h1.ping(h3.addr, count=5, interval=0.05)[0] == 5
        if datapath != "user":
            assert any(f["actions"] == "output:3" for f in sw.kernel_flows()["megaflows"])

        # And leaves again: gone from the report and the kernel; h1 and h2 unaffected.
        hangup(config([(1, p1), (2, p2)], new), "configuration applied")
        assert [p["name"] for p in sw.stats()["ports"]] == [p1, p2]
        assert h1.ping(h3.addr, count=2, interval=0.05)[0] == 0
        assert h1.ping(h2.addr, count=3, interval=0.05)[0] == 3
        if datapath != "user":
            assert not any(f["actions"] == "output:3" for f in sw.kernel_flows()["megaflows"])
    finally:
        assert sw.stop() == 0, sw.log()
