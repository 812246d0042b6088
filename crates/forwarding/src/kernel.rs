//! What a mode hands the kernel fast path, and what it takes back: one way in for every mode
//! (issue 36, item 5).
//!
//! A mode answers [`Mode::kernel`](crate::Mode::kernel) with a [`ToKernel`]: the kernel programs
//! its decisions suit, each with the state that program reads. Megaflow entries, fetched decision
//! by decision (OpenFlow, learning, port map); label tables (LESS); virtual links with their
//! accounts (AFDX). What the kernel counted, and the state it hands back, come through one call,
//! [`Mode::take_back`](crate::Mode::take_back). A new kind of kernel program (a P4 program's)
//! is one more field of [`ToKernel`] and one more case of [`FromKernel`], not a family of methods
//! on the seam. The datapath (`datapath/src/switch/fastsync.rs`) mirrors what is offered and
//! hands back what the kernel counted.

use packet::FlowKey;

use crate::{Credits, DpAction, EntryId, Nanos};

/// What a mode hands the kernel fast path. Several kinds at once: a switch shared by modes hands
/// it one part's flows and another's labels.
#[derive(Default)]
pub struct ToKernel<'a> {
    /// Decisions as megaflow entries.
    pub flows: Option<&'a dyn FlowOffload>,
    /// Label-switching tables.
    pub labels: Option<&'a KernelLabels>,
    /// Virtual links to filter, police and forward. The kernel decides the links it takes, and
    /// the mode the frames of the others.
    pub links: Option<&'a dyn LinkOffload>,
    /// A P4 program with its tables, groups and externs' cells (`p4::backends::software::Switch::generation`
    /// moves on every change to them). The datapath compiles the program for the kernel where it
    /// fits (`p4::backends::ebpf`), and the kernel then decides every frame it can.
    #[cfg(feature = "p4")]
    pub p4: Option<&'a ::p4::backends::software::Switch>,
    /// `p4`'s kernel object compiled elsewhere, loaded in place of compiling the program here
    /// (checked to be its object first).
    #[cfg(feature = "p4")]
    pub p4_object: Option<&'a [u8]>,
}

/// A mode whose decisions the kernel replays as megaflow entries.
pub trait FlowOffload {
    /// The kernel-replayable form of a decision [`Mode::receive`](crate::Mode::receive) returned
    /// ([`Verdict::entry`](crate::Verdict::entry)), if it is still current.
    fn entry(&self, id: EntryId) -> Option<KernelEntry<'_>>;
}

/// A mode whose virtual links the kernel decides.
pub trait LinkOffload {
    fn table(&self) -> &KernelLinks;
    /// The credit of each of [`KernelLinks::accounts`] at `now` (bytes × ns, as the kernel counts
    /// it), so that an account handed to the kernel goes with what it had.
    fn credits(&self, now: Nanos) -> Vec<u64>;
}

/// What comes back from the kernel to the mode that handed it something.
#[derive(Clone, Copy, Debug)]
pub enum FromKernel<'a> {
    /// Hits on flow entry `id`, to be credited with the entry's `credits`.
    FlowHits { id: EntryId, credits: &'a Credits, packets: u64, bytes: u64, now: Nanos },
    /// What a kernel meter counted: (packets, bytes, dropped packets, dropped bytes).
    MeterCounts { meter: u32, counts: (u64, u64, u64, u64) },
    /// What the kernel counted on link `id` since the last harvest.
    LinkCounts { id: u16, counts: &'a LinkCounts },
    /// Accounts handed back from the kernel: (index in [`KernelLinks::accounts`], its credit at
    /// `now`).
    AccountCredits { credits: &'a [(usize, u64)], now: Nanos },
    /// What the kernel counted running the P4 program since the last harvest, and the
    /// register cells as its frames left them.
    P4Counts(&'a P4Counts),
}

/// What a kernel running a P4 program hands back ([`FromKernel::P4Counts`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct P4Counts {
    /// Hits on table entries: (`Block.table`, entry index in insertion order, packets, bytes).
    pub entries: Vec<(String, usize, u64, u64)>,
    /// Indirect counters' cells: (`Block.name`, index, packets, bytes).
    pub counters: Vec<(String, usize, u64, u64)>,
    /// Every register cell: (`Block.name`, index, value).
    pub registers: Vec<(String, usize, u128)>,
    /// Frames the kernel forwarded, and dropped as the program decided (by the software target's
    /// names for why: parser_rejected, program_dropped, no_egress_port).
    pub forwarded: u64,
    pub copies: u64,
    pub dropped: Vec<(&'static str, u64)>,
}

/// A decision the kernel fast path may replay: every frame whose flow key equals `key` under
/// `mask` gets `actions`, and its hits are credited back ([`FromKernel::FlowHits`]) with
/// `credits`.
pub struct KernelEntry<'a> {
    pub mask: &'a FlowKey,
    pub actions: &'a [DpAction],
    pub credits: &'a Credits,
    /// The meters the actions name, with their configuration.
    pub meters: Vec<(u32, &'a pipeline::meter::Meter)>,
}

/// A replacement label stack a label-switching mode computed for a kind of frame, which the kernel
/// fast path applies to later frames of that kind: out `port`, with `stack` after the Ethernet
/// header and `ethertype` (0: the IP version's, read from the frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelStack {
    pub port: u32,
    pub ethertype: u16,
    pub stack: Vec<u8>,
}

/// What the kernel fast path needs to switch labels itself (docs/less.md §5): the per-hop rule
/// needs no table, only these, which the mode keeps and the datapath mirrors whenever
/// `generation` moves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelLabels {
    pub generation: u64,
    pub max_labels: usize,
    /// The mode's ports: the kernel switches labels only on frames that come in on them, and sends
    /// labelled frames only out of them.
    pub ports: std::collections::BTreeSet<u32>,
    /// Ports where hosts are: plain IP from them may be labelled in the kernel.
    pub edge_ports: std::collections::BTreeSet<u32>,
    /// Ports the mode holds down although their carrier is up (a neighbour gone silent).
    pub down_ports: std::collections::BTreeSet<u32>,
    /// Host frames, by IP destination.
    pub push: std::collections::BTreeMap<std::net::IpAddr, KernelStack>,
    /// Detours, by (the port that is down or 0, for a frame that arrived backtracking the port it
    /// came in on or 0, the hash of the frame's reroute block). A stack for port 0 leaves by the
    /// port the frame came in on.
    pub reroute: std::collections::BTreeMap<(u32, u32, u64), KernelStack>,
}

/// A virtual link the kernel fast path may filter, police and forward itself (docs/afdx.md): the
/// AFDX mode's table as data, which the datapath mirrors once it knows which links the kernel can
/// carry (every output an interface, no scheduled egress).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLink {
    pub id: u16,
    pub in_port: u32,
    pub out_ports: Vec<u32>,
    /// The egress queue its frames take on every output (its priority's).
    pub queue: u8,
    /// Frame sizes, FCS included.
    pub smin: u16,
    pub smax: u16,
    /// Index into [`KernelLinks::accounts`]: links sharing one share its credit.
    pub account: usize,
    /// Check the frames' IPv4 and UDP headers (`afdx::ip_header_ok`).
    pub ip_check: bool,
}

