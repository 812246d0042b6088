#!/usr/bin/env bash
# `make test-arm-kernel`: a real ARM kernel verifying, JIT-compiling and running the fast path.
# Debian 12's arm64 kernel is booted under qemu-system-aarch64 (TCG: emulated, a few minutes) with
# a small initramfs of busybox, the datapath's tests cross-built for aarch64 (static musl) and the
# aarch64 images of `make cross`. Inside it:
#   - every fast-path kernel test (BPF_PROG_TEST_RUN) (flows, actions, meters, AFDX links, LESS labels, on
#     TC and XDP), the programs verified by arm64's verifier and run by its JIT;
#   - each aarch64 image's idle resident memory, switching between two veth ports (the footprint
#     table's aarch64 rows, docs/deploy.md);
#   - the full image with the fast path at TC and at XDP on those ports.
# Packages come from the mirror, checked link by link (scripts/debian.sh); nothing is installed
# but qemu-system-arm.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
T=aarch64-unknown-linux-musl
SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
. scripts/debian.sh

for p in qemu-system-arm cpio; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$p" >/dev/null; done

index=$(debian_index "$SUITE" arm64)
kernel=$(debian_depends "$index" linux-image-arm64)
dir=build/kernels/$kernel
if [ ! -f "$dir/done" ]; then
  echo "test-arm-kernel: unpacking $kernel and busybox-static (arm64)"
  rm -rf "$dir" && mkdir -p "$dir"
  debian_fetch "$index" "$kernel" "$dir/kernel.deb"
  debian_fetch "$index" busybox-static "$dir/busybox.deb"
  dpkg -x "$dir/kernel.deb" "$dir/root" && dpkg -x "$dir/busybox.deb" "$dir/root" && rm "$dir"/*.deb
  touch "$dir/done"
fi
release=${kernel#linux-image-}

# The datapath's tests and the images, for aarch64.
scripts/cross.sh $T >/dev/null
export "CC_${T//-/_}=clang-14" "CARGO_TARGET_$(echo $T | tr 'a-z-' 'A-Z_')_LINKER=rust-lld"
tests=$(cargo test --release --locked --target $T -p datapath --lib --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])')

# The initramfs: busybox, veth's module, the test binary, the images and an init that runs them.
initrd=$dir/initramfs
rm -rf "$initrd" && mkdir -p "$initrd"/{bin,dev,proc,sys,tmp}
cp "$dir/root/bin/busybox" "$initrd/bin/"
# veth for the ports; clsact and cls_bpf, which 6.1 attaches TC programs through (no TCX before 6.6).
for m in veth sch_ingress cls_bpf; do cp "$(find "$dir/root/lib/modules" -name "$m.ko")" "$initrd/"; done
cp "$tests" "$initrd/datapath-tests"
cp build/cross/$T/edgeflow build/cross/$T/edgeflow-minimal "$initrd/"
cat >"$initrd/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t devtmpfs devtmpfs /dev; mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t bpf bpf /sys/fs/bpf; mount -t tmpfs tmpfs /tmp
echo "guest-kernel $(uname -r) $(uname -m)"
ip link set lo up
/datapath-tests --color never --test-threads 1 fastpath::kernel:: 2>&1 | grep -E -A4 "^test .*FAILED|test result|panicked"
for m in veth sch_ingress cls_bpf; do insmod /$m.ko; done
ip link add ef-a0 type veth # busybox names the peer itself (veth0)
ip link add ef-b0 type veth
for d in $(ip -o link | cut -d' ' -f2 | cut -d@ -f1 | tr -d :); do ip link set "$d" up; done
for image in edgeflow edgeflow-minimal; do
  for rings in 1024 256; do
    /$image run --port ef-a0 --port ef-b0 --fail-mode standalone --ring-frames $rings >/tmp/$image.log 2>&1 &
    pid=$!
    sleep 12
    echo "idle $image, --ring-frames $rings: $(grep -E 'VmRSS|RssAnon' /proc/$pid/status | tr -s ' \t' ' ' | tr '\n' ' ')"
    kill $pid; wait $pid || echo "$image exited: $(tail -n 3 /tmp/$image.log)"
    grep -E 'WARN|ERROR' /tmp/$image.log | sed "s/^/$image: /"
  done
done
for dp in tc xdp; do
  /edgeflow run --port ef-a0 --port ef-b0 --fail-mode standalone --datapath $dp >/tmp/fast.log 2>&1 &
  pid=$!
  sleep 20
  echo "fast path $dp: $(grep -o 'kernel fast path attached.*' /tmp/fast.log)"
  kill $pid; wait $pid || echo "edgeflow --datapath $dp exited: $(tail -n 3 /tmp/fast.log)"
  grep -E 'WARN|ERROR' /tmp/fast.log | sed "s/^/edgeflow $dp: /"
done
echo guest-done
poweroff -f
EOF
chmod +x "$initrd/init"
(cd "$initrd" && find . | cpio -o -H newc --quiet | gzip -1) >"$dir/initramfs.cpio.gz"

echo "test-arm-kernel: Linux $release on qemu-system-aarch64 (TCG, emulated)"
out=$(timeout 1200 qemu-system-aarch64 -M virt -cpu cortex-a72 -smp 2 -m 1024 -nographic -no-reboot \
  -kernel "$dir"/root/boot/vmlinuz-* -initrd "$dir/initramfs.cpio.gz" \
  -append "console=ttyAMA0 rdinit=/init quiet" 2>&1 | tr -d '\r' || true)
printf '%s\n' "$out" | grep -aE 'guest-kernel|test result|panicked|FAILED|idle |fast path|edgeflow|guest-done'
grep -q 'test result: ok' <<<"$out" && grep -q guest-done <<<"$out" &&
  [ "$(grep -c 'fast path .*: kernel fast path attached' <<<"$out")" = 2 ]
