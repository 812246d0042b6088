#!/usr/bin/env bash
# `make fuzz`: every cargo-fuzz target in fuzz/ for FUZZ_S seconds each (default 180), starting
# from the seed corpus (fuzz/seeds/<target>) and the corpus earlier runs grew (build/fuzz/corpus).
# FUZZ_TARGETS="a b" picks targets. A crash stops the run with the input under
# fuzz/artifacts/<target>/: fix it and add the input to the regression tests
# (crates/packet/tests/fuzzed.rs does this for packet_rewrite), as docs/security.md records.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: libFuzzer's instrumentation needs nightly, and a moving nightly moves the results.
TOOLCHAIN=nightly-2026-05-19
CARGO_FUZZ=0.13.1
FUZZ_S=${FUZZ_S:-180}
export PATH="$HOME/.cargo/bin:$PATH"

if ! rustup run "$TOOLCHAIN" rustc --version >/dev/null 2>&1; then
  echo "fuzz: installing the $TOOLCHAIN toolchain"
  rustup toolchain install "$TOOLCHAIN" --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ\$"; then
  echo "fuzz: installing cargo-fuzz $CARGO_FUZZ"
  cargo install cargo-fuzz --version "$CARGO_FUZZ" --locked
fi

targets=${FUZZ_TARGETS:-$(cd fuzz && cargo +"$TOOLCHAIN" fuzz list --fuzz-dir .)}
mkdir -p build/fuzz
summary=build/fuzz/summary.txt
: > "$summary"
for t in $targets; do
  corpus=build/fuzz/corpus/$t
  mkdir -p "$corpus"
  echo "fuzz: $t for ${FUZZ_S} s"
  (cd fuzz && cargo +"$TOOLCHAIN" fuzz run --fuzz-dir . "$t" "../$corpus" "seeds/$t" -- \
      -max_total_time="$FUZZ_S" -print_final_stats=1) > "build/fuzz/$t.log" 2>&1 || {
    echo "fuzz: $t FAILED; the input is under fuzz/artifacts/$t/, the log in build/fuzz/$t.log"
    grep -m1 -A2 "panicked at" "build/fuzz/$t.log" || tail -20 "build/fuzz/$t.log"
    exit 1
  }
  runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "build/fuzz/$t.log" | grep -o "[0-9]*$" || echo "?")
  cov=$(grep -o "cov: [0-9]*" "build/fuzz/$t.log" | tail -1 | grep -o "[0-9]*" || echo "?")
  echo "$t: $runs runs in ${FUZZ_S} s, coverage $cov edges, corpus $(ls "$corpus" | wc -l) inputs" | tee -a "$summary"
done
echo "fuzz: no crash; summary in $summary"
