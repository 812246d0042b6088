#!/usr/bin/env bash
# `make package`: Debian and OpenWrt packages of edgeflow, in build/packages/ (docs/deploy.md#packages).
#   scripts/package.sh                     every architecture: .deb for amd64 (the native build),
#                                          arm64 and armhf (make cross's static musl images); .ipk
#                                          for aarch64 and armv7 (the full images)
#   scripts/package.sh deb ARCH BIN OUT    one Debian package of the switch BIN for ARCH into OUT
#   scripts/package.sh ipk ARCH BIN OUT    one OpenWrt package (opkg), ARCH as OpenWrt names it
# A package holds what `make install` puts in place (PREFIX=/usr), the config as a conffile, and
# maintainer scripts that make the account and tell systemd; it does not enable or start the
# service: a switch needs its ports configured first.
set -euo pipefail
cd "$(dirname "$0")/.."

version() { sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1; }

deb() {
  local arch=$1 bin=$2 out=$3 strip=strip depends
  local stage; stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  case $arch in
    amd64) depends="libc6 (>= 2.34), libgcc-s1" ;;
    *) depends=""; strip=true ;;  # static musl images, stripped by the embedded profile
  esac
  chmod 755 "$stage"
  make -s install DESTDIR="$stage" PREFIX=/usr EDGEFLOW_BIN="$bin" STRIP="$strip" >/dev/null
  # As Debian ships them: man pages compressed, and a copyright file.
  gzip -9n "$stage"/usr/share/man/man1/*.1
  mkdir -p "$stage/usr/share/doc/edgeflow"
  printf '%s\n' "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" \
    "Upstream-Name: edgeflow" "" "Files: *" "Copyright: edgeflow developers" \
    "License: Apache-2.0 (Cargo.toml's license; the text is in /usr/share/common-licenses/Apache-2.0)" \
    > "$stage/usr/share/doc/edgeflow/copyright"
  # The example config is the conffile dpkg keeps a user's edits of; the .example beside it is
  # the pristine copy.
  mkdir -p "$stage/DEBIAN"
  local size; size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
  {
    echo "Package: edgeflow"
    echo "Version: $(version)"
    echo "Architecture: $arch"
    echo "Maintainer: edgeflow developers <edgeflow@localhost>"
    echo "Installed-Size: $size"
    [ -n "$depends" ] && echo "Depends: $depends"
    echo "Recommends: systemd"
    echo "Section: net"
    echo "Priority: optional"
    echo "Homepage: https://github.com/edgeflow/edgeflow"
    echo "Description: programmable switch for Linux edge devices"
    echo " An OpenFlow 1.3 switch with AFDX, TSN, LESS and P4 modes, forwarding between Linux"
    echo " interfaces in userspace or in the kernel (eBPF at TC and XDP)."
  } > "$stage/DEBIAN/control"
  echo /etc/edgeflow/edgeflow.toml > "$stage/DEBIAN/conffiles"
  cat > "$stage/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if command -v systemd-sysusers >/dev/null; then
    systemd-sysusers /usr/lib/sysusers.d/edgeflow.conf
  elif ! getent passwd edgeflow >/dev/null; then
    adduser --system --group --no-create-home --home /nonexistent edgeflow
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
  fi
fi
SH
  cat > "$stage/DEBIAN/prerm" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop edgeflow.service || true
fi
SH
  cat > "$stage/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
SH
  chmod 755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
  mkdir -p "$out"
  local deb="$out/edgeflow_$(version)_$arch.deb"
  dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
  echo "$deb"
}

# An OpenWrt package: opkg's format, a gzipped tar of debian-binary, control.tar.gz and
# data.tar.gz (as OpenWrt's ipkg-build writes it), for a static image (no Depends). ARCH is OpenWrt's package architecture
# (aarch64_generic, arm_cortex-a7_neon-vfpv4, mipsel_24kc, ...). The switch's own files: the
# binary, the procd script, the UCI config (a conffile) with the datapath the image supports.
ipk() {
  local arch=$1 bin=$2 out=$3
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$work/data/usr/bin" "$work/data/etc/init.d" "$work/data/etc/config" "$work/control"
  install -m755 "$bin" "$work/data/usr/bin/edgeflow"
  install -m755 packaging/openwrt/edgeflow.init "$work/data/etc/init.d/edgeflow"
  # The sample says user, which every image runs; the packaged images are full ones, with the
  # kernel fast path, which 64- and 32-bit kernels alike run (docs/deploy.md).
  sed "s/^\toption datapath 'user'/\toption datapath 'tc'/" packaging/openwrt/edgeflow.config \
    > "$work/data/etc/config/edgeflow"
  chmod 644 "$work/data/etc/config/edgeflow"
  local size; size=$(du -sb "$work/data" | cut -f1)
  {
    echo "Package: edgeflow"
    echo "Version: $(version)-1"
    echo "Source: packaging/openwrt"
    echo "SourceName: edgeflow"
    echo "License: Apache-2.0"
    echo "Section: net"
    echo "Architecture: $arch"
    echo "Installed-Size: $size"
    echo "Description: programmable switch for Linux edge devices (OpenFlow 1.3, AFDX, TSN, LESS, P4)"
    # The user the UCI config runs the switch as (option user): opkg's default_postinst adds it
    # and its group, with free ids, as OpenWrt's build does for a package's USERID.
    echo "Require-User: edgeflow:edgeflow"
  } > "$work/control/control"
  echo /etc/config/edgeflow > "$work/control/conffiles"
  # The scripts OpenWrt's build writes for every package: base-files' default_postinst adds the
  # Require-User users and enables the procd service (not in an image being built, IPKG_INSTROOT
  # set); default_prerm stops and disables it.
  local step
  for step in postinst prerm; do
    printf '%s\n' '#!/bin/sh' '[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0' '[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0' \
      '. ${IPKG_INSTROOT}/lib/functions.sh' "default_$step \$0 \$@" > "$work/control/$step"
  done
  chmod 755 "$work/control/postinst" "$work/control/prerm"
  echo "2.0" > "$work/debian-binary"
  tar -C "$work/control" --owner=0 --group=0 --numeric-owner -czf "$work/control.tar.gz" .
  tar -C "$work/data" --owner=0 --group=0 --numeric-owner -czf "$work/data.tar.gz" .
  mkdir -p "$out"
  local ipk="$out/edgeflow_$(version)-1_$arch.ipk"
  tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$ipk" ./debian-binary ./control.tar.gz ./data.tar.gz
  echo "$ipk"
}

case "${1:-}" in
  deb) deb "$2" "$3" "$4"; exit 0 ;;
  ipk) ipk "$2" "$3" "$4"; exit 0 ;;
esac

out=build/packages
deb amd64 target/release/edgeflow "$out"
for pair in arm64:aarch64-unknown-linux-musl armhf:armv7-unknown-linux-musleabihf; do
  arch=${pair%%:*} image=build/cross/${pair#*:}/edgeflow
  [ -x "$image" ] || { echo "package: no $image (make cross)"; exit 1; }
  deb "$arch" "$image" "$out"
done
# OpenWrt: the full images (the minimal one has no kernel fast path), for the ARM targets make
# cross builds.
for pair in aarch64_generic:aarch64-unknown-linux-musl arm_cortex-a7_neon-vfpv4:armv7-unknown-linux-musleabihf; do
  arch=${pair%%:*} image=build/cross/${pair#*:}/edgeflow
  [ -x "$image" ] || { echo "package: no $image (make cross)"; exit 1; }
  ipk "$arch" "$image" "$out"
done
