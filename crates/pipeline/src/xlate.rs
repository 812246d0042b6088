//! Translation: running a packet through the OpenFlow tables, groups and action set, producing the
//! datapath actions for it and the header bits the result depended on.
//!
//! Under 600 lines: the spec's §5 walk (tables, instructions, action set, groups, reserved
//! ports) is one algorithm and reads best in one place.

use ofp::action::Action;
use ofp::group_meter::{group_type, OFPG_ANY};
use ofp::message::packet_in_reason;
use ofp::oxm::{Field, OxmField};
use ofp::port::*;
use packet::{FlowKey, Packet};

use crate::exec::{remarked_dscp, Credits, DpAction, ToController};
use crate::flow::vlan_vid_of;
use crate::meter::Verdict;
use crate::normal::Learned;
use crate::revalidate::{Lookup, Reads};
use crate::Pipeline;

/// Chained groups deeper than this are cut off (the group-mod loop check keeps real configs below).
const MAX_DEPTH: u32 = 32;

/// The result of translating one packet.
#[derive(Clone, Debug, Default)]
pub struct Translation {
    pub actions: Vec<DpAction>,
    /// Mask of the header bits the translation depended on.
    pub consulted: FlowKey,
    pub credits: Credits,
    /// What it read besides header bits: the changes that retire its cache entry.
    pub reads: Reads,
    /// False when the result depends on more than the flow key (e.g. a lookup after popping a
    /// header exposed fields the original key did not hold).
    pub cacheable: bool,
}

impl Translation {
    /// Empties it for the next translation, keeping its vectors' room.
    pub(crate) fn clear(&mut self) {
        let Translation { actions, consulted, credits, reads, cacheable } = self;
        actions.clear();
        *consulted = FlowKey::default();
        let Credits { tables, flows, buckets, groups, learned } = credits;
        tables.clear();
        flows.clear();
        buckets.clear();
        groups.clear();
        *learned = None;
        let Reads { lookups, groups, meters, ports, all_ports, addresses } = reads;
        lookups.clear();
        groups.clear();
        meters.clear();
        ports.clear();
        *all_ports = false;
        addresses.clear();
        *cacheable = true;
    }
}

/// An action set (spec §5.10): at most one action of each kind, executed in a fixed order.
#[derive(Clone, Debug, Default)]
struct ActionSet {
    copy_ttl_in: bool,
    pop_vlan: bool,
    pop_mpls: Option<u16>,
    pop_pbb: bool,
    push_mpls: Option<u16>,
    push_pbb: Option<u16>,
    push_vlan: Option<u16>,
    copy_ttl_out: bool,
    dec_mpls_ttl: bool,
    dec_nw_ttl: bool,
    set_mpls_ttl: Option<u8>,
    set_nw_ttl: Option<u8>,
    set_fields: Vec<OxmField>,
    set_queue: Option<u32>,
    group: Option<u32>,
    output: Option<(u32, u16)>,
}

impl ActionSet {
    fn write(&mut self, actions: &[Action]) {
        for a in actions {
            match a {
                Action::CopyTtlIn => self.copy_ttl_in = true,
                Action::PopVlan => self.pop_vlan = true,
                Action::PopMpls(t) => self.pop_mpls = Some(*t),
                Action::PushMpls(t) => self.push_mpls = Some(*t),
                Action::PushVlan(t) => self.push_vlan = Some(*t),
                Action::CopyTtlOut => self.copy_ttl_out = true,
                Action::DecMplsTtl => self.dec_mpls_ttl = true,
                Action::DecNwTtl => self.dec_nw_ttl = true,
                Action::SetMplsTtl(t) => self.set_mpls_ttl = Some(*t),
                Action::SetNwTtl(t) => self.set_nw_ttl = Some(*t),
                Action::SetField(f) => {
                    self.set_fields.retain(|g| g.field != f.field);
                    self.set_fields.push(*f);
                }
                Action::SetQueue(q) => self.set_queue = Some(*q),
                Action::Group(g) => self.group = Some(*g),
                Action::Output { port, max_len } => self.output = Some((*port, *max_len)),
                Action::PushPbb(t) => self.push_pbb = Some(*t),
                Action::PopPbb => self.pop_pbb = true,
                // Experimenter actions are refused when the flow is added.
                Action::Experimenter { .. } => {}
            }
        }
    }

