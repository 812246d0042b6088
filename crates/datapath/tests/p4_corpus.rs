//! p4c's STF corpus on the kernel back end (issue 52, items 4 and 5), in `make test`: every
//! program the kernel back end compiles runs its script through the TC program by
//! BPF_PROG_TEST_RUN (`fastpath::p4_test_run`), frames it sends up decided by the software
//! target as userspace decides them in the datapath. None may FAIL: a program the kernel takes
//! gives the frames the software target gives (the kernel is an accelerator, not a second
//! truth). The floor is how many pass so far; it can only go up.
//!
//! Then the differential: each program that passed runs frames mutated from its script's
//! (bits flipped, bytes set, cut short, lengthened; other ingress ports) on both targets, with
//! the script's tables, and every frame the kernel decides must leave by the same ports with the
//! same bytes, or be dropped by both. Programs with registers or meters are left out (a frame
//! the kernel sends up changes the software target's cells and not the kernel's).

use std::path::PathBuf;

use datapath::fastpath::p4_test_run::TestRun;
use p4::backends::ebpf::verdict::{DROP, FORWARD};
use p4::stf::{self, corpus_dir, Command, Verdict};

/// How many of the corpus's 230 programs the kernel back end compiles and passes today.
const PASSING_FLOOR: usize = 178;
/// `EDGEFLOW_P4_CORPUS_EVERY=2` (what `make test` sets, tests/test_crates.py) runs every second
/// program in name order, and holds the passes to this floor: clang and the verifier take most of a
/// minute over the whole corpus, which `make test-p4c` and a plain `cargo test` still run.
const PASSING_FLOOR_HALF: usize = 85;
/// How many mutated frames the differential sends through one program, at most.
const MUTATIONS_PER_PROGRAM: usize = 2_400;

#[test]
fn the_corpus_passes_on_the_kernel_back_end_as_on_the_software_target() {
    if !ebpf::test_may_load_programs("the P4 corpus on the kernel back end") {
        return;
    }
    let dir = corpus_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("{}: the p4c STF corpus is not there (set P4C_STF_DIR)", dir.display());
    };
    let mut scripts: Vec<PathBuf> =
        entries.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "stf")).collect();
    scripts.sort();
    let every = std::env::var("EDGEFLOW_P4_CORPUS_EVERY").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(1);
    assert!(every == 1 || every == 2, "EDGEFLOW_P4_CORPUS_EVERY: 1 (the whole corpus) or 2 (every second program)");
    scripts = scripts.into_iter().step_by(every).collect();
    let floor = if every == 2 { PASSING_FLOOR_HALF } else { PASSING_FLOOR };
    // Two halves on two threads: most of the time is clang and the verifier, one program at a time.
    let (first, second) = scripts.split_at(scripts.len() / 2);
    let tallies = std::thread::scope(|s| {
        let a = s.spawn(|| first.iter().map(|p| run_program(p)).collect::<Vec<_>>());
        let b = s.spawn(|| second.iter().map(|p| run_program(p)).collect::<Vec<_>>());
        [a.join().unwrap(), b.join().unwrap()]
    });
    let (mut passed, mut up, mut failed, mut refused) = (0, 0, Vec::new(), 0);
    let (mut compared, mut differed) = (0, Vec::new());
    for program in tallies.into_iter().flatten() {
        match program {
            ProgramRun::Refused(why) => {
                if let Some(why) = why {
                    println!("{why}");
                }
                refused += 1;
            }
            ProgramRun::Failed(f) => failed.push(f),
            ProgramRun::Passed { sent_up, decided, differences } => {
                passed += 1;
                up += sent_up as usize;
                compared += decided;
                differed.extend(differences);
            }
        }
    }
    println!("{passed} of {} pass on the kernel back end ({up} with frames sent up); {refused} refused", scripts.len());
    println!("differential: {compared} mutated frames decided by the kernel, {} differed", differed.len());
    differed.truncate(20);
    assert!(differed.is_empty(), "the kernel and the software target differ:\n{}", differed.join("\n"));
    assert!(compared >= 10_000 / every, "only {compared} mutated frames were decided in the kernel");
    assert!(failed.is_empty(), "{} program(s) the kernel took gave other frames:\n{}", failed.len(), failed.join("\n"));
    assert!(passed >= floor, "{passed} pass, fewer than the floor {floor}");
}

/// What one corpus program did on the kernel back end.
enum ProgramRun {
    /// Not compiled, not loaded, or the script stopped: why, when worth printing.
    Refused(Option<String>),
    Failed(String),
    Passed {
        sent_up: bool,
        decided: usize,
        differences: Vec<String>,
    },
}

