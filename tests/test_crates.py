"""Every crate's own tests (`make test-unit`: unit and integration tests, BPF_PROG_TEST_RUN ones
included), in `make test`. They are built beside the other tests (testbed/background.py: 50 s of
compiling on two cores that the suite's waiting leaves idle) and run here, last, at normal
priority and on their own: some time the kernel's token buckets, and some make veths of their own."""

import os
import re
import subprocess

import pytest

from testbed import background
from testbed.util import ROOT, run_dir


# No root needed: the tests that load BPF programs say so and skip without it, as in make test-unit.
@pytest.mark.no_root
@pytest.mark.timeout(900)
@pytest.mark.background("crate-tests-build")
def test_every_crates_own_tests_pass():
    code, out, seconds = background.result("crate-tests-build")
    assert code == 0, f"cargo test --no-run failed:\n{out[-6000:]}"
    print(f"\nbuilt beside the other tests in {seconds:.0f} s")
    # Half of p4c's corpus on the kernel back end (crates/datapath/tests/p4_corpus.rs): clang and
    # the verifier over all of it take most of a minute; `make test-p4c` runs it whole.
    env = {**os.environ, "EDGEFLOW_P4_CORPUS_EVERY": "2"}
    r = subprocess.run(["cargo", *background.CRATE_TESTS], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env=env)
    log = run_dir("logs") / "crate-tests.log"
    log.write_text(r.stdout + r.stderr)
    results = re.findall(r"test result: (\w+)\. (\d+) passed; (\d+) failed", r.stdout)
    passed, failed = (sum(int(x[i]) for x in results) for i in (1, 2))
    print(f"{len(results)} test binaries: {passed} passed, {failed} failed (all output in {log})")
    failures = re.findall(r"^test (\S+) \.\.\. FAILED$", r.stdout, re.M)
    assert r.returncode == 0, f"failed: {failures}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    # 255 when this was written: a run that found far fewer ran the wrong thing.
    assert failed == 0 and passed >= 250, (len(results), passed, failed)
