//! The P4 kernel back end against the software target (issue 36, item 2): each example program
//! is generated as BPF C (`p4::backends::ebpf`), compiled by clang, loaded, and its maps filled with the
//! same entries and groups as the software target's; then crafted and random frames go through
//! both (`Switch::process` and BPF_PROG_TEST_RUN of the TC program), and the verdicts (dropped
//! and why, or the ports and queue), the bytes that leave and the counters must agree. Needs root
//! and clang.
//!
//! About 1 480 lines, one concern: the two targets held to one answer, program by program; the
//! shorter programs each pin one construct where they disagreed (issue 52) and share the
//! helpers above them.

use std::path::Path;

use std::collections::BTreeMap;

use datapath::fastpath::p4::{set_port, P4Kernel};
// What the kernel decided for one frame, and the frame as it left.
use datapath::fastpath::p4_test_run::{read_verdict, Verdict as KernelVerdict};
use ebpf::{Map, Object};
use p4::backends::ebpf::{generate, Generated};
use p4::backends::software::{Dropped, Match, Switch};
use packet::craft::udp4;

const INGRESS_IFINDEX: u32 = 1;

fn example(name: &str) -> (p4::frontend::ast::Program, p4::frontend::check::Checked) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    p4::front_end(name, &text).unwrap_or_else(|e| panic!("{e}"))
}

/// clang on the generated C, as the switch compiles it.
fn compile(name: &str, c: &str) -> Vec<u8> {
    ebpf::clang::compile(&format!("p4-kernel-test-{name}"), c).unwrap_or_else(|e| panic!("{e}"))
}

fn map<'o>(obj: &'o Object, name: &str) -> &'o Map {
    obj.map(name).unwrap_or_else(|e| panic!("map {name}: {e}"))
}

/// A veth pair, left down: every port's interface in the kernel's egress map, so that the
/// program forwards as on a switch (a copy a test run sends there is dropped at once).
struct DownVeth(String);

impl DownVeth {
    fn new(tag: &str) -> DownVeth {
        let name = format!("efk{}{tag}", std::process::id() % 100_000);
        let ok = std::process::Command::new("ip")
            .args(["link", "add", &name, "type", "veth", "peer", "name", &format!("{name}p")])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip link add {name}");
        DownVeth(name)
    }

    fn ifindex(&self) -> u32 {
        datapath::sys::ifindex(&self.0).unwrap()
    }
}

impl Drop for DownVeth {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

/// The program loaded, its maps written as the switch writes them (`P4Kernel`) from the
/// software target's tables and groups, every port sending on `out`, groups broadcast by XDP.
fn load(name: &str, g: Generated, sw: &Switch, out: &DownVeth) -> P4Kernel {
    let obj = Object::load(&compile(name, &g.c)).unwrap_or_else(|e| panic!("loading {name}: {e}"));
    let mut k = P4Kernel::with_object(obj, g);
    k.write(sw).unwrap();
    let egress: BTreeMap<u32, u32> = (1..=4).map(|p| (p, out.ifindex())).collect();
    k.set_egress(sw, &egress, true).unwrap();
    k
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hook {
    Tc,
    Xdp,
}

/// One frame through the program on `hook`; None where a TC test run cannot carry the frame (an
/// IPv4 frame shorter than its header, which the kernel refuses before the program sees it).
fn run_kernel(obj: &Object, frame: &[u8], port: u32, hook: Hook) -> Option<KernelVerdict> {
    set_port(obj, INGRESS_IFINDEX, port, 0).unwrap();
    run_on_its_port(obj, frame, hook)
}

/// As [`run_kernel`], on the port the maps already give the test's interface.
fn run_on_its_port(obj: &Object, frame: &[u8], hook: Hook) -> Option<KernelVerdict> {
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
    Some(read_verdict(obj, 0, data, frame.len()).unwrap_or_else(|e| panic!("the verdict of this frame: {e}")))
}

#[derive(Debug, Default)]
struct Tally {
    forwarded: usize,
    parser: usize,
    program: usize,
    no_port: usize,
    /// Frames XDP broadcast to a group.
    broadcast: usize,
    /// Frames forwarded on queue 1 (the metered test's yellow).
    yellow: usize,
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

fn agree(
    k: &KernelVerdict,
    soft: &Result<Vec<p4::backends::software::Output>, Dropped>,
    hook: Hook,
    frame: &[u8],
    tally: &mut Tally,
) {
    use p4::backends::ebpf::verdict::{DROP, MISFIT, NO_PORT, PARSER, PROGRAM};
    // XDP sends a frame once: copies to several ports are broadcast into the group's DEVMAP.
    if hook == Hook::Xdp && matches!(soft, Ok(o) if o.len() > 1) {
        tally.broadcast += 1;
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
            tally.yellow += outputs.first().is_some_and(|o| o.queue == 1) as usize;
            for o in &outputs {
                assert_eq!(k.queue, o.queue as u32, "queue: {frame:02x?}");
                assert_eq!(k.data, o.frame, "bytes out of port {}: {frame:02x?}", o.port);
            }
            tally.forwarded += 1;
        }
    }
}

/// A program's kernel back end (refused: the test fails with the reason) and its software target.
fn both_targets(name: &str, text: &str) -> (Generated, Switch) {
    let (program, checked) = p4::front_end(name, text).unwrap_or_else(|e| panic!("{e}"));
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("the kernel back end refused {name}: {e}"));
    (g, Switch::new(program, checked).unwrap())
}

/// A program of an Ethernet header only, parsed whole, with `ingress` as its ingress control's
/// body (locals and apply), an empty egress, and a deparser that emits the headers' struct.
fn ethernet_only(ingress: &str) -> String {
    format!(
        "#include <core.p4>\n#include <edgeflow.p4>\n\
         header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\n\
         struct headers {{ eth_t eth; }}\nstruct meta_t {{ bit<8> unused; }}\n\
         parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n\
           state start {{ packet.extract(hdr.eth); transition accept; }} }}\n\
         control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n{ingress}\n}}\n\
         control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out packet, in headers hdr) {{ apply {{ packet.emit(hdr); }} }}\n\
         EdgeflowSwitch(P(), I(), E(), D()) main;\n"
    )
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
    if !may_load_and_pin() {
        return;
    }
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
    let out = DownVeth::new("r");
    let mut k = load("router", g.clone(), &sw, &out);
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
        compare(k.object(), &mut sw, &f, (rng.next() % 4) as u32 + 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 500 && tally.parser > 100 && tally.program > 100, "{tally:?}");
    // The routes' counter and the entries' hits agree too, as the switch harvests them.
    let routed = sums(k.object(), &g.counters[0].1, 8);
    for (i, &(p, b)) in routed.iter().enumerate() {
        assert_eq!(sw.counter("RouterIngress.routed", i), Some((p, b)), "routed[{i}]");
    }
    let t = &g.tables[0];
    let hits = sums(k.object(), &t.hits_map, 4);
    assert_eq!(sw.entry_counts(&t.target).unwrap(), hits);
    let (back, _) = k.harvest(&sw);
    let harvested: Vec<(u64, u64)> = (0..4)
        .map(|i| back.entries.iter().find(|e| e.0 == t.target && e.1 == i).map_or((0, 0), |e| (e.2, e.3)))
        .collect();
    assert_eq!(harvested, hits, "harvested hits");
    assert_eq!(back.forwarded as usize, tally.forwarded, "frames the kernel says it forwarded");
    assert_eq!(k.harvest(&sw).0.entries, vec![], "a second harvest finds nothing new");
}

#[test]
fn the_l2_switch_floods_forwards_and_drops_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
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
    let out = DownVeth::new("l");
    let k = load("l2", g.clone(), &sw, &out);
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
        compare(k.object(), &mut sw, &f, (rng.next() % 3) as u32 + 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 800 && tally.program > 100 && tally.parser > 50 && tally.broadcast > 50, "{tally:?}");
    let t = g.tables.iter().find(|t| t.target == "L2Ingress.dmac").unwrap();
    let hits = sums(k.object(), &t.hits_map, 4);
    assert_eq!(sw.entry_counts(&t.target).unwrap(), hits);
}

