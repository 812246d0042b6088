#!/usr/bin/env bash
# `make test-kernels`: boots the kernels gateways run with virtme-ng over this machine's root
# filesystem, each in turn (KERNELS, default "bookworm bullseye": Debian 12's own 6.1 and Debian 11's
# 5.10, the kernel of OpenWrt 22.03's generation), and runs the kernel fast path's tests inside:
# BPF_PROG_TEST_RUN of every program feature (flows, actions, meters, AFDX links, LESS labels, on
# TC and XDP), the differential check against userspace, and forwarding through TC and XDP in
# namespaces (pings and TCP). `make test` runs a short form on 6.1 (tests/test_kernels.py).
#
#   scripts/test-kernels.sh prepare   fetches what the runs need, once: each kernel, unpacked from
#                                     its Debian package into this machine's cache,
#                                     $XDG_CACHE_HOME/edgeflow/kernels (~/.cache by default;
#                                     EDGEFLOW_KERNEL_CACHE overrides), where every checkout finds
#                                     it (apt-get download + dpkg -x; Debian 11's from its suite,
#                                     its release file checked against Debian's archive keys and
#                                     the package against the release's hashes), never installed;
#                                     and whether KVM boots a guest here. scripts/setup.sh runs it
#                                     for 6.1, `make test-kernels` for every kernel it boots.
#   scripts/test-kernels.sh           the runs, with what `prepare` left: nothing is fetched here.
#
# KVM is used where it boots the guest. Where it does not, the run says so and uses TCG, slower:
# no /dev/kvm; a CPU without VMX or SVM, whose /dev/kvm is a paravirtual KVM (PVM) that boots no
# stock kernel (the machine this was written on: it hangs after "Probing EDD"); or a nested KVM
# that hangs on the guest's first instruction, told apart by a short first boot.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$HOME/.cargo/bin:$PATH"
ACTION=${1:-run}
KERNELS=${KERNELS:-bookworm bullseye}
KERNEL_CACHE=${EDGEFLOW_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeflow/kernels}
VERDICT=$KERNEL_CACHE/accel-$(uname -r)
mkdir -p "$KERNEL_CACHE"

# Prints the directory SUITE's kernel was unpacked in, or fails: `prepare` leaves the package's
# name beside the cache, so that a run reads no index.
kernel_dir() {
  local name=$KERNEL_CACHE/$1.package
  [ -f "$name" ] && [ -f "$KERNEL_CACHE/$(cat "$name")/done" ] || return 1
  echo "$KERNEL_CACHE/$(cat "$name")"
}

