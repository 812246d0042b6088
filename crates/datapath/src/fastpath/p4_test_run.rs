//! A P4 program's kernel back end run one frame at a time, by BPF_PROG_TEST_RUN of its TC
//! program, with its maps filled as the switch fills them (`P4Kernel`): what `edgeflow p4 stf
//! --target kernel` runs p4c's test scripts on (issue 52, item 4), and what a test reads the
//! kernel's verdict of a frame with.
//!
//! No frame leaves the machine: every port "sends" on an interface index no interface has, so
//! a copy TC clones out (`bpf_clone_redirect`, which a test run really carries out) is refused by
//! the kernel, and the last copy's redirect is only the run's return value. What the program
//! decided is read back from `p4_verdict`, in the cell of the CPU the run ran on: the thread is
//! kept on the CPU it was on when the run was built.

use std::collections::BTreeMap;
use std::io;

use p4::backends::ebpf::verdict::{DROP, FORWARD, MISFIT};
use p4::backends::software::Switch;
use p4::stf::{Sent, Target};

use super::p4::P4Kernel;
use crate::ebpf::Object;

/// The interface a frame arrives on in a test run; `p4_ports` says which switch port it is.
const INGRESS_IFINDEX: u32 = 1;
/// The interface every switch port sends on: none has this index (see the top).
const NO_INTERFACE: u32 = 0x7fff_fff0;
/// The shortest frame BPF_PROG_TEST_RUN takes, on either hook.
const ETHERNET_HEADER: usize = 14;
/// Ports the kernel sends on: all the switch's port numbers `p4_ifindex` holds (256 entries).
const PORTS: u32 = 256;

/// What the kernel decided for one frame (`struct p4_verdict`), and the frame as it left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// `p4::backends::ebpf::verdict`'s DROP, FORWARD or UP, and the reason.
    pub kind: u32,
    pub reason: u32,
    pub queue: u32,
    /// The ports copies left by.
    pub ports: Vec<u32>,
    pub parser_error: u32,
    /// When the kernel stamped the frame (ns, CLOCK_MONOTONIC): a software target comparing
    /// itself runs the frame at the same instant.
    pub timestamp: u64,
    pub data: Vec<u8>,
}

/// The verdict of the frame of `frame_len` bytes a test run on `cpu` just ran, which left as
/// `data`: `p4_verdict`'s cell of that CPU.
pub fn read_verdict(obj: &Object, cpu: usize, data: Vec<u8>, frame_len: usize) -> io::Result<Verdict> {
    let cells = obj.map("p4_verdict")?.lookup_percpu(&0u32.to_ne_bytes())?;
    let cell = cells.get(cpu).ok_or_else(|| io::Error::other(format!("no p4_verdict cell for CPU {cpu}")))?;
    verdict(cell, data, frame_len)
}

/// `struct p4_verdict` from one CPU's cell: kind, reason, queue, n, ports[16], len,
/// parser_error, timestamp.
fn verdict(cell: &[u8], data: Vec<u8>, frame_len: usize) -> io::Result<Verdict> {
    let word = |i: usize| u32::from_ne_bytes(cell[4 * i..4 * i + 4].try_into().unwrap());
    if cell.len() < 96 || word(20) as usize != frame_len {
        return Err(io::Error::other("p4_verdict on this CPU is not this frame's (the run moved CPU?)"));
    }
    let n = (word(3) as usize).min(p4::backends::ebpf::GROUP_MAX);
    Ok(Verdict {
        kind: word(0),
        reason: word(1),
        queue: word(2),
        ports: (0..n).map(|i| word(4 + i)).collect(),
        parser_error: word(21),
        timestamp: u64::from_ne_bytes(cell[88..96].try_into().unwrap()),
        data,
    })
}

/// Keeps this thread on the CPU it runs on, and says which.
fn stay_on_this_cpu() -> io::Result<usize> {
    // SAFETY: sched_getcpu has no preconditions; the set is a zeroed cpu_set_t with one bit set,
    // for this thread.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(cpu as usize)
    }
}

/// A program loaded for test runs, its maps following a software target's control plane.
pub struct TestRun {
    kernel: P4Kernel,
    cpu: usize,
}

impl TestRun {
    /// Generated, compiled by clang and loaded (`P4Kernel::build`: its errors), its maps written
    /// from `switch`.
    pub fn build(switch: &Switch) -> io::Result<TestRun> {
        TestRun::with_kernel(P4Kernel::build(switch)?, switch)
    }

    /// An object already loaded from the program's generated C.
    pub fn with_kernel(kernel: P4Kernel, switch: &Switch) -> io::Result<TestRun> {
        let mut run = TestRun { kernel, cpu: stay_on_this_cpu()? };
        run.follow(switch)?;
        Ok(run)
    }

    pub fn object(&self) -> &Object {
        self.kernel.object()
    }

