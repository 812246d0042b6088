//! The userspace pipeline and the kernel fast path on the same random flow tables and frames,
//! through the differential fuzz target's harness (`make fuzz` runs it for minutes; this, a few
//! thousand inputs in every test run, and every input the fuzzer ever failed on). Needs root.

include!("../../../fuzz/harness/differential.rs");

/// xorshift64*: a repeatable stream of inputs.
fn inputs(seed: u64, n: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut s = seed | 1;
    (0..n).map(move |_| {
        (0..len)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    })
}

/// Prints the input a failing comparison ran on, to keep under tests/differential/ once fixed.
struct ShownIfItFails<'a>(&'a [u8]);

impl Drop for ShownIfItFails<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("the input: {hex} (DIFFERENTIAL_DEBUG=1 shows its tables and frames)");
        }
    }
}

#[test]
fn random_tables_and_frames_agree_in_userspace_and_the_kernel() {
    if !ebpf::test_may_load_programs("the differential fast-path check") {
        return;
    }
    for input in inputs(0x5eed, 4000, 128) {
        let _shown = ShownIfItFails(&input);
        differential(&input);
    }
    // It compared: the kernel forwarded, dropped and deferred, on both hooks, and decided frames
    // of every feature the inputs draw.
    let t = tally();
    println!("{t:?}");
    assert!(t.xdp_forwarded >= 200 && t.tc_forwarded >= 700 && t.tc_copies >= 300, "{t:?}");
    assert!(t.xdp_dropped >= 1000 && t.tc_dropped >= 1000 && t.xdp_passed >= 500 && t.tc_deferred >= 1000, "{t:?}");
    assert!(
        t.tagged >= 1000 && t.ipv6 >= 1000 && t.grouped >= 70 && t.metered_drops >= 10 && t.multi_table >= 500,
        "{t:?}"
    );
}

#[test]
fn the_seeds_agree() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/differential");
    for entry in std::fs::read_dir(dir).expect("the seed corpus (fuzz/seeds.py writes it)") {
        differential(&std::fs::read(entry.unwrap().path()).unwrap());
    }
}

/// Every input the fuzzer failed on, kept under tests/differential/.
#[test]
fn what_the_fuzzer_found_stays_fixed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/differential");
    for entry in std::fs::read_dir(dir).unwrap() {
        differential(&std::fs::read(entry.unwrap().path()).unwrap());
    }
}
