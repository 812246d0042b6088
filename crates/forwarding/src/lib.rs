//! The forwarding seam: what the datapath asks of a forwarding mode, and what a mode answers.
//!
//! The datapath owns ports, the loop, egress queues and the kernel fast path; a mode owns the
//! decision. For every received frame the datapath calls [`Mode::receive`]; the mode hands each
//! copy it forwards to [`Output::transmit`] with an [`Egress`] descriptor (port and queue; the
//! frame carries its rewrites) and returns a [`Verdict`]: a typed drop reason when the frame went
//! nowhere, and optionally a decision the kernel fast path may replay ([`Mode::kernel_entry`]).
//! Timers go through [`Mode::next_deadline`] and [`Mode::tick`], so the loop sleeps until the
//! earliest one. Nothing here does I/O: a mode is driven with frames and a clock in tests exactly
//! as the datapath drives it.
//!
//! Adding a mode is one module here that implements [`Mode`], plus a line where the binary picks it.

#[cfg(feature = "afdx")]
pub mod afdx;
pub mod bucket;
pub mod learning;
#[cfg(feature = "streams")]
pub mod streams;
#[cfg(feature = "less")]
pub mod less;
pub mod openflow;
#[cfg(feature = "p4")]
pub mod p4;
pub mod partition;
pub mod portmap;

use ofp::error::{BadRequest, ErrorCode};
use packet::{FlowKey, Packet};
pub use pipeline::classifier::RuleId as EntryId;
pub use pipeline::exec::{Credits, DpAction};
pub use pipeline::{Nanos, PortView, Retired};

/// Where one copy of a frame leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Egress {
    /// OpenFlow port number (`OFPP_LOCAL` included).
    pub port: u32,
    /// The egress queue the mode chose, or `None` to let the port choose from the frame's VLAN
    /// priority (802.1Q's default priority-to-class table).
    pub queue: Option<u32>,
}

/// Why a frame was dropped. Counted per reason by the datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// Could not be parsed (runt, bad header lengths, truncated transport header).
    Malformed,
    /// Arrived on a port configured not to receive (`NO_RECV`, administratively down).
    PortBlocked,
    /// The mode sent it nowhere: a table miss with no miss flow, an empty action list, no route.
    NoAction,
    /// A meter band dropped it.
    Meter,
    /// Its IP or MPLS TTL ran out.
    TtlExpired,
    /// For the controller, but over the packet-in rate limit.
    PacketInLimit,
    /// Sent to a port that does not exist (now).
    NoSuchPort,
    /// Sent to a queue the port does not have.
    NoSuchQueue,
    /// Its egress queue was full.
    QueueFull,
    /// The egress interface will not take it: longer than the interface's MTU (the kernel
    /// refuses such a frame for good; retrying it would block the port).
    OverMtu,
    /// The mode's frame filter refused it (an AFDX frame not of its virtual link's format, size
    /// or input port; the mode's own counters say which).
    Filtered,
    /// Over its traffic contract (AFDX BAG policing).
    Policed,
    /// A LESS label stack this switch cannot follow (the mode's counters say why).
    BadLabel,
}

impl DropReason {
    pub const ALL: [DropReason; 13] = [
        DropReason::Malformed,
        DropReason::PortBlocked,
        DropReason::NoAction,
        DropReason::Meter,
        DropReason::TtlExpired,
        DropReason::PacketInLimit,
        DropReason::NoSuchPort,
        DropReason::NoSuchQueue,
        DropReason::QueueFull,
        DropReason::OverMtu,
        DropReason::Filtered,
        DropReason::Policed,
        DropReason::BadLabel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::PortBlocked => "port_blocked",
            DropReason::NoAction => "no_action",
            DropReason::Meter => "meter",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::PacketInLimit => "packet_in_limit",
            DropReason::NoSuchPort => "no_such_port",
            DropReason::NoSuchQueue => "no_such_queue",
            DropReason::QueueFull => "queue_full",
            DropReason::OverMtu => "over_mtu",
            DropReason::Filtered => "filtered",
            DropReason::Policed => "policed",
            DropReason::BadLabel => "bad_label",
        }
    }
}

/// What a mode did with one received frame, beyond the copies it transmitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Set when no copy left and nothing went to a controller.
    pub dropped: Option<DropReason>,
    /// A decision the kernel fast path may hold, to be fetched with [`Mode::kernel_entry`].
    pub entry: Option<EntryId>,
}

/// Asynchronous messages for the controllers.
#[derive(Clone, Debug)]
pub enum Event {
    PacketIn(ofp::PacketIn),
    FlowRemoved(ofp::FlowRemoved),
    PortStatus(ofp::PortStatus),
}

