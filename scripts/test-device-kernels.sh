#!/usr/bin/env bash
# `make test-arm-kernel`: real ARM kernels running the switch: Debian 12's arm64 kernel under
# qemu-system-aarch64 and its 32-bit armmp kernel under qemu-system-arm (both TCG: emulated, a few
# minutes each), each with a small initramfs of busybox and the `make cross` images for that
# architecture. Inside each:
#   - two hosts in network namespaces on two veth ports; each image (full, minimal) switches a ping
#     between them, then its idle resident memory is read, with the default rings and with
#     `--ring-frames 256` (the footprint table's aarch64 and armv7 rows, docs/deploy.md);
#   - arm64: every fast-path kernel test (BPF_PROG_TEST_RUN: flows, actions, meters, AFDX links,
#     LESS labels, on TC and XDP), verified by arm64's verifier and run by its JIT, and the full
#     image with the fast path at TC (forwarding the ping) and at XDP;
#   - armhf: the full image refusing the fast path by name (32-bit images do, docs/deploy.md).
# ARM_ARCHES="arm64 armhf" (the default) picks the machines. Packages come from the mirror, checked
# link by link (scripts/debian.sh); nothing is installed but qemu-system-arm.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
. scripts/debian.sh

for p in qemu-system-arm cpio; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null; done

# The guest's init. FASTPATH (yes/no) is set in a line written before it.
guest_init() {
  cat <<'EOF'
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev; mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t bpf bpf /sys/fs/bpf; mount -t tmpfs tmpfs /tmp
echo "guest-kernel $(uname -r) $(uname -m)"
ip link set lo up
[ "$FASTPATH" = yes ] &&
  /datapath-tests --color never --test-threads 1 fastpath::kernel:: 2>&1 | grep -E -A4 "^test .*FAILED|test result|panicked"
for m in veth sch_ingress cls_bpf; do [ -f /$m.ko ] && insmod /$m.ko; done
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
# run LABEL ARGS...: the switch on the two ports, a ping through it, then idle.
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
  [ "$got" = 3 ] || [ "$label" = "edgeflow datapath xdp" ] || tail -n 8 /tmp/run.log | sed "s/^/run $label: log: /"
  kill $pid; wait $pid || echo "run $label: exited: $(tail -n 3 /tmp/run.log)"
  grep -E 'WARN|ERROR' /tmp/run.log | sed "s/^/run $label: /"
}
for image in edgeflow edgeflow-minimal; do
  for rings in 1024 256; do run "$image rings $rings" /$image run --ring-frames $rings; done
done
if [ "$FASTPATH" = yes ]; then
  for dp in tc xdp; do run "edgeflow datapath $dp" /edgeflow run --datapath $dp; done
else
  echo "refused: $(/edgeflow run --port ef-a0 --datapath tc 2>&1 | grep -o 'not supported on 32-bit.*' | cut -c1-60)"
fi
echo guest-done
poweroff -f
EOF
}

# boot ARCH: unpack ARCH's kernel and busybox, build its initramfs, boot it and check what it printed.
boot() {
  local arch=$1 target metapackage qemu console fastpath index kernel dir initrd tests out
  case $arch in
    arm64) target=aarch64-unknown-linux-musl metapackage=linux-image-arm64 fastpath=yes
      qemu=(qemu-system-aarch64 -M virt -cpu cortex-a72) ;;
    armhf) target=armv7-unknown-linux-musleabihf metapackage=linux-image-armmp fastpath=no
      qemu=(qemu-system-arm -M virt -cpu cortex-a15) ;;
    *) echo "test-arm-kernel: no machine for $arch (arm64, armhf)" >&2; return 1 ;;
  esac
  index=$(debian_index "$SUITE" "$arch")
  kernel=$(debian_depends "$index" "$metapackage")
  dir=build/kernels/$kernel
  if [ ! -f "$dir/done" ]; then
    echo "test-arm-kernel: unpacking $kernel and busybox-static ($arch)"
    rm -rf "$dir" && mkdir -p "$dir"
    debian_fetch "$index" "$kernel" "$dir/kernel.deb"
    debian_fetch "$index" busybox-static "$dir/busybox.deb"
    dpkg -x "$dir/kernel.deb" "$dir/root" && dpkg -x "$dir/busybox.deb" "$dir/root" && rm "$dir"/*.deb
    touch "$dir/done"
  fi

  scripts/cross.sh "$target" >/dev/null
  initrd=$dir/initramfs
  rm -rf "$initrd" && mkdir -p "$initrd"/{bin,dev,proc,sys,tmp}
  cp "$dir/root/bin/busybox" "$initrd/bin/"
  # veth for the ports; clsact and cls_bpf, which 6.1 attaches TC programs through (no TCX before 6.6).
  for m in veth sch_ingress cls_bpf; do
    find "$dir/root/lib/modules" -name "$m.ko" -exec cp {} "$initrd/" \;
  done
  cp "build/cross/$target/edgeflow" "build/cross/$target/edgeflow-minimal" "$initrd/"
  if [ $fastpath = yes ]; then
    export "CC_${target//-/_}=clang-14" "CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_LINKER=rust-lld"
    tests=$(cargo test --release --locked --target "$target" -p datapath --lib --no-run --message-format=json \
      2>/dev/null | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])')
    cp "$tests" "$initrd/datapath-tests"
  fi
  { echo '#!/bin/busybox sh'; echo "FASTPATH=$fastpath"; guest_init; } >"$initrd/init"
  chmod +x "$initrd/init"
  (cd "$initrd" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.cpio.gz"

  echo "test-arm-kernel: Linux ${kernel#linux-image-} on ${qemu[0]} (TCG, emulated)"
  out=$(timeout 1200 "${qemu[@]}" -smp 2 -m 1024 -nographic -no-reboot \
    -kernel "$dir"/root/boot/vmlinuz-* -initrd "$dir/initramfs.cpio.gz" \
    -append "console=ttyAMA0 rdinit=/init quiet" 2>&1 | tr -d '\r' || true)
  printf '%s\n' "$out" | grep -aE '^(guest-kernel|test result|run |refused|guest-done)|panicked|FAILED|Oops'
  grep -q guest-done <<<"$out" || { echo "test-arm-kernel: $arch: the guest did not finish" >&2; return 1; }
  # Every run switches the ping but XDP's: its redirect into a veth is dropped unless the peer
  # runs XDP or GRO, and busybox has no ethtool to turn GRO on (the host's tests do, netns.py).
  local runs=4 expect_fast=0
  [ $fastpath = yes ] && runs=5 expect_fast=2
  if [ $fastpath = yes ] && ! grep -q 'test result: ok' <<<"$out"; then
    echo "test-arm-kernel: $arch: the fast path's kernel tests did not pass" >&2; return 1
  fi
  [ "$(grep -v 'datapath xdp' <<<"$out" | grep -c '^run .*: ping 3/3')" = $runs ] ||
    { echo "test-arm-kernel: $arch: a run did not switch the ping" >&2; return 1; }
  [ "$(grep -c '^run .*: kernel fast path attached' <<<"$out")" = $expect_fast ] ||
    { echo "test-arm-kernel: $arch: the fast path did not attach at tc and xdp" >&2; return 1; }
  [ $fastpath = yes ] || grep -q '^refused: not supported on 32-bit' <<<"$out" ||
    { echo "test-arm-kernel: $arch: the 32-bit image did not refuse the fast path" >&2; return 1; }
}

for arch in ${ARM_ARCHES:-arm64 armhf}; do boot "$arch"; done
echo "test-arm-kernel: passed"
