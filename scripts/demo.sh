#!/usr/bin/env bash
# Two hosts behind edgeflow: first with no controller (native mode), then driven by our os-ken
# L2 learning app. Prints ping and iperf3 results for both.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m testbed.demo "$@"
