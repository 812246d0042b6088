"""TLS on the controller channel, both ways, and what each side refuses: a peer certificate from
another CA, an expired one, one the pin does not name, one of the wrong kind (its extended key
usage, or a name `--peer-name` does not allow) — each with a log line that says which — and a
controller (os-ken over TLS) refusing a switch whose certificate it does not trust. Every refusal
beside the same connection accepted with the right certificate."""

import datetime
import ipaddress
import socket
import ssl
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from testbed.controllers import OsKen
from testbed.netns import sh
from testbed.switches import Edgeflow
from testbed.util import free_port, wait_for

NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path, key, cert):
    path.with_suffix(".key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def pki(d):
    """Two CAs (`ca`, trusted, and `other-ca`) and leaf certificates: `switch`, `ctl` and `ctl2`
    from `ca`, `stranger` from `other-ca`, `expired` from `ca` but expired yesterday. Returns
    {name: (key path, certificate path)} (and the CAs' keys and certificates under `cas`, to sign
    more with `leaf`) and each certificate's SHA-256 as openssl prints it."""
    cas = {}
    for ca in ("ca", "other-ca"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(_name(ca)).issuer_name(_name(ca)).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(NOW - datetime.timedelta(days=1))
                .not_valid_after(NOW + datetime.timedelta(days=2))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        _write(d / ca, key, cert)
        cas[ca] = (key, cert)
    out, sha = {}, {}
    out["cas"] = cas
    leaves = {"switch": ("ca", 0), "ctl": ("ca", 0), "ctl2": ("ca", 0), "stranger": ("other-ca", 0),
              "expired": ("ca", -3)}
    for name, (ca, shift) in leaves.items():
        out[name], sha[name] = leaf(d, cas[ca], name, shift=shift)
    out["ca"] = d / "ca.pem"
    out["other-ca"] = d / "other-ca.pem"
    return out, sha


BOTH = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def leaf(d, ca, name, cn=None, usage=BOTH, dns=(), shift=0):
    """A certificate `ca` (its key and certificate) signs for `name`'s key, whose subject's common
    name is `cn` (default `name`), with extended key usages `usage` (None: no such extension, any
    use) and DNS names `dns` beside 127.0.0.1, valid from a day before now+`shift` days for two
    days. Returns (key path, certificate path) and its SHA-256 as openssl prints it."""
    ca_key, ca_cert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    start = NOW + datetime.timedelta(days=shift - 1)
    builder = (x509.CertificateBuilder().subject_name(_name(cn or name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                           *map(x509.DNSName, dns)]), critical=False))
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write(d / name, key, cert)
    return (d / f"{name}.key", d / f"{name}.pem"), ":".join(f"{b:02X}" for b in cert.fingerprint(hashes.SHA256()))


def switch_tls(keys, *extra):
    key, cert = keys["switch"]
    return ["--private-key", str(key), "--certificate", str(cert), "--ca-cert", str(keys["ca"]), *extra]


def ofctl(keys, who, port):
    """ovs-ofctl dump-flows over TLS as `who`, trusting `ca`: its result."""
    key, cert = keys[who]
    return sh("ovs-ofctl", "-O", "OpenFlow13", f"--private-key={key}", f"--certificate={cert}",
              f"--ca-cert={keys['ca']}", "dump-flows", f"ssl:127.0.0.1:{port}", check=False, timeout=20)


def logged(sw, *words, timeout=10):
    """Waits until one line of the switch's log holds every word; returns it."""
    found = []

    def has():
        found[:] = [l for l in sw.log().splitlines() if all(w in l for w in words)]
        return found
    try:
        wait_for(has, timeout=timeout, what=f"a log line with {words}")
    except TimeoutError as e:
        raise TimeoutError(f"{e}; the log ends:\n" + "\n".join(sw.log().splitlines()[-8:])) from None
    return found[0]


def test_a_tls_listener_refuses_other_cas_expired_and_unpinned_certificates(two_hosts, tmp_path):
    keys, sha = pki(tmp_path)
    port = free_port()
    with Edgeflow(two_hosts.switch_ports, extra=switch_tls(keys, "--listen", f"ptls:{port}:127.0.0.1")) as sw:
        ok = ofctl(keys, "ctl", port)
        assert ok.returncode == 0 and "actions=NORMAL" in ok.stdout, ok.stderr
        for who, reason in (("stranger", "UnknownIssuer"), ("expired", "certificate expired")):
            r = ofctl(keys, who, port)
            assert r.returncode != 0 and "actions=" not in r.stdout, (who, r.stdout)
            line = logged(sw, "TLS handshake failed", reason)
            assert "peer=127.0.0.1:" in line, line
        # Each refusal is counted; the session that got in is not.
        channel = sw.stats()["channel"]
        assert channel["handshakes_failed"] == 2, channel
    # Pinned: of two certificates the CA signed, only the pinned one gets in.
    pin = ["--listen", f"ptls:{port}:127.0.0.1", "--peer-cert-sha256", sha["ctl"]]
    with Edgeflow(two_hosts.switch_ports, extra=switch_tls(keys, *pin)) as sw:
        assert ofctl(keys, "ctl", port).returncode == 0
        r = ofctl(keys, "ctl2", port)
        assert r.returncode != 0, r.stdout
        line = logged(sw, "TLS handshake failed", "not the pinned certificate")
        assert sha["ctl2"] in line and sha["ctl"] in line, line


class TlsController:
    """A bare TLS server in a controller's place: accepts one switch, presenting `who`'s
    certificate, and records whether the handshake completed."""

    def __init__(self, keys, who):
        key, cert = keys[who]
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.load_verify_locations(keys["ca"])
        self.ctx.verify_mode = ssl.CERT_REQUIRED
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.settimeout(15)
        self.port = self.listener.getsockname()[1]
        self.handshakes = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        try:
            raw, _ = self.listener.accept()
            with self.ctx.wrap_socket(raw, server_side=True) as s:
                self.handshakes.append("ok")
                s.recv(8)
        except (OSError, ssl.SSLError) as e:
            self.handshakes.append(str(e))


def test_the_switch_refuses_a_controller_it_does_not_trust(two_hosts, tmp_path):
    keys, sha = pki(tmp_path)
    good = TlsController(keys, "ctl")
    with Edgeflow(two_hosts.switch_ports, controllers=[f"tls:127.0.0.1:{good.port}"], extra=switch_tls(keys)) as sw:
        logged(sw, "connected (TLS)", f"tls:127.0.0.1:{good.port}")
    for who, extra, reason in (("stranger", (), "UnknownIssuer"), ("expired", (), "certificate expired"),
                               ("ctl2", ("--peer-cert-sha256", sha["ctl"]), "not the pinned certificate")):
        bad = TlsController(keys, who)
        target = f"tls:127.0.0.1:{bad.port}"
        with Edgeflow(two_hosts.switch_ports, controllers=[target], extra=switch_tls(keys, *extra)) as sw:
            line = logged(sw, "cannot connect", "TLS handshake failed", reason)
            assert target in line, line
            assert "connected (TLS)" not in sw.log()


def test_osken_over_tls_refuses_a_switch_it_does_not_trust(two_hosts, tmp_path):
    """os-ken, listening with TLS, connects a switch whose certificate its CA signed and refuses
    one it does not trust; the switch says the handshake failed and keeps retrying."""
    keys, _ = pki(tmp_path)
    ctl_key, ctl_cert = keys["ctl"]
    with OsKen("pass_through", log_name="osken-tls", tls=(ctl_key, ctl_cert, keys["ca"])) as osken:
        with Edgeflow(two_hosts.switch_ports, controllers=[osken.target], extra=switch_tls(keys)) as sw:
            logged(sw, "connected (TLS)")
            wait_for(lambda: any("in_port=1" in f for f in sw.flows()), timeout=15,
                     what="os-ken to program the switch")
    # The same os-ken trusting only the other CA refuses the switch's certificate. Under TLS 1.3
    # the client's handshake ends before the server has checked it: the refusal arrives as an
    # alert instead of the hello, and the switch says so (and backs off as for a failed connect).
    with OsKen("pass_through", log_name="osken-tls-untrusted", tls=(ctl_key, ctl_cert, keys["other-ca"])) as osken:
        with Edgeflow(two_hosts.switch_ports, controllers=[osken.target], extra=switch_tls(keys)) as sw:
            line = logged(sw, "connection failed before the peer's hello", osken.target)
            assert "alert" in line.lower(), line
            assert sw.stats()["channel"]["handshakes_failed"] >= 1
            time.sleep(1)
            assert not any("in_port=1" in f for f in sw.flows()), sw.flows()


def test_one_ca_for_switches_and_controllers_a_switch_does_not_pass_for_a_controller(two_hosts, tmp_path):
    """Where one CA signs switches and controllers, a certificate of the wrong kind is refused both
    ways: by its extended key usage (a switch's client-only certificate offered as a controller's,
    a controller's server-only one offered to a listener), and, where it allows either use, by the
    names `--peer-name` permits (the subject's CN, or a DNS name). Each refusal is logged with its
    reason and counted; the right certificate is served beside it, by os-ken as the controller."""
    keys, _ = pki(tmp_path)
    ca = keys["cas"]["ca"]
    keys["switch-2"], _ = leaf(tmp_path, ca, "switch-2", usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    keys["switch-3"], _ = leaf(tmp_path, ca, "switch-3", usage=None, dns=["switch-3.example"])
    keys["ctl-server"], _ = leaf(tmp_path, ca, "ctl-server", cn="ctl", usage=[ExtendedKeyUsageOID.SERVER_AUTH])
    keys["ctl-dns"], _ = leaf(tmp_path, ca, "ctl-dns", cn="controller 7", dns=["ctl-7.example"])
    names = ["--peer-name", "ctl", "--peer-name", "ctl-7.example"]

    # The switch connecting: a peer without serverAuth is no controller, named or not.
    bad = TlsController(keys, "switch-2")
    target = f"tls:127.0.0.1:{bad.port}"
    with Edgeflow(two_hosts.switch_ports, controllers=[target], extra=switch_tls(keys)) as sw:
        line = logged(sw, "cannot connect", "TLS handshake failed",
                      "does not allow extended key usage for server authentication")
        assert target in line, line
    # Another switch whose certificate allows any use is a controller by its name alone: os-ken
    # presenting it is refused, presenting a controller's is served and programs the switch.
    key, cert = keys["switch-3"]
    with OsKen("pass_through", log_name="osken-tls-switch", tls=(key, cert, keys["ca"])) as osken:
        with Edgeflow(two_hosts.switch_ports, controllers=[osken.target], extra=switch_tls(keys, *names)) as sw:
            line = logged(sw, "cannot connect", "not a permitted peer name",
                          "CN:switch-3, DNS:switch-3.example where ctl, ctl-7.example are permitted")
            assert osken.target in line, line
            assert sw.stats()["channel"]["handshakes_failed"] >= 1
            assert "connected (TLS)" not in sw.log()
    key, cert = keys["ctl"]
    with OsKen("pass_through", log_name="osken-tls-named", tls=(key, cert, keys["ca"])) as osken:
        with Edgeflow(two_hosts.switch_ports, controllers=[osken.target], extra=switch_tls(keys, *names)) as sw:
            logged(sw, "connected (TLS)")
            wait_for(lambda: any("in_port=1" in f for f in sw.flows()), timeout=15,
                     what="os-ken to program the switch")

    # The switch listening: a peer without clientAuth is refused, as is one of no permitted
    # name; a controller named by its CN or by a DNS name is served.
    port = free_port()
    with Edgeflow(two_hosts.switch_ports, extra=switch_tls(keys, "--listen", f"ptls:{port}", *names)) as sw:
        for who, reason in (("ctl-server", "does not allow extended key usage for client authentication"),
                            ("switch-3", "not a permitted peer name")):
            r = ofctl(keys, who, port)
            assert r.returncode != 0 and "actions=" not in r.stdout, (who, r.stdout)
            line = logged(sw, "TLS handshake failed", reason)
            assert "peer=127.0.0.1:" in line, line
        for who in ("ctl", "ctl-dns"):
            ok = ofctl(keys, who, port)
            assert ok.returncode == 0 and "actions=NORMAL" in ok.stdout, (who, ok.stderr)
        assert sw.stats()["channel"]["handshakes_failed"] == 2, sw.stats()["channel"]
