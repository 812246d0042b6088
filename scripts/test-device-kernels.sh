#!/usr/bin/env bash
# `make test-device-kernels` (and `make test-arm-kernel`, its ARM half): the devices' own kernels
# running the switch, each Debian 12's (6.1) under qemu-system (TCG: emulated, minutes each), with a
# small initramfs of busybox and the `make cross` images for that architecture:
#   arm64   linux-image-arm64        qemu-system-aarch64 -M virt    aarch64-unknown-linux-musl
#   armhf   linux-image-armmp        qemu-system-arm -M virt        armv7-unknown-linux-musleabihf
#   i386    linux-image-686          qemu-system-i386 (pc)          i586-unknown-linux-musl
#   mipsel  linux-image-4kc-malta    qemu-system-mipsel -M malta    mipsel-unknown-linux-musl
#   mips    built here (6.1)         qemu-system-mips -M malta      mips-unknown-linux-musl
# Debian 12 has no big-endian MIPS port: scripts/mips-kernel.sh builds that kernel (malta,
# big-endian, from apt's linux-source-6.1) and busybox (Debian's source) once, into build/kernels.
# Inside each:
#   - two hosts in network namespaces on two veth ports; each image (full, minimal) switches a ping
#     between them, then its idle resident memory is read, with the default rings and with
#     `--ring-frames 256` (the footprint table's rows, docs/deploy.md);
#   - the full image with the kernel fast path at TC (forwarding the ping) and at XDP, and the
#     switch's own count of the frames the kernel decided (`edgeflow stats`: fast path hits), which
#     must be above 0 on both;
#   - where the datapath's tests were cross-built (KERNEL_TESTS, arm64 and mips by default: 64-bit,
#     and the one big-endian kernel, whose verifier and JIT see the programs' byte order): every
#     fast-path kernel test (BPF_PROG_TEST_RUN: flows, actions, meters, AFDX links, LESS labels, on
#     TC and XDP), verified by that kernel's verifier and run by its JIT or interpreter.
# KERNEL_ARCHES picks the machines (all five by default; ARM_ARCHES, the older name, still works),
# KERNEL_TESTS the ones the kernel tests run on ("arm64 mips"; "all" for every one, each a cross
# build of the tests), KERNEL_IMAGES the images ("edgeflow edgeflow-minimal"). Packages come from the
# mirror, checked link by link (scripts/debian.sh); nothing is installed but the qemu-system packages
# (and, for mips, the cross compiler and kernel source scripts/mips-kernel.sh builds with).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
ARCHES=${KERNEL_ARCHES:-${ARM_ARCHES:-arm64 armhf i386 mipsel mips}}
TESTS_ON=${KERNEL_TESTS:-arm64 mips}
IMAGES=${KERNEL_IMAGES:-edgeflow edgeflow-minimal}
. scripts/debian.sh

# The guest's init. TESTS (yes/no), JITS and IMAGES are set in lines written before it.
guest_init() {
  cat <<'EOF'
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev; mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t bpf bpf /sys/fs/bpf; mount -t tmpfs tmpfs /tmp
mkdir -p /run && mount -t tmpfs tmpfs /run
echo; echo "guest-kernel $(uname -r) $(uname -m)" # after a newline: the BIOS leaves its last line open
ip link set lo up
# Before the tests: one makes a veth pair (the XDP fallback link).
for m in veth sch_ingress cls_bpf; do [ -f /$m.ko ] && insmod /$m.ko; done
# JITS: the bpf_jit_enable settings the tests run under, one run each ("" leaves the kernel's
# default); the switch then runs under the last. A JIT-compiled program is in /proc/kallsyms
# (as bpf_prog_TAG_NAME [bpf]) once bpf_jit_kallsyms is 1: the runs below count them.
echo 1 >/proc/sys/net/core/bpf_jit_kallsyms 2>/dev/null
for jit in ${JITS:-default}; do
  [ "$jit" = default ] || echo "$jit" >/proc/sys/net/core/bpf_jit_enable
  [ "$TESTS" = yes ] || continue
  echo "guest-tests: bpf_jit_enable $(cat /proc/sys/net/core/bpf_jit_enable)"
  /datapath-tests --color never --test-threads 1 fastpath::kernel:: 2>&1 | grep -E -A4 "^test .*FAILED|test result|panicked"
done
# Two hosts, each a network namespace held open by a sleeping process, on the ports' peers.
i=0
for port in ef-a0 ef-b0; do
  i=$((i + 1))
  ip link add $port type veth # busybox names the peer itself: veth0 (free again once renamed)
  ip link set veth0 name ef-h$i
  unshare -n sleep 100000 &
  eval host$i=$!
  sleep 1
  ip link set ef-h$i netns $(eval echo \$host$i)
  nsenter -t $(eval echo \$host$i) -n sh -c "ip link set lo up; ip link set ef-h$i up; ip addr add 10.9.0.$i/24 dev ef-h$i"
  ip link set $port up
done
# run LABEL ARGS...: the switch on the two ports, a ping through it, its fast path's count of the
# frames the kernel decided (when it runs one), then idle.
run() {
  label=$1; shift
  "$@" --port ef-a0 --port ef-b0 --fail-mode standalone >/tmp/run.log 2>&1 &
  pid=$!
  sleep 10
  got=$(nsenter -t $host1 -n ping -c 3 -W 3 10.9.0.2 | grep -o '[0-9]* packets received' | cut -d' ' -f1)
  sleep 3
  # smaps_rollup walks the page tables; 6.1's VmRSS lags, its counters cached a thread at a time.
  echo "run $label: ping ${got:-0}/3; $(grep -E '^(Rss|Anonymous):' /proc/$pid/smaps_rollup | tr -s ' \t' ' ' | tr '\n' ' ')"
  grep -o 'kernel fast path attached.*' /tmp/run.log | sed "s/^/run $label: /"
  case "$*" in
    *--datapath*) echo "run $label: fast path $(/edgeflow stats --json 2>&1 | grep -o '"hits": [0-9]*' | head -n 1 | tr -d '"')"
      echo "run $label: JIT-compiled programs: $(grep -c 'bpf_prog_.*\[bpf\]$' /proc/kallsyms)" ;;
  esac
  [ "$got" = 3 ] || [ "$label" = "edgeflow datapath xdp" ] || tail -n 8 /tmp/run.log | sed "s/^/run $label: log: /"
  kill $pid; wait $pid || echo "run $label: exited: $(tail -n 3 /tmp/run.log)"
  grep -E 'WARN|ERROR' /tmp/run.log | sed "s/^/run $label: /"
}
for image in $IMAGES; do
  for rings in 1024 256; do run "$image rings $rings" /$image run --ring-frames $rings; done