/// Whether this machine may load the test's programs (root, BPF); if so, the test thread is on
/// CPU 0 from here on (`pin`).
fn may_load_and_pin() -> bool {
    let may = ebpf::test_may_load_programs("the P4 kernel back end's differential test");
    if may {
        pin();
    }
    may
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
    if !may_load_and_pin() {
        return;
    }
    let (program, checked) = example("afdx_switch.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    // 64 VLs from port 1, each its own account, alternately to ports 2 and 3 (high priority) and
    // to port 2; frame-based, as the paper's program polices. The BAGs are long against the
    // frames' pace (the test runs thousands a second): every VL's first good frame conforms and
    // most after it are early and policed, however fast or slow the machine.
    let table = "AfdxIngress.tbl_forward_virtual_link";
    for i in 0..64u128 {
        let (vl, multi) = (10 + i, i % 2 == 0);
        let (queue, smax) = if multi { (7, 200) } else { (0, 1518) };
        let args = vec![vl, queue, i, 128_000, 500, 64, smax];
        sw.insert(table, vec![Match::Exact(1), Match::Exact(vl)], "forward", args, 0).unwrap();
        let ports = if multi { vec![2u32, 3] } else { vec![2] };
        sw.set_group(vl as u16, ports.clone());
    }
    let out = DownVeth::new("a");
    let k = load("afdx", g.clone(), &sw, &out);
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
        compare(k.object(), &mut sw, &f, rng.pick(&[1, 1, 1, 2]), &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded >= 30 && tally.broadcast >= 10 && tally.program > 1000 && tally.parser > 50, "{tally:?}");
    // Policing agreed frame by frame; its counter says how much of it there was.
    let (_, map, _) = &g.counters[0];
    let policed = sums(k.object(), map, 64);
    for (i, &(p, b)) in policed.iter().enumerate() {
        assert_eq!(sw.counter("AfdxIngress.policed", i), Some((p, b)), "policed[{i}]");
    }
    let total: u64 = policed.iter().map(|c| c.0).sum();
    assert!(total > 500, "{total} frames policed");
}

/// The L2 switch with both kinds of meter (RFC 2698 two-rate three-colour): a direct meter on
/// the MAC table, in bytes, whose red drops the frame, and a meter per ingress port, in packets,
/// whose yellow lowers the frame to queue 1 and whose red drops it. Colours depend on when each
/// frame came, so the software target runs each at the kernel's stamp, as the AFDX test does.
#[test]
fn meters_colour_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4/l2_switch.p4");
    let metered = std::fs::read_to_string(path)
        .unwrap()
        .replace(
            "    direct_counter(CounterType.packets_and_bytes) dmac_hits;\n",
            "    direct_counter(CounterType.packets_and_bytes) dmac_hits;\n    \
             direct_meter<bit<2>>(MeterType.bytes) dmac_meter;\n    meter(8, MeterType.packets) port_meter;\n    \
             bit<2> dcolour;\n    bit<2> pcolour;\n",
        )
        .replace("        counters = dmac_hits;\n", "        counters = dmac_hits;\n        meters = dmac_meter;\n")
        .replace(
            "        dmac.apply();\n",
            "        dmac.apply();\n        dmac_meter.read(dcolour);\n        if (dcolour == 2) {\n            \
             mark_to_drop(standard_metadata);\n        }\n        \
             port_meter.execute_meter(standard_metadata.ingress_port, pcolour);\n        if (pcolour == 1) {\n            \
             standard_metadata.priority = 1;\n        }\n        if (pcolour == 2) {\n            \
             mark_to_drop(standard_metadata);\n        }\n",
        );
    assert!(metered.contains("meters = dmac_meter;") && metered.contains("execute_meter"), "the example changed");
    let (g, mut sw) = both_targets("metered_l2.p4", &metered);
    let hosts: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]];
    let table = "L2Ingress.dmac";
    for (i, h) in hosts.iter().enumerate().take(2) {
        let keys = vec![Match::Exact(0), Match::Exact(mac(*h))];
        sw.insert(table, keys.clone(), "forward", vec![i as u128 + 1], 0).unwrap();
        // 20 kB/s committed and 40 kB/s peak, bursts of 2 and 4 frames of 60 bytes.
        sw.set_entry_meter(table, &keys, 0, [20_000, 120, 40_000, 240]).unwrap();
    }
    for port in 1..=3 {
        sw.set_meter("L2Ingress.port_meter", port, 2_000, 3, 4_000, 6).unwrap();
    }
    sw.set_group(1, vec![1, 2, 3]);
    let out = DownVeth::new("m");
    let k = load("metered", g.clone(), &sw, &out);
    let mut tally = Tally::default();
    let mut rng = Rng(0x3e7e_5eed_0000_0001);
    for n in 0..3000 {
        // Bursts and pauses, so that buckets are spent and fill again.
        if n % 40 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(rng.next() % 4));
        }
        let f = udp4(rng.pick(&hosts), rng.pick(&hosts), [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        compare(k.object(), &mut sw, &f, (rng.next() % 3) as u32 + 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 300 && tally.program > 300 && tally.yellow > 50, "every colour: {tally:?}");
}

/// What the kernel cannot carry goes up to the software target, counted, never cut or dropped:
/// a multicast group of more ports than a verdict holds (it was cut to the first 16 on TC), and
/// headers past the bytes the kernel copies (they were dropped as PacketTooShort).
#[test]
fn what_the_kernel_cannot_carry_goes_up_counted() {
    use p4::backends::ebpf::verdict::{MISFIT, UP};
    if !may_load_and_pin() {
        return;
    }
    let up_misfits = |obj: &Object| -> u64 {
        let slot = p4::backends::ebpf::stats_slot(UP, MISFIT);
        map(obj, "p4_stats")
            .lookup_percpu(&slot.to_ne_bytes())
            .unwrap()
            .iter()
            .map(|c| u64::from_ne_bytes(c[..8].try_into().unwrap()))
            .sum()
    };
    let sent_up = |k: &KernelVerdict, what: &str| assert_eq!((k.kind, k.reason), (UP, MISFIT), "{what}: {k:?}");

    let (program, checked) = example("l2_switch.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    let wide: Vec<u32> = (1..=p4::backends::ebpf::GROUP_MAX as u32 + 1).collect();
    sw.set_group(1, wide.clone());
    let out = DownVeth::new("g");
    let mut k = load("wide_group", g, &sw, &out);
    // Every port has an interface, so nothing but the group's size can send the frame up.
    let egress: BTreeMap<u32, u32> = wide.iter().map(|p| (*p, out.ifindex())).collect();
    k.set_egress(&sw, &egress, true).unwrap();
    let flood = udp4([2, 0, 0, 0, 0, 9], [0xff; 6], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    let soft = sw.process(&flood, 1, 0).unwrap();
    assert_eq!(soft.len(), wide.len() - 1, "the software target floods to every other port");
    for hook in [Hook::Tc, Hook::Xdp] {
        sent_up(
            &run_kernel(k.object(), &flood, 1, hook).unwrap(),
            &format!("{hook:?}: a group of {} ports", wide.len()),
        );
    }
    assert_eq!(up_misfits(k.object()), 2);

    // Ethernet and two headers of 160 bytes each, read only when the EtherType says so.
    let fields: String = (0..20).map(|i| format!("bit<64> w{i}; ")).collect();
    let text = format!(
        "#include <core.p4>\n#include <edgeflow.p4>\n\
         header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\nheader wide_t {{ {fields}}}\n\
         struct headers {{ eth_t eth; wide_t a; wide_t b; }}\nstruct meta_t {{ bit<8> unused; }}\n\
         parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n\
           state start {{ packet.extract(hdr.eth); transition select(hdr.eth.kind) {{ 0x88b5: wide; default: accept; }} }}\n\
           state wide {{ packet.extract(hdr.a); packet.extract(hdr.b); transition accept; }}\n}}\n\
         control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ sm.egress_port = 2; }} }}\n\
         control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control D(packet_out packet, in headers hdr) {{ apply {{ packet.emit(hdr.eth); packet.emit(hdr.a); packet.emit(hdr.b); }} }}\n\
         EdgeflowSwitch(P(), I(), E(), D()) main;\n"
    );
    let (g, mut sw) = both_targets("deep.p4", &text);
    let k = load("deep", g, &sw, &out);
    let frame = |len: usize| {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        f
    };
    let deep = frame(14 + 320 + 10);
    assert_eq!(sw.process(&deep, 1, 0).unwrap()[0].port, 2, "the software target forwards it");
    for hook in [Hook::Tc, Hook::Xdp] {
        sent_up(&run_kernel(k.object(), &deep, 1, hook).unwrap(), &format!("{hook:?}: headers to byte {}", 14 + 320));
    }
    assert_eq!(up_misfits(k.object()), 2);
    // A frame that really is shorter than its headers is still the parser's drop, in both.
    let mut tally = Tally::default();
    compare(k.object(), &mut sw, &frame(14 + 200), 1, &mut tally);
    compare(
        k.object(),
        &mut sw,
        &udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60),
        3,
        &mut tally,
    );
    assert_eq!((tally.parser, tally.forwarded), (2, 2), "{tally:?}");
}

/// `t.apply().hit` and `.miss` as values, and `packet.emit(hdr)` of the headers' struct, which the
/// kernel back end refused ("member hit of Bool", "emit of a Struct"), so that such a program ran
/// whole in userspace: now decided in the kernel, and as the software target decides.
#[test]
fn hit_and_miss_decide_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "action mark(bit<16> kind) { hdr.eth.kind = kind; }\n\
         table known { key = { hdr.eth.dst : exact; } actions = { mark; NoAction; } default_action = NoAction(); }\n\
         table blocked { key = { hdr.eth.src : exact; } actions = { NoAction; } default_action = NoAction(); }\n\
         apply {\n\
         if (known.apply().hit) { sm.egress_port = 2; } else { sm.egress_port = 3; }\n\
         if (!blocked.apply().miss) { mark_to_drop(sm); }\n\
         }",
    );
    let (g, mut sw) = both_targets("hit_miss.p4", &text);
    let hosts: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]];
    sw.insert("I.known", vec![Match::Exact(mac(hosts[1]))], "mark", vec![0x88b5], 0).unwrap();
    sw.insert("I.blocked", vec![Match::Exact(mac(hosts[2]))], "NoAction", vec![], 0).unwrap();
    let out = DownVeth::new("h");
    let k = load("hit_miss", g, &sw, &out);
    let mut tally = Tally::default();
    let mut rng = Rng(0x5eed_0000_4117_0001);
    for _ in 0..300 {
        let f = udp4(rng.pick(&hosts), rng.pick(&hosts), [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 100 && tally.program > 50, "hits, misses and drops: {tally:?}");
}

/// `setValid()` and `setInvalid()`, which the kernel back end refused (so the whole program ran
/// in userspace): a frame whose headers they change goes up, counted, for the software target to
/// decide (a header made valid has no place in the frame to be written back to), and every other
/// frame is decided in the kernel as in software, a `setValid()` of a header already there included.
#[test]
fn headers_made_valid_or_invalid_decide_in_the_kernel_or_go_up() {
    use p4::backends::ebpf::verdict::{MISFIT, UP};
    if !may_load_and_pin() {
        return;
    }
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> kind; }\n\
        struct headers { eth_t eth; vlan_t vlan; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { 0x8100: tagged; default: accept; } }\n\
          state tagged { packet.extract(hdr.vlan); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          apply {\n\
            sm.egress_port = 2;\n\
            if (hdr.vlan.isValid()) {\n\
              if (hdr.eth.src == 0x020000000001) { hdr.vlan.setInvalid(); } else { hdr.vlan.setValid(); hdr.vlan.pcp = 3; }\n\
            } else if (hdr.eth.dst == 0x020000000002) {\n\
              hdr.vlan.setValid(); hdr.vlan.vid = 5; hdr.vlan.kind = hdr.eth.kind; hdr.eth.kind = 0x8100;\n\
            }\n\
          } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.eth); packet.emit(hdr.vlan); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let (g, mut sw) = both_targets("vlan_edit.p4", text);
    let out = DownVeth::new("v");
    let k = load("vlan_edit", g, &sw, &out);
    let tagged = |src: [u8; 6]| {
        let mut f = udp4(src, [2, 0, 0, 0, 0, 9], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        f.splice(12..12, [0x81, 0x00, 0x00, 0x0a]);
        f
    };
    // Changed in place or not at all: decided in the kernel, as in software.
    let mut tally = Tally::default();
    compare(
        k.object(),
        &mut sw,
        &udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 9], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60),
        1,
        &mut tally,
    );
    compare(k.object(), &mut sw, &tagged([2, 0, 0, 0, 0, 7]), 1, &mut tally);
    assert_eq!(tally.forwarded, 4, "{tally:?}");
    // A tag pushed, a tag popped: up, for the software target, which does both.
    let pushed = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    let popped = tagged([2, 0, 0, 0, 0, 1]);
    for (frame, grows) in [(&pushed, 4i64), (&popped, -4)] {
        for hook in [Hook::Tc, Hook::Xdp] {
            let v = run_kernel(k.object(), frame, 1, hook).unwrap();
            assert_eq!((v.kind, v.reason), (UP, MISFIT), "{hook:?}: {v:?}");
        }
        let soft = sw.process(frame, 1, 0).unwrap();
        assert_eq!(soft[0].frame.len() as i64, frame.len() as i64 + grows, "the software target edits the tag");
    }
}

