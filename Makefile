# The two commands that matter: `make demo` and `make test`. Both install what they need first.
SHELL := /bin/bash
export PATH := $(HOME)/.cargo/bin:$(PATH)
CARGO ?= cargo
PYTEST := .venv/bin/python -m pytest

.PHONY: all setup build demo test test-unit test-integration bench bench-quick clean

all: build

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --locked

demo: build
	scripts/demo.sh

test: build test-unit test-integration

test-unit:
	$(CARGO) test --release --locked --workspace

test-integration:
	$(PYTEST) tests -v --durations=10

clean:
	$(CARGO) clean
	rm -rf build results

bench: build
	.venv/bin/python -m testbed.bench

bench-quick: build
	.venv/bin/python -m testbed.bench --quick