    /// The set as an ordered action list (spec §5.10).
    fn to_list(&self) -> Vec<Action> {
        let mut l = Vec::new();
        if self.copy_ttl_in {
            l.push(Action::CopyTtlIn);
        }
        if self.pop_vlan {
            l.push(Action::PopVlan);
        }
        if let Some(t) = self.pop_mpls {
            l.push(Action::PopMpls(t));
        }
        if self.pop_pbb {
            l.push(Action::PopPbb);
        }
        if let Some(t) = self.push_mpls {
            l.push(Action::PushMpls(t));
        }
        if let Some(t) = self.push_pbb {
            l.push(Action::PushPbb(t));
        }
        if let Some(t) = self.push_vlan {
            l.push(Action::PushVlan(t));
        }
        if self.copy_ttl_out {
            l.push(Action::CopyTtlOut);
        }
        if self.dec_mpls_ttl {
            l.push(Action::DecMplsTtl);
        }
        if self.dec_nw_ttl {
            l.push(Action::DecNwTtl);
        }
        if let Some(t) = self.set_mpls_ttl {
            l.push(Action::SetMplsTtl(t));
        }
        if let Some(t) = self.set_nw_ttl {
            l.push(Action::SetNwTtl(t));
        }
        l.extend(self.set_fields.iter().map(|f| Action::SetField(*f)));
        if let Some(q) = self.set_queue {
            l.push(Action::SetQueue(q));
        }
        // A group in the set takes the place of the output (spec §5.10).
        if let Some(g) = self.group {
            l.push(Action::Group(g));
        } else if let Some((port, max_len)) = self.output {
            l.push(Action::Output { port, max_len });
        }
        l
    }
}

/// Which flow an action came from, for the packet-ins it produces.
#[derive(Clone, Copy)]
struct Origin {
    table_id: u8,
    cookie: u64,
    table_miss: bool,
}

const PACKET_OUT_ORIGIN: Origin = Origin { table_id: 0xff, cookie: u64::MAX, table_miss: false };

pub(crate) struct Xlate<'p> {
    p: &'p mut Pipeline,
    key: FlowKey,
    /// The packet as it arrived.
    pkt: &'p Packet,
    /// A copy of the packet that header pushes and pops are applied to, so that a later lookup sees
    /// the headers the packet will really have. Made by the first such action: most translations
    /// have none, and a copy was an allocation and the frame copied for each.
    edited: Option<Packet>,
    in_port: u32,
    now: u64,
    t: Translation,
    popped: bool,
    depth: u32,
}

impl<'p> Xlate<'p> {
    pub(crate) fn new(p: &'p mut Pipeline, pkt: &'p Packet, key: &FlowKey, now: u64) -> Self {
        // The last translation's vectors, if it was not cached: most setups translate twice (the
        // miss, the controller's packet-out) and cache neither.
        let mut t = std::mem::take(&mut p.spare);
        t.clear();
        // Every translation depends on the input port (IN_PORT, FLOOD, learning).
        t.consulted.mask_field(Field::InPort);
        t.consulted.mask_field(Field::InPhyPort);
        t.reads.ports.push(key.in_port());
        Xlate { in_port: key.in_port(), key: *key, pkt, edited: None, p, now, t, popped: false, depth: 0 }
    }

    /// The packet with the header changes translated so far.
    fn scratch(&self) -> &Packet {
        self.edited.as_ref().unwrap_or(self.pkt)
    }

    /// The packet to apply a header change to (copied from the arrived one on the first).
    fn scratch_mut(&mut self) -> &mut Packet {
        let pkt = self.pkt;
        self.edited.get_or_insert_with(|| pkt.clone())
    }

    pub(crate) fn finish(self) -> Translation {
        self.t
    }

