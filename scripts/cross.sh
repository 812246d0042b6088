#!/usr/bin/env bash
# `make cross`: static (musl) edgeflow binaries for the devices it is for, in the `embedded`
# profile, each full (default features) and minimal (OpenFlow + the userspace datapath:
# `--no-default-features`), into build/cross/TARGET/, with their sizes in build/cross/sizes.tsv.
#
#   scripts/cross.sh                          every target below, both variants
#   scripts/cross.sh TARGET [full|minimal]    one target, one or both variants
#   scripts/cross.sh prepare [TARGET...]      only fetch the targets' standard libraries (setup
#                                             does for the image the tests run, so that building it
#                                             beside them fetches nothing)
#   scripts/cross.sh tests TARGET             only build the datapath's tests for TARGET (release
#                                             profile, with unwinding) and print the test program's
#                                             path: the fast path's kernel tests for another
#                                             architecture's kernel (scripts/test-device-kernels.sh)
#
# Nothing but rustup's standard library for the target is needed: clang-14 compiles ring's C for
# the target (it needs no sysroot), rust-lld links against Rust's own musl, and the eBPF objects
# are built in the target's byte order by crates/ebpf/build.rs. Adding a target is a line in
# TARGETS, and a CC/linker pair below if clang cannot build for it.
#
# armv7, i586 and MIPS (the gateways, the Geode LX, OpenWrt's routers) have no standard library from
# rustup that builds the workspace, so the pinned nightly compiles one (`-Z build-std`, from its
# rust-src), with LLVM's libunwind from the same source, against a musl that scripts/musl-sysroot.sh
# builds from Debian's source.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

TARGETS=(aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf x86_64-unknown-linux-musl
         i586-unknown-linux-musl mips-unknown-linux-musl mipsel-unknown-linux-musl)
# The toolchain that builds the standard library of the targets below from source: pinned, and the
# fuzzers' (scripts/fuzz.sh), so that a nightly's regression cannot change a router's image.
NIGHTLY=nightly-2026-05-19
# armv7 and i586 are tier-2 targets, but the rustup mirror here serves their musl standard library
# for old releases only (armv7's for 1.87 and 1.88), which the workspace outgrows (docs/deploy.md);
# MIPS is tier 3, with none at all.
build_std() {
  case $1 in
    armv7-unknown-linux-musleabihf | i586-unknown-linux-musl | mips-unknown-linux-musl | mipsel-unknown-linux-musl) return 0 ;;
  esac
  return 1
}
targets=("${1:-all}")
[ "${targets[0]}" = all ] && targets=("${TARGETS[@]}")
variants=(full minimal)
[ -n "${2:-}" ] && variants=("$2")

# LLVM's libunwind, from the nightly's rust-src: scripts/musl-sysroot.sh builds it for the target.
libunwind_src() { echo "$(rustc "+$NIGHTLY" --print sysroot)/lib/rustlib/src/rust/src/llvm-project/libunwind"; }

# The toolchain that has the target's standard library: the pinned nightly for those built from
# source, else the default one (setup adds aarch64's; this adds the others).
toolchain_for() {
  local t=$1 tc
  if build_std "$t"; then
    if ! rustup toolchain list | grep -q "^$NIGHTLY"; then
      rustup toolchain install --profile minimal "$NIGHTLY" >/dev/null 2>&1 || return 1
    fi
    rustup "+$NIGHTLY" component list --installed 2>/dev/null | grep -qx rust-src ||
      rustup "+$NIGHTLY" component add rust-src >/dev/null 2>&1 || return 1
    echo "$NIGHTLY"
    return
  fi
  if rustup target list --installed 2>/dev/null | grep -qx "$t" || rustup target add "$t" >/dev/null 2>&1; then
    echo default
    return
  fi
  return 1
}

if [ "${1:-}" = prepare ]; then
  shift
  for t in "${@:-${TARGETS[@]}}"; do
    toolchain_for "$t" >/dev/null || { echo "cross: no Rust standard library for $t: rustup serves none for the default toolchain, or the pinned $NIGHTLY and its rust-src did not install" >&2; exit 1; }
    if build_std "$t"; then scripts/musl-sysroot.sh "$t" "$(libunwind_src)" >/dev/null; fi
  done
  exit 0
fi

