"""The kernel fast path on the kernel gateways run: Debian 12's own 6.1, booted with virtme-ng over
this machine's filesystem (scripts/test-kernels.sh, also `make test-kernels`). Inside it, every
program feature's BPF_PROG_TEST_RUN test (flows, actions, meters, AFDX links, LESS labels, on TC
and XDP) must pass as it does on this kernel, and the switch must forward in namespaces through
TC and XDP attached as 6.1 allows (a clsact filter, TCX being 6.6's): here (GUEST_TESTS=short)
three pings through each hook (test_fastpath.py's `matches_the_kernel`); TCP through them (the
legacy attachments' iperf3) runs in the guest with `make test-kernels` only. The random
differential check against userspace runs on this kernel in every make test, and in the guest
with `make test-kernels` (emulated, it would take 20 s of the budget here). Where KVM cannot boot
the guest the run says so and emulates (TCG), slower; it never skips."""

import os
import subprocess

import pytest

from testbed.util import ROOT


@pytest.mark.timeout(600)
def test_fast_path_tests_pass_inside_debian_12s_kernel():
    # make test boots 6.1 only; `make test-kernels` boots Debian 11's 5.10 after it.
    env = {**os.environ, "KERNELS": "bookworm", "GUEST_TESTS": "short"}
    r = subprocess.run([str(ROOT / "scripts" / "test-kernels.sh")], capture_output=True, text=True, timeout=600,
                       env=env)
    print("\n" + r.stdout[-3000:])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "guest-kernel 6.1." in r.stdout
    # Every test under datapath's fastpath module (`fastpath::`, the filter the guest runs).
    sources = [ROOT / "crates/datapath/src/fastpath.rs", *(ROOT / "crates/datapath/src/fastpath").glob("*.rs")]
    tests = sum(p.read_text().count("#[test]") for p in sources)
    assert f"{tests} passed; 0 failed" in r.stdout, f"every fast-path kernel test ran inside ({tests})"
    assert "tc: attached as ['tc clsact']" in r.stdout, "6.1 has no TCX: the fallback was taken"
    assert "guest-tests-passed" in r.stdout
