#!/usr/bin/env bash
# Installs what edgeflow needs on Debian 12, idempotently.
#   scripts/setup.sh build   what building needs: a C toolchain with clang for the BPF programs,
#                            libbpf's headers and Rust (`make`, `make build`)
#   scripts/setup.sh         everything: that, and the peers, tools and Python environment the
#                            tests, benchmarks and demo drive (`make test`, `make bench`, `make demo`)
set -euo pipefail
cd "$(dirname "$0")/.."
SCOPE=${1:-all}

BUILD_PACKAGES=(build-essential pkg-config m4 clang-14 llvm-14 libbpf-dev)
TESTBED_PACKAGES=(
  bpftool iproute2 iputils-ping ethtool tcpdump iperf3 netcat-openbsd procps psmisc openssl
  openvswitch-switch openvswitch-common
  python3 python3-venv python3-pip
  qemu-system-x86 busybox-static qemu-user-static
)
APT_PACKAGES=("${BUILD_PACKAGES[@]}")
if [ "$SCOPE" != build ]; then
  APT_PACKAGES+=("${TESTBED_PACKAGES[@]}")
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Rust: use what is on PATH or in ~/.cargo; otherwise rustup, a pinned release of its installer
# checked against the SHA-256 written here (no script piped to a shell), then the stable toolchain.
RUSTUP_VERSION=1.29.0
declare -A RUSTUP_SHA256=(
  [x86_64]=4acc9acc76d5079515b46346a485974457b5a79893cfb01112423c89aeb5aa10
  [aarch64]=9732d6c5e2a098d3521fca8145d826ae0aaa067ef2385ead08e6feac88fa5792
)
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    arch=$(uname -m)
    want=${RUSTUP_SHA256[$arch]:-}
    [ -n "$want" ] || { echo "setup: no pinned rustup installer for $arch: install Rust with rustup yourself" >&2; exit 1; }
    echo "setup: installing Rust (rustup $RUSTUP_VERSION, stable)"
    apt-get install -y -qq curl ca-certificates >/dev/null
    dir=$(mktemp -d)
    init=$dir/rustup-init # rustup-init acts by the name it is run as
    curl -sSf -o "$init" "https://static.rust-lang.org/rustup/archive/$RUSTUP_VERSION/$arch-unknown-linux-gnu/rustup-init"
    echo "$want  $init" | sha256sum -c --quiet - || { echo "setup: rustup-init does not match its pinned SHA-256" >&2; exit 1; }
    chmod +x "$init"
    "$init" -y --profile minimal --default-toolchain stable
    rm -rf "$dir"
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi

if [ "$SCOPE" = build ]; then
  echo "setup (build): ok"
  exit 0
fi

# Python: one venv for the testbed and its os-ken applications.
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import os_ken, pytest, pytest_timeout, matplotlib, scapy, cryptography, virtme_ng, finsy" 2>/dev/null; then
  echo "setup: installing Python packages"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r testbed/requirements.txt
fi

# The pinned P4Runtime release the committed schema (crates/p4runtime/schema/p4runtime.fds) is
# written from, for tests/test_p4runtime_schema.py, which writes it again and compares. Its
# protobuf (3.20) is older than the one finsy needs in .venv, so it goes in a directory of its own,
# run with `python -S`; building needs none of it.
P4RT_DIR=build/tools/p4runtime-schema
P4RT_REQS=scripts/p4runtime-requirements.txt
if ! cmp -s "$P4RT_REQS" "$P4RT_DIR/requirements.txt"; then
  echo "setup: installing the pinned p4runtime release into $P4RT_DIR"
  rm -rf "$P4RT_DIR"
  .venv/bin/pip install -q --no-deps --require-hashes --only-binary :all: --target "$P4RT_DIR" -r "$P4RT_REQS"
  cp "$P4RT_REQS" "$P4RT_DIR/requirements.txt"
fi

# p4runtime-shell, the P4 project's own P4Runtime client, for tests/test_p4runtime_shell.py: it pins
# an older P4Runtime, protobuf and grpcio than finsy's in .venv, so it gets a venv of its own.
SHELL_DIR=build/tools/p4runtime-shell
SHELL_REQS=scripts/p4runtime-shell-requirements.txt
if ! cmp -s "$SHELL_REQS" "$SHELL_DIR/requirements.txt"; then
  echo "setup: installing p4runtime-shell into $SHELL_DIR"
  rm -rf "$SHELL_DIR"
  "$PY" -m venv "$SHELL_DIR"
  "$SHELL_DIR/bin/pip" install -q --no-deps --require-hashes --only-binary :all: -r "$SHELL_REQS"
  cp "$SHELL_REQS" "$SHELL_DIR/requirements.txt"
fi

# Faucet pins its own os-ken (3.1), so it gets a venv of its own.
if [ ! -x .venv-faucet/bin/faucet ]; then
  echo "setup: installing Faucet into .venv-faucet"
  "$PY" -m venv .venv-faucet
  .venv-faucet/bin/pip install -q --upgrade pip
  .venv-faucet/bin/pip install -q -r testbed/requirements-faucet.txt
fi

# Prometheus (Debian 12's package) for the metrics test, unpacked under build/tools: installing
# it would start a server on every address of this machine.
PROMETHEUS_DIR=build/tools/prometheus
if [ ! -x "$PROMETHEUS_DIR/usr/bin/prometheus" ]; then
  echo "setup: unpacking Debian's prometheus into $PROMETHEUS_DIR"
  tmp=$(mktemp -d) && chmod 755 "$tmp"
  (cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }; })
  rm -rf "$PROMETHEUS_DIR" && mkdir -p "$PROMETHEUS_DIR"
  dpkg -x "$tmp"/prometheus_*.deb "$PROMETHEUS_DIR"
  rm -rf "$tmp"
fi

# The standard library of the image tests/test_arm.py runs (aarch64, musl): the test session builds
# it beside the other tests, and fetches nothing.
scripts/cross.sh prepare aarch64-unknown-linux-musl

# Debian 12's kernel for the guest of tests/test_kernels.py, and whether KVM boots it here: fetched
# and decided now, so that the test only boots it.
KERNELS=bookworm scripts/test-kernels.sh prepare

# BPF filesystem (for the kernel fast path).
if ! mount | grep -q "on /sys/fs/bpf type bpf"; then
  mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
fi
echo "setup: ok"
