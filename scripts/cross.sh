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
#
# Nothing but rustup's standard library for the target is needed: clang-14 compiles ring's C for
# the target (it needs no sysroot), rust-lld links against Rust's own musl, and the eBPF objects
# are built in the target's byte order by crates/ebpf/build.rs. Adding a target is a line in
# TARGETS, and a CC/linker pair below if clang cannot build for it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

TARGETS=(aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf x86_64-unknown-linux-musl)
targets=("${1:-all}")
[ "${targets[0]}" = all ] && targets=("${TARGETS[@]}")
variants=(full minimal)
[ -n "${2:-}" ] && variants=("$2")

msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)

# The toolchain that has the target's standard library: the default one, or else the declared
# MSRV (a mirror may serve a target for some releases only; the MSRV builds the workspace too).
toolchain_for() {
  local t=$1 tc
  for tc in "" "$msrv"; do
    if rustup ${tc:++$tc} target list --installed 2>/dev/null | grep -qx "$t"; then
      echo "${tc:-default}"
      return
    fi
    if [ -n "$tc" ] && ! rustup toolchain list | grep -q "^$tc"; then
      rustup toolchain install --profile minimal "$tc" >/dev/null 2>&1 || continue
    fi
    if rustup ${tc:++$tc} target add "$t" >/dev/null 2>&1; then
      echo "${tc:-default}"
      return
    fi
  done
  return 1
}

if [ "${1:-}" = prepare ]; then
  shift
  for t in "${@:-${TARGETS[@]}}"; do
    toolchain_for "$t" >/dev/null || { echo "cross: no Rust standard library for $t from rustup (tried the default toolchain and $msrv)" >&2; exit 1; }
  done
  exit 0
fi

mkdir -p build/cross
sizes=build/cross/sizes.tsv
[ -f "$sizes" ] || printf 'target\tvariant\tbytes\ttoolchain\n' >"$sizes"
for t in "${targets[@]}"; do
  if ! tc=$(toolchain_for "$t"); then
    echo "cross: no Rust standard library for $t from rustup (tried the default toolchain and $msrv)" >&2
    exit 1
  fi
  env_t=$(echo "$t" | tr 'a-z-' 'A-Z_')
  export "CC_${t//-/_}=clang-14" "AR_${t//-/_}=llvm-ar-14" "CARGO_TARGET_${env_t}_LINKER=rust-lld"
  plus=()
  [ "$tc" != default ] && plus=("+$tc")
  for v in "${variants[@]}"; do
    features=()
    [ "$v" = minimal ] && features=(--no-default-features)
    echo "cross: $t $v (toolchain ${tc})"
    cargo "${plus[@]}" build --locked --profile embedded --target "$t" -p edgeflow "${features[@]}"
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
    case $arch in armv7) arch=arm ;; esac
    if [ "$arch" = "$(uname -m)" ]; then
      "$out" --version
    elif command -v "qemu-$arch-static" >/dev/null; then
      "qemu-$arch-static" "$out" --version
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
