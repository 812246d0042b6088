#!/usr/bin/env bash
# scripts/mips-kernel.sh DIR: a big-endian MIPS (malta, MIPS32r2) kernel and a static big-endian
# busybox, built here, for `KERNEL_ARCHES=mips scripts/test-device-kernels.sh`. Debian 12 has no
# big-endian MIPS port, so neither comes from the mirror as the other guests' do. DIR gets the
# layout the Debian guests unpack to: DIR/root/boot/vmlinuz-VERSION (an ELF, as Debian's malta
# kernels are) and DIR/root/bin/busybox, then DIR/done; a second run finds both there, and builds
# the kernel again only if the options below changed (DIR/root/boot/options: those it was built
# with).
#   kernel:  apt's linux-source-6.1 (Debian's 6.1, as the other guests run), from allnoconfig plus
#            the few options below, everything the guest uses built in (it loads no modules);
#   busybox: Debian 12's source package (checked link by link, as scripts/debian.sh checks
#            binaries), configured as Debian's busybox-static (its debian/config/pkg/static), linked
#            statically against glibc from libc6-dev-mips-cross.
# Both build with gcc-mips-linux-gnu, niced, on two jobs (MIPS_KERNEL_JOBS). Build trees stay in
# build/kernels/mips-src (about 1.5 GB; delete it freely once DIR/done exists).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: scripts/mips-kernel.sh DIR}
JOBS=${MIPS_KERNEL_JOBS:-2}
CROSS=mips-linux-gnu-
SRC=build/kernels/mips-src
. scripts/debian.sh

for p in linux-source-6.1 gcc-mips-linux-gnu libc6-dev-mips-cross flex bison bc libssl-dev libelf-dev cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null
done
mkdir -p "$SRC" "$DIR/root/boot" "$DIR/root/bin"

# What the guest needs of the kernel beyond allnoconfig: the malta board big-endian with its serial
# console and power-off (the guest ends with `poweroff -f`), an initramfs, the system calls Rust's
# std and busybox use (busybox's glibc, and musl whenever the time fits, sleep through the 32-bit
# time_t nanosleep: without it `sleep 10` returns at once), network namespaces and veths for the
# two hosts, AF_PACKET and AF_XDP for the userspace ports, and the fast path: the bpf() system call
# with the JIT, clsact with cls_bpf (TC, no TCX before 6.6) and XDP (in the core); the JIT
# allocates in the modules' area, so it needs module support, though no module is built. /proc's
# page monitor gives smaps_rollup (idle RSS). One CPU (TINY_RCU), as an ath79 router has.
kernel_options() {
  cat <<'EOF'
CONFIG_MIPS_MALTA=y
CONFIG_CPU_BIG_ENDIAN=y
CONFIG_CPU_MIPS32_R2=y
CONFIG_32BIT=y
CONFIG_PAGE_SIZE_4KB=y
CONFIG_HZ_250=y
CONFIG_PREEMPT_VOLUNTARY=y
CONFIG_MIPS_FP_SUPPORT=y
CONFIG_PCI=y
CONFIG_POWER_RESET=y
CONFIG_POWER_RESET_PIIX4_POWEROFF=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_PRINTK=y
CONFIG_BUG=y
CONFIG_KALLSYMS=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_RD_GZIP=y
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_MULTIUSER=y
CONFIG_FUTEX=y
CONFIG_COMPAT_32BIT_TIME=y
CONFIG_EPOLL=y
CONFIG_SIGNALFD=y
CONFIG_TIMERFD=y
CONFIG_EVENTFD=y
CONFIG_SHMEM=y
CONFIG_POSIX_TIMERS=y
CONFIG_FILE_LOCKING=y
CONFIG_ADVISE_SYSCALLS=y
CONFIG_MEMBARRIER=y
CONFIG_INOTIFY_USER=y
CONFIG_PROC_FS=y
CONFIG_PROC_SYSCTL=y
CONFIG_PROC_PAGE_MONITOR=y
CONFIG_SYSFS=y
CONFIG_TMPFS=y
CONFIG_DEVTMPFS=y
CONFIG_NAMESPACES=y
CONFIG_NET_NS=y
CONFIG_NET=y
CONFIG_PACKET=y
CONFIG_UNIX=y
CONFIG_INET=y
CONFIG_IPV6=y
CONFIG_XDP_SOCKETS=y
CONFIG_NETDEVICES=y
CONFIG_NET_CORE=y
CONFIG_VETH=y
CONFIG_NET_SCHED=y
CONFIG_NET_CLS_ACT=y
CONFIG_NET_SCH_INGRESS=y
CONFIG_NET_CLS_BPF=y
CONFIG_BPF_SYSCALL=y
CONFIG_BPF_JIT=y
CONFIG_MODULES=y
EOF
}

