#!/usr/bin/env bash
# `make test-init`: edgeflow's systemd unit under a real systemd (tests/init/test_systemd.py,
# testbed/systemd_root.py) and its OpenWrt package under OpenWrt's procd (tests/init/test_procd.py,
# testbed/procd_root.py).
#   scripts/test-init.sh prepare   the host's tools (systemd-nspawn, debootstrap, busybox), the
#                                  Debian 12 root and OpenWrt's userland built from its sources
#                                  (scripts/openwrt-userland.sh: OPENWRT_GIT, OPENWRT_RAW and
#                                  OPENWRT_FILES say where from), once (downloads: setup, not the
#                                  tests)
#   scripts/test-init.sh           the tests
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = prepare ]; then
  need=()
  command -v systemd-nspawn >/dev/null || need+=(systemd-container)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v busybox >/dev/null || need+=(busybox)
  if [ ${#need[@]} -gt 0 ]; then
    echo "test-init: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
  fi
  echo "test-init: the Debian 12 root (debootstrap, once; ~35 s)"
  .venv/bin/python -c "from testbed import systemd_root; print('test-init:', systemd_root.prepare())"
  echo "test-init: OpenWrt's procd, ubus, logd and uci (built once; ~1 min)"
  scripts/openwrt-userland.sh
  exit 0
fi

EDGEFLOW_INIT=1 exec .venv/bin/python -m pytest tests/init -v --durations=0
