//! The LESS mode (docs/less.md): a label switch with no forwarding table. Every frame carries the
//! output port of each hop in its labels; this switch reads the top one, rewrites it by the
//! per-hop rule of `packet::less`, and sends the frame out that port. Around a port that is down it
//! reroutes by itself from the backup address the frame carries (`reroute`). Switches find their
//! addresses with a protocol of their own (`protocol`, `fabric`), and edge switches turn plain IP
//! from unmodified hosts into labelled frames and back (`edge`).
//!
//! A stack this switch cannot follow is dropped and counted under its reason.
//!
//! Over 800 lines with its unit tests, one concern: the mode's state and its data path (labelled
//! frames, hosts' frames, detours, and the plans the kernel repeats of the same three). What it
//! says to its neighbours and answers its hosts is `control`.

mod control;
pub mod edge;
pub mod fabric;
pub mod protocol;
pub mod reroute;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ofp::oxm::Field;
use packet::less::{self, Address, Label, Rewrite, StackError};
use packet::parse::ethertype;
use packet::{FlowKey, Packet};

use self::edge::{Directory, Location};
use self::fabric::Fabric;
use self::reroute::{Block, Case, Detour};
use crate::{
    CounterGroup, DropReason, Egress, KernelLabels, KernelStack, Mode, Nanos, Output, PortView, ToKernel, Verdict,
};

/// Entries a stack may hold by default, reroute block included.
pub const DEFAULT_MAX_LABELS: usize = 16;
const MS: Nanos = 1_000_000;
/// Protocol frames leave ahead of data.
const CONTROL_QUEUE: u32 = 7;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Deeper stacks are dropped as `too_many_labels`.
    pub max_labels: usize,
    /// This switch is the fabric's root (the origin of addresses).
    pub root: bool,
    /// This switch's id in the protocol (the datapath id).
    pub switch_id: u64,
    /// How often HELLOs go out, and how long a silent neighbour is kept.
    pub hello_ns: Nanos,
    pub dead_ns: Nanos,
    /// How long a neighbour behind a port that lost carrier is kept (frames are rerouted around
    /// it meanwhile) before addresses change.
    pub hold_ns: Nanos,
    /// Addresses a switch keeps (several paths from the root give several).
    pub max_addresses: usize,
    /// How long a host of ours may stay silent before it is forgotten (a bridge's MAC ageing).
    /// Frames the kernel labels do not count as heard; a Linux host re-checks a neighbour it
    /// uses within about a minute (ARP), which does.
    pub host_idle_ns: Nanos,
    /// The fabric ports, if the configuration lists them: protocol frames are heard only there,
    /// and every other port is an edge port. `None`: a port on which a HELLO is heard is a fabric
    /// port (discovered), and HOSTS and HOST-QUERY are heard only on such ports.
    pub fabric_ports: Option<BTreeSet<u8>>,
    /// Hosts (addresses) of ours one edge port may have; a new one past that is not learned.
    pub max_hosts_per_port: usize,
    /// Host queries this switch may have out at once (each is kept a HELLO interval): an ARP or
    /// neighbour solicitation for an unknown address past that is not asked across the fabric.
    pub max_host_queries: usize,
}

/// Hosts an edge port may have by default: a rack's worth of servers behind a bridge, each with an
/// IPv4, an IPv6 and a link-local address.
pub const DEFAULT_MAX_HOSTS_PER_PORT: usize = 256;
/// Host queries out at once by default (64 a HELLO interval: 640 a second at 100 ms).
pub const DEFAULT_MAX_HOST_QUERIES: usize = 64;