/// An extern sized by a named constant (`counter(CELLS, ...)`, `register<..>(CELLS / 2 ...)`)
/// got one cell in the kernel where the software target had them all: a count past the first
/// was lost in the kernel. Both now count every cell alike.
#[test]
fn externs_sized_by_named_constants_have_every_cell_in_the_kernel() {
    if !may_load_and_pin() {
        return;
    }
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        const bit<32> CELLS = 32;\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        struct headers { eth_t eth; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          const bit<32> HALF = CELLS - 16;\n\
          counter(CELLS, CounterType.packets_and_bytes) by_source;\n\
          register<bit<32>>(HALF) last_kind;\n\
          apply {\n\
            by_source.count((bit<32>) hdr.eth.src[4:0]);\n\
            last_kind.write((bit<32>) hdr.eth.src[3:0], (bit<32>) hdr.eth.kind);\n\
            sm.egress_port = 2;\n\
          } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.eth); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let (g, mut sw) = both_targets("sized.p4", text);
    let out = DownVeth::new("n");
    let k = load("sized", g.clone(), &sw, &out);
    let mut tally = Tally::default();
    for source in 0..32u8 {
        let f = udp4([2, 0, 0, 0, 0, source], [2, 0, 0, 0, 0, 9], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    assert_eq!(tally.forwarded, 64, "{tally:?}");
    let (_, counter_map, cells) = g.counters.iter().find(|c| c.0 == "I.by_source").expect("the counter").clone();
    assert_eq!(cells, 32, "the counter's cells in the kernel");
    let kernel = sums(k.object(), &counter_map, 32);
    let soft: Vec<(u64, u64)> = (0..32).map(|i| sw.counter("I.by_source", i).unwrap()).collect();
    // The software target saw each frame twice (once per hook), as the kernel did.
    assert_eq!(kernel, soft);
    assert!(kernel.iter().all(|&(p, _)| p == 2), "{kernel:?}");
    let (_, _, reg_cells) = g.registers.iter().find(|c| c.0 == "I.last_kind").expect("the register").clone();
    assert_eq!(reg_cells, 16);
}

/// An LPM key of a width that is not whole bytes (a 12-bit VLAN id) matched the wrong bits in the
/// kernel: the trie compares from the top of the first byte, where the key's padding sat. Now
/// every VLAN id is routed by the longest prefix of its own 12 bits, in both targets.
#[test]
fn an_lpm_key_of_twelve_bits_matches_its_own_bits_in_the_kernel() {
    if !may_load_and_pin() {
        return;
    }
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header vlan_t { bit<3> pcp; bit<1> dei; bit<12> vid; bit<16> kind; }\n\
        struct headers { eth_t eth; vlan_t vlan; }\nstruct meta_t { bit<8> unused; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { 0x8100: tagged; default: reject; } }\n\
          state tagged { packet.extract(hdr.vlan); transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          action to(PortId_t port) { sm.egress_port = port; }\n\
          action drop() { mark_to_drop(sm); }\n\
          table by_vlan { key = { hdr.vlan.vid : lpm; } actions = { to; drop; } default_action = drop(); }\n\
          apply { by_vlan.apply(); } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.eth); packet.emit(hdr.vlan); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let (g, mut sw) = both_targets("vlan_lpm.p4", text);
    // 0x1xx: port 2; 0x12x: port 3 (longer); 0x8xx..0xfxx: port 4; the rest dropped.
    sw.insert("I.by_vlan", vec![Match::Lpm { value: 0x100, prefix: 4 }], "to", vec![2], 0).unwrap();
    sw.insert("I.by_vlan", vec![Match::Lpm { value: 0x120, prefix: 8 }], "to", vec![3], 0).unwrap();
    sw.insert("I.by_vlan", vec![Match::Lpm { value: 0x800, prefix: 1 }], "to", vec![4], 0).unwrap();
    let out = DownVeth::new("p");
    let k = load("vlan_lpm", g, &sw, &out);
    let mut tally = Tally::default();
    for vid in (0..4096u16).step_by(7) {
        let mut f = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        f.splice(12..12, [0x81, 0x00, (vid >> 8) as u8, vid as u8]);
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    println!("{tally:?}");
    assert!(tally.forwarded > 600 && tally.program > 400, "{tally:?}");
}

/// The experiment's router table (32-bit LPM, 1 024 entries) is kept in multibit arrays
/// (`p4::backends::ebpf::LpmWriter`). Two route sets, of /0 to /32, differing in a third of their
/// routes (gone, come, or a new next hop), are written in turn while another CPU runs frames to
/// every address where a prefix of either begins or ends: each must leave with the next hop of
/// one set or the other, never dropped as a miss or sent by a third route. Before and after, every
/// such address decides as in the software target.
#[test]
fn routes_changed_while_frames_are_looked_up_never_open_a_gap() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    if !may_load_and_pin() {
        return;
    }
    let (program, checked) = example("v1model_router.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.tables[0].kind, p4::backends::ebpf::TableKind::LpmArrays);
    let mut sw = Switch::new(program, checked).unwrap();
    let mut rng = Rng(0x5eed_0053);
    // (prefix, length, next hop's last bytes): the same next hop per route in a set.
    let mut a: Vec<(u32, u32, u16)> = vec![(0, 0, 1)];
    while a.len() < 400 {
        let len = 8 + (rng.next() % 25) as u32;
        let value = (rng.next() as u32) & !(u32::MAX.checked_shr(len).unwrap_or(0));
        if !a.iter().any(|r| (r.0, r.1) == (value, len)) {
            a.push((value, len, a.len() as u16 + 2));
        }
    }
    let mut b: Vec<(u32, u32, u16)> = Vec::new();
    for (i, &(value, len, hop)) in a.iter().enumerate() {
        match (i > 0).then(|| rng.next() % 6) {
            Some(0) => {}                                // gone
            Some(1) => b.push((value, len, hop + 1000)), // a new next hop
            // A neighbour instead (where no route of either set is).
            Some(2) if !a.iter().any(|r| (r.0, r.1) == (value ^ 1 << (32 - len), len)) => {
                b.push((value ^ 1 << (32 - len), len, hop + 2000))
            }
            _ => b.push((value, len, hop)),
        }
    }
    let key = |r: &(u32, u32, u16)| vec![Match::Lpm { value: r.0 as u128, prefix: r.1 }];
    let next_hop = |hop: u16| [2, 0, 0, 0, (hop >> 8) as u8, hop as u8];
    let install = |sw: &mut Switch, from: &[(u32, u32, u16)], to: &[(u32, u32, u16)]| {
        for r in from.iter().filter(|r| !to.iter().any(|t| (t.0, t.1) == (r.0, r.1))) {
            sw.delete("RouterIngress.ipv4_lpm", &key(r), 0).unwrap();
        }
        for r in to {
            sw.insert("RouterIngress.ipv4_lpm", key(r), "ipv4_forward", vec![mac(next_hop(r.2)), 2], 0).unwrap();
        }
    };
    let answer = |set: &[(u32, u32, u16)], addr: u32| {
        let covers = |r: &&(u32, u32, u16)| r.1 == 0 || (addr ^ r.0) >> (32 - r.1) == 0;
        set.iter().filter(covers).max_by_key(|r| r.1).map(|r| next_hop(r.2))
    };
    let mut addrs: Vec<u32> = a
        .iter()
        .chain(&b)
        .flat_map(|&(value, len, _)| {
            let end = value | u32::MAX.checked_shr(len).unwrap_or(0);
            [value, value.wrapping_sub(1), end, end.wrapping_add(1)]
        })
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    let frame =
        |addr: u32| udp4([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 0xfe], [10, 9, 0, 1], addr.to_be_bytes(), 1, 2, 60);
    // Each address with the next hops it may leave to.
    let probes: Vec<(Vec<u8>, [u8; 6], [u8; 6])> =
        addrs.iter().map(|&x| (frame(x), answer(&a, x).unwrap(), answer(&b, x).unwrap())).collect();
    install(&mut sw, &[], &a);
    let out = DownVeth::new("g");
    let mut k = load("router-gap", g, &sw, &out);
    let mut tally = Tally::default();
    for (f, _, _) in &probes {
        compare(k.object(), &mut sw, f, 1, &mut tally);
    }
    set_port(k.object(), INGRESS_IFINDEX, 1, 0).unwrap();
    let prog = k.object().program("p4_xdp").unwrap().try_clone().unwrap();
    let (stop, runs) = (AtomicBool::new(false), AtomicUsize::new(0));
    let wrong = std::sync::Mutex::new(Vec::new());
    let flips = 60;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Off the writer's CPU, so that a run can land between two of its stores.
            // SAFETY: a zeroed cpu_set_t with one bit set, for this thread.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(1, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            while !stop.load(Ordering::Relaxed) {
                for (f, old, new) in &probes {
                    let ctx = ebpf::xdp_md(f.len() as u32, INGRESS_IFINDEX);
                    let (verdict, data) = prog.run_once(f, &ctx).unwrap();
                    let hop: Option<[u8; 6]> = (verdict == 4).then(|| data[..6].try_into().unwrap());
                    if hop != Some(*old) && hop != Some(*new) {
                        wrong.lock().unwrap().push(format!("{:02x?}: {verdict} {hop:02x?}", &f[30..34]));
                    }
                    runs.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        for flip in 0..flips {
            let (from, to) = if flip % 2 == 0 { (&a, &b) } else { (&b, &a) };
            install(&mut sw, from, to);
            k.write(&sw).unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let wrong = wrong.into_inner().unwrap();
    let runs = runs.into_inner();
    println!("{} addresses, {runs} frames during {flips} changes, {} wrong", probes.len(), wrong.len());
    assert!(
        wrong.is_empty(),
        "{} of {runs} frames found neither answer: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
    assert!(runs >= probes.len(), "the frames ran while the routes changed ({runs})");
    for (f, _, _) in &probes {
        compare(k.object(), &mut sw, f, 1, &mut tally);
    }
    assert!(tally.forwarded >= 4 * probes.len(), "{tally:?}");
}

/// A parser's value set (P4-16 12.11) decides its select in the kernel as in software: its
/// members written to the kernel's map as the control plane sets them, replaced, and emptied.
#[test]
fn a_value_set_decides_the_parsers_select_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        struct headers { eth_t eth; }\nstruct meta_t { bit<8> hit; }\n\
        struct key_t { bit<16> kind; bit<8> low; }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          value_set<key_t>(4) kinds;\n\
          state start { packet.extract(hdr.eth); transition select(hdr.eth.kind, hdr.eth.src[7:0]) { kinds: hit; (0x0bad &&& 0xffff, _): reject; default: accept; } }\n\
          state hit { meta.hit = 1; transition accept; } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          apply { if (meta.hit == 1) { sm.egress_port = 2; hdr.eth.dst = 1; } else { sm.egress_port = 3; } } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.eth); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let (g, mut sw) = both_targets("value_set.p4", text);
    let out = DownVeth::new("v");
    let mut k = load("value_set", g, &sw, &out);
    let kinds = [0x0800u16, 0x88b5, 0x88b6, 0x0bad, 0x86dd];
    // The frames of a run, the frames the software target finds in the set (sent to port 2).
    let run = |k: &P4Kernel, sw: &mut Switch| {
        let (mut tally, mut in_set) = (Tally::default(), 0);
        for kind in kinds {
            for low in (0..=255u8).step_by(5) {
                let mut f = udp4([2, 0, 0, 0, 0, low], [2, 0, 0, 0, 0, 1], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
                f[12..14].copy_from_slice(&kind.to_be_bytes());
                compare(k.object(), sw, &f, 1, &mut tally);
                in_set += sw.process(&f, 1, 0).is_ok_and(|o| o[0].port == 2) as usize;
            }
        }
        (tally, in_set)
    };
    let (empty, in_set) = run(&k, &mut sw);
    assert_eq!((empty.forwarded, empty.parser, in_set), (2 * 4 * 52, 2 * 52, 0), "an empty set matches nothing");
    sw.set_value_set(
        "P.kinds",
        vec![
            vec![Match::Exact(0x88b5), Match::Any],
            vec![Match::Exact(0x88b6), Match::Ternary { value: 0x10, mask: 0xf0 }],
            vec![Match::Range { low: 0x0800, high: 0x0801 }, Match::Lpm { value: 0x80, prefix: 1 }],
        ],
    )
    .unwrap();
    k.write(&sw).unwrap();
    // 0x88b5: all 52; 0x88b6 from 0x10 to 0x1f: 3; 0x0800 from 0x80: 26.
    let (filled, in_set) = run(&k, &mut sw);
    assert_eq!((filled.parser, in_set), (2 * 52, 52 + 3 + 26), "{filled:?}");
    sw.set_value_set("P.kinds", vec![vec![Match::Exact(0x0bad), Match::Exact(5)]]).unwrap();
    k.write(&sw).unwrap();
    let (replaced, in_set) = run(&k, &mut sw);
    assert_eq!((replaced.parser, in_set), (2 * 51, 1), "0x0bad from ..05 takes the set's case: {replaced:?}");
    sw.set_value_set("P.kinds", vec![]).unwrap();
    k.write(&sw).unwrap();
    assert_eq!(run(&k, &mut sw).0.parser, 2 * 52, "emptied");
}

/// `exit` in an action ends the whole control, in the kernel as in software: under `switch
/// (t.apply().action_run)` the kernel ran the action's case afterwards, and under `if
/// (t.apply().hit)` its branch.
#[test]
fn exit_in_an_action_ends_the_control_in_the_kernel_too() {
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "action stop(PortId_t port) { sm.egress_port = port; exit; }\n\
         action go() { sm.egress_port = 1; }\n\
         table first { key = { hdr.eth.dst : exact; } actions = { stop; go; } default_action = go(); }\n\
         table second { key = { hdr.eth.src : exact; } actions = { stop; NoAction; } default_action = NoAction(); }\n\
         apply {\n\
         switch (first.apply().action_run) { stop: { sm.egress_port = 4; } go: { sm.egress_port = 2; } }\n\
         if (second.apply().hit) { sm.egress_port = 4; }\n\
         }",
    );
    let (g, mut sw) = both_targets("exit.p4", &text);
    let hosts: [[u8; 6]; 3] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 3]];
    sw.insert("I.first", vec![Match::Exact(mac(hosts[1]))], "stop", vec![3], 0).unwrap();
    sw.insert("I.second", vec![Match::Exact(mac(hosts[2]))], "stop", vec![3], 0).unwrap();
    let out = DownVeth::new("x");
    let k = load("exit", g, &sw, &out);
    let mut tally = Tally::default();
    for dst in hosts {
        for src in hosts {
            let f = udp4(src, dst, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
            compare(k.object(), &mut sw, &f, 1, &mut tally);
            // Where either table stopped the control, port 3 is the action's, never a case's.
            let to = sw.process(&f, 1, 0).unwrap()[0].port;
            assert_eq!(to == 3, dst == hosts[1] || src == hosts[2], "{dst:?} {src:?}: port {to}");
        }
    }
    assert_eq!(tally.forwarded, 18, "{tally:?}");
}

/// A number without a width takes the width of what it meets: `-1` compared with a bit<16> is
/// 0xffff in P4 (and the software target), where the kernel compared it as C's 64-bit -1.
#[test]
fn a_negative_number_meets_a_bit16_at_sixteen_bits_in_the_kernel() {
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "apply {\n\
         sm.egress_port = 2;\n\
         if (hdr.eth.kind == -1) { sm.egress_port = 3; }\n\
         if (-2 == hdr.eth.kind) { sm.egress_port = 4; }\n\
         }",
    );
    let (g, mut sw) = both_targets("negative.p4", &text);
    let out = DownVeth::new("m");
    let k = load("negative", g, &sw, &out);
    let mut tally = Tally::default();
    for (kind, port) in [(0xffffu16, 3u32), (0xfffe, 4), (0x0800, 2)] {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&kind.to_be_bytes());
        f.resize(60, 0);
        assert_eq!(sw.process(&f, 1, 0).unwrap()[0].port, port, "the software target, kind {kind:#x}");
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    assert_eq!(tally.forwarded, 6, "{tally:?}");
}

/// A control's variable given a value where it is declared holds it each time the control
/// runs: the kernel left it 0 (p4c's issue2614: `bit<8> tmp1 = 1; ... (bit<9>) tmp1 << 8`).
#[test]
fn a_variable_initialised_where_declared_holds_its_value_in_the_kernel() {
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "bit<8> start = 8w1;\n\
         bit<16> kind_seen = 0xabcd;\n\
         apply {\n\
         hdr.eth.kind = ((bit<9>) start << 8w8)[8:1] ++ 8w0;\n\
         if (kind_seen == 0xabcd) { sm.egress_port = 2; } else { sm.egress_port = 3; }\n\
         kind_seen = 0;\n\
         }",
    );
    let (g, mut sw) = both_targets("initialised.p4", &text);
    let out = DownVeth::new("i");
    let k = load("initialised", g, &sw, &out);
    let mut tally = Tally::default();
    for _ in 0..2 {
        let f = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        let soft = sw.process(&f, 1, 0).unwrap();
        assert_eq!((soft[0].port, &soft[0].frame[12..14]), (2, &[0x80, 0][..]), "the software target");
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    assert_eq!(tally.forwarded, 4, "{tally:?}");
}

/// An action called with out and inout arguments writes them back when it ends, also by exit,
/// and a slice argument is written back as a slice (the kernel refused such actions before).
#[test]
fn an_action_copies_out_its_inout_and_out_arguments_in_the_kernel() {
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "action bump(inout bit<16> v, out bit<8> seen, inout bit<4> low) { v = v + 1; seen = 7; low = 0xf; exit; }\n\
         apply {\n\
         sm.egress_port = 2;\n\
         bump(hdr.eth.kind, meta.unused, hdr.eth.src[3:0]);\n\
         hdr.eth.kind = 0;\n\
         }",
    );
    let (g, mut sw) = both_targets("copy_out.p4", &text);
    let out = DownVeth::new("c");
    let k = load("copy_out", g, &sw, &out);
    let mut tally = Tally::default();
    let f = udp4([2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    let soft = sw.process(&f, 1, 0).unwrap();
    assert_eq!((soft[0].frame[11], &soft[0].frame[12..14]), (0x1f, &[0x08, 0x01][..]), "the software target");
    compare(k.object(), &mut sw, &f, 1, &mut tally);
    assert_eq!(tally.forwarded, 2, "{tally:?}");
}

/// A sub-parser applied in two states and a sub-control with a table of its own run in the
/// kernel as in software (the kernel refused any instance of the program's own blocks before):
/// inlined where applied, their parameters copied in and out.
#[test]
fn sub_parsers_and_sub_controls_run_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let text = "#include <core.p4>\n#include <edgeflow.p4>\n\
        header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
        header tag_t { bit<8> kind; bit<8> value; }\n\
        struct headers { eth_t eth; tag_t tag; }\nstruct meta_t { bit<8> seen; }\n\
        parser Tag(packet_in pkt, out tag_t tag, inout bit<8> seen) {\n\
          state start { pkt.extract(tag); seen = seen + 1; transition select(tag.kind) { 1: accept; default: reject; } } }\n\
        parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          Tag() tag;\n\
          state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { 0x88b5: one; 0x88b6: other; default: accept; } }\n\
          state one { tag.apply(packet, hdr.tag, meta.seen); transition accept; }\n\
          state other { meta.seen = 10; tag.apply(packet, hdr.tag, meta.seen); transition accept; } }\n\
        control Route(inout tag_t tag, out PortId_t port) {\n\
          action to(PortId_t p) { port = p; tag.value = tag.value + 1; }\n\
          table by_value { key = { tag.value : exact; } actions = { to; NoAction; } default_action = NoAction(); }\n\
          apply { port = 4; by_value.apply(); } }\n\
        control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
          Route() route;\n\
          apply { if (hdr.tag.isValid()) { route.apply(hdr.tag, sm.egress_port); hdr.eth.src[7:0] = meta.seen; }\n\
                  else { sm.egress_port = 3; } } }\n\
        control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
        control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
        EdgeflowSwitch(P(), I(), E(), D()) main;\n";
    let (g, mut sw) = both_targets("sub_blocks.p4", text);
    sw.insert("Route.by_value", vec![Match::Exact(5)], "to", vec![2], 0).unwrap();
    let out = DownVeth::new("s");
    let k = load("sub_blocks", g, &sw, &out);
    let mut tally = Tally::default();
    let tagged = |kind: u16, tag: [u8; 2]| {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0];
        f.extend_from_slice(&kind.to_be_bytes());
        f.extend_from_slice(&tag);
        f.resize(60, 0);
        f
    };
    // (frame, the port the software target sends it to, the tag's value and src's last byte)
    for (f, port, value_and_seen) in [
        (tagged(0x88b5, [1, 5]), Some(2), (6, 1)),
        (tagged(0x88b6, [1, 7]), Some(4), (7, 11)),
        (tagged(0x88b5, [2, 5]), None, (0, 0)),
    ] {
        match (sw.process(&f, 1, 0), port) {
            (Ok(o), Some(p)) => {
                assert_eq!(o[0].port, p, "the software target");
                assert_eq!((o[0].frame[15], o[0].frame[11]), value_and_seen, "the software target");
            }
            (Err(Dropped::Parser(_)), None) => {}
            (other, _) => panic!("the software target: {other:?}"),
        }
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    let plain = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    compare(k.object(), &mut sw, &plain, 1, &mut tally);
    assert_eq!(tally.forwarded, 6, "{tally:?}");
}