build_kernel() {
  local tree=$SRC/linux-source-6.1 out=$SRC/linux-build version start
  if [ ! -f "$tree/Makefile" ]; then
    echo "mips-kernel: unpacking linux-source-6.1"
    tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$SRC"
  fi
  mkdir -p "$out"
  kernel_options >"$out/options"
  start=$(date +%s)
  make -s -C "$tree" O="$PWD/$out" ARCH=mips CROSS_COMPILE=$CROSS KCONFIG_ALLCONFIG="$PWD/$out/options" allnoconfig
  # allnoconfig drops an option whose dependencies are missing without a word: check each.
  local missing
  missing=$(grep -vxFf "$out/.config" "$out/options" || true)
  [ -z "$missing" ] || { echo "mips-kernel: options the configuration did not keep:" $missing >&2; return 1; }
  echo "mips-kernel: building the kernel ($JOBS jobs, niced)"
  nice -n 10 make -s -C "$tree" O="$PWD/$out" ARCH=mips CROSS_COMPILE=$CROSS -j"$JOBS" vmlinux
  version=$(make -s -C "$tree" O="$PWD/$out" ARCH=mips kernelrelease)
  rm -f "$DIR"/root/boot/vmlinuz-*
  ${CROSS}strip -o "$DIR/root/boot/vmlinuz-$version" "$out/vmlinux"
  cp "$out/.config" "$DIR/root/boot/config-$version"
  cp "$out/options" "$DIR/root/boot/options"
  echo "mips-kernel: kernel $version built in $(($(date +%s) - start)) s"
}

# Debian 12's busybox, patched as Debian patches it, with the configuration of its busybox-static
# (which the other guests unpack): every applet the guest's init uses (sh, ip, unshare, nsenter,
# ping, mount, grep, insmod, poweroff, ...).
build_busybox() {
  local index tree start
  index=$(debian_sources bookworm)
  rm -rf "$SRC/busybox" && mkdir -p "$SRC/busybox"
  debian_source_fetch "$index" busybox "$SRC/busybox"
  tree=$SRC/busybox/tree
  mkdir -p "$tree"
  tar -xjf "$SRC"/busybox/busybox_*.orig.tar.bz2 -C "$tree" --strip-components=1
  tar -xJf "$SRC"/busybox/busybox_*.debian.tar.xz -C "$tree"
  grep -v '^#' "$tree/debian/patches/series" | while read -r patch; do
    [ -z "$patch" ] || patch -s -p1 -d "$tree" <"$tree/debian/patches/$patch"
  done
  start=$(date +%s)
  cat "$tree/debian/config/os/linux" "$tree/debian/config/pkg/static" >"$tree/.config"
  # (yes ends on SIGPIPE once oldconfig has its answers.)
  { yes "" || true; } | make -s -C "$tree" CROSS_COMPILE=$CROSS oldconfig >/dev/null
  grep -qx 'CONFIG_STATIC=y' "$tree/.config"
  echo "mips-kernel: building busybox ($JOBS jobs, niced)"
  # gcc 12 warns a great deal about busybox 1.35: the log keeps it, a failure shows its end.
  nice -n 10 make -s -C "$tree" CROSS_COMPILE=$CROSS -j"$JOBS" busybox >"$SRC/busybox/build.log" 2>&1 ||
    { tail -n 30 "$SRC/busybox/build.log" >&2; return 1; }
  ${CROSS}strip -o "$DIR/root/bin/busybox" "$tree/busybox"
  echo "mips-kernel: busybox built in $(($(date +%s) - start)) s"
}

if ! cmp -s <(kernel_options) "$DIR/root/boot/options"; then
  rm -f "$DIR/done" && build_kernel
fi
[ -f "$DIR/done" ] && exit 0
[ -f "$DIR/root/bin/busybox" ] || build_busybox
file "$DIR"/root/boot/vmlinuz-* "$DIR/root/bin/busybox" | grep -c 'ELF 32-bit MSB.*MIPS' | grep -qx 2 ||
  { echo "mips-kernel: the kernel or busybox is not a big-endian MIPS ELF" >&2; exit 1; }
touch "$DIR/done"
