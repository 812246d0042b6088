# Sourced by the scripts that boot another kernel: Debian packages of a suite or architecture this
# machine's apt is not set up for, fetched from the mirror and checked link by link (the suite's
# InRelease by Debian's archive keys, its Packages index by InRelease, the .deb by the index).

DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# debian_index SUITE ARCH: prints the path of SUITE's checked package index for ARCH (main).
debian_index() {
  local suite=$1 arch=$2 dir sha
  dir=build/debian/$suite-$arch
  mkdir -p "$dir"
  curl -fsS -o "$dir/InRelease" "$DEBIAN_MIRROR/dists/$suite/InRelease"
  gpgv --quiet --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$dir/InRelease" 2>/dev/null ||
    { echo "debian: $suite's InRelease is not signed by Debian's archive keys" >&2; return 1; }
  sha=$(awk -v f="main/binary-$arch/Packages.xz" '/^SHA256:/ {s = 1; next} /^[^ ]/ {s = 0} s && $3 == f {print $1}' \
    "$dir/InRelease")
  curl -fsS -o "$dir/Packages.xz" "$DEBIAN_MIRROR/dists/$suite/main/binary-$arch/Packages.xz"
  echo "$sha  $dir/Packages.xz" | sha256sum -c --quiet - >&2
  xz -dc "$dir/Packages.xz" >"$dir/Packages"
  echo "$dir/Packages"
}

# debian_depends INDEX PACKAGE: the first package PACKAGE depends on (a metapackage's kernel).
debian_depends() {
  awk -v p="$2" '$0 == "Package: " p {f = 1} f && /^Depends:/ {sub(/,.*/, "", $2); print $2; exit}' "$1"
}

# debian_fetch INDEX PACKAGE OUT: PACKAGE's .deb as OUT, its SHA-256 checked against INDEX.
debian_fetch() {
  local index=$1 package=$2 out=$3 file sha
  read -r file sha < <(awk -v p="$package" '$0 == "Package: " p {f = 1} f && /^Filename:/ {n = $2}
    f && /^SHA256:/ {print n, $2; exit}' "$index")
  [ -n "$file" ] || { echo "debian: no package $package in $index" >&2; return 1; }
  curl -fsS -o "$out" "$DEBIAN_MIRROR/$file"
  echo "$sha  $out" | sha256sum -c --quiet - >&2
}

# debian_sources SUITE: prints the path of SUITE's checked source index (main), as debian_index.
debian_sources() {
  local suite=$1 dir sha
  dir=build/debian/$suite-source
  mkdir -p "$dir"
  curl -fsS -o "$dir/InRelease" "$DEBIAN_MIRROR/dists/$suite/InRelease"
  gpgv --quiet --keyring /usr/share/keyrings/debian-archive-keyring.gpg "$dir/InRelease" 2>/dev/null ||
    { echo "debian: $suite's InRelease is not signed by Debian's archive keys" >&2; return 1; }
  sha=$(awk '/^SHA256:/ {s = 1; next} /^[^ ]/ {s = 0} s && $3 == "main/source/Sources.xz" {print $1}' "$dir/InRelease")
  curl -fsS -o "$dir/Sources.xz" "$DEBIAN_MIRROR/dists/$suite/main/source/Sources.xz"
  echo "$sha  $dir/Sources.xz" | sha256sum -c --quiet - >&2
  xz -dc "$dir/Sources.xz" >"$dir/Sources"
  echo "$dir/Sources"
}

# debian_source_fetch INDEX PACKAGE DIR: the files of source package PACKAGE (its .dsc, upstream
# tarball and Debian tarball) into DIR, each checked against INDEX's SHA-256.
debian_source_fetch() {
  local index=$1 package=$2 out=$3 pool sha size file
  pool=$(awk -v p="$package" '$0 == "Package: " p {f = 1} f && /^Directory:/ {print $2; exit}' "$index")
  [ -n "$pool" ] || { echo "debian: no source package $package in $index" >&2; return 1; }
  mkdir -p "$out"
  awk -v p="$package" '$0 == "Package: " p {f = 1} f && /^$/ {exit}
    f && /^Checksums-Sha256:/ {s = 1; next} f && /^[^ ]/ {s = 0} f && s {print $1, $2, $3}' "$index" |
    while read -r sha size file; do
      curl -fsS -o "$out/$file" "$DEBIAN_MIRROR/$pool/$file"
      echo "$sha  $out/$file" | sha256sum -c --quiet - >&2
    done
}
