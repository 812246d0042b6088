#!/usr/bin/env bash
# OpenWrt's service manager and what it stands on, built for this machine, for the procd half of
# `make test-init` (tests/init/test_procd.py, testbed/procd_root.py): procd itself, ubusd and the
# ubus CLI, uci, logd and logread, validate_data and jshn, from OpenWrt's own repositories at pinned
# commits, and the four base-files scripts every init script sources (rc.common, functions.sh,
# functions/service.sh, functions/procd.sh) from openwrt.git at pinned commits, each checked
# against its sha256. procd is not packaged by Debian; a device runs the same sources built for
# its target.
#
#   scripts/openwrt-userland.sh [OUT]   builds into OUT (build/tools/init/openwrt), once
#
# Where the sources come from (setup downloads, the tests use what it left):
#   OPENWRT_GIT    printf pattern of a repository's URL from its name
#                  (default https://git.openwrt.org/project/%s.git)
#   OPENWRT_RAW    printf pattern of a script's URL from its repository, commit and path
#                  (default https://raw.githubusercontent.com/%s/%s/%s)
#   OPENWRT_FILES  a directory already holding those scripts under their paths in openwrt.git
#                  (checked against the same sums), for a machine that reaches no git host
#
# Built for glibc, not musl: a compat header gives procd the strlcpy musl has and glibc before
# 2.38 lacks; udebug's library is built without its ucode module; -Werror is dropped from procd's
# flags (its warnings are glibc's, not ours to fix).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-build/tools/init/openwrt}")
GIT_PATTERN=${OPENWRT_GIT:-https://git.openwrt.org/project/%s.git}
RAW_PATTERN=${OPENWRT_RAW:-https://raw.githubusercontent.com/%s/%s/%s}

# name commit, in build order.
REPOS=(
  "libubox 1aa36ee774c8db4d7a396903e0d2e1fb79ee8bf1"
  "ubus 3cc98db1a422dcf560f2d6347fd410f17565a89d"
  "uci 66127cd76c5d0bd46d5a90302cc6110f53a4e2f8"
  "udebug 875e1a7af6ca9d86524d18169c3a79f4a1920053"
  "ubox 6f78fa496bf36c55864a41e353df7d13f04b1077"
  "procd 2c1834abae171261f2d9161e5a28c36cbcc394a4"
)
# repository path commit sha256 where-on-the-device. /lib/config/uci.sh (uci_load and the
# other wrappers of /sbin/uci) comes from a fork of openwrt.git whose copy is the upstream file
# of its day.
SCRIPTS=(
  "openwrt/openwrt package/base-files/files/etc/rc.common 0b1fa809d0e974398503a24e408c1209969711f7 fff958592f68f8be12345170364c58ed28873e73034e4cfb64d7f31286378ad0 etc/rc.common"
  "openwrt/openwrt package/base-files/files/lib/functions.sh 01fa063ae9440273c6701708623a1928bb3ff657 bd143032bbe4df87a6f69874fb2ae63eb1157389d593083756de0169ff42e6d1 lib/functions.sh"
  "openwrt/openwrt package/base-files/files/lib/functions/service.sh 9963ae1d1c331b0f5e8cf7c6762b3c9bd126037d 03f0391288859ffdc4de837dd348399120d3cb951bbeaf75b13ad1241bd9ee8a lib/functions/service.sh"
  "openwrt/openwrt package/system/procd/files/procd.sh 03eca6c5e85cad7ff20459d2f363c60c598d9825 b9172be2e4993f25b2dc029b63fd1794ab1a13c080301242b812f81f9fbb8825 lib/functions/procd.sh"
  "Lienol/openwrt package/system/uci/files/lib/config/uci.sh 36141b743f7f0965f3f5e43e75c0f3350c05c7b9 b54eb4c703a57c0eb88107fda6c01bf4ad22a649261b1571d1d50510daa07c38 lib/config/uci.sh"
)

[ -x "$OUT/sbin/procd" ] && [ -f "$OUT/done" ] && { echo "openwrt-userland: $OUT"; exit 0; }

need=()
for tool in cmake:cmake git:git cc:gcc pkg-config:pkg-config; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
[ -f /usr/include/json-c/json.h ] || need+=(libjson-c-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "openwrt-userland: installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
stage=$work/stage
mkdir -p "$stage"
cat > "$work/compat.h" <<'EOF'
#include <string.h>
#include <stddef.h>
/* glibc before 2.38 has no strlcpy; OpenWrt's musl does. */
static inline size_t strlcpy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);
	if (size) {
		size_t n = len < size - 1 ? len : size - 1;
		memcpy(dst, src, n);
		dst[n] = 0;
	}
	return len;
}
EOF

build() { # name [targets...]; -- cmake options follow the targets
  local name=$1; shift
  local targets=() options=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do targets+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  options=("$@")
  cmake -S "$work/$name" -B "$work/$name/build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_PREFIX_PATH="$stage/usr" \
    -DCMAKE_LIBRARY_PATH="$stage/usr/lib" -DCMAKE_C_FLAGS="-I$stage/usr/include ${EXTRA_CFLAGS:-}" \
    -DCMAKE_EXE_LINKER_FLAGS="-L$stage/usr/lib -Wl,-rpath-link,$stage/usr/lib" \
    -DCMAKE_SHARED_LINKER_FLAGS="-L$stage/usr/lib" "${options[@]}" > "$work/$name.log" 2>&1 \
    && make -C "$work/$name/build" -j"$(nproc)" "${targets[@]}" >> "$work/$name.log" 2>&1 \
    || { tail -30 "$work/$name.log"; echo "openwrt-userland: $name did not build"; exit 1; }
}

for entry in "${REPOS[@]}"; do
  set -- $entry
  name=$1 commit=$2
  # shellcheck disable=SC2059
  url=$(printf "$GIT_PATTERN" "$name")
  echo "openwrt-userland: $name at ${commit:0:12}"
  git clone -q "$url" "$work/$name"
  git -C "$work/$name" -c advice.detachedHead=false checkout -q "$commit"
  case $name in
    libubox|ubus)
      build "$name" -- -DBUILD_LUA=OFF -DBUILD_EXAMPLES=OFF
      make -C "$work/$name/build" install DESTDIR="$stage" >> "$work/$name.log" 2>&1 ;;
    uci)
      build uci -- -DBUILD_LUA=OFF -DCMAKE_INSTALL_LIBDIR=lib
      make -C "$work/uci/build" install DESTDIR="$stage" >> "$work/uci.log" 2>&1 ;;
    udebug)
      # Its ucode module (not built) names an include directory cmake must find.
      build udebug udebug -- -Ducode_include_dir="$stage/usr/include"
      install -m755 "$work/udebug/build/libudebug.so" "$stage/usr/lib/"
      install -m644 "$work/udebug/udebug.h" "$work/udebug/udebug-pcap.h" "$stage/usr/include/" ;;
    ubox)
      build ubox logd logread validate_data ;;
    procd)
      sed -i 's/-Werror//g' "$work/procd/CMakeLists.txt"
      EXTRA_CFLAGS="-D_GNU_SOURCE -include $work/compat.h" build procd procd setlbf ;;
  esac