    /// Runs the packet from table `start` to the end of the pipeline.
    pub(crate) fn run_pipeline(&mut self, start: u8) {
        let mut table_id = start;
        let mut set = ActionSet::default();
        loop {
            if self.popped {
                self.t.cacheable = false;
            }
            let Some(table) = self.p.tables.get(table_id as usize) else { return };
            // The priority comes from the classifier's bucket: of the flow's entry this reads only
            // the actions and cookie (a million entries are far from the CPU's caches).
            let hit = table.flows.lookup_ranked(&self.key, &mut self.t.consulted).map(|(id, priority, f)| {
                let table_miss = priority == 0 && f.match_.is_empty();
                (id, priority as u16, f.actions.clone(), Origin { table_id, cookie: f.cookie, table_miss })
            });
            let winner = hit.as_ref().map(|&(id, priority, ..)| (priority, id));
            self.t.reads.lookups.push(Lookup { table: table_id, key: self.key, winner });
            self.t.credits.tables.push((table_id, hit.is_some()));
            let Some((id, _, actions, origin)) = hit else {
                // No match and no table-miss entry: the packet is dropped (spec §5.4).
                return;
            };
            self.t.credits.flows.push((table_id, id));
            let program = &actions.program;
            if let Some(m) = program.meter {
                if !self.meter(m) {
                    return;
                }
            }
            self.actions(&program.apply, origin);
            if program.clear {
                set = ActionSet::default();
            }
            set.write(&program.write);
            if let Some((value, mask)) = program.write_metadata {
                let md = (self.key.metadata() & !mask) | (value & mask);
                self.key.set_metadata(md);
            }
            match program.goto {
                Some(next) => table_id = next,
                None => {
                    let list = set.to_list();
                    self.actions(&list, origin);
                    return;
                }
            }
        }
    }

    /// Translates a packet-out's action list.
    pub(crate) fn packet_out(&mut self, actions: &[Action]) {
        self.actions(actions, PACKET_OUT_ORIGIN);
    }

    /// Everything goes through the MAC-learning switch (fail-open standalone mode).
    pub(crate) fn normal_only(&mut self) {
        self.normal();
    }

    fn actions(&mut self, actions: &[Action], origin: Origin) {
        for a in actions {
            match a {
                Action::Output { port, max_len } => self.output(*port, *max_len, origin),
                Action::Group(g) => self.group(*g, origin),
                Action::SetField(f) => {
                    let value = if f.field == Field::VlanVid { vlan_vid_of(f.value) as u128 } else { f.value };
                    if f.field != Field::VlanVid || self.scratch().layout.n_vlans > 0 {
                        self.key.set(f.field, value);
                    }
                    self.scratch_mut().set_field(f.field, value, &mut FlowKey::default());
                    if matches!(f.field, Field::EthType | Field::IpProto) {
                        // The headers after the field now read as something else.
                        self.reparse();
                    }
                    self.t.actions.push(DpAction::SetField(f.field, value));
                }
                Action::PushVlan(t) => {
                    self.scratch_mut().push_vlan(*t);
                    self.reparse();
                    self.t.actions.push(DpAction::PushVlan(*t));
                }
                Action::PopVlan => {
                    self.scratch_mut().pop_vlan();
                    self.popped = true;
                    self.reparse();
                    self.t.actions.push(DpAction::PopVlan);
                }
                Action::PushMpls(t) => {
                    self.scratch_mut().push_mpls(*t);
                    self.reparse();
                    self.t.actions.push(DpAction::PushMpls(*t));
                }
                Action::PopMpls(t) => {
                    self.scratch_mut().pop_mpls(*t);
                    self.popped = true;
                    self.reparse();
                    self.t.actions.push(DpAction::PopMpls(*t));
                }
                Action::SetMplsTtl(t) => self.t.actions.push(DpAction::SetMplsTtl(*t)),
                Action::DecMplsTtl => self.t.actions.push(DpAction::DecMplsTtl),
                Action::SetNwTtl(t) => self.t.actions.push(DpAction::SetNwTtl(*t)),
                Action::DecNwTtl => {
                    let to_controller = self.p.config.invalid_ttl_to_controller().then(|| ToController {
                        reason: packet_in_reason::INVALID_TTL,
                        table_id: origin.table_id,
                        cookie: origin.cookie,
                        max_len: self.p.config.miss_send_len,
                        in_port: self.in_port,
                        metadata: self.key.metadata(),
                        tunnel_id: self.key.get(Field::TunnelId) as u64,
                    });
                    self.t.actions.push(DpAction::DecNwTtl(to_controller));
                }
                Action::CopyTtlIn => self.t.actions.push(DpAction::CopyTtlIn),
                Action::CopyTtlOut => self.t.actions.push(DpAction::CopyTtlOut),
                Action::SetQueue(q) => self.t.actions.push(DpAction::SetQueue(*q)),
                Action::PushPbb(t) => {
                    self.scratch_mut().push_pbb(*t);
                    self.reparse();
                    self.t.actions.push(DpAction::PushPbb(*t));
                }
                Action::PopPbb => {
                    self.scratch_mut().pop_pbb();
                    self.popped = true;
                    self.reparse();
                    self.t.actions.push(DpAction::PopPbb);
                }
                Action::Experimenter { .. } => {}
            }
        }
    }