/// Where a mode's decisions go: the datapath's egress (or a test's recorder).
pub trait Output {
    /// One copy of `pkt`, as it is now, leaves on `egress`.
    fn transmit(&mut self, egress: Egress, pkt: &Packet);
    /// An asynchronous message for the controllers.
    fn event(&mut self, event: Event);
}

/// A decision the kernel fast path may replay: every frame whose flow key equals `key` under
/// `mask` gets `actions`, and its hits are credited back through [`Mode::credit_kernel`] with
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
        let bytes_per_bag = if self.per_frame {
            smax + PREAMBLE_AND_GAP
        } else {
            (smax * (smin + PREAMBLE_AND_GAP)).div_ceil(smin)
        };
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

/// Every port `actions` send a copy to, group buckets included.
pub fn actions_outputs(actions: &[DpAction]) -> Vec<u32> {
    let mut out = Vec::new();
    for a in actions {
        match a {
            DpAction::Output(p) => out.push(*p),
            DpAction::Clone(inner) => out.extend(actions_outputs(inner)),
            _ => {}
        }
    }
    out
}

/// One flow table's figures, for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableReport {
    pub id: u8,
    pub flows: usize,
    pub lookups: u64,
    pub matched: u64,
    /// Adds refused for want of room, and flows evicted to make room.
    pub full_refusals: u64,
    pub evictions: u64,
}

/// A mode's own counters under one name (one AFDX virtual link, say), for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterGroup {
    pub name: String,
    pub counters: Vec<(&'static str, u64)>,
}

/// A reply to an OpenFlow request a mode answered.
pub enum Reply {
    Message(ofp::Message),
    Multipart(ofp::MultipartReplyBody),
}

/// A forwarding mode: everything that decides where a frame goes.
pub trait Mode: Send {
    /// As in the configuration (`mode = "..."`).
    fn name(&self) -> &'static str;

    /// A port appeared or changed (`Some`), or went away (`None`). Called for every port at start.
    fn port_changed(&mut self, port: u32, view: Option<PortView>);

    /// Decides where a received frame goes. `key` is the frame's flow key (in_port included).
    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict;

    /// The kernel-replayable form of a decision [`Mode::receive`] returned, if it is still current.
    fn kernel_entry(&self, id: EntryId) -> Option<KernelEntry<'_>>;

    /// Changes whenever decisions handed out before may no longer hold: the datapath then drops
    /// every kernel entry (crediting their hits first).
    fn generation(&self) -> u64;

    /// Decisions handed out before that no longer hold, retired one by one since the last call
    /// (a change that could only affect them): the datapath drops just their kernel copies
    /// (crediting their hits first), and its copies of the meters listed.
    fn take_retired(&mut self) -> Retired {
        Retired::default()
    }

    /// Hits the kernel counted on entry `id` this mode handed out.
    fn credit_kernel(&mut self, _id: EntryId, _credits: &Credits, _packets: u64, _bytes: u64, _now: Nanos) {}

    /// What a kernel meter counted: (packets, bytes, dropped packets, dropped bytes).
    fn credit_kernel_meter(&mut self, _meter: u32, _counts: (u64, u64, u64, u64)) {}

    /// When [`Mode::tick`] next has work; `None`: nothing timed.
    fn next_deadline(&self) -> Option<Nanos> {
        None
    }

    /// Timed work that is due (timeouts, ageing).
    fn tick(&mut self, _now: Nanos, _out: &mut dyn Output) {}

    /// An OpenFlow request that is not about ports or the switch itself (flows, groups, meters,
    /// tables, packet-out, switch config). Modes that are not programmed by OpenFlow answer as a
    /// switch without tables: see [`not_programmable`].
    fn openflow(&mut self, msg: ofp::Message, _now: Nanos, _out: &mut dyn Output) -> Result<Option<Reply>, ErrorCode> {
        not_programmable(msg)
    }

    /// Its flow tables (those in use), for `edgeflow stats`; none for a mode without tables.
    fn tables(&self) -> Vec<TableReport> {
        Vec::new()
    }

    /// Counters only this mode keeps (per virtual link, per label), for `edgeflow stats`.
    fn counters(&self) -> Vec<CounterGroup> {
        Vec::new()
    }

    /// Standalone fail mode: whether no controller is reachable.
    fn set_fail_open(&mut self, _on: bool) {}

    /// Label-switching state for the kernel fast path, for a mode that switches labels.
    fn kernel_labels(&self) -> Option<&KernelLabels> {
        None
    }

    /// Virtual links for the kernel fast path, for a mode that filters and polices links. The
    /// kernel then decides the links it takes, and the mode the frames of the others.
    fn kernel_links(&self) -> Option<&KernelLinks> {
        None
    }