# Unpacks Debian SUITE's kernel (the package linux-image-amd64 depends on) into the cache once.
# This machine's own suite comes through apt, another's through scripts/debian.sh, checked link by
# link.
unpack_kernel() {
  local suite=$1 this package dir index=""
  this=$(. /etc/os-release && echo "$VERSION_CODENAME")
  if [ "$suite" = "$this" ]; then
    package=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    if [ -z "$package" ]; then # apt's lists not read yet on a fresh machine
      apt-get update -qq
      package=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    fi
  else
    index=$(debian_index "$suite" amd64)
    package=$(debian_depends "$index" linux-image-amd64)
  fi
  dir=$KERNEL_CACHE/$package
  if [ ! -f "$dir/done" ]; then
    echo "test-kernels: unpacking $package ($suite)"
    rm -rf "$dir" && mkdir -p "$dir"
    if [ -z "$index" ]; then
      (cd "$dir" && apt-get download "$package" >/dev/null 2>&1 && dpkg -x ./*.deb root && rm ./*.deb)
    else
      debian_fetch "$index" "$package" "$dir/kernel.deb"
      dpkg -x "$dir/kernel.deb" "$dir/root" && rm "$dir/kernel.deb"
    fi
    touch "$dir/done"
  fi
  echo "$package" >"$KERNEL_CACHE/$suite.package"
}

# Whether KVM boots a stock guest here, kept in the cache for this host kernel.
decide_accel() {
  local vmlinuz=$1 out
  [ -f "$VERDICT" ] && return 0
  if [ ! -e /dev/kvm ] || ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
    echo tcg >"$VERDICT"
  else
    # -cpu host with arch-capabilities makes this QEMU abort on a nested KVM; without it, a guest
    # that never starts is told apart by a short first try (20 s when it hangs).
    out=$(timeout 20 vng -v -r "$vmlinuz" --qemu-opts="-cpu host,-arch-capabilities" --exec "echo booted" 2>&1 | tr -d '\r' || true)
    if grep -q '^booted' <<<"$out"; then echo kvm >"$VERDICT"; else echo tcg >"$VERDICT"; fi
  fi
  echo "test-kernels: guests run under $(cat "$VERDICT") here"
}

if [ "$ACTION" = prepare ]; then
  need=()
  for p in qemu-system-x86 busybox-static curl xz-utils gpgv; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  if ((${#need[@]})); then
    echo "test-kernels: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  .venv/bin/python -c "import virtme_ng" 2>/dev/null || .venv/bin/pip install -q -r testbed/requirements.txt
  . scripts/debian.sh
  for suite in $KERNELS; do
    unpack_kernel "$suite"
    dir=$(kernel_dir "$suite")
    decide_accel "$(ls "$dir"/root/boot/vmlinuz-*)"
  done
  exit 0
elif [ "$ACTION" != run ]; then
  echo "usage: $0 [prepare]" >&2
  exit 2
fi
for suite in $KERNELS; do
  { kernel_dir "$suite" >/dev/null && [ -f "$VERDICT" ]; } ||
    { echo "test-kernels: $suite's kernel is not prepared: run 'KERNELS=$suite scripts/test-kernels.sh prepare' (scripts/setup.sh does for bookworm)" >&2; exit 1; }
done

# The test programs, built for this machine (the guest runs them from the same filesystem). Built
# as the whole workspace's, with its features unified: `make test` has built them already (`-p
# datapath` alone would resolve other features and build them again).
bins=$(cargo test --release --locked --workspace --lib --bins --tests --no-run --message-format=json 2>/dev/null |
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
# GUEST_TESTS=short (make test) runs the attachment the guest kernel allows only: the legacy ways
# are the same clsact filter on 6.1 and are tested on the host's kernel; nor the kernel's hit
# counting (emulated, each takes a quarter of a minute). The full run adds them, the userspace
# datapath under an os-ken app,
# AFDX through TC (decided in the kernel from 5.12, in userspace before, said so) and LESS through
# TC beside a learning bridge.
forwarding="tests/test_fastpath.py -k 'matches_the_kernel'"
more=""
if [ "${GUEST_TESTS:-full}" = full ]; then
  forwarding="tests/test_fastpath.py -k 'matches_the_kernel or kernel_hits or legacy'"
  more="'tests/test_osken.py::test_pass_through_app[user]'"
  more+=" 'tests/test_afdx.py::test_bad_frames_are_dropped_and_counted_per_reason[tc]'"
  more+=" 'tests/test_less.py::test_less_and_a_learning_bridge_share_a_switch[tc]'"
fi
# GUEST_TESTS=short leaves out the random differential check too (20 s emulated): the host runs
# it in every make test, and the full run runs it in each guest.
if [ "${GUEST_TESTS:-full}" = full ]; then
  differential_cmd="$differential --color never"
else
  differential_cmd=true
fi
# A failure shows the logs of the switches the guest's tests ran (they are in the guest's overlay,
# gone with it), not only the assertion.
# Under TCG everything in the guest runs many times slower (Python, scapy and os-ken take tens of
# seconds to start): the testbed's waits and the tests' time limits stretch four times
# (testbed/util.py, TIMEOUT_SCALE). They are bounds on how long a failure takes to be called, not
# claims of speed; the kernel's behaviour is what the guest tests.
scale=1
[ "$(cat "$VERDICT")" = kvm ] || scale=4
script="export EDGEFLOW_TIMEOUT_SCALE=\${EDGEFLOW_TIMEOUT_SCALE:-$scale}; mount -t bpf bpf /sys/fs/bpf 2>/dev/null; echo guest-kernel \$(uname -r); touch /tmp/guest-start;
  { $unit --color never fastpath:: && $differential_cmd &&
  .venv/bin/python -m pytest $forwarding -q -s --tb=short --color=no -p no:cacheprovider &&
  { [ -z \"$more\" ] || .venv/bin/python -m pytest $more -q -s --tb=short --color=no -p no:cacheprovider; } && echo guest-tests-passed; } ||
  find build/run -name '*.log' -newer /tmp/guest-start | while read -r f; do echo \"== guest log \$f\"; tail -n 25 \"\$f\"; done;
  sleep 2"

# The guest's last line once never reached the host (every test passed, the end marker was lost
# as the guest powered off under emulation): the console is given time to drain first.
# The guest writes the testbed's logs under build/ through an overlay; the host's stay as they were.
# The script reaches the guest as a file it reads through the host's root, not on the kernel's
# command line (virtme's --exec): the full run's grew past what an x86 command line holds (2 KiB),
# and the guest then died at its first instructions ("PANIC: early exception 0x06") and sat
# halted, a run that never ended.
mkdir -p build
printf '%s\n' "$script" > build/guest-tests.sh
boot() {
  vng -v -r "$vmlinuz" --cpus 2 --memory 2G --cwd "$PWD" --overlay-rwdir "$PWD" "$@" --exec "sh build/guest-tests.sh" 2>&1 |
    tr -d '\r' || true
}
failed=()
for suite in $KERNELS; do
  dir=$(kernel_dir "$suite")
  vmlinuz=$(ls "$dir"/root/boot/vmlinuz-*)
  accel=$(cat "$VERDICT")
  echo "test-kernels: ${dir#"$KERNEL_CACHE"/} ($suite), $( [ $accel = kvm ] && echo KVM || echo 'TCG (software emulation: KVM is absent here or does not boot the guest)')"
  if [ $accel = kvm ]; then
    out=$(boot --qemu-opts="-cpu host,-arch-capabilities")
  else
    out=$(boot --disable-kvm)
  fi
  # The kernel's messages share the console: shown without them. One can land inside a line of the
  # guest's, so the end marker is looked for anywhere in what came out (it once began a kernel
  # message's line, and a run that passed was called failed).
  printf '%s\n' "$out" | grep -av '^\[ *[0-9]' |
    grep -aE 'guest-kernel|test result|panicked|FAILED|passed|failed|attached as|legacy attach|refused by this kernel' |
    grep -av guest-tests-passed
  if grep -aq guest-tests-passed <<<"$out"; then
    echo "guest-tests-passed"
  else
    # What failed and why: pytest's failure reports (each assertion with its values), a Rust
    # test's panic, then the guest's own last lines (the switches' logs); the kernel's left out.
    echo "test-kernels: $suite failed; the failures as the guest reported them:"
    printf '%s\n' "$out" | grep -av '^\[ *[0-9]' |
      awk '/^=+ FAILURES =+/ {show = 1} /^=+ short test summary/ {show = 0} /panicked at|^---- .* stdout ----/ {print; next} show' |
      grep -av '^ *$' | head -n 200
    echo "test-kernels: $suite: the guest's last lines:"
    printf '%s\n' "$out" | grep -av '^\[ *[0-9]' | tail -n 80
    failed+=("$suite")
  fi
done
if ((${#failed[@]})); then
  echo "test-kernels: failed on ${failed[*]}"
  exit 1
fi