impl Default for Config {
    fn default() -> Config {
        Config {
            max_labels: DEFAULT_MAX_LABELS,
            root: false,
            switch_id: 0,
            hello_ns: 100 * MS,
            dead_ns: 350 * MS,
            hold_ns: 100 * MS,
            max_addresses: 4,
            host_idle_ns: 300 * 1000 * MS,
            fabric_ports: None,
            max_hosts_per_port: DEFAULT_MAX_HOSTS_PER_PORT,
            max_host_queries: DEFAULT_MAX_HOST_QUERIES,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Counters {
    /// Frames sent on with a shifted top label.
    shifted: u64,
    /// Frames sent on with their top label removed and another route label under it.
    popped: u64,
    /// Frames whose last route label was removed here: they left as IP.
    delivered: u64,
    /// Plain IP frames from hosts that left with labels (ingress) or straight to a host here.
    pushed: u64,
    local: u64,
    /// Reroutes, per case of docs/less.md §4.
    rerouted_local: u64,
    rerouted_neighbour: u64,
    backtracked: u64,
    /// Per [`StackError`], in the order of `StackError::ALL`.
    malformed: [u64; StackError::ALL.len()],
    unknown_port: u64,
    no_route: u64,
    /// Frames at a down port with no reroute budget left (docs/less.md §4): the loop bound.
    budget_spent: u64,
    /// IP frames for a destination no switch has announced.
    no_host: u64,
    /// IP frames from hosts to a group (broadcast, multicast): LESS routes to one host.
    multicast: u64,
    /// Frames that carried no label stack and were neither IP, ARP nor the protocol's.
    not_less: u64,
    /// Protocol frames: sent, received, refused.
    hellos_sent: u64,
    protocol_in: u64,
    protocol_bad: u64,
    /// Protocol frames that arrived on an edge port (not a fabric port: not listed, or with no
    /// HELLO heard there for HOSTS and HOST-QUERY), dropped.
    protocol_on_edge_port: u64,
    /// ARP and neighbour solicitations for an unknown address not asked across the fabric:
    /// `max_host_queries` were out.
    host_queries_over_limit: u64,
    arp_replies: u64,
    /// IPv6 neighbour advertisements sent for hosts elsewhere.
    nd_replies: u64,
}

/// Plans made ahead for the kernel, at most (its tables hold 4096 each; the rest is left for
/// kinds of frame met later, which userspace plans as they come).
const MAX_PLANNED: usize = 3072;

/// Where the kernel looks a detour up (`KernelLabels::reroute`): the port that is down (0 for a
/// frame that arrived backtracking), the port such a frame came in on (else 0), the block's hash.
type DetourKey = (u32, u32, u64);

/// The stack a frame with `block` leaves with on detour `d`, out of the port the stack names
/// (0: the one the frame came in on). The block's budget is one less, its backtrack flag the
/// detour's; a detour that ends at a host of ours delivers IP (no stack, the IP version's
/// ethertype, which the kernel reads from the frame).
fn detour_stack(d: &Detour, block: &Block) -> KernelStack {
    let port = d.route.first().map_or(0, |&p| p as u32);
    if d.case != Case::Backtrack && d.route.len() == 1 {
        return KernelStack { port, ethertype: 0, stack: vec![] };
    }
    let block = Block { budget: block.budget - 1, backtrack: d.case == Case::Backtrack, ..block.clone() };
    let mut stack = if d.case == Case::Backtrack { vec![] } else { less::encode_route(&d.route[1..], true) };
    stack.extend_from_slice(&block.encode());
    KernelStack { port, ethertype: less::ETHERTYPE, stack }
}

pub struct LessMode {
    cfg: Config,
    /// Every port of the switch, and whether it can send (carrier up, not administratively down).
    live: BTreeMap<u32, bool>,
    fabric: Fabric,
    directory: Directory,
    counters: Counters,
    next_hello: Nanos,
    next_announce: Nanos,
    /// Something changed that neighbours must hear at once (next tick).
    dirty: bool,
    /// Our hosts changed: announce them.
    announce: bool,
    arp_seq: u32,
    /// Host queries already flooded, per target, and when (one per target per HELLO interval, at
    /// most `max_host_queries` at once).
    asked: BTreeMap<IpAddr, Nanos>,
    announcement_frames: u64,
    /// What the kernel fast path may do on its own: stacks planned here for later frames.
    kernel: KernelLabels,
    /// Something the plans depend on changed: they are made again before the mode returns.
    stale: bool,
}

impl LessMode {
    pub fn new(cfg: Config) -> LessMode {
        let (cfg_max_labels, max_hosts_per_port) = (cfg.max_labels, cfg.max_hosts_per_port);
        let mut fabric = Fabric::new(cfg.switch_id, cfg.root, cfg.max_addresses);
        if let Some(ports) = &cfg.fabric_ports {
            fabric.list_fabric_ports(ports.clone());
        }
        // Sequence numbers start from the wall clock: a restarted switch is newer than its old self.
        let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let seq = (wall.as_millis() as u32).wrapping_mul(4);
        LessMode {
            cfg,
            live: BTreeMap::new(),
            fabric,
            directory: Directory::new(seq, max_hosts_per_port),
            counters: Counters::default(),
            next_hello: 0,
            next_announce: 0,
            dirty: true,
            announce: true,
            arp_seq: seq,
            asked: BTreeMap::new(),
            announcement_frames: 0,
            kernel: KernelLabels { generation: 1, max_labels: cfg_max_labels, ..KernelLabels::default() },
            stale: true,
        }
    }

    /// Plans made before may no longer hold (a port, an address or a host changed): they are
    /// made again (`settle`) before the mode hands control back.
    fn invalidate(&mut self) {
        self.stale = true;
    }

    /// Makes every plan the kernel may repeat again, from what the switch knows now, when
    /// something changed: each known host's route, and the detour for every kind of frame
    /// (reroute block) at every port that may go down or that it may come back by. The kernel
    /// then takes the first frame after a failure as it takes the rest (docs/less.md §5); a plan that did not change is not written again (the datapath writes
    /// differences), so an unrelated port change leaves the kernel's detours where they are.
    fn settle(&mut self) {
        if !self.stale {
            return;
        }
        self.stale = false;
        self.kernel.ports = self.live.keys().copied().collect();
        self.kernel.edge_ports =
            self.live.keys().copied().filter(|&p| p <= 255 && self.fabric.is_edge(p as u8)).collect();
        self.kernel.down_ports = self.fabric.silent_ports().map(u32::from).collect();
        self.kernel.push = self.plan_pushes();
        self.kernel.reroute = self.plan_detours();
        self.kernel.generation += 1;
    }

    /// What the kernel does with a host's frame for each destination known: delivers it to a host
    /// here, or labels it along the planned route (whose block finds the detour when the first
    /// hop is down).
    fn plan_pushes(&self) -> BTreeMap<IpAddr, KernelStack> {
        let mut push = BTreeMap::new();
        for (dst, location) in self.directory.destinations() {
            if push.len() == MAX_PLANNED {
                break;
            }
            let stack = match location {
                Location::Here(h) if self.is_live(h.port) => {
                    let ethertype = if dst.is_ipv4() { ethertype::IPV4 } else { ethertype::IPV6 };
                    KernelStack { port: h.port as u32, ethertype, stack: vec![] }
                }
                Location::Here(_) => continue,
                // The route as planned, even when its first hop is down: the kernel then takes
                // the detour planned for its block (counted as rerouted, as here).
                Location::There(_, addresses) => {
                    let Some(plan) = edge::plan(self.fabric.addresses(), &addresses) else { continue };
                    if plan.route.len() < 2 {
                        continue;
                    }
                    let stack = Self::push_stack(&plan);
                    KernelStack { port: plan.route[0] as u32, ethertype: less::ETHERTYPE, stack }
                }
            };
            push.insert(dst, stack);
        }
        push
    }

    /// The stack a host's frame leaves an ingress switch with along `plan` (two hops or more): the
    /// route after the first port, then the reroute block.
    fn push_stack(plan: &edge::Plan) -> Vec<u8> {
        let mut stack = less::encode_route(&plan.route[1..], true);
        stack.extend_from_slice(&Self::first_block(plan).encode());
        stack
    }

    /// The reroute block an ingress switch gives frames along `plan`.
    fn first_block(plan: &edge::Plan) -> Block {
        Block {
            budget: reroute::INITIAL_BUDGET,
            backtrack: false,
            backup: plan.backup.clone(),
            source: plan.source.clone(),
        }
    }

    /// Detours planned ahead, for every reroute block a frame may carry through here (every
    /// ingress switch's plan to every host's switch and port, as that switch makes it from the
    /// addresses it announced): at each of our ports, should it go down (with every other port as
    /// it is now), and for a frame that comes back by a port to another switch backtracking.
    fn plan_detours(&self) -> BTreeMap<DetourKey, KernelStack> {
        let ours: Vec<Address> = self.fabric.addresses().cloned().collect();
        let mut edges: Vec<(Vec<Address>, Vec<u8>)> = self.directory.edges().collect();
        let our_ports: Vec<u8> = self.directory.local_hosts().map(|h| h.port).collect();
        edges.push((ours, our_ports));
        // Every port may go down, a host's too, and one whose neighbour was forgotten while
        // routes planned before still lead there. Backtracking frames come from switches.
        let ports: Vec<u8> = self.live.keys().filter(|&&p| p <= 255).map(|&p| p as u8).collect();
        let mut blocks = Vec::new();
        for (i, (from, _)) in edges.iter().enumerate() {
            for (j, (to, host_ports)) in edges.iter().enumerate() {
                // A switch's own hosts are reached without labels.
                if i == j {
                    continue;
                }
                let mut host_ports = host_ports.clone();
                host_ports.sort_unstable();
                host_ports.dedup();
                for &edge_port in &host_ports {
                    let theirs: Vec<Address> =
                        to.iter().map(|a| Address { hops: a.hops.clone(), edge: Some(edge_port) }).collect();
                    if let Some(plan) = edge::plan(from.iter(), &theirs) {
                        blocks.push(Self::first_block(&plan));
                    }
                }
            }
        }
        blocks.sort_by_cached_key(|b| b.encode());
        blocks.dedup();
        let live = |p: u8| self.is_live(p);
        let mut planned = BTreeMap::new();
        'blocks: for block in &blocks {
            let hash = reroute::block_hash(&block.encode());
            let back = Block { backtrack: true, ..block.clone() };
            for &port in &ports {
                if planned.len() + 2 > MAX_PLANNED {
                    break 'blocks;
                }
                if let Some(d) = reroute::detour(&self.fabric, block, Some(port), None, live) {
                    planned.insert((port as u32, 0, hash), detour_stack(&d, block));
                }
                if self.fabric.is_edge(port) {
                    continue;
                }
                if let Some(d) = reroute::detour(&self.fabric, &back, None, Some(port), live) {
                    planned.insert((0, port as u32, hash), detour_stack(&d, &back));
                }
            }
        }
        planned
    }

    /// A detour taken in userspace that was not planned ahead (past the plans' cap, or a kind of
    /// frame the plans did not foresee), kept for the kernel to repeat. The kernel's tables are
    /// written again only when it is news.
    fn remember_detour(&mut self, key: DetourKey, stack: KernelStack) {
        if self.kernel.reroute.get(&key) != Some(&stack) {
            self.kernel.reroute.insert(key, stack);
            self.kernel.generation += 1;
        }
    }

    fn bad(&mut self, why: StackError) -> Verdict {
        self.counters.malformed[StackError::ALL.iter().position(|&e| e == why).unwrap()] += 1;
        Verdict { dropped: Some(DropReason::BadLabel), entry: None }
    }

    /// Can send: carrier up and not administratively down, and not a port whose neighbour fell
    /// silent.
    fn is_live(&self, port: u8) -> bool {
        self.live.get(&(port as u32)).copied().unwrap_or(false) && !self.fabric.is_silent(port)
    }

    /// A plain IP frame from a host: straight to a host here, or labelled along a planned route.
    fn ingress(&mut self, pkt: &mut Packet, key: &FlowKey, in_port: u8, now: Nanos, out: &mut dyn Output) -> Verdict {
        let (src, dst) = ip_addresses(key);
        self.learned(src, key_mac(key, Field::EthSrc), in_port, now);
        if !edge::is_host_address(dst) {
            self.counters.multicast += 1;
            return Verdict { dropped: Some(DropReason::NoAction), entry: None };
        }
        let no_host = |c: &mut Counters| {
            c.no_host += 1;
            Verdict { dropped: Some(DropReason::NoAction), entry: None }
        };
        match self.directory.locate(dst) {
            Some(Location::Here(h)) if h.port != in_port && self.is_live(h.port) => {
                self.counters.local += 1;
                out.transmit(Egress { port: h.port as u32, queue: None }, pkt);
                Verdict::default()
            }
            Some(Location::There(_, addresses)) => {
                let Some(plan) = edge::plan(self.fabric.addresses(), &addresses) else {
                    return no_host(&mut self.counters);
                };
                if pkt.offload.gso.is_none() && pkt.offload.csum.is_none() {
                    return self.push_route(pkt, &plan, in_port, out);
                }
                // Under labels, no NIC or kernel finishes a checksum or cuts a super-frame: done here.
                for mut seg in packet::segment::segment(pkt.clone()) {
                    self.push_route(&mut seg, &plan, in_port, out);
                }
                Verdict::default()
            }
            _ => no_host(&mut self.counters),
        }
    }

    /// Labels a host's frame along `plan` and sends it; reroutes at once if our own first hop is
    /// down. (The kernel's plan for the destination is `plan_pushes`'.)
    fn push_route(&mut self, pkt: &mut Packet, plan: &edge::Plan, in_port: u8, out: &mut dyn Output) -> Verdict {
        let block = Self::first_block(plan);
        let first = plan.route[0];
        if !self.is_live(first) {
            // The kernel finds this detour as a labelled frame with this block would.
            let key = (first as u32, 0, reroute::block_hash(&block.encode()));
            return match reroute::detour(&self.fabric, &block, Some(first), Some(in_port), |p| self.is_live(p)) {
                Some(d) => self.take_detour(pkt, 0, d, block, key, out),
                None => {
                    self.counters.no_route += 1;
                    Verdict { dropped: Some(DropReason::NoAction), entry: None }
                }
            };
        }
        if plan.route.len() > 1 {
            pkt.replace_stack(0, &Self::push_stack(plan), less::ETHERTYPE);
        }
        self.counters.pushed += 1;
        out.transmit(Egress { port: first as u32, queue: None }, pkt);
        Verdict::default()
    }

    /// Sends a frame whose stack (`stack_bytes` long, at the frame's L3) is replaced by the detour.
    /// `kernel_key`: where the kernel would look this detour up.
    fn take_detour(
        &mut self,
        pkt: &mut Packet,
        stack_bytes: usize,
        d: Detour,
        block: Block,
        kernel_key: DetourKey,
        out: &mut dyn Output,
    ) -> Verdict {
        match d.case {
            Case::Local => self.counters.rerouted_local += 1,
            Case::Neighbour => self.counters.rerouted_neighbour += 1,
            Case::Backtrack => self.counters.backtracked += 1,
        }
        let planned = detour_stack(&d, &block);
        if planned.stack.is_empty() {
            // The way around ends at a host of ours: deliver as IP.
            let l3 = pkt.layout.l3 as usize;
            let Ok(et) = less::ip_ethertype(pkt.data(), l3 + stack_bytes) else {
                return self.bad(StackError::NotIp);
            };
            pkt.replace_stack(stack_bytes, &[], et);
        } else {
            pkt.replace_stack(stack_bytes, &planned.stack, less::ETHERTYPE);
        }
        let port = planned.port;
        // A first step back goes where each frame came from, which the key for a failed port does
        // not hold: stored as port 0, the port the frame came in on.
        let first_back = d.case == Case::Backtrack && kernel_key.0 != 0;
        self.remember_detour(kernel_key, KernelStack { port: if first_back { 0 } else { port }, ..planned });
        out.transmit(Egress { port, queue: None }, pkt);
        Verdict::default()
    }

    /// A frame that cannot leave by `failed` (or that arrived backtracking): around, or dropped.
    fn reroute(
        &mut self,
        pkt: &mut Packet,
        depth: usize,
        failed: Option<u8>,
        in_port: u8,
        out: &mut dyn Output,
    ) -> Verdict {
        let l3 = pkt.layout.l3 as usize;
        let split = reroute::split(pkt.data(), l3, depth);
        if split.block.as_ref().is_some_and(|(b, _)| b.budget == 0) {
            self.counters.budget_spent += 1;
            return Verdict { dropped: Some(DropReason::NoAction), entry: None };
        }
        let detour = split
            .block
            .as_ref()
            .and_then(|(b, _)| reroute::detour(&self.fabric, b, failed, Some(in_port), |p| self.is_live(p)));
        let hash = reroute::block_hash(&pkt.data()[l3 + split.route_bytes..l3 + 4 * depth]);
        let kernel_key = match failed {
            Some(f) => (f as u32, 0, hash),
            None => (0, in_port as u32, hash),
        };
        match (detour, split.block) {
            (Some(d), Some((block, _))) => self.take_detour(pkt, 4 * depth, d, block, kernel_key, out),
            _ => {
                self.counters.no_route += 1;
                Verdict { dropped: Some(DropReason::NoAction), entry: None }
            }
        }
    }

    fn labelled(&mut self, pkt: &mut Packet, in_port: u8, out: &mut dyn Output) -> Verdict {
        let at = pkt.layout.l3 as usize;
        let depth = match less::depth(pkt.data(), at, self.cfg.max_labels) {
            Ok(d) => d,
            Err(why) => return self.bad(why),
        };
        let top = Label::from_word(u32::from_be_bytes(pkt.data()[at..at + 4].try_into().unwrap()));
        if !top.is_route() {
            // Only a backtracking frame arrives with its reroute block on top.
            let backtracking = reroute::split(pkt.data(), at, depth).block.is_some_and(|(b, _)| b.backtrack);
            if !backtracking {
                return self.bad(StackError::BadTtl);
            }
            return self.reroute(pkt, depth, None, in_port, out);
        }
        let hop = match less::hop_in_stack(pkt.data(), at, depth) {
            Ok(h) => h,
            Err(why) => return self.bad(why),
        };
        if !self.live.contains_key(&(hop.port as u32)) {
            self.counters.unknown_port += 1;
            return Verdict { dropped: Some(DropReason::BadLabel), entry: None };
        }
        if !self.is_live(hop.port) {
            return self.reroute(pkt, depth, Some(hop.port), in_port, out);
        }
        match hop.rewrite {
            Rewrite::Shift { word } => {
                pkt.replace_stack(4, &word.to_be_bytes(), less::ETHERTYPE);
                self.counters.shifted += 1;
            }
            Rewrite::Pop => {
                pkt.replace_stack(4, &[], less::ETHERTYPE);
                self.counters.popped += 1;
            }
            Rewrite::Deliver { bytes, ethertype } => {
                pkt.replace_stack(bytes, &[], ethertype);
                self.counters.delivered += 1;
            }
        }
        out.transmit(Egress { port: hop.port as u32, queue: None }, pkt);
        Verdict::default()
    }
}

/// An IP frame's source and destination, of either family.
fn ip_addresses(key: &FlowKey) -> (IpAddr, IpAddr) {
    if key.eth_type() == ethertype::IPV6 {
        let v6 = |f| IpAddr::V6(Ipv6Addr::from(key.get(f)));
        (v6(Field::Ipv6Src), v6(Field::Ipv6Dst))
    } else {
        let v4 = |f| IpAddr::V4(Ipv4Addr::from(key.get(f) as u32));
        (v4(Field::Ipv4Src), v4(Field::Ipv4Dst))
    }
}

fn key_mac(key: &FlowKey, field: Field) -> [u8; 6] {
    let b = (key.get(field) as u64).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

impl Mode for LessMode {
    fn name(&self) -> &'static str {
        "less"
    }

    fn port_changed(&mut self, port: u32, view: Option<PortView>) {
        let up = view.is_some_and(|v| {
            v.state & ofp::port::state::LINK_DOWN == 0 && v.config & ofp::port::config::PORT_DOWN == 0
        });
        match view {
            Some(_) => self.live.insert(port, up),
            None => self.live.remove(&port),
        };
        if !up && port <= 255 {
            // The neighbour there is gone now, not when its HELLOs stop.
            self.fabric.port_down(port as u8);
            if self.directory.forget_port(port as u8) {
                self.announce = true;
            }
        }
        self.dirty = true;
        self.invalidate();
        self.settle();
    }

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        let verdict = self.receive_frame(pkt, key, now, out);
        self.settle();
        verdict
    }

    fn generation(&self) -> u64 {
        0
    }

    fn next_deadline(&self) -> Option<Nanos> {
        if self.dirty || self.announce {
            return Some(0);
        }
        let expiry = self.fabric.next_expiry(self.cfg.dead_ns, self.cfg.hold_ns).unwrap_or(Nanos::MAX);
        Some(self.next_hello.min(self.next_announce).min(expiry))
    }

    fn tick(&mut self, now: Nanos, out: &mut dyn Output) {
        self.timed_work(now, out);
        self.settle();
    }

    fn kernel(&self) -> ToKernel<'_> {
        ToKernel { labels: Some(&self.kernel), ..Default::default() }
    }

