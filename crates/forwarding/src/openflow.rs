//! The OpenFlow 1.3 mode: the pipeline (tables, groups, meters, megaflow cache) and what connects
//! it to controllers — packet-in with buffering and a rate limit, packet-out, flow-removed, and the
//! flow, group, meter, table and config requests.
//!
//! Requests about ports, queues and the switch as a whole are the datapath's; the rest land here.

use ofp::error::{BadRequest, ErrorCode, SwitchConfigFailed};
use ofp::message::{config_flags, FlowMod, PacketIn, PacketOut, NO_BUFFER};
use ofp::oxm::{Field, Match};
use ofp::port::{OFPP_ANY, OFPP_CONTROLLER, OFPP_LOCAL, OFPP_MAX};
use ofp::{Action, Instruction, Message};
use packet::{parse, segment, FlowKey, Offload, Packet};
use pipeline::exec::{DpAction, Sink, Stop, ToController};
use pipeline::{Config as PipelineConfig, Nanos, Pipeline, PortView};

use crate::{
    DropReason, Egress, EntryId, Event, FlowOffload, FromKernel, KernelEntry, Mode, Output, Reply, ToKernel, Verdict,
};

pub const N_BUFFERS: u32 = 256;

#[derive(Clone, Debug)]
pub struct Config {
    pub n_tables: u8,
    /// Per-table capacity: (table id, max flows, evict when full).
    pub table_limits: Vec<(u8, u32, bool)>,
    /// Start with a table-miss flow to NORMAL (a plain learning switch that `ovs-ofctl` can still
    /// reprogram): the switch has no controller.
    pub native: bool,
    /// Packet-ins per second across all controllers (0: no limit), so a flood of misses cannot
    /// starve the control channel. Bursts of up to a quarter second's worth pass.
    pub packet_in_rate: u32,
}

/// Packets buffered for the controller (referenced by buffer_id in packet-in/out and flow-mod).
struct Buffers {
    slots: Vec<Option<(u32, u32, Vec<u8>)>>,
    next: u32,
}

impl Buffers {
    fn new() -> Self {
        Buffers { slots: (0..N_BUFFERS).map(|_| None).collect(), next: 0 }
    }

    fn store(&mut self, in_port: u32, frame: &[u8]) -> u32 {
        let id = self.next;
        // Ids cycle below OFP_NO_BUFFER; the slot is id % N_BUFFERS, the id tells stale from live.
        self.next = (self.next + 1) % 0x7fff_ffff;
        self.slots[(id % N_BUFFERS) as usize] = Some((id, in_port, frame.to_vec()));
        id
    }

    fn take(&mut self, id: u32) -> Option<(u32, Vec<u8>)> {
        let slot = &mut self.slots[(id % N_BUFFERS) as usize];
        match slot {
            Some((sid, _, _)) if *sid == id => slot.take().map(|(_, p, f)| (p, f)),
            _ => None,
        }
    }
}

/// A token bucket for packet-ins: the switch-wide limit here, and each controller's in the agent.
pub struct PacketInLimit {
    rate: u64,
    tokens: u64,
    last: u64,
}

impl PacketInLimit {
    /// `rate` packet-ins per second (0: unlimited), bursts of a quarter second's worth.
    pub fn new(rate: u32) -> Self {
        PacketInLimit { rate: rate as u64, tokens: Self::cap(rate as u64), last: 0 }
    }

    /// Capacity in milli-tokens: a quarter second of packet-ins, at least 32.
    fn cap(rate: u64) -> u64 {
        (rate / 4).max(32) * 1000
    }

    /// Whether one more may go at `now` (nanoseconds on any monotonic clock).
    pub fn allow(&mut self, now: u64) -> bool {
        if self.rate == 0 {
            return true;
        }
        let add = (now.saturating_sub(self.last) as u128 * self.rate as u128 / 1_000_000) as u64;
        self.last = self.last.max(now);
        self.tokens = (self.tokens + add).min(Self::cap(self.rate));
        if self.tokens >= 1000 {
            self.tokens -= 1000;
            true
        } else {
            false
        }
    }
}

/// Turns the pipeline's executed actions into egress descriptors and packet-ins, and counts what
/// left so the verdict can say when nothing did.
struct Bridge<'a> {
    out: &'a mut dyn Output,
    buffers: &'a mut Buffers,
    limit: &'a mut PacketInLimit,
    now: Nanos,
    sent: usize,
    limited: usize,
}