    /// The meter instruction. A meter that only drops is charged per packet when the actions run.
    /// One that remarks DSCP changes a header that later tables may match on, and which band applies
    /// depends on the moment: such a meter is charged here, the result is not cached, and the
    /// remark becomes a plain set-field. Returns false if the packet is dropped here.
    fn meter(&mut self, id: u32) -> bool {
        self.t.reads.meters.push(id);
        let len = self.scratch().len();
        let Some(meter) = self.p.meters.get_mut(id) else { return false };
        if !meter.remarks() {
            self.t.actions.push(DpAction::Meter(id));
            return true;
        }
        self.t.cacheable = false;
        match meter.charge(len, self.now) {
            Verdict::Pass => true,
            Verdict::Drop => false,
            Verdict::Remark(levels) => {
                if let Some(dscp) = remarked_dscp(&self.key, levels) {
                    self.key.set(Field::IpDscp, dscp as u128);
                    self.scratch_mut().set_field(Field::IpDscp, dscp as u128, &mut FlowKey::default());
                    self.t.actions.push(DpAction::SetField(Field::IpDscp, dscp as u128));
                }
                true
            }
        }
    }

    /// After a header change: the key as the changed headers read.
    fn reparse(&mut self) {
        if let Some(edited) = &mut self.edited {
            let _ = edited.reparse(&mut self.key);
        }
    }

    fn port_can_forward(&mut self, port: u32) -> bool {
        self.t.reads.ports.push(port);
        self.p.ports.get(&port).is_some_and(|p| p.config & (config::NO_FWD | config::PORT_DOWN) == 0)
    }

    fn output(&mut self, port: u32, max_len: u16, origin: Origin) {
        match port {
            OFPP_IN_PORT => {
                if self.port_can_forward(self.in_port) {
                    self.t.actions.push(DpAction::Output(self.in_port));
                }
            }
            OFPP_FLOOD | OFPP_ALL => self.flood(port == OFPP_FLOOD),
            OFPP_CONTROLLER => {
                let muted = self.p.ports.get(&self.in_port).is_some_and(|p| p.config & config::NO_PACKET_IN != 0);
                if !muted {
                    let reason = if origin.table_miss { packet_in_reason::NO_MATCH } else { packet_in_reason::ACTION };
                    self.t.actions.push(DpAction::Controller(ToController {
                        reason,
                        table_id: origin.table_id,
                        cookie: origin.cookie,
                        max_len,
                        in_port: self.in_port,
                        metadata: self.key.metadata(),
                        tunnel_id: self.key.get(Field::TunnelId) as u64,
                    }));
                }
            }
            OFPP_NORMAL => self.normal(),
            OFPP_TABLE => {
                // Only a packet-out may do this (checked when it is decoded).
                if self.depth < MAX_DEPTH {
                    self.depth += 1;
                    self.run_pipeline(0);
                    self.depth -= 1;
                }
            }
            p if p == self.in_port => {} // Sending back out of the input port needs IN_PORT.
            p => {
                if self.port_can_forward(p) {
                    self.t.actions.push(DpAction::Output(p));
                }
            }
        }
    }

    /// FLOOD and ALL: every port but the input one; FLOOD also skips ports that are down or
    /// blocked (spec §4.5).
    fn flood(&mut self, flood: bool) {
        self.t.reads.all_ports = true;
        let ports: Vec<u32> = self
            .p
            .ports
            .iter()
            .filter(|(&n, p)| {
                n != self.in_port
                    && p.config & (config::NO_FWD | config::PORT_DOWN) == 0
                    && (!flood || p.state & (state::LINK_DOWN | state::BLOCKED) == 0)
            })
            .map(|(&n, _)| n)
            .collect();
        for p in ports {
            self.t.actions.push(DpAction::Output(p));
        }
    }

