//! p4c's STF corpus on the kernel back end (issue 52, items 4 and 5), in `make test`: every
//! program the kernel back end compiles runs its script through the TC program by
//! BPF_PROG_TEST_RUN (`fastpath::p4_test_run`), frames it sends up decided by the software
//! target as userspace decides them in the datapath. None may FAIL: a program the kernel takes
//! gives the frames the software target gives (the kernel is an accelerator, not a second
//! truth). The floor is how many pass so far; it can only go up.
//!
//! Then the differential: each program that passed runs frames mutated from its script's
//! (bits flipped, bytes set, cut short, lengthened; other ingress ports) on both targets, in the
//! same order, with the script's tables, and every frame the kernel decides must leave by the
//! same ports with the same bytes, or be dropped by both; and after it, what the frames counted
//! and wrote must agree: every indirect counter's cells (packets, bytes) and every table
//! entry's hits grown by as much on both, every register cell equal, read from the kernel's maps
//! and the software target's state. A frame the kernel sends up is decided by userspace in the
//! datapath, so neither target's cells are held to the other's for it: the kernel may have
//! counted part of its run before giving up, so the two are aligned again after it (the
//! registers the kernel's, the counts compared from there). Programs with meters or AFDX
//! accounts are left out: their cells are token buckets of the clock, which a frame sent up
//! would leave in the kernel's state and not in the software target's, with no control-plane
//! way to align a bucket's word again.
use std::collections::BTreeMap;
use std::path::PathBuf;

use datapath::fastpath::p4_test_run::TestRun;
use p4::backends::ebpf::verdict::{DROP, FORWARD};
use p4::backends::ebpf::Generated;
use p4::backends::software::Switch;
use p4::stf::{self, corpus_dir, Command, Verdict};

/// How many of the corpus's 230 programs the kernel back end compiles and passes today.
const PASSING_FLOOR: usize = 179;
/// `EDGEFLOW_P4_CORPUS_EVERY=2` (what `make test` sets, tests/test_crates.py) runs every second
/// program in name order, and holds the passes to this floor: clang and the verifier take most of a
/// minute over the whole corpus, which `make test-p4c` and a plain `cargo test` still run.
const PASSING_FLOOR_HALF: usize = 85;
/// How many mutated frames the differential sends through one program, at most.
const MUTATIONS_PER_PROGRAM: usize = 2_400;
/// How many programs the differential compares cells of (counters, registers, table entries'
/// hits), at least: few of the corpus's programs count or keep anything but their tables' hits.
const STATEFUL_FLOOR: usize = 16;
/// As [`STATEFUL_FLOOR`], for every second program.
const STATEFUL_FLOOR_HALF: usize = 9;

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
    let (mut compared, mut differed, mut stateful, mut cell_checks) = (0, Vec::new(), 0, 0);
    for program in tallies.into_iter().flatten() {
        match program {
            ProgramRun::Refused(why) => {
                if let Some(why) = why {
                    println!("{why}");
                }
                refused += 1;
            }
            ProgramRun::Failed(f) => failed.push(f),
            ProgramRun::Passed { sent_up, differential } => {
                passed += 1;
                up += sent_up as usize;
                compared += differential.decided;
                stateful += (differential.cells > 0) as usize;
                cell_checks += differential.cells;
                differed.extend(differential.differences);
            }
        }
    }
    println!("{passed} of {} pass on the kernel back end ({up} with frames sent up); {refused} refused", scripts.len());
    println!(
        "differential: {compared} mutated frames decided by the kernel, {} differed; \
         {cell_checks} cells compared after them in {stateful} programs",
        differed.len()
    );
    differed.truncate(20);
    assert!(differed.is_empty(), "the kernel and the software target differ:\n{}", differed.join("\n"));
    assert!(compared >= 10_000 / every, "only {compared} mutated frames were decided in the kernel");
    let stateful_floor = if every == 2 { STATEFUL_FLOOR_HALF } else { STATEFUL_FLOOR };
    assert!(stateful >= stateful_floor, "only {stateful} programs had cells compared");
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
        differential: Differential,
    },
}

