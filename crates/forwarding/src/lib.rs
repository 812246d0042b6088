//! The forwarding seam: what the datapath asks of a forwarding mode, and what a mode answers.
//!
//! The datapath owns ports, the loop, egress queues and the kernel fast path; a mode owns the
//! decision. For every received frame the datapath calls [`Mode::receive`]; the mode hands each
//! copy it forwards to [`Output::transmit`] with an [`Egress`] descriptor (port and queue; the
//! frame carries its rewrites) and returns a [`Verdict`]: a typed drop reason when the frame went
//! nowhere, and optionally a decision the kernel fast path may replay. What a mode hands the
//! kernel, and takes back, goes through [`Mode::kernel`] and [`Mode::take_back`] (`kernel`).
//! Timers go through [`Mode::next_deadline`] and [`Mode::tick`], so the loop sleeps until the
//! earliest one. Nothing here does I/O: a mode is driven with frames and a clock in tests exactly
//! as the datapath drives it.
//!
//! Adding a mode is one module here that implements [`Mode`], plus a line where the binary picks it.

#[cfg(feature = "afdx")]
pub mod afdx;
pub mod bucket;
pub mod kernel;
pub mod learning;
#[cfg(feature = "less")]
pub mod less;
pub mod openflow;
#[cfg(feature = "p4")]
pub mod p4;
pub mod partition;
pub mod portmap;
#[cfg(feature = "streams")]
pub mod streams;

use ofp::error::{BadRequest, ErrorCode};
use packet::{FlowKey, Packet};
pub use pipeline::classifier::RuleId as EntryId;
pub use pipeline::exec::{Credits, DpAction};
pub use pipeline::{ActionLists, Nanos, PortView, PreparedFlowMod, Retired};

pub use kernel::{
    FlowOffload, FromKernel, KernelAccount, KernelEntry, KernelLabels, KernelLink, KernelLinks, KernelStack,
    LinkCounts, LinkOffload, P4Counts, ToKernel,
};

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
    /// A decision the kernel fast path may hold (made for this frame, or found made), to be
    /// fetched with [`FlowOffload::entry`].
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

/// The first words of the mode control requests ([`Mode::control`]) that only read: a P4
/// program's tables, a table's entries, a counter's cell. Listed here, not judged per mode, so
/// that a verb a mode adds later counts as a write, refused to a slave controller, until it is
/// named here.
pub const CONTROL_READS: [&str; 3] = ["tables", "entries", "counter"];

/// Whether a mode control request only reads (its first word is in [`CONTROL_READS`]).
pub fn control_only_reads(request: &str) -> bool {
    request.split_whitespace().next().is_some_and(|verb| CONTROL_READS.contains(&verb))
}

/// A forwarding mode: everything that decides where a frame goes.
pub trait Mode: Send {
    /// As in the configuration (`mode = "..."`).
    fn name(&self) -> &'static str;

    /// A port appeared or changed (`Some`), or went away (`None`). Called for every port at start.
    fn port_changed(&mut self, port: u32, view: Option<PortView>);

    /// Decides where a received frame goes. `key` is the frame's flow key (in_port included).
    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict;

    /// What this mode hands the kernel fast path ([`ToKernel`]): nothing by default, and then
    /// every frame is decided here.
    fn kernel(&self) -> ToKernel<'_> {
        ToKernel::default()
    }

    /// What the kernel counted on what this mode handed it, and the state it hands back.
    fn take_back(&mut self, _back: FromKernel<'_>) {}

    /// Changes whenever decisions handed out before may no longer hold: the datapath then drops
    /// every kernel entry (crediting their hits first).
    fn generation(&self) -> u64;

    /// Decisions handed out before that no longer hold, retired one by one since the last call
    /// (a change that could only affect them): the datapath drops just their kernel copies
    /// (crediting their hits first), and its copies of the meters listed.
    fn take_retired(&mut self) -> Retired {
        Retired::default()
    }

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

    /// A flow-mod whose pure part the connection's thread did ([`PreparedFlowMod`]); a mode
    /// without a pipeline to take it that way takes it as the flow-mod it was.
    fn prepared_flow_mod(
        &mut self,
        fm: PreparedFlowMod,
        now: Nanos,
        out: &mut dyn Output,
    ) -> Result<Option<Reply>, ErrorCode> {
        self.openflow(ofp::Message::FlowMod(fm.into_flow_mod()), now, out)
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
    /// and its answer; None for a mode that has none. A request whose first word is not in
    /// [`CONTROL_READS`] may change the mode, and a slave controller may not send it.
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