/// A scanned table declared larger than the kernel scans (here with no `size`: 1 024) fits:
/// while the control plane holds more entries than the kernel's 256 the write fails and every
/// frame goes up; back under, the kernel decides again (the back end refused such tables).
#[test]
fn a_scanned_table_past_the_kernels_256_entries_sends_frames_up_until_it_fits_again() {
    use p4::backends::ebpf::verdict::{FORWARD, MISFIT, UP};
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "action to(PortId_t port) { sm.egress_port = port; }\n\
         table by_kind { key = { hdr.eth.kind : ternary; } actions = { to; NoAction; } default_action = to(2); }\n\
         apply { by_kind.apply(); }",
    );
    let (g, mut sw) = both_targets("scanned.p4", &text);
    let out = DownVeth::new("t");
    let mut k = load("scanned", g, &sw, &out);
    let frame = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    let decided = |k: &P4Kernel| run_kernel(k.object(), &frame, 1, Hook::Tc).unwrap();
    assert_eq!(decided(&k).kind, FORWARD);
    for kind in 0..300u128 {
        sw.insert("I.by_kind", vec![Match::Ternary { value: 0x9000 + kind, mask: 0xffff }], "to", vec![3], 1).unwrap();
    }
    assert!(k.write(&sw).is_err(), "300 entries in a table the kernel holds 256 of");
    k.apply_stale().unwrap();
    assert_eq!((decided(&k).kind, decided(&k).reason), (UP, MISFIT), "every frame goes up");
    for kind in 10..300u128 {
        sw.delete("I.by_kind", &[Match::Ternary { value: 0x9000 + kind, mask: 0xffff }], 1).unwrap();
    }
    k.write(&sw).unwrap();
    k.apply_stale().unwrap();
    let mut tally = Tally::default();
    compare(k.object(), &mut sw, &frame, 1, &mut tally);
    assert_eq!(tally.forwarded, 2, "decided in the kernel again: {tally:?}");
}

