# The two commands that matter: `make demo` and `make test`. Both install what they need first.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
PYTEST := .venv/bin/python -m pytest

.PHONY: all setup setup-build build install uninstall msrv cross cross-test footprint test-device-kernels test-arm-kernel demo test test-unit test-integration test-kernels test-init test-p4c package bench bench-quick fuzz soak clean

all: build

# Building installs only what building needs; the tests, benchmarks and demo install their peers
# (Open vSwitch, iperf3, the Python testbed) too.
setup-build:
	@scripts/setup.sh build

setup:
	@scripts/setup.sh

# With the pipeline's scale example (make bench's scale experiment, and its smoke test).
build: setup-build
	$(CARGO) build --release --locked
	$(CARGO) build --release --locked -p pipeline --example scale

demo: setup build
	scripts/demo.sh

# `make install` (PREFIX=/usr/local, DESTDIR for staging) installs what `make` built, and builds
# nothing (no setup, no compiler as root: `make`, then `sudo make install`): the switch, stripped
# (the release profile keeps debug info for the tests' backtraces), the man pages and shell
# completions (generated from the CLI by crates/docgen), the example config (edgeflow.toml too
# when there is none), the systemd unit and its account. Not the load generator: a test rig's
# tool, in target/release. `make uninstall` removes what it put there, and the config only while
# it is still the example. docs/deploy.md.
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
BINDIR := $(PREFIX)/bin
DATADIR := $(PREFIX)/share
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
GENERATED := build/docgen
# EDGEFLOW_BIN: another build of the switch (a cross image, for a package), with STRIP=true if
# it is stripped already.
STRIP ?= strip
EDGEFLOW_BIN ?= target/release/edgeflow
install:
	@for f in $(EDGEFLOW_BIN) target/release/docgen; do \
	  [ -x $$f ] || { echo "make install: no $$f: run make first (as yourself), then make install"; exit 1; }; done
	rm -rf $(GENERATED) && target/release/docgen $(GENERATED)
	install -Dm755 -s --strip-program=$(STRIP) $(EDGEFLOW_BIN) $(DESTDIR)$(BINDIR)/edgeflow
	install -d $(DESTDIR)$(DATADIR)/man/man1
	install -m644 $(GENERATED)/man/man1/*.1 $(DESTDIR)$(DATADIR)/man/man1/
	install -Dm644 $(GENERATED)/completions/edgeflow.bash $(DESTDIR)$(DATADIR)/bash-completion/completions/edgeflow
	install -Dm644 $(GENERATED)/completions/_edgeflow $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_edgeflow
	install -Dm644 $(GENERATED)/completions/edgeflow.fish $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/edgeflow.fish
	install -Dm644 docs/example.toml $(DESTDIR)$(SYSCONFDIR)/edgeflow/edgeflow.toml.example
	[ -e $(DESTDIR)$(SYSCONFDIR)/edgeflow/edgeflow.toml ] || install -m644 docs/example.toml $(DESTDIR)$(SYSCONFDIR)/edgeflow/edgeflow.toml
	install -d $(DESTDIR)$(UNITDIR)
	sed 's|@BINDIR@|$(BINDIR)|g; s|/etc/edgeflow/|$(SYSCONFDIR)/edgeflow/|g' packaging/systemd/edgeflow.service > $(DESTDIR)$(UNITDIR)/edgeflow.service
	chmod 644 $(DESTDIR)$(UNITDIR)/edgeflow.service
	install -Dm644 packaging/systemd/edgeflow.sysusers $(DESTDIR)$(SYSUSERSDIR)/edgeflow.conf
	@# The account now, on this machine; a staged install leaves it to the package's scripts.
	if [ -z "$(DESTDIR)" ] && command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/edgeflow.conf; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/edgeflow
	rm -f $(DESTDIR)$(DATADIR)/man/man1/edgeflow.1 $(DESTDIR)$(DATADIR)/man/man1/edgeflow-*.1
	rm -f $(DESTDIR)$(DATADIR)/bash-completion/completions/edgeflow $(DESTDIR)$(DATADIR)/zsh/vendor-completions/_edgeflow $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/edgeflow.fish
	if cmp -s docs/example.toml $(DESTDIR)$(SYSCONFDIR)/edgeflow/edgeflow.toml; then rm -f $(DESTDIR)$(SYSCONFDIR)/edgeflow/edgeflow.toml; fi
	rm -f $(DESTDIR)$(SYSCONFDIR)/edgeflow/edgeflow.toml.example
	-rmdir $(DESTDIR)$(SYSCONFDIR)/edgeflow 2>/dev/null
	rm -f $(DESTDIR)$(UNITDIR)/edgeflow.service $(DESTDIR)$(SYSUSERSDIR)/edgeflow.conf

# Static binaries for the devices (aarch64, armv7, x86_64 musl; full and minimal) in the embedded
# profile, with their sizes: scripts/cross.sh.
cross: setup-build
	scripts/cross.sh

# The declared MSRV (Cargo.toml's rust-version) checks the whole workspace, every target, with the
# locked dependencies: .cargo/config.toml keeps `cargo update` to versions it supports.
msrv: setup-build
	@v=$$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml); \
	rustup toolchain list | grep -q "^$$v-" || rustup toolchain install --profile minimal "$$v"; \
	echo "msrv: rust $$v"; $(CARGO) +$$v check --workspace --all-targets --locked

# The images built from source with the pinned nightly (i586, big- and little-endian MIPS, armv7;
# full and minimal), then run under qemu-user on their devices' CPUs (tests/cross). `make test`
# builds and runs the minimal aarch64 image itself (tests/test_arm.py); building these eight takes
# longer than it has.
CROSS_TEST_TARGETS := i586-unknown-linux-musl mips-unknown-linux-musl mipsel-unknown-linux-musl armv7-unknown-linux-musleabihf
cross-test: setup build
	for t in $(CROSS_TEST_TARGETS); do scripts/cross.sh $$t || exit 1; done
	EDGEFLOW_CROSS=1 $(PYTEST) tests/cross -v --durations=0

# The footprint table of docs/deploy.md: each image's size and idle resident memory.
footprint: setup cross
	.venv/bin/python -m testbed.footprint

# The peers and Python environments (scripts/setup.sh: apt, three venvs, Prometheus; 50 s from a
# fresh clone) install while cargo builds (three minutes): neither needs the other, and the tests
# need both. Setup's output follows the build's.
# The crates' own tests (test-unit's) are built, the aarch64 image the qemu-user tests run is
# built, and the guest kernel booted, beside the integration tests (testbed/background.py): they
# wait for frames and timers, the builds for nothing. The crates' tests then run last, on their
# own (tests/test_crates.py).
test: setup-build
	@mkdir -p build; scripts/setup.sh > build/setup.log 2>&1 & setup=$$!; \
	$(MAKE) --no-print-directory build; built=$$?; \
	wait $$setup; ready=$$?; cat build/setup.log; \
	[ $$ready -eq 0 ] || { echo "make test: scripts/setup.sh failed ($$ready)"; exit $$ready; }; exit $$built
	$(MAKE) --no-print-directory test-integration

# Every unit and integration test of every crate. Not the doc tests: there are none, and rustdoc's
# pass over thirteen crates to find that out took 40 s of the budget (add `--doc` with the first).
# The same command as testbed/background.py's CRATE_TESTS.
test-unit:
	$(CARGO) test --release --locked --workspace --no-fail-fast --lib --bins --tests

# Every test's duration, and a JUnit file of them, in every run: the budget (20 minutes for `make
# test`) is watched, not guessed.
test-integration:
	$(PYTEST) tests -v --durations=0 --junitxml=build/junit.xml

# p4c's STF corpus (../shared/p4c-stf, or P4C_STF_DIR) on the software target and the kernel
# back end: build/p4c-stf.txt, a line per test and target (docs/p4.md, "STF").
test-p4c:
	$(CARGO) build --release --locked -p edgeflow
	scripts/p4c-stf.sh

# The kernel fast path's tests inside Debian 12's own kernel (6.1) and Debian 11's (5.10), booted
# with virtme-ng: scripts/test-kernels.sh (KERNELS="bookworm" for one), after fetching them.
test-kernels: setup build
	scripts/test-kernels.sh prepare
	scripts/test-kernels.sh

# The devices' kernels under qemu-system (emulated): Debian 12's for arm64, armhf (armmp), i386 (686)
# and mipsel (4kc-malta), and for big-endian mips a malta 6.1 kernel and busybox built once by
# scripts/mips-kernel.sh (Debian 12 has no such port). Each runs its `make cross` images: a ping
# switched by the userspace datapath and by the kernel fast path at TC and XDP, the frames the
# kernel decided, idle memory, and the fast path's kernel tests (arm64 and mips; KERNEL_TESTS=all
# on every one). scripts/test-device-kernels.sh (KERNEL_ARCHES="i386 mips" for some).
# test-arm-kernel is its ARM half.
test-device-kernels: setup-build
	scripts/test-device-kernels.sh

test-arm-kernel: setup-build
	KERNEL_ARCHES="$${ARM_ARCHES:-arm64 armhf}" scripts/test-device-kernels.sh

# Debian packages (amd64 from the native build; arm64 and armhf from make cross's static images)
# in build/packages: scripts/package.sh.
package: build cross
	scripts/package.sh

# The systemd unit under a real systemd as PID 1: a Debian 12 root (made once, by debootstrap)
# booted with systemd-nspawn, edgeflow installed in it; and the .ipk under OpenWrt's procd, ubus
# and logd, built from OpenWrt's sources over that root: scripts/test-init.sh.
test-init: setup build
	scripts/test-init.sh prepare
	scripts/test-init.sh

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