    fn counters(&self) -> Vec<CounterGroup> {
        self.counter_groups()
    }

    /// New timers and limits take effect at once; neighbours, addresses and hosts stay. Whether
    /// this switch is the fabric's root does not change live: every address in the fabric hangs
    /// on the root's.
    fn reconfigure(&mut self, next: &crate::Reconfig) -> Result<(), String> {
        #[allow(irrefutable_let_patterns)]
        let crate::Reconfig::Less(cfg) = next
        else {
            return Err("the less mode takes only a LESS configuration".into());
        };
        if cfg.root != self.cfg.root {
            return Err(format!(
                "[less] root = {}: whether this switch is the root changes every address in the \
                                fabric; restart to change it",
                cfg.root
            ));
        }
        if cfg.fabric_ports != self.cfg.fabric_ports {
            return Err("[less] fabric_ports: which ports are fabric ports decides where hosts and neighbours \
                        are; restart to change it"
                .into());
        }
        if cfg.max_addresses != self.cfg.max_addresses {
            return Err("[less] max_addresses: the fabric's addresses are kept in that many places; restart to \
                        change it"
                .into());
        }
        let switch_id = self.cfg.switch_id;
        self.cfg = Config { switch_id, ..cfg.clone() };
        // Hosts past a lowered limit stay until they fall silent; new ones wait for room.
        self.directory.max_hosts_per_port = cfg.max_hosts_per_port;
        if self.kernel.max_labels != cfg.max_labels {
            self.kernel.max_labels = cfg.max_labels;
            self.kernel.generation += 1;
        }
        self.dirty = true;
        Ok(())
    }
}