done

rm -rf "$OUT.partial"
mkdir -p "$OUT.partial"/{sbin,bin,lib,usr/bin,usr/lib,usr/share/libubox,etc}
cp -a "$stage"/usr/lib/*.so* "$OUT.partial/usr/lib/"
install -m755 "$stage/usr/sbin/ubusd" "$work/procd/build/procd" "$work/ubox/build/logd" "$work/ubox/build/logread" \
  "$work/ubox/build/validate_data" "$stage/usr/bin/uci" "$OUT.partial/sbin/"
cp -a "$work/ubox/build"/libvalidate.so* "$OUT.partial/usr/lib/"
install -m755 "$stage/usr/bin/ubus" "$OUT.partial/bin/"
install -m755 "$stage/usr/bin/jshn" "$OUT.partial/usr/bin/"
install -m644 "$stage/usr/share/libubox/jshn.sh" "$OUT.partial/usr/share/libubox/"
# procd preloads it into a service whose stdout it logs, for line-buffered output.
install -m755 "$work/procd/build/libsetlbf.so" "$OUT.partial/lib/"
mkdir -p "$OUT.partial/etc/rc.d"

for entry in "${SCRIPTS[@]}"; do
  set -- $entry
  repo=$1 path=$2 commit=$3 sum=$4 dest=$OUT.partial/$5
  mkdir -p "$(dirname "$dest")"
  if [ -n "${OPENWRT_FILES:-}" ]; then
    cp "$OPENWRT_FILES/$path" "$dest"
  else
    # shellcheck disable=SC2059
    curl -fsSL "$(printf "$RAW_PATTERN" "$repo" "$commit" "$path")" -o "$dest"
  fi
  echo "$sum  $dest" | sha256sum -c --quiet - || { echo "openwrt-userland: $path is not $repo's at $commit"; exit 1; }
done
chmod 755 "$OUT.partial/etc/rc.common"
{ for entry in "${REPOS[@]}" "${SCRIPTS[@]}"; do echo "$entry"; done; } > "$OUT.partial/done"
rm -rf "$OUT"
mv "$OUT.partial" "$OUT"
echo "openwrt-userland: $OUT"
