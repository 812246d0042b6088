# The two commands that matter: `make demo` and `make test`. Both install what they need first.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
PYTEST := .venv/bin/python -m pytest

.PHONY: all setup setup-build build cross cross-test footprint test-arm-kernel demo test test-unit test-integration test-kernels bench bench-quick fuzz soak clean

all: build

# Building installs only what building needs; the tests, benchmarks and demo install their peers
# (Open vSwitch, iperf3, the Python testbed) too.
setup-build:
	@scripts/setup.sh build

setup:
	@scripts/setup.sh

build: setup-build
	$(CARGO) build --release --locked

demo: setup build
	scripts/demo.sh

# Static binaries for the devices (aarch64, armv7, x86_64 musl; full and minimal) in the embedded
# profile, with their sizes: scripts/cross.sh.
cross: setup-build
	scripts/cross.sh

# What the tests run under qemu-user: the minimal aarch64 image.
cross-test: setup-build
	scripts/cross.sh aarch64-unknown-linux-musl minimal

# The footprint table of docs/deploy.md: each image's size and idle resident memory.
footprint: setup cross
	.venv/bin/python -m testbed.footprint

test: setup build cross-test test-unit test-integration

test-unit:
	$(CARGO) test --release --locked --workspace --no-fail-fast

# Every test's duration, and a JUnit file of them, in every run: the budget (20 minutes for `make
# test`) is watched, not guessed.
test-integration:
	$(PYTEST) tests -v --durations=0 --junitxml=build/junit.xml

# The kernel fast path's tests inside Debian 12's own kernel (6.1) and Debian 11's (5.10), booted
# with virtme-ng: scripts/test-kernels.sh (KERNELS="bookworm" for one).
test-kernels: setup build
	scripts/test-kernels.sh

# Debian 12's arm64 and armhf kernels under qemu-system-aarch64/-arm (emulated): the fast path's
# kernel tests verified and run by a real ARM kernel, the images switching a ping there, and their
# idle memory (ARM_ARCHES="arm64 armhf").
test-arm-kernel: setup-build
	scripts/test-arm-kernel.sh

clean:
	$(CARGO) clean
	rm -rf build results

bench: setup build
	.venv/bin/python -m testbed.bench

# Every experiment in --quick mode (results/quick) and the claims each shows: ~10 minutes.
bench-quick: setup build
	EDGEFLOW_BENCH=1 $(PYTEST) tests/bench -v --durations=0 --junitxml=build/junit-bench.xml

# Every fuzz target for FUZZ_S seconds (default 180) on the pinned nightly: scripts/fuzz.sh.
fuzz: setup-build
	scripts/fuzz.sh

# Random flow-mod churn while traffic flows, SOAK_S seconds per datapath (default 600): the switch
# stays up, untouched traffic arrives whole, memory stays flat (testbed/soak.py).
SOAK_S ?= 600
soak: setup build
	.venv/bin/python -m testbed.soak --seconds $(SOAK_S)