    /// What the kernel counted on link `id` since the last harvest.
    fn credit_kernel_link(&mut self, _id: u16, _counts: &LinkCounts) {}

    /// The credit of each of [`KernelLinks::accounts`] at `now` (bytes × ns, as the kernel counts
    /// it), so that an account handed to the kernel goes with what it had.
    fn link_credits(&self, _now: Nanos) -> Vec<u64> {
        Vec::new()
    }

    /// Accounts handed back from the kernel: (index in [`KernelLinks::accounts`], its credit at
    /// `now`).
    fn set_link_credits(&mut self, _credits: &[(usize, u64)], _now: Nanos) {}

    /// Whether [`Mode::receive`] hands out decisions for the kernel ([`Mode::kernel_entry`]).
    fn offers_kernel_entries(&self) -> bool {
        false
    }

    /// Whether OpenFlow controllers program it (flows, groups, meters, packet-out).
    fn is_programmable(&self) -> bool {
        false
    }

    /// Whether controllers see `port` (port descriptions, status, statistics): a switch shared by
    /// several modes shows them only the OpenFlow part's ports.
    fn controller_sees(&self, _port: u32) -> bool {
        true
    }

    /// Forgets the decisions it has cached and offered the kernel, so that each is made, and
    /// offered, again on its next frame: the switch empties the kernel's copy when something it
    /// read outside the mode changed (a port's egress, a port leaving). A mode that offers every
    /// decision again on every frame has nothing to forget.
    fn forget_decisions(&mut self) {}

    /// A request of the mode's own control protocol (`edgeflow p4`, for a P4 program's tables),
    /// and its answer; None for a mode that has none.
    fn control(&mut self, _request: &str) -> Option<Result<String, String>> {
        None
    }

    /// The mode itself, for a control plane that knows its type: P4Runtime reaches a P4
    /// program's tables and externs through it (`p4::P4Mode::switch_mut`). None for a mode no
    /// such control plane serves.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }

    /// Takes a configuration read again (SIGHUP) while it runs, keeping what did not change
    /// (counters, credits, neighbours). An `Err` says why not, and changes nothing.
    fn reconfigure(&mut self, _next: &Reconfig) -> Result<(), String> {
        Err(format!("the {} mode takes no new configuration while it runs", self.name()))
    }
}

/// A mode's own configuration, read again from the file on SIGHUP.
#[derive(Clone, Debug)]
pub enum Reconfig {
    #[cfg(feature = "afdx")]
    Afdx { vls: Vec<afdx::VirtualLink>, mac_constant: u32, network: Option<u8> },
    #[cfg(feature = "less")]
    Less(less::Config),
}

/// How a mode without OpenFlow tables answers OpenFlow: reads describe a switch with no tables
/// (so `ovs-ofctl show` and `dump-flows` work and show nothing to program), writes are refused
/// with the permission error of their kind.
pub fn not_programmable(msg: ofp::Message) -> Result<Option<Reply>, ErrorCode> {
    use ofp::error::{FlowModFailed, GroupModFailed, SwitchConfigFailed, TableModFailed};
    use ofp::multipart::{AggregateStats, MultipartReplyBody as B, MultipartRequestBody as R};
    use ofp::Message as M;
    match msg {
        M::FlowMod(_) => Err(ErrorCode::FlowModFailed(FlowModFailed::Eperm)),
        M::GroupMod(_) => Err(ErrorCode::GroupModFailed(GroupModFailed::Eperm)),
        M::TableMod(_) => Err(ErrorCode::TableModFailed(TableModFailed::Eperm)),
        M::SetConfig(_) => Err(ErrorCode::SwitchConfigFailed(SwitchConfigFailed::Eperm)),
        M::MeterMod(_) | M::PacketOut(_) => Err(ErrorCode::BadRequest(BadRequest::Eperm)),
        M::GetConfigRequest => {
            let config = ofp::message::SwitchConfig { flags: 0, miss_send_len: 0 };
            Ok(Some(Reply::Message(M::GetConfigReply(config))))
        }
        M::MultipartRequest(req) => Ok(Some(Reply::Multipart(match req.body {
            R::Flow(_) => B::Flow(vec![]),
            R::Aggregate(_) => B::Aggregate(AggregateStats::default()),
            R::Table => B::Table(vec![]),
            R::TableFeatures(t) if t.is_empty() => B::TableFeatures(vec![]),
            R::TableFeatures(_) => return Err(ErrorCode::BadRequest(BadRequest::Eperm)),
            _ => return Err(ErrorCode::BadRequest(BadRequest::BadMultipart)),
        }))),
        _ => Err(ErrorCode::BadRequest(BadRequest::BadType)),
    }
}