impl LessMode {
    fn receive_frame(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        let in_port = key.in_port() as u8;
        match key.eth_type() {
            less::ETHERTYPE => self.labelled(pkt, in_port, out),
            less::PROTOCOL_ETHERTYPE => self.protocol(pkt, in_port, now, out),
            ethertype::ARP if self.fabric.is_edge(in_port) => self.arp(key, in_port, now, out),
            ethertype::IPV6 if self.fabric.is_edge(in_port) && control::is_neighbour_discovery(key) => {
                self.neighbour_discovery(key, in_port, now, out)
            }
            ethertype::IPV4 | ethertype::IPV6 if self.fabric.is_edge(in_port) => {
                self.ingress(pkt, key, in_port, now, out)
            }
            _ => {
                self.counters.not_less += 1;
                Verdict { dropped: Some(DropReason::NoAction), entry: None }
            }
        }
    }

    fn timed_work(&mut self, now: Nanos, out: &mut dyn Output) {
        if self.fabric.expire(now, self.cfg.dead_ns, self.cfg.hold_ns) {
            self.dirty = true;
            self.announce = true;
            self.invalidate();
        }
        if self.dirty || now >= self.next_hello {
            // Queries older than an interval may be asked again: what is kept of them is bounded.
            let hello = self.cfg.hello_ns;
            self.asked.retain(|_, &mut t| now.saturating_sub(t) < hello);
            self.send_hellos(out);
            self.next_hello = now + self.cfg.hello_ns;
            self.dirty = false;
        }
        // Hosts are announced on change and every ten HELLOs; a switch unheard for thirty is forgotten.
        if self.announce || now >= self.next_announce {
            self.announce_hosts(out);
            self.announce = false;
            self.next_announce = now + 10 * self.cfg.hello_ns;
        }
        // A switch unheard for thirty HELLOs is forgotten with its hosts; a host of ours silent for
        // host_idle is no longer announced. Either way plans made for them must go, the kernel's too.
        let gone = self.directory.expire(now, 30 * self.cfg.hello_ns, self.cfg.host_idle_ns);
        if gone.local {
            self.announce = true;
        }
        if gone.local || gone.remote {
            self.invalidate();
        }
    }