    /// Writes what the control plane changed since the last frame.
    fn follow(&mut self, switch: &Switch) -> io::Result<()> {
        if self.kernel.behind(switch) {
            self.kernel.write(switch)?;
        }
        let egress: BTreeMap<u32, u32> = (0..PORTS).map(|p| (p, NO_INTERFACE)).collect();
        self.kernel.set_egress(switch, &egress, false)
    }

    /// One frame, arrived on switch port `port`, through the TC program.
    pub fn run(&mut self, switch: &Switch, frame: &[u8], port: u32) -> io::Result<Verdict> {
        self.follow(switch)?;
        self.kernel.register_port(port, INGRESS_IFINDEX, 0)?;
        let ctx = crate::ebpf::sk_buff(INGRESS_IFINDEX, 0);
        let (_, data) = match self.kernel.object().program("p4_tc")?.run_once(frame, &ctx) {
            // A TC test run checks an IPv4 frame's header before the program sees it (a
            // datapath's TC hook does not): the same program's XDP entry takes it as it is.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && frame.len() >= ETHERNET_HEADER => {
                let ctx = crate::ebpf::xdp_md(frame.len() as u32, INGRESS_IFINDEX);
                self.kernel.object().program("p4_xdp")?.run_once(frame, &ctx)?
            }
            other => other?,
        };
        read_verdict(self.kernel.object(), self.cpu, data, frame.len())
    }

    /// What the kernel's frames counted and wrote since the last time, given to `switch` (its
    /// entries' hits, counters and registers), as the switch harvests them.
    pub fn harvest_into(&mut self, switch: &mut Switch) {
        let (counts, _) = self.kernel.harvest(switch);
        for (table, i, packets, bytes) in counts.entries {
            switch.credit_entry(&table, i, packets, bytes);
        }
        for (name, i, packets, bytes) in counts.counters {
            switch.credit_counter(&name, i, packets, bytes);
        }
        for (name, i, value) in counts.registers {
            switch.load_register(&name, i, value);
        }
    }
}

impl Target for TestRun {
    fn send(&mut self, switch: &mut Switch, frame: &[u8], port: u32) -> Sent {
        let mut padded = frame.to_vec();
        if frame.len() < ETHERNET_HEADER {
            padded.resize(ETHERNET_HEADER, 0);
            if !padding_changes_nothing(switch, frame, &padded, port) {
                return Sent::Unsupported(format!(
                    "a frame of {} bytes: the kernel's test runs take none shorter than an Ethernet header, \
                     and padded as a NIC pads it the program decides it otherwise",
                    frame.len()
                ));
            }
        }
        let pad = &padded[frame.len()..];
        // The copies of a padded frame leave without the pad, when the kernel left it as it was
        // (when not, the bytes show what the kernel did, and the script's check says so).
        let unpadded = |data: &[u8]| match data.strip_suffix(pad) {
            Some(data) => data.to_vec(),
            None => data.to_vec(),
        };
        match self.run(switch, &padded, port) {
            Ok(v) if v.kind == FORWARD => Sent::Out(v.ports.iter().map(|&p| (p, unpadded(&v.data))).collect()),
            Ok(v) if v.kind == DROP => Sent::Out(Vec::new()),
            Ok(v) if v.reason == MISFIT => Sent::Up("the frame does not fit the kernel's program (misfit)".into()),
            Ok(_) => Sent::Up("sent up".into()),
            // The harness failed, not the program: nothing was decided, by the kernel or by
            // userspace, so the run stops (a frame sent up is the datapath's own answer).
            Err(e) => Sent::Unsupported(format!("the frame: BPF_PROG_TEST_RUN failed ({e})")),
        }
    }

    fn settle(&mut self, switch: &mut Switch) -> Result<(), String> {
        self.harvest_into(switch);
        Ok(())
    }
}

/// No Ethernet link carries a frame shorter than its header, and neither of the kernel's test
/// runs takes one; p4c's scripts send such frames to programs that parse a few bytes. Such a
/// frame runs in the kernel padded with zeros to an Ethernet header, as a NIC pads a runt, when
/// the software target shows the pad changes nothing the program decides: the same copies to
/// the same ports, each with the pad after it untouched, or the same drop. Probed on copies of
/// the switch, so that its counters and registers see the frame once.
fn padding_changes_nothing(switch: &Switch, frame: &[u8], padded: &[u8], port: u32) -> bool {
    let pad = &padded[frame.len()..];
    match (switch.snapshot().process(frame, port, 0), switch.snapshot().process(padded, port, 0)) {
        (Ok(alone), Ok(with_pad)) => {
            alone.len() == with_pad.len()
                && alone
                    .iter()
                    .zip(&with_pad)
                    .all(|(a, b)| a.port == b.port && b.frame == [a.frame.as_slice(), pad].concat())
        }
        (Err(alone), Err(with_pad)) => alone == with_pad,
        _ => false,
    }
}
