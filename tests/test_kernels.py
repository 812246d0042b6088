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

import pytest

from testbed import background
from testbed.util import ROOT


@pytest.mark.timeout(960)
@pytest.mark.background("guest-kernel")
def test_fast_path_tests_pass_inside_debian_12s_kernel():
    # Booted at the session's start beside the other tests (testbed/background.py).
    code, stdout, seconds = background.result("guest-kernel")
    print(f"\nthe guest's run took {seconds:.0f} s beside the other tests\n" + stdout[-3000:])
    assert code == 0, stdout[-6000:]
    assert "guest-kernel 6.1." in stdout
    # Every test under datapath's fastpath module (`fastpath::`, the filter the guest runs).
    sources = [ROOT / "crates/datapath/src/fastpath.rs", *(ROOT / "crates/datapath/src/fastpath").glob("*.rs")]
    # (A measurement marked #[ignore], hit_cost_by_stage, is not a test the guest runs.)
    tests = sum(p.read_text().count("#[test]") - p.read_text().count("#[ignore]") for p in sources)
    assert f"{tests} passed; 0 failed" in stdout, f"every fast-path kernel test ran inside ({tests})"
    assert "tc: attached as ['tc clsact']" in stdout, "6.1 has no TCX: the fallback was taken"
    assert "guest-tests-passed" in stdout
