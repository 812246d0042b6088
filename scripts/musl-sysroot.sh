#!/usr/bin/env bash
# The C runtime for a Rust target whose standard library scripts/cross.sh builds from source (armv7,
# i586, MIPS): rustup's rust-std carries a target's musl (libc.a, the crt objects) and libunwind.a, and
# these targets have no rust-std here. So: Debian 12's musl source (1.2.3, `apt-get source` through
# a private source list, leaving this machine's apt configuration alone) and LLVM's libunwind from
# the pinned nightly's rust-src (the unwinder Rust's own musl targets link), both compiled by
# clang-14 for the target into build/musl/TARGET/{include,lib}.
#
#   scripts/musl-sysroot.sh TARGET LIBUNWIND_SRC   prints the sysroot's path, building it if needed
set -euo pipefail
cd "$(dirname "$0")/.."
target=$1
libunwind_src=$2
# The Rust targets' own CPUs (rustc --print target-spec-json): a Pentium (no SSE: the Geode LX),
# MIPS32r2 with soft float (OpenWrt's MIPS routers have no FPU), ARMv7-A with hard float on
# VFPv3-D16 and no NEON (`+v7,+vfp3d16,+thumb2,-neon`: what every Cortex-A has).
case $target in
  armv7-unknown-linux-musleabihf) cflags="--target=armv7-linux-musleabihf -march=armv7-a -mfpu=vfpv3-d16 -mfloat-abi=hard" ;;
  i586-unknown-linux-musl) cflags="--target=i586-linux-musl -march=pentium" ;;
  mips-unknown-linux-musl) cflags="--target=mips-linux-musl -march=mips32r2 -msoft-float" ;;
  mipsel-unknown-linux-musl) cflags="--target=mipsel-linux-musl -march=mips32r2 -msoft-float" ;;
  *) echo "musl-sysroot: no recipe for $target" >&2; exit 1 ;;
esac
triple=${cflags#--target=}
triple=${triple%% *}
cflags="$cflags -O2"
sysroot=$PWD/build/musl/$target
if [ -f "$sysroot/lib/libc.a" ] && [ -f "$sysroot/lib/crtbegin.o" ] && [ -f "$sysroot/lib/libunwind.a" ]; then
  echo "$sysroot"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -f "$sysroot/lib/libc.a" ] || [ ! -f "$sysroot/lib/crtbegin.o" ]; then
  src_dir=build/musl/src
  if ! ls "$src_dir"/musl_*.orig.tar.gz >/dev/null 2>&1; then
    lists=$PWD/build/musl/apt-lists
    mkdir -p "$lists/partial" "$src_dir"
    printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main\n' \
      >build/musl/sources.list
    apt_opts=(-o "Dir::Etc::SourceList=$PWD/build/musl/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$lists" -o APT::Sandbox::User=root)
    apt-get "${apt_opts[@]}" update -qq >&2
    (cd "$src_dir" && apt-get "${apt_opts[@]}" source --download-only musl >&2)
  fi
  tar -xzf "$src_dir"/musl_*.orig.tar.gz -C "$work"
  echo "musl-sysroot: building musl for $target with clang-14" >&2
  (
    cd "$work"/musl-*
    CC="clang-14 $cflags" AR=llvm-ar-14 RANLIB=llvm-ranlib-14 \
      ./configure --target="$triple" --prefix="$sysroot" --disable-shared >&2
    make -j"$(nproc)" >&2
    rm -rf "$sysroot"
    make install >&2
  )
  # rustc adds crtbegin.o/crtend.o around a static musl executable (GCC's: .ctors/.dtors and the
  # frame-info registration). Rust runs its constructors from .init_array and finds unwind tables
  # through PT_GNU_EH_FRAME, so empty ones serve, as they do for a plain static musl C program.
  : >"$work/empty.c"
  clang-14 $cflags -c "$work/empty.c" -o "$sysroot/lib/crtbegin.o"
  cp "$sysroot/lib/crtbegin.o" "$sysroot/lib/crtend.o"
fi
# libunwind with the flags Rust's bootstrap gives it: no C++ runtime, no exceptions of its own.
echo "musl-sysroot: building libunwind for $target with clang-14" >&2
mkdir -p "$work/unwind"
for src in "$libunwind_src"/src/{libunwind.cpp,Unwind-EHABI.cpp,UnwindLevel1.c,UnwindLevel1-gcc-ext.c,UnwindRegistersRestore.S,UnwindRegistersSave.S}; do
  lang=()
  case $src in *.cpp) lang=(-std=c++17 -nostdinc++ -fno-exceptions -fno-rtti) ;; *.c) lang=(-std=c99) ;; esac
  clang-14 $cflags "${lang[@]}" -nostdinc -isystem "$(clang-14 -print-resource-dir)/include" \
    -isystem "$sysroot/include" -I"$libunwind_src/include" -funwind-tables -fstrict-aliasing \
    -fvisibility=hidden -D_LIBUNWIND_DISABLE_VISIBILITY_ANNOTATIONS -DNDEBUG \
    -c "$src" -o "$work/unwind/$(basename "$src").o"
done
llvm-ar-14 rcs "$sysroot/lib/libunwind.a" "$work/unwind"/*.o
echo "$sysroot"