    fn normal(&mut self) {
        for f in [Field::EthSrc, Field::EthDst, Field::VlanVid] {
            self.t.consulted.mask_field(f);
        }
        let vlan = self.key.get(Field::VlanVid) as u16 & 0x0fff;
        let src = self.key.get(Field::EthSrc) as u64;
        let dst = self.key.get(Field::EthDst) as u64;
        if self.p.ports.contains_key(&self.in_port) {
            match self.p.learn_address(vlan, src, self.in_port, self.now) {
                Learned::Changed | Learned::Refreshed => self.t.credits.learned = Some((vlan, src, self.in_port)),
                Learned::Ignored => {}
            }
        }
        self.t.reads.addresses.push((vlan, dst));
        match self.p.macs.lookup(vlan, dst) {
            Some(port) if port == self.in_port => {}
            Some(port) if self.port_can_forward(port) => self.t.actions.push(DpAction::Output(port)),
            _ => self.flood(true),
        }
    }

    fn port_live(&mut self, port: u32) -> bool {
        self.t.reads.ports.push(port);
        self.p
            .ports
            .get(&port)
            .is_some_and(|p| p.config & config::PORT_DOWN == 0 && p.state & (state::LINK_DOWN | state::BLOCKED) == 0)
    }

    fn group_live(&mut self, id: u32, depth: u32) -> bool {
        self.t.reads.groups.push(id);
        let Some(g) = self.p.groups.groups.get(&id) else { return false };
        let buckets = g.buckets.clone();
        depth < MAX_DEPTH && buckets.iter().any(|b| self.bucket_live(b, depth + 1))
    }

    fn bucket_live(&mut self, b: &ofp::Bucket, depth: u32) -> bool {
        (b.watch_port == OFPP_ANY || self.port_live(b.watch_port))
            && (b.watch_group == OFPG_ANY || self.group_live(b.watch_group, depth))
    }

    fn group(&mut self, id: u32, origin: Origin) {
        if self.depth >= MAX_DEPTH {
            return;
        }
        self.t.reads.groups.push(id);
        let Some(g) = self.p.groups.groups.get(&id) else { return };
        let typ = g.group_type;
        let buckets = g.buckets.clone();
        self.t.credits.groups.push(id);
        let chosen: Vec<usize> = match typ {
            group_type::ALL => (0..buckets.len()).collect(),
            group_type::INDIRECT => (0..buckets.len().min(1)).collect(),
            group_type::FAST_FAILOVER => buckets.iter().position(|b| self.bucket_live(b, 0)).into_iter().collect(),
            _ => self.select_bucket(&buckets).into_iter().collect(),
        };
        for i in chosen {
            self.t.credits.buckets.push((id, i as u16));
            self.in_clone(|x| x.actions(&buckets[i].actions, origin));
        }
    }

    /// Weighted choice among live buckets by a hash of the flow, so one flow stays on one bucket.
    fn select_bucket(&mut self, buckets: &[ofp::Bucket]) -> Option<usize> {
        let fields = [
            Field::EthSrc,
            Field::EthDst,
            Field::EthType,
            Field::VlanVid,
            Field::IpProto,
            Field::Ipv4Src,
            Field::Ipv4Dst,
            Field::Ipv6Src,
            Field::Ipv6Dst,
            Field::TcpSrc,
            Field::TcpDst,
        ];
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for f in fields {
            self.t.consulted.mask_field(f);
            let v = self.key.get(f);
            for b in v.to_be_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        let live: Vec<(usize, u64)> = buckets
            .iter()
            .enumerate()
            .filter(|(_, b)| b.weight > 0 && self.bucket_live(b, 0))
            .map(|(i, b)| (i, b.weight as u64))
            .collect();
        let total: u64 = live.iter().map(|&(_, w)| w).sum();
        if total == 0 {
            return None;
        }
        let mut pick = h % total;
        for (i, w) in live {
            if pick < w {
                return Some(i);
            }
            pick -= w;
        }
        None
    }

    /// Translates `f` into a `Clone` action: it sees a copy of the key and headers, and nothing it
    /// does leaks into what follows.
    fn in_clone(&mut self, f: impl FnOnce(&mut Self)) {
        let saved_actions = std::mem::take(&mut self.t.actions);
        let saved_key = self.key;
        let saved_edited = self.edited.clone();
        let saved_popped = self.popped;
        self.depth += 1;
        f(self);
        self.depth -= 1;
        let inner = std::mem::replace(&mut self.t.actions, saved_actions);
        self.key = saved_key;
        self.edited = saved_edited;
        self.popped = saved_popped;
        if !inner.is_empty() {
            self.t.actions.push(DpAction::Clone(inner));
        }
    }
}