impl Sink for Bridge<'_> {
    fn output(&mut self, port: u32, queue: Option<u32>, pkt: &Packet) {
        self.sent += 1;
        self.out.transmit(Egress { port, queue }, pkt);
    }

    fn to_controller(&mut self, pkt: &Packet, info: &ToController) {
        // A controller sees wire-sized frames with complete checksums. A frame that already is
        // one (every frame but a local sender's offloaded ones) goes as it is, uncopied.
        if pkt.offload.gso.is_none() && pkt.offload.csum.is_none() {
            self.packet_in(pkt.data(), info);
            return;
        }
        for seg in segment::segment(pkt.clone()) {
            self.packet_in(seg.data(), info);
        }
    }

    fn packet_ins_held_back(&self) -> bool {
        self.limited > 0
    }
}

impl Bridge<'_> {
    /// One packet-in of a wire-sized frame, if the rate limit lets it go.
    fn packet_in(&mut self, frame: &[u8], info: &ToController) {
        if !self.limit.allow(self.now) {
            self.limited += 1;
            return;
        }
        self.sent += 1;
        let total_len = frame.len().min(u16::MAX as usize) as u16;
        let (buffer_id, data) = if info.max_len == ofp::action::OFPCML_NO_BUFFER {
            (NO_BUFFER, frame.to_vec())
        } else {
            let id = self.buffers.store(info.in_port, frame);
            (id, frame[..frame.len().min(info.max_len as usize)].to_vec())
        };
        let mut match_ = Match::new().with(Field::InPort, info.in_port as u128);
        if info.metadata != 0 {
            match_ = match_.with(Field::Metadata, info.metadata as u128);
        }
        if info.tunnel_id != 0 {
            match_ = match_.with(Field::TunnelId, info.tunnel_id as u128);
        }
        self.out.event(Event::PacketIn(PacketIn {
            buffer_id,
            total_len,
            reason: info.reason,
            table_id: info.table_id,
            cookie: info.cookie,
            match_,
            data,
        }));
    }

    fn verdict(&self, stopped: Option<Stop>) -> Option<DropReason> {
        if self.sent > 0 {
            return None;
        }
        Some(match stopped {
            Some(Stop::Meter) => DropReason::Meter,
            Some(Stop::TtlExpired) => DropReason::TtlExpired,
            None if self.limited > 0 => DropReason::PacketInLimit,
            None => DropReason::NoAction,
        })
    }
}

pub struct OpenFlowMode {
    pipeline: Pipeline,
    buffers: Buffers,
    limit: PacketInLimit,
    /// The frame of a packet-out (or a buffered packet) as it runs, its room kept for the next.
    packet_out: Packet,
}

impl OpenFlowMode {
    pub fn new(cfg: &Config) -> OpenFlowMode {
        let mut pipeline = Pipeline::new(cfg.n_tables);
        for &(table, max, evict) in &cfg.table_limits {
            pipeline.set_table_limit(table, max, evict);
        }
        if cfg.native {
            let fm = FlowMod {
                priority: 0,
                instructions: vec![Instruction::ApplyActions(vec![Action::output(ofp::port::OFPP_NORMAL)])],
                ..Default::default()
            };
            pipeline.flow_mod(&fm, 0).expect("the NORMAL flow is valid");
        }
        OpenFlowMode {
            pipeline,
            buffers: Buffers::new(),
            limit: PacketInLimit::new(cfg.packet_in_rate),
            packet_out: Packet::with_capacity(0),
        }
    }