    fn counter_groups(&self) -> Vec<CounterGroup> {
        let c = &self.counters;
        let mut counters = vec![
            ("shifted", c.shifted),
            ("popped", c.popped),
            ("delivered", c.delivered),
            ("pushed", c.pushed),
            ("local", c.local),
            ("rerouted_local", c.rerouted_local),
            ("rerouted_neighbour", c.rerouted_neighbour),
            ("backtracked", c.backtracked),
        ];
        counters.extend(StackError::ALL.iter().zip(c.malformed).map(|(e, n)| (e.name(), n)));
        counters.extend([
            ("unknown_port", c.unknown_port),
            ("no_route", c.no_route),
            ("budget_spent", c.budget_spent),
            ("no_host", c.no_host),
            ("multicast", c.multicast),
            ("not_less", c.not_less),
            ("hellos_sent", c.hellos_sent),
            ("protocol_in", c.protocol_in),
            ("protocol_bad", c.protocol_bad),
            ("protocol_on_edge_port", c.protocol_on_edge_port),
            ("hosts_over_port_limit", self.directory.hosts_over_port_limit),
            ("host_queries_over_limit", c.host_queries_over_limit),
            ("query_origins_over_limit", self.directory.query_origins_over_limit),
            ("arp_replies", c.arp_replies),
            ("nd_replies", c.nd_replies),
        ]);
        let mut groups = vec![CounterGroup { name: "labels".into(), counters }];
        let addresses: Vec<(&'static str, u64)> = vec![
            ("addresses", self.fabric.addresses().count() as u64),
            // 1 while this switch is the fabric's root (a standby root is 0).
            ("root", self.fabric.is_root() as u64),
            ("neighbours", self.fabric.neighbours().count() as u64),
            ("neighbours_silenced", self.fabric.silenced),
            ("hosts", self.directory.len() as u64),
            // Frames our last announcement of hosts took (more than one past an Ethernet frame's worth).
            ("announcement_frames", self.announcement_frames),
        ];
        groups.push(CounterGroup { name: "fabric".into(), counters: addresses });
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;
    use packet::less::Label;
    use packet::Offload;

    #[derive(Default)]
    struct Sent(Vec<(u32, Vec<u8>)>);

    impl Output for Sent {
        fn transmit(&mut self, egress: Egress, pkt: &Packet) {
            self.0.push((egress.port, pkt.data().to_vec()));
        }
        fn event(&mut self, _: Event) {}
    }

    const LIVE: PortView = PortView { config: 0, state: 0 };

    #[test]
    fn a_new_configuration_changes_timers_and_limits_and_keeps_the_rest() {
        let mut m = switch(2);
        let before = m.kernel.generation;
        let cfg = Config { hello_ns: 50 * MS, dead_ns: 200 * MS, max_labels: 8, ..Config::default() };
        m.reconfigure(&crate::Reconfig::Less(cfg)).unwrap();
        assert_eq!((m.cfg.hello_ns, m.cfg.dead_ns, m.kernel.max_labels), (50 * MS, 200 * MS, 8));
        assert!(m.kernel.generation > before, "the kernel's label limit is written again");
        assert_eq!(m.live.len(), 2, "the ports stay");
        let root = m.reconfigure(&crate::Reconfig::Less(Config { root: true, ..Config::default() }));
        assert!(root.unwrap_err().contains("root"), "a root change takes a restart");
        assert_eq!(m.cfg.hello_ns, 50 * MS, "and a refusal changes nothing");
    }

    fn switch(ports: u32) -> LessMode {
        let mut m = LessMode::new(Config::default());
        for p in 1..=ports {
            m.port_changed(p, Some(LIVE));
        }
        m
    }

    fn udp_with_labels(labels: &[Label]) -> Vec<u8> {
        let ip = packet::craft::udp4([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        let mut f = ip[..12].to_vec();
        f.extend_from_slice(&less::ETHERTYPE.to_be_bytes());
        labels.iter().for_each(|l| f.extend_from_slice(&l.word().to_be_bytes()));
        f.extend_from_slice(&ip[14..]);
        f
    }

    fn send(m: &mut LessMode, frame: &[u8]) -> (Verdict, Sent) {
        let (key, layout) = packet::parse(frame, 1).unwrap();
        let mut pkt = Packet::new(frame, Offload::default(), layout);
        let mut out = Sent::default();
        let v = m.receive(&mut pkt, &key, 0, &mut out);
        (v, out)
    }

    fn counter(m: &LessMode, name: &str) -> u64 {
        m.counters()[0].counters.iter().find(|(n, _)| *n == name).unwrap().1
    }

    #[test]
    fn three_hops_then_plain_ip() {
        let mut m = switch(8);
        let ip = packet::craft::udp4([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        let mut frame = udp_with_labels(&[Label { ports: [2, 8, 2], bottom: true, ttl: 3 }]);
        let mut ports = vec![];
        for _ in 0..3 {
            let (v, out) = send(&mut m, &frame);
            assert_eq!(v, Verdict::default());
            ports.push(out.0[0].0);
            frame = out.0[0].1.clone();
        }
        assert_eq!(ports, [2, 8, 2]);
        assert_eq!(frame, ip, "the last hop delivers the frame as it was before the labels");
        assert_eq!((counter(&m, "shifted"), counter(&m, "delivered")), (2, 1));
    }

    #[test]
    fn a_spent_label_gives_way_to_the_next() {
        let mut m = switch(8);
        let frame = udp_with_labels(&[
            Label { ports: [4, 0, 0], bottom: false, ttl: 1 },
            Label { ports: [6, 1, 0], bottom: true, ttl: 2 },
        ]);
        let (_, out) = send(&mut m, &frame);
        assert_eq!(out.0[0].0, 4);
        assert_eq!(out.0[0].1, udp_with_labels(&[Label { ports: [6, 1, 0], bottom: true, ttl: 2 }]));
        assert_eq!(counter(&m, "popped"), 1);
    }

    #[test]
    fn what_cannot_be_followed_is_dropped_and_counted() {
        let mut m = switch(4);
        let cases = [
            (Label { ports: [0, 1, 0], bottom: true, ttl: 1 }, "port_zero"),
            (Label { ports: [1, 0, 0], bottom: true, ttl: 2 }, "bad_ttl"),
            (Label { ports: [9, 0, 0], bottom: true, ttl: 1 }, "unknown_port"),
        ];
        for (label, reason) in cases {
            let (v, out) = send(&mut m, &udp_with_labels(&[label]));
            assert_eq!((v.dropped, out.0.len()), (Some(DropReason::BadLabel), 0), "{reason}");
            assert_eq!(counter(&m, reason), 1, "{reason}");
        }
        let deep: Vec<Label> = (0..17).map(|i| Label { ports: [1, 0, 0], bottom: i == 16, ttl: 1 }).collect();
        assert_eq!(send(&mut m, &udp_with_labels(&deep)).0.dropped, Some(DropReason::BadLabel));
        assert_eq!(counter(&m, "too_many_labels"), 1);
        let plain = packet::craft::udp4([2; 6], [4; 6], [10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 60);
        assert_eq!(send(&mut m, &plain).0.dropped, Some(DropReason::NoAction));
        assert_eq!(counter(&m, "no_host"), 1, "plain IP for a host nobody announced");
    }

    fn send_on(m: &mut LessMode, frame: &[u8], port: u32, now: Nanos) -> (Verdict, Sent) {
        let (key, layout) = packet::parse(frame, port).unwrap();
        let mut pkt = Packet::new(frame, Offload::default(), layout);
        let mut out = Sent::default();
        let v = m.receive(&mut pkt, &key, now, &mut out);
        (v, out)
    }

    fn arp(op: u16, n: u32, target: [u8; 4]) -> Vec<u8> {
        let sha = [2, 0xaa, 0, (n >> 16) as u8, (n >> 8) as u8, n as u8];
        let spa = (0x0a01_0000 + n).to_be_bytes();
        packet::craft::FrameBuilder::new([0xff; 6], sha).build(packet::craft::L3::Arp {
            op,
            sha,
            spa,
            tha: [0; 6],
            tpa: target,
        })
    }

    fn fabric_counter(m: &LessMode, name: &str) -> u64 {
        m.counters()[1].counters.iter().find(|(n, _)| *n == name).unwrap().1
    }

    fn sent_kinds(out: &Sent) -> Vec<(u32, Message)> {
        out.0
            .iter()
            .filter(|(_, f)| f[12..14] == less::PROTOCOL_ETHERTYPE.to_be_bytes())
            .map(|(p, f)| (*p, Message::decode(&f[14..]).unwrap()))
            .collect()
    }

    use protocol::{HostEntry, Hosts, Message};

    #[test]
    fn with_fabric_ports_listed_protocol_frames_elsewhere_are_dropped_and_counted() {
        let cfg = Config { fabric_ports: Some(BTreeSet::from([4])), switch_id: 2, ..Config::default() };
        let mut m = LessMode::new(cfg);
        (1..=4).for_each(|p| m.port_changed(p, Some(LIVE)));
        let root = fabric::Fabric::new(1, true, 4);
        // A host on port 1 learned, then that host says HELLO as a switch would.
        send_on(&mut m, &arp(2, 1, [10, 0, 0, 9]), 1, 0);
        let hello = Message::Hello(root.hello_for(1)).encode([2; 6]);
        let (v, _) = send_on(&mut m, &hello, 1, 1);
        assert_eq!(v.dropped, Some(DropReason::Filtered));
        let hosts = Hosts {
            origin: 9,
            seq: 1,
            part: 0,
            parts: 1,
            addresses: vec![Address::default()],
            hosts: vec![HostEntry { ip: "10.0.0.2".parse().unwrap(), mac: [2; 6], port: 1 }],
        };
        assert_eq!(
            send_on(&mut m, &Message::Hosts(hosts.clone()).encode([2; 6]), 1, 1).0.dropped,
            Some(DropReason::Filtered)
        );
        assert_eq!(counter(&m, "protocol_on_edge_port"), 2);
        assert_eq!(fabric_counter(&m, "neighbours"), 0);
        assert_eq!(fabric_counter(&m, "hosts"), 1, "port 1 is still an edge port, its host kept; no HOSTS taken");
        // On the listed port, the same frames are heard.
        send_on(&mut m, &Message::Hello(root.hello_for(4)).encode([2; 6]), 4, 2);
        send_on(&mut m, &Message::Hosts(hosts).encode([2; 6]), 4, 2);
        assert_eq!(
            (fabric_counter(&m, "neighbours"), fabric_counter(&m, "hosts"), counter(&m, "protocol_in")),
            (1, 2, 2)
        );
    }

    #[test]
    fn discovered_a_port_hears_hosts_and_queries_only_once_a_hello_made_it_a_fabric_port() {
        let mut m = switch(2);
        let hosts = Hosts { origin: 9, seq: 1, part: 0, parts: 1, addresses: vec![Address::default()], hosts: vec![] };
        let frame = Message::Hosts(hosts).encode([2; 6]);
        assert_eq!(send_on(&mut m, &frame, 2, 0).0.dropped, Some(DropReason::Filtered));
        assert_eq!(counter(&m, "protocol_on_edge_port"), 1);
        let root = fabric::Fabric::new(1, true, 4);
        send_on(&mut m, &Message::Hello(root.hello_for(1)).encode([2; 6]), 2, 1);
        assert_eq!(send_on(&mut m, &frame, 2, 1).0, Verdict::default());
        assert_eq!(counter(&m, "protocol_on_edge_port"), 1);
    }

    #[test]
    fn many_hosts_on_one_port_fill_its_share_and_the_announcement_goes_in_frames_that_fit() {
        let cfg = Config {
            fabric_ports: Some(BTreeSet::from([4])),
            switch_id: 2,
            max_hosts_per_port: 150,
            ..Config::default()
        };
        let mut m = LessMode::new(cfg);
        (1..=4).for_each(|p| m.port_changed(p, Some(LIVE)));
        // 200 invented ARP senders on port 1 (replies: nothing is asked), one real host on port 2.
        for n in 0..200 {
            send_on(&mut m, &arp(2, n, [10, 0, 0, 9]), 1, 0);
        }
        send_on(&mut m, &arp(2, 1_000, [10, 0, 0, 9]), 2, 0);
        assert_eq!((counter(&m, "hosts_over_port_limit"), fabric_counter(&m, "hosts")), (50, 151));
        let mut out = Sent::default();
        m.tick(1, &mut out);
        let parts: Vec<Hosts> = sent_kinds(&out)
            .into_iter()
            .filter_map(|(port, msg)| match msg {
                Message::Hosts(h) => Some((port, h)),
                _ => None,
            })
            .map(|(port, h)| {
                assert_eq!(port, 4, "announced on the fabric port only");
                h
            })
            .collect();
        assert!(out.0.iter().all(|(_, f)| f.len() <= protocol::MAX_FRAME));
        assert_eq!(parts.len(), 2);
        assert_eq!(fabric_counter(&m, "announcement_frames"), 2);
        assert_eq!(parts.iter().map(|p| p.hosts.len()).sum::<usize>(), 151);
    }

    #[test]
    fn host_queries_out_at_once_are_bounded_and_age_with_the_hello_interval() {
        let cfg = Config { max_host_queries: 4, ..Config::default() };
        let mut m = LessMode::new(cfg);
        (1..=2).for_each(|p| m.port_changed(p, Some(LIVE)));
        let asked = |m: &mut LessMode, target: u8, now: Nanos| {
            let (_, out) = send_on(m, &arp(1, 7, [10, 0, 9, target]), 1, now);
            sent_kinds(&out).iter().filter(|(_, msg)| matches!(msg, Message::HostQuery(_))).count()
        };
        // Port 2 has no neighbour: queries flood on fabric ports only, so make it one.
        let root = fabric::Fabric::new(1, true, 4);
        send_on(&mut m, &Message::Hello(root.hello_for(1)).encode([2; 6]), 2, 0);
        let first: Vec<usize> = (0..6).map(|t| asked(&mut m, t, 0)).collect();
        assert_eq!(first, [1, 1, 1, 1, 0, 0]);
        assert_eq!(counter(&m, "host_queries_over_limit"), 2);
        assert_eq!(asked(&mut m, 0, 50 * MS), 0, "asked already within the interval");
        let hello = m.cfg.hello_ns;
        assert_eq!(asked(&mut m, 5, hello), 1, "a HELLO interval on, the old ones make room");
        assert!(m.asked.len() <= 4);
    }

    #[test]
    fn a_port_without_carrier_is_no_route() {
        let mut m = switch(4);
        m.port_changed(3, Some(PortView { config: 0, state: ofp::port::state::LINK_DOWN }));
        let (v, out) = send(&mut m, &udp_with_labels(&[Label { ports: [3, 0, 0], bottom: true, ttl: 1 }]));
        assert_eq!((v.dropped, out.0.len()), (Some(DropReason::NoAction), 0));
        assert_eq!(counter(&m, "no_route"), 1);
        m.port_changed(3, Some(LIVE));
        assert_eq!(send(&mut m, &udp_with_labels(&[Label { ports: [3, 0, 0], bottom: true, ttl: 1 }])).1 .0[0].0, 3);
    }
}