/// A ternary table's `const entries` are decided in the kernel in the program's order
/// (the first entry that matches wins), as in software (the back end refused them before).
#[test]
fn const_entries_of_a_scanned_table_decide_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let text = ethernet_only(
        "action to(PortId_t port) { sm.egress_port = port; }\n\
         table by_kind {\n\
           key = { hdr.eth.kind : ternary; hdr.eth.src[7:0] : ternary; }\n\
           actions = { to; NoAction; }\n\
           const entries = {\n\
             (0x0800 &&& 0xff00, 0x01 &&& 0x0f) : to(2);\n\
             (0x0008 &&& 0x000f, _) : to(3);\n\
             (_, 0x10 &&& 0xf0) : to(4);\n\
           }\n\
           default_action = NoAction();\n\
         }\n\
         apply { sm.egress_port = 1; by_kind.apply(); }",
    );
    let (g, mut sw) = both_targets("const_entries.p4", &text);
    let out = DownVeth::new("e");
    let k = load("const_entries", g, &sw, &out);
    let mut tally = Tally::default();
    let mut ports = std::collections::BTreeSet::new();
    let mut rng = Rng(7);
    for _ in 0..300 {
        let kind = rng.pick(&[0x0800u16, 0x0801, 0x0808, 0x1808, 0x0000, 0x86dd]);
        let low = (rng.next() % 40) as u8;
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, low];
        f.extend_from_slice(&kind.to_be_bytes());
        f.resize(60, 0);
        ports.insert(sw.process(&f, 1, 0).unwrap()[0].port);
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    assert_eq!(ports.into_iter().collect::<Vec<_>>(), vec![1, 2, 3, 4], "every entry and the default taken");
    assert_eq!(tally.forwarded, 600, "{tally:?}");
}