/// One policing account: the credit grows by `smax` bytes per BAG up to `smax`·(BAG + jitter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelAccount {
    pub bag_ns: u64,
    pub smax: u16,
    pub jitter_ns: u64,
    /// Every frame costs `smax` (frame-based policing), or its own length (byte-based).
    pub per_frame: bool,
}

/// A frame-filtering mode's table for the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelLinks {
    /// The destinations' 32-bit constant field.
    pub mac_constant: u32,
    /// The interface id of the switch's network (`NETWORK_A`, `NETWORK_B`); 0: either.
    pub network: u8,
    pub links: Vec<KernelLink>,
    pub accounts: Vec<KernelAccount>,
}

impl KernelAccount {
    /// The most the account lets through in the long run, as the wire carries it, in bit/s: one
    /// frame of at most `smax` bytes per BAG, or under byte policing `smax` bytes per BAG in
    /// frames of at least `smin`; each frame with its preamble and inter-frame gap (20 bytes).
    pub fn wire_bps(&self, smin: u16) -> u64 {
        const PREAMBLE_AND_GAP: u64 = (packet::PREAMBLE_LEN + packet::IFG_LEN) as u64;
        let (smax, smin) = (self.smax as u64, smin.max(1) as u64);
        let bytes_per_bag =
            if self.per_frame { smax + PREAMBLE_AND_GAP } else { (smax * (smin + PREAMBLE_AND_GAP)).div_ceil(smin) };
        ((bytes_per_bag * 8) as u128 * 1_000_000_000).div_ceil(self.bag_ns.max(1) as u128) as u64
    }
}

impl KernelLinks {
    /// The ports on which the kernel, which sends every frame at once in the order it came,
    /// would break priority: the links leaving by them take more than one queue, and their
    /// accounts together may offer more than the port's link carries (`link_bps`; None leaves
    /// the port out), so a backlog builds there and the order it leaves in is what matters.
    /// Under the link's rate policing keeps every backlog to the accounts' bursts.
    pub fn ports_needing_priority(&self, link_bps: impl Fn(u32) -> Option<u64>) -> std::collections::BTreeSet<u32> {
        let mut smin = vec![u16::MAX; self.accounts.len()];
        for l in &self.links {
            smin[l.account] = smin[l.account].min(l.smin);
        }
        let mut by_port: std::collections::BTreeMap<u32, (u8, std::collections::BTreeSet<usize>)> = Default::default();
        for l in &self.links {
            for &port in &l.out_ports {
                let (queues, accounts) = by_port.entry(port).or_default();
                *queues |= 1 << l.queue.min(7);
                accounts.insert(l.account);
            }
        }
        by_port
            .into_iter()
            .filter(|(port, (queues, accounts))| {
                let offered: u64 = accounts.iter().map(|&a| self.accounts[a].wire_bps(smin[a])).sum();
                queues.count_ones() > 1 && link_bps(*port).is_some_and(|link| offered > link)
            })
            .map(|(port, _)| port)
            .collect()
    }
}

/// What the kernel counted for one link since the last harvest: frames and bytes (FCS included)
/// in, out, and dropped per reason (in the mode's order of reasons).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounts {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    /// Bytes of the frames that came in on a port other than the link's.
    pub wrong_port_bytes: u64,
    pub dropped: [u64; 8],
}