/// What the differential found in one program.
#[derive(Default)]
struct Differential {
    /// Mutated frames the kernel decided.
    decided: usize,
    /// Cells compared, summed over those frames.
    cells: usize,
    differences: Vec<String>,
}

/// One corpus program through its script on the kernel, then (those without meters or
/// accounts) the differential.
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
    let untimed = generated.meters.is_empty() && generated.accounts.is_empty();
    // C that clang refuses is the back end's bug; entries the kernel cannot hold, a refusal.
    let mut kernel = match TestRun::build(&switch) {
        Ok(k) => k,
        Err(e) if e.to_string().contains("clang") => panic!("{name}: the generated C: {e}"),
        Err(e) => return ProgramRun::Refused(Some(format!("REFUSED {name}: {e}"))),
    };
    let outcome = stf::run(&script, &mut switch, &mut kernel);
    match &outcome.verdict {
        Verdict::Pass => {
            let differential = match untimed {
                true => differential(&name, &script, &generated, &mut switch, &mut kernel),
                false => Differential::default(),
            };
            ProgramRun::Passed { sent_up: !outcome.up.is_empty(), differential }
        }
        Verdict::Fail => ProgramRun::Failed(format!("{name}:\n{}", outcome.render())),
        Verdict::Refused(why) => ProgramRun::Refused(Some(format!("REFUSED {name}: {why}"))),
    }
}

/// Frames mutated from the script's, through both targets, one at a time in the same order:
/// how many the kernel decided, how many cells were compared after them, and each difference
/// found (in the frames out, or in the cells).
fn differential(
    name: &str,
    script: &stf::Script,
    generated: &Generated,
    switch: &mut Switch,
    kernel: &mut TestRun,
) -> Differential {
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
    let mut found = Differential::default();
    let mut cells = Cells::aligned(generated, switch, kernel);
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
            let hex = || f.iter().map(|b| format!("{b:02x}")).collect::<String>();
            if k.kind != FORWARD && k.kind != DROP {
                // Sent up: userspace decides it in the datapath; the two start level again.
                cells = Cells::aligned(generated, switch, kernel);
                continue;
            }
            found.decided += 1;
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
                found.differences.push(format!("{name}: port {port} frame {}: kernel {k:?}, software {soft:?}", hex()));
            }
            let (compared, differ) = cells.compare(generated, switch, kernel);
            found.cells += compared;
            if let Some(differ) = differ {
                found.differences.push(format!("{name}: port {port} frame {}: after it, {differ}", hex()));
                cells = Cells::aligned(generated, switch, kernel);
            }
        }
    }
    found
}

/// The cells frames change on both targets, by name (`counter Block.c`, `register Block.r`,
/// `hits Block.t`): a counter's packets and bytes per cell, a table's hits (packets, bytes)
/// per entry, a register's values. Counters and hits are compared by how much they grew since
/// the two were aligned (the script's frames the kernel sent up counted on one side only);
/// registers by their values, the software target's set to the kernel's when aligned.
struct Cells {
    kernel: BTreeMap<String, Vec<u128>>,
    software: BTreeMap<String, Vec<u128>>,
}

impl Cells {
    /// Both targets' cells now, the software target's registers given the kernel's values.
    fn aligned(generated: &Generated, switch: &mut Switch, kernel: &TestRun) -> Cells {
        let read = kernel_cells(generated, switch, kernel);
        for (name, _, _) in &generated.registers {
            for (i, v) in read[&format!("register {name}")].iter().enumerate() {
                switch.load_register(name, i, *v);
            }
        }
        Cells { kernel: read, software: software_cells(generated, switch) }
    }