# target_env TARGET [tests]: the toolchain ($tc, and $plus to name it to cargo), the build-std flags
# ($std_flags) and the C compiler, linker and flags for TARGET, exported for cargo. With `tests`:
# for a test program, which unwinds (its standard library built with panic_unwind, and the unwind
# tables' index kept, which libunwind finds them by).
target_env() {
  local t=$1 purpose=${2:-image} sysroot target_cflags env_t
  if ! tc=$(toolchain_for "$t"); then
    echo "cross: no Rust standard library for $t: rustup serves none for the default toolchain, or the pinned $NIGHTLY and its rust-src did not install" >&2
    exit 1
  fi
  env_t=$(echo "$t" | tr 'a-z-' 'A-Z_')
  export "CC_${t//-/_}=clang-14" "AR_${t//-/_}=llvm-ar-14" "CARGO_TARGET_${env_t}_LINKER=rust-lld"
  plus=()
  [ "$tc" != default ] && plus=("+$tc")
  # Without the index to the unwind tables (PT_GNU_EH_FRAME, 170 KB of the aarch64 full image):
  # with panic = "abort" nothing unwinds, and all it served was the panic report's backtrace,
  # which in a stripped image names no frame ("<unknown>" on each line). Not in the profile: a
  # profile cannot pass the linker a flag.
  rustflags="-C link-arg=--no-eh-frame-hdr"
  [ "$purpose" = tests ] && rustflags=""
  std_flags=()
  if build_std "$t"; then
    sysroot=$(scripts/musl-sysroot.sh "$t" "$(libunwind_src)")
    # The standard library from source; static, as the tier-2 musl targets are by default.
    std_flags=(-Z build-std=std,panic_abort)
    [ "$purpose" = tests ] && std_flags=(-Z build-std=std,panic_unwind,test)
    rustflags="$rustflags -C target-feature=+crt-static -L native=$sysroot/lib"
    # C (ring's) for the Rust target's CPU and float ABI: clang's MIPS default (FPXX) does not
    # link with Rust's soft-float objects.
    case $t in
      mips*) target_cflags="-march=mips32r2 -msoft-float" ;;
      armv7*) target_cflags="-march=armv7-a -mfpu=vfpv3-d16 -mfloat-abi=hard" ;;
      i586*) target_cflags="-march=pentium" ;;
    esac
    export "CFLAGS_${t//-/_}=$target_cflags -isystem $sysroot/include" "CXXFLAGS_${t//-/_}=$target_cflags -isystem $sysroot/include"
  fi
  export "CARGO_TARGET_${env_t}_RUSTFLAGS=$rustflags"
}

if [ "${1:-}" = tests ]; then
  t=${2:?scripts/cross.sh tests TARGET}
  target_env "$t" tests
  cargo "${plus[@]}" test --release --locked --target "$t" -p datapath --lib --no-run "${std_flags[@]}" \
    --message-format=json | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])'
  exit 0
fi

mkdir -p build/cross
sizes=build/cross/sizes.tsv
[ -f "$sizes" ] || printf 'target\tvariant\tbytes\ttoolchain\n' >"$sizes"
for t in "${targets[@]}"; do
  target_env "$t"
  for v in "${variants[@]}"; do
    # A full image is every feature a switch uses, not the P4 developer's tools (`p4-tools`:
    # `p4 stf`, `p4 ir`), which a router's flash has no room for.
    features=(--no-default-features --features tls,fastpath,afdx,less,streams,p4,p4runtime)
    [ "$v" = minimal ] && features=(--no-default-features)
    # ring, which the `tls` feature's rustls uses, requires SSE2, which the Geode LX (i586) lacks:
    # its full image is every other feature (docs/deploy.md).
    [ "$v" = full ] && [ "$t" = i586-unknown-linux-musl ] &&
      features=(--no-default-features --features fastpath,afdx,less,streams,p4,p4runtime)
    echo "cross: $t $v (toolchain ${tc})"
    cargo "${plus[@]}" build --locked --profile embedded --target "$t" -p edgeflow "${std_flags[@]}" "${features[@]}"
    mkdir -p "build/cross/$t"
    out="build/cross/$t/edgeflow"
    [ "$v" = minimal ] && out="$out-minimal"
    cp "target/$t/embedded/edgeflow" "$out"
    bytes=$(stat -c %s "$out")
    grep -v "^$t	$v	" "$sizes" >"$sizes.new" || true
    printf '%s\t%s\t%s\t%s\n' "$t" "$v" "$bytes" "$tc" >>"$sizes.new"
    mv "$sizes.new" "$sizes"
    # It starts on its architecture (qemu-user where this machine is another).
    arch=${t%%-*}
    # On the device's own CPU model where qemu has it: a Pentium has no SSE (the Geode LX has
    # none), a 24Kc no FPU (the ath79 routers'), so an instruction they lack ends the run.
    cpu=()
    case $arch in
      armv7) arch=arm ;;
      i586) arch=i386 cpu=(-cpu pentium) ;;
      mips | mipsel) cpu=(-cpu 24Kc) ;;
    esac
    if [ "$arch" = "$(uname -m)" ]; then
      "$out" --version
    elif command -v "qemu-$arch-static" >/dev/null; then
      "qemu-$arch-static" "${cpu[@]}" "$out" --version
    fi
    # The flash budgets of issue 54 (docs/deploy.md): aarch64's full image within 5 MB
    # stripped, its minimal within 3 MB and 1.5 MB once xz-compressed (what squashfs costs).
    packed=$(xz -9e -T1 -c "$out" | wc -c)
    echo "cross: $out: $bytes bytes ($packed xz)"
    limit=0 packed_limit=0
    case "$t/$v" in
      aarch64-*/full) limit=5000000 ;;
      aarch64-*/minimal) limit=3000000 packed_limit=1500000 ;;
    esac
    if [ "$limit" -gt 0 ] && [ "$bytes" -gt "$limit" ]; then
      echo "cross: $out is $bytes bytes, over its budget of $limit (docs/deploy.md)" >&2
      exit 1
    fi
    if [ "$packed_limit" -gt 0 ] && [ "$packed" -gt "$packed_limit" ]; then
      echo "cross: $out is $packed bytes xz-compressed, over its budget of $packed_limit (docs/deploy.md)" >&2
      exit 1
    fi
  done
done
column -t "$sizes"
