"""`make package`'s Debian package, read as dpkg reads it (its installation under a real systemd
is tests/init/test_systemd.py, `make test-init`): the fields a package index needs, the config as
a conffile, the files `make install` puts in place and no other, and maintainer scripts that
parse."""

import subprocess

import pytest

from testbed.util import ROOT

pytestmark = pytest.mark.no_root


def test_the_deb_holds_what_make_install_installs_with_the_config_as_a_conffile(tmp_path):
    deb = subprocess.run(["scripts/package.sh", "deb", "amd64", "target/release/edgeflow", str(tmp_path / "out")],
                         cwd=ROOT, check=True, capture_output=True, text=True, timeout=300).stdout.strip()
    assert deb.endswith("_amd64.deb"), deb
    field = lambda name: subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True,
                                        check=True).stdout.strip()
    assert (field("Package"), field("Architecture")) == ("edgeflow", "amd64")
    assert field("Version") and "libc6" in field("Depends") and field("Description")
    # The switch's own files, as make install stages them (man pages compressed, as Debian's).
    staged = tmp_path / "staged"
    subprocess.run(["make", "-s", "-C", str(ROOT), f"DESTDIR={staged}", "PREFIX=/usr", "install"], check=True,
                   capture_output=True, timeout=300)
    want = {"./" + str(p.relative_to(staged)) + (".gz" if p.suffix == ".1" else "")
            for p in staged.rglob("*") if p.is_file()} | {"./usr/share/doc/edgeflow/copyright"}
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    files = {l.split()[-1] for l in listing.splitlines() if not l.startswith("d")}
    assert files == want, (files ^ want)
    assert all(l.split()[1] == "root/root" for l in listing.splitlines()), listing
    control = tmp_path / "control"
    subprocess.run(["dpkg-deb", "-e", deb, str(control)], check=True)
    assert (control / "conffiles").read_text().split() == ["/etc/edgeflow/edgeflow.toml"]
    for script in ("postinst", "prerm", "postrm"):
        subprocess.run(["sh", "-n", str(control / script)], check=True)