    fn bridge<'a>(
        buffers: &'a mut Buffers,
        limit: &'a mut PacketInLimit,
        out: &'a mut dyn Output,
        now: Nanos,
    ) -> Bridge<'a> {
        Bridge { out, buffers, limit, now, sent: 0, limited: 0 }
    }

    /// After a flow-mod (its flow-removed messages went as its flows left): the packet it
    /// names, if any.
    fn flow_mod_done(
        &mut self,
        done: Result<(), ErrorCode>,
        buffer_id: u32,
        now: Nanos,
        out: &mut dyn Output,
    ) -> Result<Option<Reply>, ErrorCode> {
        done?;
        if buffer_id != NO_BUFFER {
            self.run_buffer(buffer_id, now, out)?;
        }
        Ok(None)
    }

    /// Sends a buffered packet through the tables (flow-mod with a buffer_id).
    fn run_buffer(&mut self, buffer_id: u32, now: Nanos, out: &mut dyn Output) -> Result<(), ErrorCode> {
        let (in_port, frame) = self.buffers.take(buffer_id).ok_or(ErrorCode::BadRequest(BadRequest::BufferUnknown))?;
        self.run_actions(&frame, in_port, &[Action::output(ofp::port::OFPP_TABLE)], now, out)
    }

    fn packet_out(&mut self, po: PacketOut, now: Nanos, out: &mut dyn Output) -> Result<(), ErrorCode> {
        self.pipeline.check_packet_out(&po.actions)?;
        let valid_in_port = po.in_port == OFPP_CONTROLLER
            || po.in_port == OFPP_ANY
            || (po.in_port < OFPP_MAX && po.in_port != 0)
            || (po.in_port == OFPP_LOCAL && self.pipeline.has_port(OFPP_LOCAL));
        if !valid_in_port {
            return Err(ErrorCode::BadRequest(BadRequest::BadPort));
        }
        let frame = if po.buffer_id != NO_BUFFER {
            self.buffers.take(po.buffer_id).ok_or(ErrorCode::BadRequest(BadRequest::BufferUnknown))?.1
        } else {
            po.data
        };
        self.run_actions(&frame, po.in_port, &po.actions, now, out)
    }

    fn run_actions(
        &mut self,
        frame: &[u8],
        in_port: u32,
        actions: &[Action],
        now: Nanos,
        out: &mut dyn Output,
    ) -> Result<(), ErrorCode> {
        let (key, layout) = parse(frame, in_port).map_err(|_| ErrorCode::BadRequest(BadRequest::BadPacket))?;
        self.packet_out.load(frame, Offload::default(), layout);
        let mut bridge = Self::bridge(&mut self.buffers, &mut self.limit, out, now);
        self.pipeline.packet_out(&mut self.packet_out, &key, actions, now, &mut bridge);
        Ok(())
    }
}

impl FlowOffload for OpenFlowMode {
    fn entry(&self, id: EntryId) -> Option<KernelEntry<'_>> {
        let (entry, mask) = self.pipeline.cache_entry(id)?;
        let meters = entry
            .actions
            .iter()
            .filter_map(|a| match a {
                DpAction::Meter(m) => self.pipeline.meter(*m).map(|meter| (*m, meter)),
                _ => None,
            })
            .collect();
        Some(KernelEntry { mask, actions: &entry.actions, credits: &entry.credits, meters })
    }
}

