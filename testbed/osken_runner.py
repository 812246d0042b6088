"""Runs os-ken applications (os-ken 4.x ships no manager command).

usage: python -m testbed.osken_runner --port 6653 [--host 127.0.0.1] [--tls KEY CERT CA] APP_MODULE...

With --tls, os-ken listens with TLS only (on --port), presents CERT and requires the switch's
certificate to be signed by CA.
"""

import argparse
import sys

from os_ken.lib import hub

hub.patch(thread=False)

from os_ken import cfg  # noqa: E402  (after the eventlet patching, as os-ken's own manager does)
from os_ken.base.app_manager import AppManager  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, default=6653)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--tls", nargs=3, metavar=("KEY", "CERT", "CA"))
    p.add_argument("apps", nargs="+")
    a = p.parse_args()
    listen = ["--ofp-tcp-listen-port", str(a.port)]
    if a.tls:
        key, cert, ca = a.tls
        listen = ["--ofp-ssl-listen-port", str(a.port), "--ctl-privkey", key, "--ctl-cert", cert, "--ca-certs", ca]
    cfg.CONF(args=[*listen, "--ofp-listen-host", a.host], project="os_ken")
    AppManager.run_apps(a.apps + ["os_ken.controller.ofp_handler"])


if __name__ == "__main__":
    sys.exit(main())