/// v1model's `verify_checksum` and `update_checksum` with csum16 over an IPv4 header, in the
/// kernel as in software: a bad checksum reaches ingress as `checksum_error`, a routed frame
/// leaves with its TTL one less and its checksum right (the kernel refused both before).
#[test]
fn v1model_checksums_are_verified_and_updated_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let fields = "{ hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, \
                    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, \
                    hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst }";
    let text = format!(
        "#include <core.p4>\n#include <v1model.p4>\n\
         header eth_t {{ bit<48> dst; bit<48> src; bit<16> kind; }}\n\
         header ipv4_t {{ bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len; bit<16> identification;\n\
           bit<3> flags; bit<13> frag_offset; bit<8> ttl; bit<8> protocol; bit<16> checksum; bit<32> src; bit<32> dst; }}\n\
         struct headers {{ eth_t eth; ipv4_t ipv4; }}\nstruct meta_t {{ }}\n\
         parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n\
           state start {{ packet.extract(hdr.eth); transition select(hdr.eth.kind) {{ 0x0800: ip; default: accept; }} }}\n\
           state ip {{ packet.extract(hdr.ipv4); transition accept; }} }}\n\
         control V(inout headers hdr, inout meta_t meta) {{\n\
           apply {{ verify_checksum(hdr.ipv4.isValid(), {fields}, hdr.ipv4.checksum, HashAlgorithm.csum16); }} }}\n\
         control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{\n\
           apply {{ if (sm.checksum_error == 1) {{ sm.egress_spec = 3; }}\n\
                   else if (hdr.ipv4.isValid()) {{ hdr.ipv4.ttl = hdr.ipv4.ttl - 1; sm.egress_spec = 2; }}\n\
                   else {{ sm.egress_spec = 4; }} }} }}\n\
         control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {{ apply {{ }} }}\n\
         control C(inout headers hdr, inout meta_t meta) {{\n\
           apply {{ update_checksum(hdr.ipv4.isValid(), {fields}, hdr.ipv4.checksum, HashAlgorithm.csum16); }} }}\n\
         control D(packet_out packet, in headers hdr) {{ apply {{ packet.emit(hdr.eth); packet.emit(hdr.ipv4); }} }}\n\
         V1Switch(P(), V(), I(), E(), C(), D()) main;\n"
    );
    let (g, mut sw) = both_targets("checksums.p4", &text);
    let out = DownVeth::new("k");
    let k = load("checksums", g, &sw, &out);
    let ip_sum = |h: &[u8]| {
        let mut s: u32 = h.chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    };
    let good = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    assert_eq!(ip_sum(&good[14..34]), 0xffff, "the crafted frame's checksum holds");
    let routed = sw.process(&good, 1, 0).unwrap();
    assert_eq!((routed[0].port, routed[0].frame[22]), (2, good[22] - 1), "routed, TTL one less");
    assert_eq!(ip_sum(&routed[0].frame[14..34]), 0xffff, "its checksum updated");
    let mut bad = good.clone();
    bad[24] ^= 0x40;
    assert_eq!(sw.process(&bad, 1, 0).unwrap()[0].port, 3, "a bad checksum reaches ingress");
    let mut tally = Tally::default();
    let mut rng = Rng(11);
    for i in 0..400 {
        let mut f = good.clone();
        if i % 2 == 1 {
            let at = 14 + (rng.next() % 20) as usize;
            f[at] = rng.next() as u8;
        }
        if i % 7 == 0 {
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
        }
        compare(k.object(), &mut sw, &f, 1, &mut tally);
    }
    assert!(tally.forwarded > 600, "{tally:?}");
}

