"""IEEE 802.1CB frame replication and elimination with real frames (docs/tsn.md, "FRER"): switch X
numbers a talker's stream and copies it onto two links to switch Y, which passes the first copy
of each number to the listener and discards the other. One link is cut mid-stream: the listener
gets every frame once, none lost and none twice, on every datapath."""

import time

from testbed import netns
from testbed.less import stream
from testbed.switches import Edgeflow
from testbed.topology import Fabric
from testbed.util import run_dir


def stream_counters(sw, name="s1"):
    return next(g["counters"] for g in sw.stats()["mode_counters"] if g["name"] == f"stream {name}")


def test_a_replicated_stream_survives_a_cut_link_without_loss_or_duplicates(datapath):
    netns.cleanup()
    f = Fabric("fr")
    f.switch("x")
    f.switch("y")
    f.host("x", "10.0.0.1/24")
    f.host("y", "10.0.0.2/24")
    f.link("x", "y")
    f.link("x", "y")
    with f:
        talker, listener = f.hosts
        for h in f.hosts:
            if Edgeflow.HOST_SETTINGS[datapath]:
                h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])
        # Ports: 1 the host, 2 and 3 the two links, on both switches.
        roles = {"x": "in_ports = [1]\nout_ports = [2, 3]\ngenerate = true\n",
                 "y": "in_ports = [2, 3]\nout_ports = [1]\nrecover = true\nhistory_length = 32\n"}
        switches = {}
        try:
            for name in ("x", "y"):
                cfg = run_dir("frer") / f"{name}.toml"
                ports = "".join(f'[[port]]\nname = "{p}"\n' for p in f.ports[name])
                cfg.write_text(f'mode = "frer"\n{ports}[[frer.stream]]\nname = "s1"\ndst = "{listener.mac}"\n'
                               f"{roles[name]}")
                switches[name] = Edgeflow([], datapath=datapath, extra=["--config", str(cfg)],
                                          log_name=f"frer-{name}-{datapath}").start()
            time.sleep(0.5)
            cut = f.ports["x"][1]
            sent, got = stream(talker, listener, 256, 2000, 3.0, flow=11,
                               during=lambda: netns.sh("ip", "link", "set", cut, "down"), at=1.5)
            x, y = stream_counters(switches["x"]), stream_counters(switches["y"])
        finally:
            codes = {n: sw.stop() for n, sw in switches.items()}
    print(f"\nFRER ({datapath}): sent {sent['sent']}, received {got['received']}, lost {got['lost']}, "
          f"duplicates {got['duplicates']}; X generated {x['generated']}; Y passed {y['passed']}, "
          f"discarded {y['discarded']}, lost {y['lost']}, out of order {y['out_of_order']}")
    assert all(c == 0 for c in codes.values()), codes
    assert got["received"] == sent["sent"] and got["lost"] == 0 and got["duplicates"] == 0, (sent, got)
    assert x["generated"] == sent["sent"] and y["passed"] == sent["sent"], (x, y)
    # Both copies arrived while both links were up (1.5 s of 3 at 2 000 frames/s), one after.
    assert 0.3 * sent["sent"] < y["discarded"] < 0.7 * sent["sent"], y
    assert y["lost"] == 0 and y["rogue"] == 0 and y["tagless"] == 0, y
