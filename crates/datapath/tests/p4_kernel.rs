//! The P4 kernel back end against the software target (issue 36, item 2): each example program
//! is generated as BPF C (`p4::ebpf`), compiled by clang, loaded, and its maps filled with the
//! same entries and groups as the software target's; then crafted and random frames go through
//! both (`Switch::process` and BPF_PROG_TEST_RUN of the TC program), and the verdicts (dropped
//! and why, or the ports and queue), the bytes that leave and the counters must agree. Needs root
//! and clang.

use std::path::Path;
use std::process::Command;

use ebpf::{Map, Object};
use p4::ebpf::{generate, scan_entry, table_key, table_value, Generated, TableKind};
use p4::run::{Dropped, Match, Switch};
use packet::craft::udp4;

const INGRESS_IFINDEX: u32 = 1;

fn example(name: &str) -> (p4::ast::Program, p4::check::Checked) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    p4::front_end(name, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// clang on the generated C, as `ebpf/build.rs` builds the fast path.
fn compile(name: &str, c: &str) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("ef-p4-kernel-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("prog.c");
    let obj = dir.join("prog.o");
    std::fs::write(&src, c).unwrap();
    let multiarch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let clang = ["clang-14", "clang"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("clang (scripts/setup.sh installs clang-14)");
    let out = Command::new(clang)
        .args(["-O2", "-target", "bpf", "-Wall", "-Wno-unused-function", "-Wno-unused-label", "-mcpu=v3"])
        .arg(format!("-I{multiarch}"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(out.status.success(), "clang on {}:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    let elf = std::fs::read(&obj).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    elf
}

fn map<'o>(obj: &'o Object, name: &str) -> &'o Map {
    obj.map(name).unwrap_or_else(|e| panic!("map {name}: {e}"))
}

/// The kernel's copy of the software target's tables, groups and defaults.
fn fill(obj: &Object, g: &Generated, sw: &Switch, groups: &[(u16, Vec<u32>)]) {
    for t in &g.tables {
        let (action, args) = sw.default_action(&t.target).unwrap();
        let v = table_value(t, action, 0, args, g.max_args).unwrap();
        map(obj, "p4_defaults").update(&t.number.to_ne_bytes(), &v).unwrap();
        for (i, e) in sw.entries(&t.target).unwrap().iter().enumerate() {
            let v = table_value(t, &e.action, i as u32, &e.args, g.max_args).unwrap();
            match t.kind {
                TableKind::Scan => {
                    let entry = scan_entry(t, &e.keys, e.priority, &v);
                    map(obj, &t.map).update(&(i as u32).to_ne_bytes(), &entry).unwrap();
                }
                _ => map(obj, &t.map).update(&table_key(t, &e.keys).unwrap(), &v).unwrap(),
            }
        }
    }
    for (id, ports) in groups {
        let mut v = (ports.len() as u32).to_ne_bytes().to_vec();
        for i in 0..p4::ebpf::GROUP_MAX {
            v.extend_from_slice(&ports.get(i).copied().unwrap_or(0).to_ne_bytes());
        }
        map(obj, "p4_groups").update(&(*id as u32).to_ne_bytes(), &v).unwrap();
    }
}

/// What the kernel decided for one frame: (kind, reason, queue, ports, parser error), and the
/// frame as it left.
#[derive(Debug)]
struct KernelVerdict {
    /// When the kernel stamped the frame: the software target runs it at the same instant.
    timestamp: u64,
    kind: u32,
    reason: u32,
    queue: u32,
    ports: Vec<u32>,
    data: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hook {
    Tc,
    Xdp,
}

/// One frame through the program on `hook`; None where a TC test run cannot carry the frame (an
/// IPv4 frame shorter than its header, which the kernel refuses before the program sees it).
fn run_kernel(obj: &Object, frame: &[u8], port: u32, hook: Hook) -> Option<KernelVerdict> {
    map(obj, "p4_ports").update(&INGRESS_IFINDEX.to_ne_bytes(), &port.to_ne_bytes()).unwrap();
    let (name, ctx) = match hook {
        Hook::Tc => ("p4_tc", ebpf::sk_buff(INGRESS_IFINDEX, 0).to_vec()),
        Hook::Xdp => ("p4_xdp", ebpf::xdp_md(frame.len() as u32, INGRESS_IFINDEX).to_vec()),
    };
    let data = match obj.program(name).unwrap().run_once(frame, &ctx) {
        Ok((_, data)) => data,
        Err(e) if hook == Hook::Tc && frame[12..14] == [8, 0] && frame.len() < 34 => {
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
            return None;
        }
        Err(e) => panic!("{hook:?} test run of {} bytes {frame:02x?}: {e}", frame.len()),
    };
    // The test thread is pinned to CPU 0 (`pin`): the run's verdict is in that CPU's cell.
    let cells = map(obj, "p4_verdict").lookup_percpu(&0u32.to_ne_bytes()).unwrap();
    let v = &cells[0];
    assert_eq!(u32::from_ne_bytes(v[80..84].try_into().unwrap()), frame.len() as u32, "the verdict of this frame");
    let word = |i: usize| u32::from_ne_bytes(v[4 * i..4 * i + 4].try_into().unwrap());
    let n = word(3) as usize;
    Some(KernelVerdict {
        timestamp: u64::from_ne_bytes(v[88..96].try_into().unwrap()),
        kind: word(0),
        reason: word(1),
        queue: word(2),
        ports: (0..n).map(|i| word(4 + i)).collect(),
        data,
    })
}

#[derive(Debug, Default)]
struct Tally {
    forwarded: usize,
    parser: usize,
    program: usize,
    no_port: usize,
    up: usize,
    frames: usize,
}

/// Both targets on one frame; panics where they differ.
fn compare(obj: &Object, sw: &mut Switch, frame: &[u8], port: u32, tally: &mut Tally) {
    // The software target sees the frame as often as the kernel does, so that the counters agree.
    // The hooks take turns at going first (policing lets only the first of two through).
    tally.frames += 1;
    let hooks = if tally.frames.is_multiple_of(2) { [Hook::Tc, Hook::Xdp] } else { [Hook::Xdp, Hook::Tc] };
    for hook in hooks {
        if let Some(k) = run_kernel(obj, frame, port, hook) {
            agree(&k, &sw.process(frame, port, k.timestamp), hook, frame, tally);
        }
    }
}

fn agree(k: &KernelVerdict, soft: &Result<Vec<p4::run::Output>, Dropped>, hook: Hook, frame: &[u8], tally: &mut Tally) {
    const DROP: u32 = 0;
    const PARSER: u32 = 1;
    const PROGRAM: u32 = 2;
    const NO_PORT: u32 = 3;
    const MISFIT: u32 = 4;
    // XDP sends a frame once: copies to several ports go up, for userspace to send.
    if hook == Hook::Xdp && matches!(soft, Ok(o) if o.len() > 1) {
        assert_eq!((k.kind, k.reason), (2, MISFIT), "xdp multicast: {frame:02x?}");
        tally.up += 1;
        return;
    }
    assert_ne!(k.reason, MISFIT, "{hook:?} sent up a frame it should decide: {frame:02x?}");
    match soft {
        Err(Dropped::Parser(_)) => {
            assert_eq!((k.kind, k.reason), (DROP, PARSER), "parser: {frame:02x?}");
            tally.parser += 1;
        }
        Err(Dropped::Program) => {
            assert_eq!((k.kind, k.reason), (DROP, PROGRAM), "program drop: {frame:02x?}");
            tally.program += 1;
        }
        Err(Dropped::NoPort) => {
            assert_eq!((k.kind, k.reason), (DROP, NO_PORT), "no port: {frame:02x?}");
            tally.no_port += 1;
        }
        Err(Dropped::Unsupported(w)) => panic!("the software target cannot run {w}"),
        Ok(outputs) => {
            let outputs = outputs.clone();
            assert_ne!(k.kind, DROP, "the kernel dropped what the software target sent ({outputs:?}): {frame:02x?}");
            let mut soft_ports: Vec<u32> = outputs.iter().map(|o| o.port).collect();
            let mut kernel_ports = k.ports.clone();
            soft_ports.sort();
            kernel_ports.sort();
            assert_eq!(kernel_ports, soft_ports, "ports: {frame:02x?}");
            for o in &outputs {
                assert_eq!(k.queue, o.queue as u32, "queue: {frame:02x?}");
                assert_eq!(k.data, o.frame, "bytes out of port {}: {frame:02x?}", o.port);
            }
            tally.forwarded += 1;
        }
    }
}

/// xorshift64*: repeatable frames.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn mac(m: [u8; 6]) -> u128 {
    m.iter().fold(0u128, |v, &b| (v << 8) | b as u128)
}

fn sums(obj: &Object, name: &str, cells: usize) -> Vec<(u64, u64)> {
    (0..cells as u32)
        .map(|i| {
            map(obj, name).lookup_percpu(&i.to_ne_bytes()).unwrap().iter().fold((0, 0), |(p, b), c| {
                (
                    p + u64::from_ne_bytes(c[0..8].try_into().unwrap()),
                    b + u64::from_ne_bytes(c[8..16].try_into().unwrap()),
                )
            })
        })
        .collect()
}

#[test]
fn the_router_decides_in_the_kernel_as_in_software() {
    if !ebpf::test_may_load_programs("the P4 kernel back end's differential test") {
        return;
    }
    pin();
    let (program, checked) = example("ipv4_router.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    let gw = [2, 0, 0, 0, 0, 0xfe];
    let routes = [
        (0x0a00_0000u128, 8u32, [2, 0, 0, 0, 0, 1], 1u128),
        (0x0a01_0000, 16, [2, 0, 0, 0, 0, 2], 2),
        (0x0a01_0200, 24, [2, 0, 0, 0, 0, 3], 3),
        (0xc0a8_0000, 16, [2, 0, 0, 0, 0, 4], 4),
    ];
    for (prefix, len, next, port) in routes {
        let args = vec![mac(gw), mac(next), port, port];
        sw.insert("RouterIngress.routes", vec![Match::Lpm { value: prefix, prefix: len }], "next_hop", args, 0)
            .unwrap();
    }
    let obj = Object::load(&compile("router", &g.c)).unwrap_or_else(|e| panic!("loading the router: {e}"));
    fill(&obj, &g, &sw, &[]);
    let mut tally = Tally::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let dsts = [0x0a01_0203u32, 0x0a01_0909, 0x0a02_0304, 0xc0a8_0101, 0x0b00_0001, 0x0a01_02ff];
    for _ in 0..2000 {
        let dst = rng.pick(&dsts);
        let mut f = udp4([2, 0, 0, 0, 0, 9], gw, [10, 9, 0, 1], dst.to_be_bytes(), 1000, 2000, 60);
        match rng.next() % 8 {
            0 => f[22] = 1,                                   // TTL 1: dropped
            1 => f[22] = (rng.next() % 255) as u8 + 1,        // any TTL
            2 => f.truncate(14 + (rng.next() % 20) as usize), // too short for its headers
            3 => f[12] = 0x86,                                // not IPv4
            4 => f[14] = 0x46,                                // IHL 6: verify fails
            5 => {
                let at = (rng.next() % f.len() as u64) as usize;
                f[at] = rng.next() as u8; // anything
            }
            _ => {}
        }
        compare(&obj, &mut sw, &f, (rng.next() % 4) as u32 + 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 500 && tally.parser > 100 && tally.program > 100, "{tally:?}");
    // The routes' counter and the entries' hits agree too.
    let routed = sums(&obj, &g.counters[0].1, 8);
    for (i, &(p, b)) in routed.iter().enumerate() {
        assert_eq!(sw.counter("RouterIngress.routed", i), Some((p, b)), "routed[{i}]");
    }
    let t = &g.tables[0];
    let hits = sums(&obj, &t.hits_map, 4);
    assert_eq!(sw.entry_counts(&t.target).unwrap(), hits);
}

#[test]
fn the_l2_switch_floods_forwards_and_drops_in_the_kernel_as_in_software() {
    if !ebpf::test_may_load_programs("the P4 kernel back end's differential test") {
        return;
    }
    pin();
    let (program, checked) = example("l2_switch.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    let hosts: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]];
    for vid in [0u128, 10] {
        for (i, h) in hosts.iter().enumerate().take(2) {
            sw.insert(
                "L2Ingress.dmac",
                vec![Match::Exact(vid), Match::Exact(mac(*h))],
                "forward",
                vec![i as u128 + 1],
                0,
            )
            .unwrap();
        }
    }
    for port in [1u128, 2] {
        sw.insert("L2Ingress.vlan_allowed", vec![Match::Exact(port), Match::Exact(10)], "NoAction", vec![], 0).unwrap();
    }
    let group = vec![1u32, 2, 3];
    sw.set_group(1, group.clone());
    let obj = Object::load(&compile("l2", &g.c)).unwrap_or_else(|e| panic!("loading the L2 switch: {e}"));
    fill(&obj, &g, &sw, &[(1, group)]);
    let mut tally = Tally::default();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..2000 {
        let dst = rng.pick(&hosts);
        let src = rng.pick(&hosts);
        let mut f = udp4(src, dst, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        if rng.next().is_multiple_of(2) {
            // A VLAN tag: 10 (carried by ports 1 and 2) or 20 (by none), any priority.
            let vid: u16 = rng.pick(&[10, 20]);
            let tci = ((rng.next() % 8) as u16) << 13 | vid;
            let mut tag = vec![0x81, 0x00];
            tag.extend_from_slice(&tci.to_be_bytes());
            f.splice(12..12, tag);
        }
        if rng.next().is_multiple_of(10) {
            f.truncate(14 + (rng.next() % 4) as usize);
        }
        compare(&obj, &mut sw, &f, (rng.next() % 3) as u32 + 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 800 && tally.program > 100 && tally.parser > 50, "{tally:?}");
    let t = g.tables.iter().find(|t| t.target == "L2Ingress.dmac").unwrap();
    let hits = sums(&obj, &t.hits_map, 4);
    assert_eq!(sw.entry_counts(&t.target).unwrap(), hits);
}

/// Keeps the test on CPU 0, where its test runs run and their verdicts land.
fn pin() {
    // SAFETY: a zeroed cpu_set_t with one bit set, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0);
    }
}

#[test]
fn the_afdx_switch_filters_and_polices_in_the_kernel_as_in_software() {
    if !ebpf::test_may_load_programs("the P4 kernel back end's differential test") {
        return;
    }
    pin();
    let (program, checked) = example("afdx_switch.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    // 64 VLs from port 1, each its own account, alternately to ports 2 and 3 (high priority) and
    // to port 2; frame-based, as the paper's program polices. The BAGs are long against the
    // frames' pace (the test runs thousands a second): every VL's first good frame conforms and
    // most after it are early and policed, however fast or slow the machine.
    let table = "AfdxIngress.tbl_forward_virtual_link";
    let mut groups = Vec::new();
    for i in 0..64u128 {
        let (vl, multi) = (10 + i, i % 2 == 0);
        let (queue, smax) = if multi { (7, 200) } else { (0, 1518) };
        let args = vec![vl, queue, i, 128_000, 500, 64, smax];
        sw.insert(table, vec![Match::Exact(1), Match::Exact(vl)], "forward", args, 0).unwrap();
        let ports = if multi { vec![2u32, 3] } else { vec![2] };
        sw.set_group(vl as u16, ports.clone());
        groups.push((vl as u16, ports));
    }
    let obj = Object::load(&compile("afdx", &g.c)).unwrap_or_else(|e| panic!("loading the AFDX switch: {e}"));
    fill(&obj, &g, &sw, &groups);
    let mut tally = Tally::default();
    let mut rng = Rng(0x0afd_0afd_0afd_0afd);
    for _ in 0..3000 {
        let vl = 10 + (rng.next() % 70) as u16; // 74 and up: no such VL
        let dst = [0x03, 0, 0, 0, (vl >> 8) as u8, vl as u8];
        // An end system's address: 02:00:00, its id, then the interface in bits 7..5.
        let interface: u8 = rng.pick(&[1, 1, 1, 2, 3]);
        let mut src = [0x02, 0, 0, 0, 0x01, interface << 5];
        if rng.next().is_multiple_of(20) {
            src[5] |= 1; // low bits set
        }
        let size = 64 + (rng.next() % 240) as usize;
        let mut f = udp4(src, dst, [10, 1, 33, 1], [224, 224, 0, vl as u8], 1, 2, size);
        if rng.next().is_multiple_of(25) {
            f[12] = 0x86; // not IPv4: the parser rejects it
        }
        compare(&obj, &mut sw, &f, rng.pick(&[1, 1, 1, 2]), &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded >= 30 && tally.up >= 10 && tally.program > 1000 && tally.parser > 50, "{tally:?}");
    // Policing agreed frame by frame; its counter says how much of it there was.
    let (_, map, _) = &g.counters[0];
    let policed = sums(&obj, map, 64);
    for (i, &(p, b)) in policed.iter().enumerate() {
        assert_eq!(sw.counter("AfdxIngress.policed", i), Some((p, b)), "policed[{i}]");
    }
    let total: u64 = policed.iter().map(|c| c.0).sum();
    assert!(total > 500, "{total} frames policed");
}
