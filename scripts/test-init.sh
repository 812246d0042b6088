#!/usr/bin/env bash
# `make test-init`: edgeflow's systemd unit under a real systemd (tests/init, testbed/systemd_root.py).
#   scripts/test-init.sh prepare   the host's tools (systemd-nspawn, debootstrap) and the Debian 12
#                                  root, once (a download: setup, not the tests)
#   scripts/test-init.sh           the tests
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = prepare ]; then
  need=()
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  if [ ${#need[@]} -gt 0 ]; then
    echo "test-init: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
  fi
  echo "test-init: the Debian 12 root (debootstrap, once; ~35 s)"
  .venv/bin/python -c "from testbed import systemd_root; print('test-init:', systemd_root.prepare())"
  exit 0
fi

EDGEFLOW_INIT=1 exec .venv/bin/python -m pytest tests/init -v --durations=0