/// A program whose parser loops, filling a stack of three tags through `next` until a tag's
/// `last` bit (or the stack is full: `StackOutOfBounds`), and whose ingress reads and writes the
/// stack's headers at indices known only when a frame runs (the kernel back end refused stacks);
/// an action's copy-out goes to the element its index named at the call, though the action
/// moves the index (P4-16 6.8), on both targets.
const TAG_STACK: &str = "#include <core.p4>\n#include <edgeflow.p4>\n\
    header eth_t { bit<48> dst; bit<48> src; bit<16> kind; }\n\
    header tag_t { bit<7> value; bit<1> last; }\n\
    struct headers { eth_t eth; tag_t[3] tags; }\nstruct meta_t { bit<8> unused; }\n\
    parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
      state start { packet.extract(hdr.eth); transition select(hdr.eth.kind) { 0x88b5: tag; default: accept; } }\n\
      state tag { packet.extract(hdr.tags.next); transition select(hdr.tags.last.last) { 0: tag; default: accept; } } }\n\
    control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n\
      action bump(inout bit<7> v) { v = 0x33; hdr.eth.dst[1:0] = hdr.eth.dst[1:0] + 1; }\n\
      apply {\n\
        sm.egress_port = (PortId_t)hdr.tags.nextIndex + 1;\n\
        hdr.eth.src[7:0] = (bit<8>)hdr.tags[hdr.eth.dst[1:0]].value;\n\
        hdr.eth.src[15:8] = hdr.tags[hdr.eth.dst[1:0]].isValid() ? 8w1 : 8w0;\n\
        hdr.tags[hdr.eth.dst[9:8]].value = 0x55;\n\
        hdr.tags[hdr.eth.dst[17:16]].value |= 0x10;\n\
        bump(hdr.tags[hdr.eth.dst[1:0]].value);\n\
      } }\n\
    control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }\n\
    control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr); } }\n\
    EdgeflowSwitch(P(), I(), E(), D()) main;\n";

/// A frame of `tags` (value, last bit) after an Ethernet header whose destination's last three
/// bytes pick the indices ingress reads and writes.
fn tagged_frame(tags: &[(u8, u8)], indices: [u8; 3]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, indices[2], indices[1], indices[0], 2, 0, 0, 0, 0, 1, 0x88, 0xb5];
    f.extend(tags.iter().map(|(value, last)| value << 1 | last));
    f.resize(60, 0xfe);
    f
}

#[test]
fn a_parser_loop_fills_a_header_stack_and_run_time_indices_reach_it_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    // `bump(hdr.tags[i].value)` with an `i` the action changes writes back to the element named
    // at the call (P4-16, 6.8): the kernel back end prints the IR the compiled software target
    // runs, so the two agree on it.
    let (g, mut sw) = both_targets("tag_stack.p4", TAG_STACK);
    let out = DownVeth::new("k");
    let k = load("tag_stack", g, &sw, &out);
    // The software target first: two tags go to port 3 (nextIndex 2), the value read at index 1
    // is the second tag's, index 0 was written 0x55, and index 1 (or-ed with 0x10) is where
    // `bump` copies its 0x33 out, though it moved the index to 2.
    let two = tagged_frame(&[(3, 0), (9, 1)], [1, 0, 1]);
    let o = sw.process(&two, 1, 0).unwrap();
    assert_eq!((o[0].port, o[0].frame[11], o[0].frame[10]), (3, 9, 1), "the software target");
    assert_eq!((o[0].frame[14], o[0].frame[15]), (0x55 << 1, 0x33 << 1 | 1), "the software target");
    // A fourth tag with its last bit clear overflows the stack.
    let four = tagged_frame(&[(1, 0), (2, 0), (3, 0), (4, 1)], [0, 0, 0]);
    assert!(matches!(sw.process(&four, 1, 0), Err(Dropped::Parser(e)) if e == "StackOutOfBounds"));
    let mut tally = Tally::default();
    let mut rng = Rng(0x5eed_57ac);
    for n in 0..400 {
        // One to four tags, the last bit on the last (or none: the frame's fill ends the loop,
        // 0xfe has its last bit clear, so a full stack overflows), indices 0 to 3 (3 is past the end).
        let count = 1 + rng.next() % 4;
        let mut tags: Vec<(u8, u8)> = (0..count).map(|_| ((rng.next() % 128) as u8, 0)).collect();
        if n % 5 != 0 {
            tags.last_mut().unwrap().1 = 1;
        }
        let indices = [rng.pick(&[0, 1, 2, 3]), rng.pick(&[0, 1, 2, 3]), rng.pick(&[0, 1, 2, 3])];
        compare(k.object(), &mut sw, &tagged_frame(&tags, indices), 1, &mut tally);
    }
    let plain = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
    compare(k.object(), &mut sw, &plain, 1, &mut tally);
    assert!(tally.forwarded > 400 && tally.parser > 200, "{tally:?}");
}

/// `push_front`, `==` of whole stacks and a stack copied into a variable, in a control.
#[test]
fn stack_copies_comparisons_and_push_front_decide_in_the_kernel_as_in_software() {
    if !may_load_and_pin() {
        return;
    }
    let text = TAG_STACK.replace(
        "apply {\nsm.egress_port",
        "apply {\n\
           tag_t[3] before = hdr.tags;\n\
           if (hdr.tags.nextIndex < 3) { hdr.tags.push_front(1); }\n\
           hdr.eth.dst[47:40] = before == hdr.tags ? 8w1 : 8w2;\n\
           hdr.eth.dst[39:32] = hdr.tags[0].isValid() ? 8w1 : 8w2;\n\
           hdr.eth.dst[31:24] = (bit<8>)hdr.tags.nextIndex;\n\
           sm.egress_port",
    );
    let (g, mut sw) = both_targets("tag_push.p4", &text);
    let out = DownVeth::new("q");
    let k = load("tag_push", g, &sw, &out);
    // One tag pushed one place on: the copy differs, index 0 is invalid, nextIndex is 2, and
    // the frame leaves unchanged in its tags (the invalid header is not emitted).
    let one = tagged_frame(&[(3, 1)], [3, 3, 3]);
    let o = sw.process(&one, 1, 0).unwrap();
    assert_eq!(&o[0].frame[..3], &[2, 2, 2], "the software target");
    let mut tally = Tally::default();
    for tags in [&[(3, 1)][..], &[(1, 0), (5, 1)], &[(1, 0), (2, 0), (7, 1)]] {
        for indices in [[0, 1, 2], [3, 3, 3], [2, 0, 1]] {
            compare(k.object(), &mut sw, &tagged_frame(tags, indices), 1, &mut tally);
        }
    }
    assert_eq!(tally.forwarded, 18, "{tally:?}");
}