done
for dp in tc xdp; do run "edgeflow datapath $dp" /edgeflow run --datapath $dp; done
dmesg | grep -E -A12 'Oops|BUG:|Unable to handle|WARNING:' | sed 's/^/kernel: /' | head -n 40
echo guest-done
poweroff -f
EOF
}

# boot ARCH: unpack ARCH's kernel and busybox, build its initramfs, boot it and check what it printed.
boot() {
  local arch=$1 target metapackage qemu_package console mem=1024 index kernel dir initrd tests=no out jits=
  local qemu
  case $arch in
    arm64) target=aarch64-unknown-linux-musl metapackage=linux-image-arm64 qemu_package=qemu-system-arm
      console=ttyAMA0 qemu=(qemu-system-aarch64 -M virt -cpu cortex-a72 -smp 2) ;;
    armhf) target=armv7-unknown-linux-musleabihf metapackage=linux-image-armmp qemu_package=qemu-system-arm
      console=ttyAMA0 qemu=(qemu-system-arm -M virt -cpu cortex-a15 -smp 2) ;;
    # A Pentium II class CPU: Debian's 686 kernel needs CMOV; the image itself runs on a Pentium.
    i386) target=i586-unknown-linux-musl metapackage=linux-image-686 qemu_package=qemu-system-x86
      console=ttyS0 qemu=(qemu-system-i386 -cpu pentium2 -smp 2) ;;
    # Malta: the board qemu has for a 32-bit MIPS kernel; 256 MB is all it maps without highmem,
    # and Debian's 4kc-malta kernel is built for one CPU. A 24Kc, the ath79 routers' core.
    mipsel) target=mipsel-unknown-linux-musl metapackage=linux-image-4kc-malta qemu_package=qemu-system-mips
      console=ttyS0 mem=256 qemu=(qemu-system-mipsel -M malta -cpu 24Kc) ;;
    # The same board and CPU big-endian, on a kernel built here (no metapackage: Debian has none).
    # A 32-bit MIPS kernel leaves its JIT off (bpf_jit_enable 0: MIPS does not ask for it on by
    # default), so the programs ran interpreted on mipsel; here the tests run interpreted, then
    # JIT-compiled (a program the JIT cannot compile falls back), and the switch JIT-compiled.
    mips) target=mips-unknown-linux-musl metapackage='' qemu_package=qemu-system-mips jits="0 1"
      console=ttyS0 mem=256 qemu=(qemu-system-mips -M malta -cpu 24Kc) ;;
    *) echo "test-device-kernels: no machine for $arch (arm64, armhf, i386, mipsel, mips)" >&2; return 1 ;;
  esac
  for p in "$qemu_package" cpio; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null; done
  if [ -z "$metapackage" ]; then
    dir=build/kernels/malta-be
    scripts/mips-kernel.sh "$dir"
    kernel=$(basename "$dir"/root/boot/vmlinuz-*)
    kernel=linux-image-${kernel#vmlinuz-}-malta-be
  else
    index=$(debian_index "$SUITE" "$arch")
    kernel=$(debian_depends "$index" "$metapackage")
    dir=build/kernels/$kernel
  fi
  if [ ! -f "$dir/done" ]; then
    echo "test-device-kernels: unpacking $kernel and busybox-static ($arch)"
    rm -rf "$dir" && mkdir -p "$dir"
    debian_fetch "$index" "$kernel" "$dir/kernel.deb"
    debian_fetch "$index" busybox-static "$dir/busybox.deb"
    dpkg -x "$dir/kernel.deb" "$dir/root" && dpkg -x "$dir/busybox.deb" "$dir/root" && rm "$dir"/*.deb
    touch "$dir/done"
  fi

  initrd=$dir/initramfs
  rm -rf "$initrd" && mkdir -p "$initrd"/{bin,dev,proc,sys,tmp}
  cp "$dir/root/bin/busybox" "$initrd/bin/"
  # veth for the ports; clsact and cls_bpf, which 6.1 attaches TC programs through (no TCX before 6.6).
  # (The kernel built here has them built in.)
  for m in veth sch_ingress cls_bpf; do
    [ ! -d "$dir/root/lib/modules" ] || find "$dir/root/lib/modules" -name "$m.ko" -exec cp {} "$initrd/" \;
  done
  for image in $IMAGES; do
    case $image in
      edgeflow) scripts/cross.sh "$target" full >/dev/null ;;
      edgeflow-minimal) scripts/cross.sh "$target" minimal >/dev/null ;;
    esac
    cp "build/cross/$target/$image" "$initrd/"
  done
  # The full image runs the fast path whichever images the rings runs use.
  if [ ! -f "$initrd/edgeflow" ]; then
    scripts/cross.sh "$target" full >/dev/null && cp "build/cross/$target/edgeflow" "$initrd/"
  fi
  if [ "$TESTS_ON" = all ] || [[ " $TESTS_ON " = *" $arch "* ]]; then
    tests=yes
    cp "$(scripts/cross.sh tests "$target" | tail -n 1)" "$initrd/datapath-tests"
  fi
  { echo '#!/bin/busybox sh'; echo "TESTS=$tests"; echo "JITS='$jits'"; echo "IMAGES='$IMAGES'"; guest_init; } >"$initrd/init"
  chmod +x "$initrd/init"
  (cd "$initrd" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.cpio.gz"

  echo "test-device-kernels: Linux ${kernel#linux-image-} on ${qemu[0]} (TCG, emulated)"
  # No network device: the guest's ports are veths (and the PC's would boot iPXE first). A kernel
  # that panics restarts after 5 s, which -no-reboot makes the end of qemu: its oops is printed.
  out=$(timeout 1800 "${qemu[@]}" -m "$mem" -nographic -no-reboot -net none \
    -kernel "$dir"/root/boot/vmlinuz-* -initrd "$dir/initramfs.cpio.gz" \
    -append "console=$console rdinit=/init quiet panic=5" 2>&1 | tr -d '\r' | sed -E 's/\x1b(\[[0-9;?]*[a-zA-Z]|c)//g' || true)
  printf '%s\n' "$out" >"build/kernels/$arch.log"
  printf '%s\n' "$out" | grep -aE '^(guest-|test result|run |kernel: )|panicked|FAILED|Oops'
  grep -q guest-done <<<"$out" || {
    echo "test-device-kernels: $arch: the guest did not finish; its last lines (all in build/kernels/$arch.log):" >&2
    tail -n 25 <<<"$out" >&2
    return 1
  }
  if [ $tests = yes ] && { ! grep -q 'test result: ok' <<<"$out" || grep -q 'test result: FAILED' <<<"$out"; }; then
    echo "test-device-kernels: $arch: the fast path's kernel tests did not pass" >&2; return 1
  fi
  # Every run switches the ping but XDP's: its redirect into a veth is dropped unless the peer
  # runs XDP or GRO, and busybox has no ethtool to turn GRO on (the host's tests do, netns.py).
  local runs
  runs=$(($(wc -w <<<"$IMAGES") * 2 + 1))
  [ "$(grep -v 'datapath xdp' <<<"$out" | grep -c '^run .*: ping 3/3')" = $runs ] ||
    { echo "test-device-kernels: $arch: a run did not switch the ping" >&2; return 1; }
  [ "$(grep -c '^run .*: kernel fast path attached' <<<"$out")" = 2 ] ||
    { echo "test-device-kernels: $arch: the fast path did not attach at tc and xdp" >&2; return 1; }
  # The kernel decided frames itself, at TC and at XDP: the ping's after the first of each flow.
  [ "$(grep -cE '^run edgeflow datapath (tc|xdp): fast path hits: [1-9]' <<<"$out")" = 2 ] ||
    { echo "test-device-kernels: $arch: the kernel fast path decided no frame at tc or xdp" >&2; return 1; }
  ! grep -q '^kernel: ' <<<"$out" || { echo "test-device-kernels: $arch: the kernel complained" >&2; return 1; }
}

for arch in $ARCHES; do boot "$arch"; done
echo "test-device-kernels: passed ($ARCHES)"
