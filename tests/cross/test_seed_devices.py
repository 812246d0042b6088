"""The images for the seeds' own devices, each under qemu-user on this machine's kernel, on the CPU
the device has: i586 on a Pentium (no SSE or SSE2, as the Geode LX of seed 004's gateway), big- and
little-endian MIPS on a 24Kc (MIPS32r2 without an FPU, as the ath79 routers), armv7 on a
Cortex-A7. `make cross-test` builds them (`scripts/cross.sh`) and runs these tests
(EDGEFLOW_CROSS=1): building eight images with fat LTO takes longer than `make test` can give. An image that is missing fails, naming the
command that builds it."""

import contextlib
import re
import shutil
import subprocess

import pytest

from testbed.controllers import OsKen
from testbed.switches import Edgeflow
from testbed.util import ROOT, wait_for

# (target, qemu-user, its CPU, what `file` says of the image)
DEVICES = [
    ("i586-unknown-linux-musl", "qemu-i386-static", "pentium", "Intel 80386"),
    ("mips-unknown-linux-musl", "qemu-mips-static", "24Kc", "MSB executable, MIPS, MIPS32 rel2"),
    ("mipsel-unknown-linux-musl", "qemu-mipsel-static", "24Kc", "LSB executable, MIPS, MIPS32 rel2"),
    # Built from source like the three above (scripts/cross.sh); a Cortex-A7, as in OpenWrt's
    # ipq40xx routers and the Allwinner boards.
    ("armv7-unknown-linux-musleabihf", "qemu-arm-static", "cortex-a7", "ARM, EABI5"),
]
IMAGES = [pytest.param(d, v, id=f"{d[0].split('-')[0]}-{v}") for d in DEVICES for v in ("full", "minimal")]


def image(device, variant):
    target, qemu, cpu, kind = device
    binary = ROOT / "build" / "cross" / target / ("edgeflow" if variant == "full" else "edgeflow-minimal")
    assert binary.exists(), f"{binary} missing: `scripts/cross.sh {target} {variant}` builds it"
    if shutil.which(qemu) is None:
        pytest.fail(f"{qemu} is missing: scripts/setup.sh installs qemu-user-static")
    described = subprocess.run(["file", "-b", str(binary)], capture_output=True, text=True).stdout
    assert kind in described and "statically linked" in described, described
    return [qemu, "-cpu", cpu, str(binary)]


@pytest.mark.no_root
@pytest.mark.parametrize("device,variant", IMAGES)
def test_the_image_starts_on_its_cpu(device, variant):
    program = image(device, variant)
    r = subprocess.run(program + ["--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("edgeflow "), (r.returncode, r.stdout, r.stderr)


@contextlib.contextmanager
def forwarding_for_an_os_ken_app(program, two_hosts, log_name):
    """The switch and its ports' I/O, once os-ken's learning app has its flows and a ping went
    through it."""
    h1, h2 = two_hosts.hosts
    # Under qemu-user a port is a plain packet socket, which carries no offloads (docs/deploy.md).
    for h in two_hosts.hosts:
        h.set_offload(tx="off")
    with OsKen("l2_learning") as ctl, \
            Edgeflow(two_hosts.switch_ports, controllers=[ctl.target], log_name=log_name, program=program) as sw:
        wait_for(lambda: any("CONTROLLER" in f for f in sw.flows()), timeout=60, what="the app's table-miss flow")
        received, sent, _ = h1.ping(h2.addr, count=5)
        assert received == sent == 5, sw.log()
        learned = [f for f in sw.flows() if "priority=10" in f]
        assert len(learned) == 2, sw.flows()
        yield sw, {p["name"]: p["io"] for p in sw.stats()["ports"]}


@pytest.mark.parametrize("device,variant", IMAGES)
def test_the_image_forwards_for_an_os_ken_app(device, variant, two_hosts):
    with forwarding_for_an_os_ken_app(image(device, variant), two_hosts, f"cross-{variant}") as (sw, io):
        assert set(io.values()) == {"af_packet plain"}, io
        if device is DEVICES[0]:
            # qemu-i386 keeps one GDT for all of a process's threads, so a thread's TLS segment,
            # reloaded on return from a signal handler, is the last-started thread's: after
            # SIGTERM the main thread's tokio context is another thread's, and it panics. Rust's
            # own i586 toolchain and musl show the same; a real kernel does not (below).
            sw.kill()
            return
        assert sw.stop() == 0, sw.log()


@pytest.mark.parametrize("variant", ["full", "minimal"])
def test_the_i586_image_forwards_and_stops_on_a_real_kernel(variant, two_hosts):
    """This machine's kernel runs a 32-bit x86 program natively (its IA-32 system calls, as the
    Geode's kernel offers them): the image's packet rings work there, and SIGTERM is a clean
    shutdown."""
    program = image(DEVICES[0], variant)[-1:]
    with forwarding_for_an_os_ken_app(program, two_hosts, f"i586-native-{variant}") as (sw, io):
        assert set(io.values()) == {"af_packet rings"}, io
        assert sw.stop() == 0, sw.log()
        assert "SIGTERM: shutting down" in sw.log() and "forwarding stopped" in sw.log()


@pytest.mark.no_root
def test_the_minimal_i586_image_has_no_sse_instruction():
    """A Pentium model under qemu runs only the paths a test takes; the Geode LX has no SSE at
    all, so no instruction of the image may use an XMM register or another SSE/SSE2 instruction.
    The full image has one such piece: httparse's SSE4.2 header scanner (hyper's, for P4Runtime),
    which it runs only where CPUID reports SSE4.2 (docs/deploy.md)."""
    binary = image(DEVICES[0], "minimal")[-1]
    listing = subprocess.run(["llvm-objdump-14", "-d", "--no-show-raw-insn", binary], capture_output=True,
                             text=True, check=True).stdout
    assert listing.count("\n") > 100_000, "the disassembly is the whole program"
    sse = re.compile(r"\t(\S*\s.*%xmm\d|[lsm]fence|movnti|clflush|maskmovq|movntq|prefetch(nta|t[012]))")
    found = [line for line in listing.splitlines() if sse.search(line)]
    assert not found, found[:10]


@pytest.mark.no_root
@pytest.mark.parametrize("device,variant", IMAGES)
def test_the_openwrt_sample_config_is_one_the_image_accepts(device, variant, tmp_path):
    """/etc/config/edgeflow as the feed package installs it on a 32-bit router, rendered by the
    image's own `edgeflow uci` as the procd script does, then checked by the image."""
    program = image(device, variant)
    rendered = subprocess.run(program + ["uci", str(ROOT / "packaging" / "openwrt" / "edgeflow.config")],
                              capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    config = tmp_path / "edgeflow.toml"
    config.write_text(rendered.stdout)
    r = subprocess.run(program + ["check-config", str(config)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_the_full_i586_image_refuses_tls_naming_the_feature(two_hosts):
    """ring, rustls' cryptography, requires SSE2: the i586 full image is built without `tls`, and
    a `tls:` controller is refused at start with the feature's name (docs/deploy.md)."""
    ports = [a for p in two_hosts.switch_ports for a in ("--port", p)]
    r = subprocess.run(image(DEVICES[0], "full") + ["run", *ports, "--controller", "tls:127.0.0.1:6653",
                                                   "--private-key", "k", "--certificate", "c", "--ca-cert", "ca"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "cargo feature `tls`" in r.stderr, r.stderr
