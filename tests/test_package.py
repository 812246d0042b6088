"""`make package`'s Debian package, read as dpkg reads it, and its OpenWrt package as opkg does (its installation under a real systemd
is tests/init/test_systemd.py, `make test-init`): the fields a package index needs, the config as
a conffile, the files `make install` puts in place and no other, and maintainer scripts that
parse."""

import io
import subprocess
import tarfile

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


def test_the_ipk_is_what_opkg_reads(tmp_path):
    """opkg's format (as OpenWrt's ipkg-build writes it): a gzipped tar of debian-binary,
    control.tar.gz and data.tar.gz, in that order; the fields opkg needs; the UCI config as a
    conffile; the procd script executable and parsing; the datapath the image can run."""
    ipk = subprocess.run(["scripts/package.sh", "ipk", "x86_64", "target/release/edgeflow", str(tmp_path / "out")],
                         cwd=ROOT, check=True, capture_output=True, text=True, timeout=300).stdout.strip()
    with tarfile.open(ipk, "r:gz") as outer:
        assert [m.name for m in outer.getmembers()] == ["./debian-binary", "./control.tar.gz", "./data.tar.gz"]
        assert outer.extractfile("./debian-binary").read() == b"2.0\n"
        control = tarfile.open(fileobj=io.BytesIO(outer.extractfile("./control.tar.gz").read()), mode="r:gz")
        data = tarfile.open(fileobj=io.BytesIO(outer.extractfile("./data.tar.gz").read()), mode="r:gz")
    fields = dict(l.split(": ", 1) for l in control.extractfile("./control").read().decode().splitlines())
    assert (fields["Package"], fields["Architecture"], fields["Version"]) == ("edgeflow", "x86_64", fields["Version"])
    assert fields["Version"].endswith("-1") and int(fields["Installed-Size"]) > 1_000_000
    conffiles = control.extractfile("./conffiles").read().decode().split()
    files = {m.name: m for m in data.getmembers() if m.isfile()}
    assert conffiles == ["/etc/config/edgeflow"] and "." + conffiles[0] in files
    assert set(files) == {"./usr/bin/edgeflow", "./etc/init.d/edgeflow", "./etc/config/edgeflow"}, set(files)
    assert all(m.uid == 0 and m.gid == 0 for m in data.getmembers())
    for exe in ("./usr/bin/edgeflow", "./etc/init.d/edgeflow"):
        assert files[exe].mode & 0o111, exe
    for name in ("./postinst", "./prerm"):
        script = tmp_path / name[2:]
        script.write_bytes(control.extractfile(name).read())
        subprocess.run(["sh", "-n", str(script)], check=True)
        # base-files' own steps: for postinst, the Require-User users and the service enabled.
        assert f"default_{name[2:]} $0 $@" in script.read_text(), script.read_text()
    uci = data.extractfile("./etc/config/edgeflow").read().decode()
    assert "option datapath 'tc'" in uci, "a full image runs the kernel fast path"
    # The switch runs as the user the package makes opkg add (`--user`, not root).
    assert fields["Require-User"] == "edgeflow:edgeflow" and "option user 'edgeflow'" in uci, (fields, uci)