impl Mode for OpenFlowMode {
    fn name(&self) -> &'static str {
        "openflow"
    }

    fn port_changed(&mut self, port: u32, view: Option<PortView>) {
        match view {
            Some(v) => self.pipeline.set_port(port, v),
            None => self.pipeline.remove_port(port),
        }
    }

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        let mut bridge = Self::bridge(&mut self.buffers, &mut self.limit, out, now);
        let done = self.pipeline.process(pkt, key, now, &mut bridge);
        Verdict { dropped: bridge.verdict(done.stopped), entry: done.created.or(done.hit) }
    }

    fn kernel(&self) -> ToKernel<'_> {
        ToKernel { flows: Some(self), ..Default::default() }
    }

    fn take_back(&mut self, back: FromKernel<'_>) {
        match back {
            FromKernel::FlowHits { id, credits, packets, bytes, now } => {
                self.pipeline.credit_many(credits, packets, bytes, now);
                self.pipeline.touch_cached(id, packets, now);
            }
            FromKernel::MeterCounts { meter, counts: (p, b, dp, db) } => {
                self.pipeline.credit_meter(meter, p, b, dp, db)
            }
            FromKernel::LinkCounts { .. } | FromKernel::AccountCredits { .. } | FromKernel::P4Counts(_) => {}
        }
    }

    fn generation(&self) -> u64 {
        self.pipeline.generation()
    }

    /// A hit in the megaflow cache is offered to nobody (only a fresh translation is): the cache
    /// goes, and its generation moves, which empties the kernel's copy too.
    fn forget_decisions(&mut self) {
        self.pipeline.invalidate();
    }

    fn is_programmable(&self) -> bool {
        true
    }

    fn take_retired(&mut self) -> crate::Retired {
        self.pipeline.take_retired()
    }

    fn next_deadline(&self) -> Option<Nanos> {
        self.pipeline.next_deadline()
    }

    fn tick(&mut self, now: Nanos, out: &mut dyn Output) {
        self.pipeline.expire_into(now, &mut |r| out.event(Event::FlowRemoved(r)));
    }

    fn prepared_flow_mod(
        &mut self,
        fm: crate::PreparedFlowMod,
        now: Nanos,
        out: &mut dyn Output,
    ) -> Result<Option<Reply>, ErrorCode> {
        let buffer_id = fm.fm.buffer_id;
        let done = self.pipeline.prepared_flow_mod_into(fm, now, &mut |r| out.event(Event::FlowRemoved(r)));
        self.flow_mod_done(done, buffer_id, now, out)
    }

    fn openflow(&mut self, msg: Message, now: Nanos, out: &mut dyn Output) -> Result<Option<Reply>, ErrorCode> {
        // A change's flow-removed messages go one by one as its flows leave, never all at once.
        let mut removed = |r| out.event(Event::FlowRemoved(r));
        match msg {
            Message::FlowMod(fm) => {
                let done = self.pipeline.flow_mod_into(&fm, now, &mut removed);
                return self.flow_mod_done(done, fm.buffer_id, now, out);
            }
            Message::GroupMod(gm) => self.pipeline.group_mod_into(&gm, now, &mut removed)?,
            Message::MeterMod(mm) => self.pipeline.meter_mod_into(&mm, now, &mut removed)?,
            Message::PacketOut(po) => self.packet_out(po, now, out)?,
            Message::TableMod(tm) => self.pipeline.table_mod(tm.table_id, tm.config)?,
            Message::SetConfig(c) => {
                let known = config_flags::FRAG_MASK | config_flags::INVALID_TTL_TO_CONTROLLER;
                if c.flags & !known != 0 || c.flags & config_flags::FRAG_MASK == config_flags::FRAG_REASM {
                    return Err(ErrorCode::SwitchConfigFailed(SwitchConfigFailed::BadFlags));
                }
                self.pipeline.set_config(PipelineConfig { flags: c.flags, miss_send_len: c.miss_send_len });
            }
            Message::GetConfigRequest => {
                let c = self.pipeline.config();
                let reply = ofp::message::SwitchConfig { flags: c.flags, miss_send_len: c.miss_send_len };
                return Ok(Some(Reply::Message(Message::GetConfigReply(reply))));
            }
            Message::MultipartRequest(req) => {
                let body = self
                    .pipeline
                    .multipart(&req.body, now)
                    .unwrap_or(Err(ErrorCode::BadRequest(BadRequest::BadMultipart)))?;
                return Ok(Some(Reply::Multipart(body)));
            }
            _ => return Err(ErrorCode::BadRequest(BadRequest::BadType)),
        }
        Ok(None)
    }

    fn set_fail_open(&mut self, on: bool) {
        self.pipeline.set_fail_open(on);
    }

    /// The megaflow cache (how much churn retired one by one, how often it was flushed), the MAC
    /// learning table (how many addresses it gave up to make room), and every meter's and group's counters, as their OpenFlow stats replies give them.
    fn counters(&self) -> Vec<crate::CounterGroup> {
        let mut groups = vec![
            crate::CounterGroup { name: "megaflow cache".into(), counters: self.pipeline.cache_counters().to_vec() },
            crate::CounterGroup { name: "mac table".into(), counters: self.pipeline.mac_counters().to_vec() },
        ];
        groups.extend(self.pipeline.meter_counters().map(|(id, [packets, bytes, band_packets, band_bytes])| {
            crate::CounterGroup {
                name: format!("meter {id}"),
                counters: vec![
                    ("packets_in", packets),
                    ("bytes_in", bytes),
                    ("band_packets", band_packets),
                    ("band_bytes", band_bytes),
                ],
            }
        }));
        groups.extend(self.pipeline.group_counters().map(|(id, [packets, bytes])| crate::CounterGroup {
            name: format!("group {id}"),
            counters: vec![("packets", packets), ("bytes", bytes)],
        }));
        groups
    }

    fn tables(&self) -> Vec<crate::TableReport> {
        let tables = self.pipeline.tables().iter().enumerate();
        tables
            .filter(|(_, t)| t.enabled && (!t.is_empty() || t.lookup_count > 0 || t.full_refusals > 0))
            .map(|(id, t)| crate::TableReport {
                id: id as u8,
                flows: t.len(),
                lookups: t.lookup_count,
                matched: t.matched_count,
                full_refusals: t.full_refusals,
                evictions: t.evictions,
            })
            .collect()
    }
}