/// One corpus program through its script on the kernel, then (stateless ones) the differential.
fn run_program(script_path: &std::path::Path) -> ProgramRun {
    let name = script_path.file_stem().unwrap().to_string_lossy().into_owned();
    let program_path = script_path.with_extension("p4");
    let text = std::fs::read_to_string(&program_path).unwrap_or_default();
    let script = stf::parse(&script_path.display().to_string(), &std::fs::read_to_string(script_path).unwrap())
        .unwrap_or_else(|e| panic!("{e}"));
    let Ok(mut switch) = stf::load(&program_path.display().to_string(), &text) else {
        return ProgramRun::Refused(None);
    };
    let Ok(generated) = p4::backends::ebpf::generate_ir(switch.ir()) else {
        return ProgramRun::Refused(None);
    };
    let stateless = generated.registers.is_empty() && generated.meters.is_empty() && generated.accounts.is_empty();
    // C that clang refuses is the back end's bug; entries the kernel cannot hold, a refusal.
    let mut kernel = match TestRun::build(&switch) {
        Ok(k) => k,
        Err(e) if e.to_string().contains("clang") => panic!("{name}: the generated C: {e}"),
        Err(e) => return ProgramRun::Refused(Some(format!("REFUSED {name}: {e}"))),
    };
    let outcome = stf::run(&script, &mut switch, &mut kernel);
    match &outcome.verdict {
        Verdict::Pass => {
            let (decided, differences) =
                if stateless { differential(&name, &script, &mut switch, &mut kernel) } else { (0, Vec::new()) };
            ProgramRun::Passed { sent_up: !outcome.up.is_empty(), decided, differences }
        }
        Verdict::Fail => ProgramRun::Failed(format!("{name}:\n{}", outcome.render())),
        Verdict::Refused(why) => ProgramRun::Refused(Some(format!("REFUSED {name}: {why}"))),
    }
}

/// Frames mutated from the script's, through both targets: how many the kernel decided, and
/// each difference found.
fn differential(
    name: &str,
    script: &stf::Script,
    switch: &mut p4::backends::software::Switch,
    kernel: &mut TestRun,
) -> (usize, Vec<String>) {
    let sent: Vec<(u32, Vec<u8>)> = script
        .commands
        .iter()
        .filter_map(|(_, c)| match c {
            // A frame shorter than an Ethernet header reaches no hook: padded, as a NIC pads it.
            Command::Packet { port, frame } => {
                let mut frame = frame.clone();
                frame.resize(frame.len().max(14), 0);
                Some((*port, frame))
            }
            _ => None,
        })
        .collect();
    // A program's share of the time, however many frames its script sends.
    let per_frame = (MUTATIONS_PER_PROGRAM / sent.len().max(1)).clamp(50, 400);
    let mut rng = Rng(0x5eed ^ name.len() as u64);
    let (mut decided, mut differences) = (0, Vec::new());
    for (port, frame) in &sent {
        for _ in 0..per_frame {
            let mut f = frame.clone();
            match rng.next() % 4 {
                0 => {
                    let bit = (rng.next() % (8 * f.len().min(64)) as u64) as usize;
                    f[bit / 8] ^= 0x80 >> (bit % 8);
                }
                1 => {
                    let at = (rng.next() % f.len().min(64) as u64) as usize;
                    f[at] = rng.next() as u8;
                }
                2 => f.truncate(14 + (rng.next() % (f.len() - 13) as u64) as usize),
                _ => (0..rng.next() % 40).for_each(|_| f.push(rng.next() as u8)),
            }
            let port = if rng.next().is_multiple_of(4) { (rng.next() % 8) as u32 } else { *port };
            let Ok(k) = kernel.run(switch, &f, port) else { continue };
            if k.kind != FORWARD && k.kind != DROP {
                continue;
            }
            decided += 1;
            let soft = switch.process(&f, port, k.timestamp);
            let same = match (&soft, k.kind) {
                (Ok(out), FORWARD) => {
                    let mut ports: Vec<u32> = out.iter().map(|o| o.port).collect();
                    let mut kports = k.ports.clone();
                    ports.sort_unstable();
                    kports.sort_unstable();
                    ports == kports && out.iter().all(|o| o.frame == k.data)
                }
                (Err(_), DROP) => true,
                (Ok(out), DROP) => out.is_empty(),
                _ => false,
            };
            if !same {
                let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
                differences.push(format!("{name}: port {port} frame {hex}: kernel {k:?}, software {soft:?}"));
            }
        }
    }
    (decided, differences)
}

/// xorshift64*: repeatable mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}