/// The kernel finds a frame's port, its output's interface and both ports' counters in arrays
/// for the ports most switches number (below 512, an interface that owns its slot), by hashing
/// for the others: a port of 700 (its interface and counts hashed), one past 2^20 (no slot), and
/// an interface whose slot another interface holds are each the port they were registered as.
#[test]
fn every_port_is_found_and_counted_whether_an_array_or_a_hash_holds_it() {
    if !may_load_and_pin() {
        return;
    }
    let (program, checked) = example("l2_switch.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    const NEAR: u32 = 3;
    const HASHED: u32 = 700;
    const PAST_SLOTS: u32 = (1 << 20) + 5;
    let hosts: [([u8; 6], u32); 3] =
        [([2, 0, 0, 0, 0, 1], NEAR), ([2, 0, 0, 0, 0, 2], HASHED), ([2, 0, 0, 0, 0, 3], PAST_SLOTS)];
    for (host, port) in hosts {
        sw.insert("L2Ingress.dmac", vec![Match::Exact(0), Match::Exact(mac(host))], "forward", vec![port as u128], 0)
            .unwrap();
    }
    let out = DownVeth::new("p");
    let obj = Object::load(&compile("ports", &g.c)).unwrap_or_else(|e| panic!("loading: {e}"));
    let mut k = P4Kernel::with_object(obj, g);
    k.write(&sw).unwrap();
    let egress: BTreeMap<u32, u32> = hosts.iter().map(|(_, p)| (*p, out.ifindex())).collect();
    k.set_egress(&sw, &egress, true).unwrap();
    // The interface that holds the test's slot (its index ≡ the test's modulo the slots).
    let other = INGRESS_IFINDEX + p4::backends::ebpf::PORT_SLOTS;
    let mut expected: BTreeMap<u32, [u64; 4]> = BTreeMap::new();
    let mut send = |k: &mut P4Kernel, from: u32, to: usize| {
        let f = udp4([2, 0, 0, 0, 0, 9], hosts[to].0, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        let v = run_on_its_port(k.object(), &f, Hook::Xdp).unwrap();
        assert_eq!((v.kind, v.ports.clone()), (1, vec![hosts[to].1]), "from port {from} to {:?}", hosts[to]);
        let len = f.len() as u64;
        let rx = expected.entry(from).or_default();
        rx[0] += 1;
        rx[1] += len;
        let tx = expected.entry(hosts[to].1).or_default();
        tx[2] += 1;
        tx[3] += len;
    };
    // Every port on an interface of its own first, as the switch registers them (the kernel
    // counts a port's frames from then).
    for (i, (_, port)) in hosts.iter().enumerate() {
        k.register_port(*port, 100 + i as u32, 0).unwrap();
    }
    // Its own slot, port below 512.
    k.register_port(NEAR, INGRESS_IFINDEX, 0).unwrap();
    send(&mut k, NEAR, 1);
    // The slot taken by another interface first: this one's port comes from the hash.
    k.forget_interface(INGRESS_IFINDEX);
    k.register_port(9, other, 0).unwrap();
    k.register_port(HASHED, INGRESS_IFINDEX, 0).unwrap();
    send(&mut k, HASHED, 2);
    send(&mut k, HASHED, 0);
    // A port past the slots' reach, on an interface that held its slot: the slot is emptied.
    k.forget_interface(other);
    k.register_port(NEAR, INGRESS_IFINDEX, 0).unwrap();
    k.register_port(PAST_SLOTS, INGRESS_IFINDEX, 0).unwrap();
    send(&mut k, PAST_SLOTS, 1);
    let (_, counted) = k.harvest(&sw);
    assert_eq!(counted.into_iter().collect::<BTreeMap<_, _>>(), expected, "each port's frames in and out");
}

/// What a frame costs the kernel back end's v1model programs, by the kernel's own timing
/// (BPF_PROG_TEST_RUN of the XDP program with repeat, the fastest of seven batches), beside an
/// empty program: not a test of behaviour, a measurement for docs/p4.md (issue 53, "on tc and xdp
/// ≥ 0.9 of the OpenFlow fast path"; the fast path's own hit is `hit_cost_by_stage`).
/// `cargo test --release -p datapath --test p4_kernel cost_of_a_frame -- --ignored --nocapture`.
#[test]
#[ignore]
fn cost_of_a_frame() {
    if !may_load_and_pin() {
        return;
    }
    let time = |obj: &Object, frame: &[u8], want: u32| {
        set_port(obj, INGRESS_IFINDEX, 1, 0).unwrap();
        let prog = obj.program("p4_xdp").unwrap();
        // A test run's repeats share one copy of the frame, and the router lowers its TTL each
        // time: 250 repeats from TTL 255 keep every one routed.
        (0..400)
            .map(|_| {
                let (verdict, ns) = prog.test_run(frame, 250, INGRESS_IFINDEX, false).unwrap();
                assert_eq!(verdict, want, "the program's verdict");
                ns
            })
            .min()
            .unwrap()
    };
    const XDP_PASS: u32 = 2;
    const XDP_REDIRECT: u32 = 4;
    let empty = [0xb7, 0, 0, 0, XDP_PASS as u8, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0];
    let empty = ebpf::Program::from_instructions("empty", ebpf::prog_type::XDP, &empty).unwrap();
    let host = [2, 0, 0, 0, 0, 2];
    let mut frame = udp4([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 0xfe], [10, 0, 1, 1], [10, 0, 2, 2], 1000, 2000, 64);
    frame[22] = 255;
    packet::csum::set_ipv4_checksum(&mut frame[14..34]);
    let floor = (0..7).map(|_| empty.test_run(&frame, 200_000, INGRESS_IFINDEX, false).unwrap().1).min().unwrap();
    println!("{floor:>5} ns  an empty program");
    let out = DownVeth::new("c");
    let (program, checked) = example("v1model_router.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    let route = Match::Lpm { value: 0x0a00_0200, prefix: 24 };
    sw.insert("RouterIngress.ipv4_lpm", vec![route], "ipv4_forward", vec![mac(host), 2], 0).unwrap();
    let k = load("router-cost", g.clone(), &sw, &out);
    println!(
        "{:>5} ns  v1model router: a route, MACs, TTL and checksum rewritten",
        time(k.object(), &frame, XDP_REDIRECT)
    );
    // As the p4 experiment's router (testbed/experiments/p4.py, `routes`): 1 000 routes of /8
    // to /32 outside 10/8 beside the frame's /24.
    let mut seed = 53u64;
    let mut next = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as u32
    };
    let mut routes = std::collections::BTreeSet::new();
    while routes.len() < 999 {
        let prefix = 8 + next() % 25;
        let first = 11 + next() % 213;
        let value = ((first << 24 | next() & 0xff_ffff) as u64 & !((1u64 << (32 - prefix)) - 1)) as u128;
        if first != 127 {
            routes.insert((value, prefix));
        }
    }
    for (value, prefix) in routes {
        sw.insert("RouterIngress.ipv4_lpm", vec![Match::Lpm { value, prefix }], "ipv4_forward", vec![mac(host), 1], 0)
            .unwrap();
    }
    let k = load("router-cost-1000", g, &sw, &out);
    println!(
        "{:>5} ns  v1model router, 1 000 routes /8-/32 (as the p4 experiment's)",
        time(k.object(), &frame, XDP_REDIRECT)
    );
    let (program, checked) = example("v1model_l2_switch.p4");
    let g = generate(&program, &checked).unwrap_or_else(|e| panic!("{e}"));
    let mut sw = Switch::new(program, checked).unwrap();
    sw.insert("L2Ingress.dmac", vec![Match::Exact(0x0200_0000_00fe)], "forward", vec![2], 0).unwrap();
    let k = load("l2-cost", g, &sw, &out);
    println!("{:>5} ns  v1model L2 switch: an address, forwarded", time(k.object(), &frame, XDP_REDIRECT));
}
