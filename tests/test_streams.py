"""TSN streams with real frames (docs/tsn.md, "Streams"), on every datapath:
- IEEE 802.1CB frame replication and elimination: switch X numbers a talker's stream and copies
  it onto two links to switch Y, which passes the first copy of each number to the listener and
  discards the other. One link is cut mid-stream: the listener gets every frame once.
- IEEE 802.1Qci filtering and policing: a stream's flow meter passes its committed rate green
  and its excess rate yellow (marked drop-eligible) and drops the rest; a stream gate open half
  its cycle passes half; frames over the largest SDU are dropped; each counted."""

import time
from types import SimpleNamespace

import pytest

from testbed import netns
from testbed.less import stream
from testbed.switches import Edgeflow
from testbed.topology import Fabric, two_paths
from testbed.util import run_dir


def offload_for(hosts, datapath):
    """The hosts' offloads as `datapath` needs them (Edgeflow.HOST_SETTINGS)."""
    if Edgeflow.HOST_SETTINGS[datapath]:
        for h in hosts:
            h.set_offload(**Edgeflow.HOST_SETTINGS[datapath])


def stream_counters(sw, name="s1"):
    return next(g["counters"] for g in sw.stats()["mode_counters"] if g["name"] == f"stream {name}")


# The mode holds nothing in the kernel: each of the two upcall paths (XDP's pass, TC's redirect to
# the upcall interface) is run by one of the two tests, userspace by both.
@pytest.mark.parametrize("datapath", ["user", "xdp"])
def test_a_replicated_stream_survives_a_cut_link_without_loss_or_duplicates(datapath):
    netns.cleanup()
    f = two_paths("fr")
    with f:
        talker, listener = f.hosts
        offload_for(f.hosts, datapath)
        # Ports: 1 the host, 2 and 3 the two links, on both switches; X is a, Y is b.
        roles = {"a": "in_ports = [1]\nout_ports = [2, 3]\ngenerate = true\n",
                 "b": "in_ports = [2, 3]\nout_ports = [1]\nrecover = true\nhistory_length = 32\n"}
        switches = {}
        try:
            for name in ("a", "b"):
                cfg = run_dir("streams") / f"frer-{name}.toml"
                ports = "".join(f'[[port]]\nname = "{p}"\n' for p in f.ports[name])
                cfg.write_text(f'mode = "streams"\n{ports}[[stream]]\nname = "s1"\ndst = "{listener.mac}"\n'
                               f"{roles[name]}")
                switches[name] = Edgeflow([], datapath=datapath, extra=["--config", str(cfg)],
                                          log_name=f"streams-{name}-{datapath}").start()
            time.sleep(0.5)
            cut = f.ports["a"][1]
            sent, got = stream(talker, listener, 256, 2000, 3.0, flow=11,
                               during=lambda: netns.sh("ip", "link", "set", cut, "down"), at=1.5)
            x, y = stream_counters(switches["a"]), stream_counters(switches["b"])
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


@pytest.mark.parametrize("datapath", ["user", "tc"])
def test_streams_are_metered_gated_and_filtered_as_configured(datapath):
    netns.cleanup()
    f = Fabric("qc")
    f.switch("s")
    f.host("s", "10.0.0.1/24")
    f.host("s", "10.0.0.2/24")
    with f:
        talker, listener = f.hosts
        offload_for(f.hosts, datapath)
        gated_mac = "02:00:00:00:00:77"
        ports = "".join(f'[[port]]\nname = "{p}"\n' for p in f.ports["s"])
        cfg = run_dir("streams") / "qci.toml"
        cfg.write_text(
            f'mode = "streams"\n{ports}'
            f'[[stream]]\nname = "metered"\ndst = "{listener.mac}"\nin_ports = [1]\nout_ports = [2]\n'
            "max_sdu_bytes = 1000\nmeter = { cir_kbps = 4000, cbs_bytes = 3000, eir_kbps = 2000, ebs_bytes = 3000 }\n"
            f'[[stream]]\nname = "gated"\ndst = "{gated_mac}"\nin_ports = [1]\nout_ports = [2]\n'
            "gate = { cycle_ns = 10000000, entries = [{ duration_ns = 5000000, open = true }, "
            "{ duration_ns = 5000000, open = false }] }\n")
        with Edgeflow([], datapath=datapath, extra=["--config", str(cfg)], log_name=f"streams-qci-{datapath}") as sw:
            time.sleep(0.3)
            size, seconds = 500, 2.0
            # 10 Mbit/s offered: 4 committed (green), 2 excess (yellow), the rest red.
            sent, got = stream(talker, listener, size, 2500, seconds, flow=21)
            oversize, _ = stream(talker, listener, 1100, 200, 0.25, flow=22)
            gated_sent, gated_got = stream(talker, SimpleNamespace(mac=gated_mac, addr=listener.addr,
                                                                   popen=listener.popen), 200, 1000, 1.0, flow=23)
            metered, gated = stream_counters(sw, "metered"), stream_counters(sw, "gated")
    span = (sent["sent"] - 1) / 2500
    want_green = (4e6 / 8 * span + 3000) / size
    want_yellow = (2e6 / 8 * span + 3000) / size
    print(f"\nQci ({datapath}): sent {sent['sent']}, received {got['received']}; green {metered['green']} "
          f"(bound {want_green:.0f}), yellow {metered['yellow']} (bound {want_yellow:.0f}), red {metered['red']}; "
          f"over the SDU {metered['sdu_too_large']} of {oversize['sent']}; gate passed {gated_got['received']} of "
          f"{gated_sent['sent']}, closed {gated['gate_closed']}")
    assert metered["green"] + metered["yellow"] + metered["red"] == sent["sent"], metered
    assert 0.97 * want_green <= metered["green"] <= want_green + 1, (metered, want_green)
    assert 0.97 * want_yellow <= metered["yellow"] <= want_yellow + 1, (metered, want_yellow)
    assert got["received"] == metered["green"] + metered["yellow"], (got, metered)
    assert metered["sdu_too_large"] == oversize["sent"]
    # Open 5 ms of every 10: half, give or take a window's frames.
    assert abs(gated_got["received"] - gated_sent["sent"] / 2) <= 0.05 * gated_sent["sent"], (gated_sent, gated_got)
    assert gated_got["received"] + gated["gate_closed"] == gated_sent["sent"], gated
