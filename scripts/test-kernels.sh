#!/usr/bin/env bash
# `make test-kernels`: boots the kernels gateways run (today Debian 12's own, 6.1) with virtme-ng
# over this machine's root filesystem and runs the kernel fast path's tests inside:
# BPF_PROG_TEST_RUN of every program feature (flows, actions, meters, AFDX links, LESS labels, on
# TC and XDP), the differential check against userspace, and forwarding through TC and XDP in
# namespaces (pings and TCP). The kernel is unpacked from its Debian package under build/kernels/
# (apt-get download + dpkg -x), never installed. `make test` runs all of it (tests/test_kernels.py).
# KVM is used where it boots the guest; where it does not (absent, or a nested KVM that hangs on
# the guest's first instruction, as on the machine this was written on) the run says so and
# uses TCG, slower.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$HOME/.cargo/bin:$PATH"

# Debian 12's kernel: the package linux-image-amd64 depends on, unpacked once.
need=()
for p in qemu-system-x86 busybox-static; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  echo "test-kernels: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
.venv/bin/python -c "import virtme_ng" 2>/dev/null || .venv/bin/pip install -q -r testbed/requirements.txt
package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
dir=build/kernels/$package
if [ ! -f "$dir/done" ]; then
  echo "test-kernels: unpacking $package"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && apt-get download "$package" 2>/dev/null && dpkg -x ./*.deb root && rm ./*.deb)
  touch "$dir/done"
fi
vmlinuz=$(ls "$dir"/root/boot/vmlinuz-*)

# The test programs, built for this machine (the guest runs them from the same filesystem).
bins=$(cargo test --release --locked -p datapath --no-run --message-format=json 2>/dev/null |
  .venv/bin/python -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])')
unit=$(awk '$1 == "datapath" {print $2}' <<<"$bins")
differential=$(awk '$1 == "differential" {print $2}' <<<"$bins")
# Then forwarding through real interfaces in namespaces: attached the way the guest kernel
# allows (clsact before 6.6), and the legacy ways, pings and TCP through TC and XDP.
forwarding="tests/test_fastpath.py -k 'matches_the_kernel or kernel_hits or legacy'"
script="mount -t bpf bpf /sys/fs/bpf 2>/dev/null; echo guest-kernel \$(uname -r);
  $unit --color never fastpath:: && $differential --color never &&
  .venv/bin/python -m pytest $forwarding -q -s --color=no -p no:cacheprovider && echo guest-tests-passed"

# The guest writes the testbed's logs under build/ through an overlay; the host's stay as they were.
boot() {
  vng -v -r "$vmlinuz" --cpus 2 --memory 2G --cwd "$PWD" --overlay-rwdir "$PWD" "$@" --exec "$script" 2>&1 |
    tr -d '\r' | grep -av '^\[ *[0-9]' || true
}
# -cpu host with arch-capabilities makes this QEMU abort on a nested KVM; without it, a guest
# that never starts is told apart by a short first try, whose verdict is kept for this host kernel.
verdict=build/kernels/accel-$(uname -r)
if [ ! -e /dev/kvm ]; then
  accel=tcg
elif [ -f "$verdict" ]; then
  accel=$(cat "$verdict")
else
  out=$(timeout 20 vng -v -r "$vmlinuz" --qemu-opts="-cpu host,-arch-capabilities" --exec "echo booted" 2>&1 | tr -d '\r' || true)
  if grep -q '^booted' <<<"$out"; then accel=kvm; else accel=tcg; fi
  echo "$accel" > "$verdict"
fi
echo "test-kernels: $package, $( [ $accel = kvm ] && echo KVM || echo 'TCG (software emulation: KVM is absent here or does not boot the guest)')"
if [ $accel = kvm ]; then
  out=$(boot --qemu-opts="-cpu host,-arch-capabilities")
else
  out=$(boot --disable-kvm)
fi
printf '%s\n' "$out" | grep -aE 'guest-kernel|test result|panicked|FAILED|passed|failed|attached as|legacy attach|guest-tests-passed'
grep -q guest-tests-passed <<<"$out"
