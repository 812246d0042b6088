"""Work a test session starts at once and a test collects at the end: the guest kernel's run
(`scripts/test-kernels.sh`, about a minute emulated), the cross-built image the qemu-user tests
run (`scripts/cross.sh`, most of a minute of compiling) and the build of the crates' own tests
(`cargo test --no-run`, 50 s on two cores). All are CPU work that waits for nothing, while the
other tests spend most of their time waiting (for frames, timers, peers): the two cores were a
third busy over a whole run, and the first two jobs were done two minutes into it. So the jobs
run in the idle scheduling class (SCHED_IDLE, nice 19, idle I/O) beside them, where they take
what those leave idle, instead of the budget's minutes in turn.

They touch nothing the other tests use: the guest has its own kernel and namespaces (and writes
through an overlay), the cross build its own target directory, and the crates' tests are only
built here (into target/release/deps, beside the binaries the tests run, which the build leaves
as they are: its features are theirs); they run in `tests/test_crates.py`, at the end, on their
own. A test that needs a job's result calls `result(name)`, which starts the job if the session
did not (a test run on its own) and waits for it. `tests/conftest.py` starts the jobs the collected tests ask for (the `background`
marker) and runs those tests last."""

import os
import subprocess
import time

from .util import ROOT, run_dir

#: `make test-unit`'s command: every crate's unit and integration tests (not the doc tests).
CRATE_TESTS = ["test", "--release", "--locked", "--workspace", "--no-fail-fast", "--lib", "--bins", "--tests"]

JOBS = {
    # make test boots 6.1 only, in its short form; `make test-kernels` boots Debian 11's 5.10 too.
    "guest-kernel": ([str(ROOT / "scripts" / "test-kernels.sh")], {"KERNELS": "bookworm", "GUEST_TESTS": "short"}),
    "cross-aarch64-minimal": ([str(ROOT / "scripts" / "cross.sh"), "aarch64-unknown-linux-musl", "minimal"], {}),
    # The guest's run builds the same test binaries first (cargo's lock makes one of them wait).
    "crate-tests-build": (["cargo", *CRATE_TESTS, "--no-run"], {}),
}

_running = {}


class Job:
    def __init__(self, name):
        cmd, env = JOBS[name]
        self.name = name
        self.log_path = run_dir("logs") / f"background-{name}.log"
        self._log = open(self.log_path, "w")
        self.started = time.monotonic()
        # SCHED_IDLE, not just nice 19: a nice task still takes its slice before a test's thread
        # that wakes on the same core (the first AFDX test once lost a conforming frame while the
        # jobs started); an idle-class one runs only where nothing else would.
        idle = ["chrt", "--idle", "0", "nice", "-n", "19", "ionice", "-c", "3"]
        self.proc = subprocess.Popen([*idle, *cmd], stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=ROOT, env={**os.environ, **env},
                                     start_new_session=True)

    def wait(self, timeout):
        """The exit status and everything the job printed."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TimeoutError(f"{self.name}: still running after {timeout} s; its output so far: "
                               f"{self.log_path.read_text()[-3000:]}") from None
        self._log.close()
        return self.proc.returncode, self.log_path.read_text()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        self._log.close()


def start(name):
    if name not in _running:
        _running[name] = Job(name)
    return _running[name]


def result(name, timeout=900):
    """Waits for job `name` (starting it if nothing did) and returns (exit status, output, seconds
    it ran)."""
    job = start(name)
    code, out = job.wait(timeout)
    return code, out, time.monotonic() - job.started


def stop_all():
    for job in _running.values():
        job.stop()
    _running.clear()