    /// How many cells were compared, and the first that differ (described).
    fn compare(&self, generated: &Generated, switch: &Switch, kernel: &TestRun) -> (usize, Option<String>) {
        let (k, s) = (kernel_cells(generated, switch, kernel), software_cells(generated, switch));
        let mut compared = 0;
        for (name, now) in &k {
            let soft = &s[name];
            let register = name.starts_with("register");
            let grown = |now: &[u128], then: &[u128]| -> Vec<u128> {
                now.iter().enumerate().map(|(i, v)| v.wrapping_sub(then.get(i).copied().unwrap_or(0))).collect()
            };
            let (kv, sv) = match register {
                true => (now.clone(), soft.clone()),
                false => (grown(now, &self.kernel[name]), grown(soft, &self.software[name])),
            };
            compared += kv.len();
            if kv != sv {
                let what = if register { "values" } else { "growth" };
                return (compared, Some(format!("{name}'s {what}: kernel {kv:?}, software {sv:?}")));
            }
        }
        (compared, None)
    }
}

/// The kernel's cells, read from its maps (per-CPU counts summed).
fn kernel_cells(generated: &Generated, switch: &Switch, kernel: &TestRun) -> BTreeMap<String, Vec<u128>> {
    let obj = kernel.object();
    // A per-CPU array's first `cells` cells, each its (packets, bytes) summed over the CPUs.
    let counts = |map_name: &str, cells: usize| -> Vec<u128> {
        if cells == 0 {
            return Vec::new();
        }
        let m = obj.map(map_name).unwrap_or_else(|e| panic!("{map_name}: {e}"));
        let values = m.lookup_cells(cells as u32, true).unwrap_or_else(|e| panic!("{map_name}: {e}"));
        let stride = (m.value_size as usize).next_multiple_of(8);
        let word = |b: &[u8], i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap()) as u128;
        values
            .chunks(values.len() / cells)
            .flat_map(|cell| {
                let per_cpu = cell.chunks(stride);
                let (mut packets, mut bytes) = (0, 0);
                for c in per_cpu {
                    (packets, bytes) = (packets + word(c, 0), bytes + word(c, 1));
                }
                [packets, bytes]
            })
            .collect()
    };
    let mut out = BTreeMap::new();
    for (name, map_name, cells) in &generated.counters {
        out.insert(format!("counter {name}"), counts(map_name, *cells));
    }
    for t in &generated.tables {
        let entries = switch.entries(&t.target).map_or(0, <[_]>::len);
        out.insert(format!("hits {}", t.target), counts(&t.hits_map, entries));
    }
    for (name, map_name, cells) in &generated.registers {
        let m = obj.map(map_name).unwrap_or_else(|e| panic!("{map_name}: {e}"));
        let values = m.lookup_cells(*cells as u32, false).unwrap_or_else(|e| panic!("{map_name}: {e}"));
        let values =
            values.chunks(m.value_size as usize).map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()) as u128);
        out.insert(format!("register {name}"), values.collect());
    }
    out
}

/// The software target's cells, named as [`kernel_cells`] names the kernel's.
fn software_cells(generated: &Generated, switch: &Switch) -> BTreeMap<String, Vec<u128>> {
    let mut out = BTreeMap::new();
    for (name, _, cells) in &generated.counters {
        let counts = (0..*cells).flat_map(|i| {
            let (packets, bytes) = switch.counter(name, i).unwrap_or_default();
            [packets as u128, bytes as u128]
        });
        out.insert(format!("counter {name}"), counts.collect());
    }
    for t in &generated.tables {
        let hits = switch.entry_counts(&t.target).unwrap_or_default();
        out.insert(format!("hits {}", t.target), hits.iter().flat_map(|&(p, b)| [p as u128, b as u128]).collect());
    }
    for (name, _, cells) in &generated.registers {
        out.insert(format!("register {name}"), (0..*cells).map(|i| switch.register(name, i).unwrap_or(0)).collect());
    }
    out
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
