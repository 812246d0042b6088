"""P4Runtime's schema is committed (crates/p4runtime/schema/p4runtime.fds), so that building needs
no Python: it must stay what scripts/p4runtime_descriptors.py writes from the pinned P4Runtime
release (scripts/p4runtime-requirements.txt, which scripts/setup.sh installs into
build/tools/p4runtime-schema), not a set edited by hand or written from another release."""

import os
import subprocess
import sys

import pytest

from testbed.util import ROOT

pytestmark = pytest.mark.no_root

PACKAGES = ROOT / "build" / "tools" / "p4runtime-schema"
PINS = ROOT / "scripts" / "p4runtime-requirements.txt"
SCRIPT = ROOT / "scripts" / "p4runtime_descriptors.py"
COMMITTED = ROOT / "crates" / "p4runtime" / "schema" / "p4runtime.fds"


def test_the_committed_schema_is_what_the_pinned_release_writes(tmp_path):
    installed = PACKAGES / "requirements.txt"
    assert installed.exists() and installed.read_text() == PINS.read_text(), \
        f"{PACKAGES} does not hold the release {PINS.name} pins: scripts/setup.sh installs it"
    out = tmp_path / "p4runtime.fds"
    # -S: the pinned packages only, not the newer protobuf in the venv's site-packages.
    subprocess.run([sys.executable, "-S", str(SCRIPT), str(out)], check=True,
                   env={**os.environ, "PYTHONPATH": str(PACKAGES)})
    written, committed = out.read_bytes(), COMMITTED.read_bytes()
    assert written == committed, (
        f"{COMMITTED.relative_to(ROOT)} ({len(committed)} bytes) is not what the pinned release writes "
        f"({len(written)} bytes): write it again as {SCRIPT.name}'s docstring says")
