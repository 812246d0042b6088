//! Six LESS switches wired together in memory and driven through the seam alone: addresses
//! converge from HELLOs, unmodified hosts find each other by ARP or IPv6 neighbour discovery, their
//! IP frames (v4 and v6) cross the fabric
//! labelled and arrive as they were sent, and each of the three reroute cases carries a frame
//! around a link taken down, with no controller.
//!
//! ```text
//!            R (root)
//!          1/   \2
//!         1/     \1
//!        A ---2---2--- B ---4 hB
//!        |3           |3
//!        |1           |1
//!   hC 3-C            D
//!        |2           |2
//!        |1           |2
//!        +---- E -----+
//!              |3
//!              hE
//! ```
#![cfg(feature = "less")]

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use forwarding::less::{Config, LessMode};
use forwarding::{Egress, Event, Mode, Output, PortView};

use ofp::oxm::Field;
use ofp::port::state::LINK_DOWN;
use packet::craft::{FrameBuilder, L3, L4};
use packet::{parse, Offload, Packet};

const R: usize = 0;
const A: usize = 1;
const B: usize = 2;
const C: usize = 3;
const D: usize = 4;
const E: usize = 5;
const MS: u64 = 1_000_000;

/// Switch-to-switch links: (switch, port, switch, port).
const LINKS: [(usize, u32, usize, u32); 7] =
    [(R, 1, A, 1), (R, 2, B, 1), (A, 2, B, 2), (A, 3, C, 1), (B, 3, D, 1), (C, 2, E, 1), (D, 2, E, 2)];

struct Host {
    at: (usize, u32),
    mac: [u8; 6],
    ip: [u8; 4],
    ip6: [u8; 16],
    received: Vec<Vec<u8>>,
    arp: BTreeMap<[u8; 4], [u8; 6]>,
    /// IPv6 neighbours, from advertisements.
    nd: BTreeMap<[u8; 16], [u8; 6]>,
}

impl Host {
    fn new(at: (usize, u32), n: u8) -> Host {
        let mut ip6 = [0; 16];
        ip6[..2].copy_from_slice(&[0xfd, 0]);
        ip6[15] = n;
        let (mac, ip) = ([2, 0, 0, 0, 0, n], [10, 0, 0, n]);
        Host { at, mac, ip, ip6, received: vec![], arp: BTreeMap::new(), nd: BTreeMap::new() }
    }
}

#[derive(Default)]
struct Sent(Vec<(u32, Vec<u8>)>);

impl Output for Sent {
    fn transmit(&mut self, egress: Egress, pkt: &Packet) {
        self.0.push((egress.port, pkt.data().to_vec()));
    }
    fn event(&mut self, _: Event) {}
}

struct Net {
    switches: Vec<LessMode>,
    wires: BTreeMap<(usize, u32), (usize, u32)>,
    down: Vec<(usize, u32)>,
    hosts: Vec<Host>,
    now: u64,
    /// Every frame a switch sent, by (switch, port): to read labels off a link.
    trace: Vec<((usize, u32), Vec<u8>)>,
}

impl Net {
    fn new() -> Net {
        Net::with_host_idle(Config::default().host_idle_ns)
    }

    fn with_host_idle(host_idle_ns: u64) -> Net {
        let hosts = vec![Host::new((B, 4), 2), Host::new((C, 3), 3), Host::new((E, 3), 5)];
        let ports = [2, 3, 4, 3, 2, 3];
        let mut switches = vec![];
        for (i, &n) in ports.iter().enumerate() {
            let cfg = Config { root: i == R, switch_id: 100 + i as u64, host_idle_ns, ..Config::default() };
            let mut m = LessMode::new(cfg);
            for p in 1..=n {
                m.port_changed(p, Some(PortView::default()));
            }
            switches.push(m);
        }
        let mut wires = BTreeMap::new();
        for (a, pa, b, pb) in LINKS {
            wires.insert((a, pa), (b, pb));
            wires.insert((b, pb), (a, pa));
        }
        Net { switches, wires, down: vec![], hosts, now: 0, trace: vec![] }
    }

    /// Frames in flight until none is left.
    fn run(&mut self, mut queue: VecDeque<(usize, u32, Vec<u8>)>) {
        while let Some((sw, port, frame)) = queue.pop_front() {
            let (key, layout) = parse(&frame, port).unwrap();
            let mut pkt = Packet::new(&frame, Offload::default(), layout);
            let mut out = Sent::default();
            self.switches[sw].receive(&mut pkt, &key, self.now, &mut out);
            self.route(sw, out, &mut queue);
        }
    }

    fn route(&mut self, sw: usize, out: Sent, queue: &mut VecDeque<(usize, u32, Vec<u8>)>) {
        for (port, frame) in out.0 {
            self.trace.push(((sw, port), frame.clone()));
            if self.down.contains(&(sw, port)) {
                continue;
            }
            if let Some(&(to, to_port)) = self.wires.get(&(sw, port)) {
                queue.push_back((to, to_port, frame));
            } else if let Some(h) = self.hosts.iter().position(|h| h.at == (sw, port)) {
                for reply in self.host_receives(h, frame) {
                    queue.push_back((sw, port, reply));
                }
            }
        }
    }

    /// A host answers ARP for its address and keeps everything else.
    fn host_receives(&mut self, h: usize, frame: Vec<u8>) -> Vec<Vec<u8>> {
        let host = &mut self.hosts[h];
        if frame[12..14] == [0x08, 0x06] {
            let (op, sha, spa, tpa) = (frame[21], &frame[22..28], &frame[28..32], &frame[38..42]);
            host.arp.insert(spa.try_into().unwrap(), sha.try_into().unwrap());
            if op == 1 && tpa == host.ip {
                let reply = FrameBuilder::new(sha.try_into().unwrap(), host.mac).build(L3::Arp {
                    op: 2,
                    sha: host.mac,
                    spa: host.ip,
                    tha: sha.try_into().unwrap(),
                    tpa: spa.try_into().unwrap(),
                });
                return vec![reply];
            }
            return vec![];
        }
        // IPv6 neighbour discovery, as a Linux host does it: a solicitation for our address is
        // answered to its sender; an advertisement is kept.
        let (key, _) = parse(&frame, 0).unwrap();
        if key.eth_type() == 0x86dd && key.ip_proto() == 58 {
            let target: [u8; 16] = key.get(Field::Ipv6NdTarget).to_be_bytes();
            match key.get(Field::Icmpv6Type) {
                135 if target == host.ip6 => {
                    let (asker_mac, asker) = (frame[6..12].try_into().unwrap(), frame[22..38].try_into().unwrap());
                    return vec![packet::craft::neighbour_advertisement(host.mac, host.ip6, asker_mac, asker)];
                }
                136 => {
                    let tll = (key.get(Field::Ipv6NdTll) as u64).to_be_bytes();
                    host.nd.insert(target, tll[2..].try_into().unwrap());
                    return vec![];
                }
                _ => {}
            }
        }
        if frame[..6] == host.mac {
            host.received.push(frame);
        }
        vec![]
    }

    /// Time passes in 1 ms steps; every switch's timers run.
    fn advance(&mut self, ms: u64) {
        for _ in 0..ms {
            self.now += MS;
            for sw in 0..self.switches.len() {
                if self.switches[sw].next_deadline().is_some_and(|d| d <= self.now) {
                    let mut out = Sent::default();
                    self.switches[sw].tick(self.now, &mut out);
                    let mut queue = VecDeque::new();
                    self.route(sw, out, &mut queue);
                    self.run(queue);
                }
            }
        }
    }

    /// Host `h` sends a frame from its port.
    fn host_sends(&mut self, h: usize, frame: Vec<u8>) {
        let (sw, port) = self.hosts[h].at;
        self.run(VecDeque::from([(sw, port, frame)]));
    }

    fn arp_request(&self, h: usize, target: [u8; 4]) -> Vec<u8> {
        let me = &self.hosts[h];
        FrameBuilder::new([0xff; 6], me.mac).build(L3::Arp { op: 1, sha: me.mac, spa: me.ip, tha: [0; 6], tpa: target })
    }

    /// What an unmodified host does: ARP until answered, then send.
    fn resolve(&mut self, h: usize, target: [u8; 4]) -> [u8; 6] {
        for _ in 0..5 {
            if let Some(&mac) = self.hosts[h].arp.get(&target) {
                return mac;
            }
            let req = self.arp_request(h, target);
            self.host_sends(h, req);
            self.advance(200);
        }
        panic!("{target:?} never resolved");
    }

    /// The same over IPv6: solicit until advertised.
    fn solicit(&mut self, h: usize, target: [u8; 16]) -> [u8; 6] {
        for _ in 0..5 {
            if let Some(&mac) = self.hosts[h].nd.get(&target) {
                return mac;
            }
            let me = &self.hosts[h];
            let ns = packet::craft::neighbour_solicitation(me.mac, me.ip6, target);
            self.host_sends(h, ns);
            self.advance(200);
        }
        panic!("{target:?} never advertised");
    }

    fn udp6(&self, from: usize, to: usize, seq: u8) -> Vec<u8> {
        let (me, them) = (&self.hosts[from], &self.hosts[to]);
        FrameBuilder::new(them.mac, me.mac).build(L3::Ipv6 {
            src: me.ip6,
            dst: them.ip6,
            hop_limit: 64,
            tc: 0,
            flow_label: 7,
            l4: L4::Udp { src: 5000, dst: 9, payload: vec![seq; 64] },
        })
    }

    fn udp(&self, from: usize, to_mac: [u8; 6], to_ip: [u8; 4], seq: u8) -> Vec<u8> {
        let me = &self.hosts[from];
        FrameBuilder::new(to_mac, me.mac).build(L3::Ipv4 {
            src: me.ip,
            dst: to_ip,
            ttl: 64,
            tos: 0,
            l4: L4::Udp { src: 5000, dst: 9, payload: vec![seq; 64] },
        })
    }

    /// Carrier on a link (both ends) or a host port goes away or comes back.
    fn link(&mut self, a: usize, pa: u32, up: bool) {
        let mut ends = vec![(a, pa)];
        ends.extend(self.wires.get(&(a, pa)).copied());
        let view = PortView { config: 0, state: if up { 0 } else { LINK_DOWN } };
        for (sw, p) in ends {
            self.switches[sw].port_changed(p, Some(view));
            if up {
                self.down.retain(|&d| d != (sw, p));
            } else {
                self.down.push((sw, p));
            }
        }
    }

    fn counter(&self, sw: usize, name: &str) -> u64 {
        let groups = self.switches[sw].counters();
        groups.iter().flat_map(|g| g.counters.iter()).find(|(n, _)| *n == name).unwrap().1
    }

    fn addresses(&self, sw: usize) -> u64 {
        self.counter(sw, "addresses")
    }

    /// Sends one frame from host `from` to host `to` and says whether it arrived as sent.
    fn delivers(&mut self, from: usize, to: usize, seq: u8) -> bool {
        let mac = self.hosts[to].mac;
        let frame = self.udp(from, mac, self.hosts[to].ip, seq);
        let before = self.hosts[to].received.len();
        self.host_sends(from, frame.clone());
        let got = &self.hosts[to].received[before..];
        got.len() == 1 && got[0] == frame
    }
}

const HB: usize = 0;
const HC: usize = 1;
const HE: usize = 2;

fn converged() -> Net {
    let mut net = Net::new();
    net.advance(500);
    // E has two shortest paths from the root (via C and via D); everyone else one.
    assert_eq!((0..6).map(|s| net.addresses(s)).collect::<Vec<_>>(), [1, 1, 1, 1, 1, 2]);
    let b_ip = net.hosts[HB].ip;
    assert_eq!(net.resolve(HE, b_ip), net.hosts[HB].mac, "hB is found by a query across the fabric");
    let c_ip = net.hosts[HC].ip;
    net.resolve(HC, b_ip);
    net.resolve(HB, c_ip);
    net
}

fn labels_on(net: &Net, from: (usize, u32), last: usize) -> Vec<Vec<u8>> {
    net.trace[last..].iter().filter(|(at, _)| *at == from).map(|(_, f)| f.clone()).collect()
}

#[test]
fn hosts_talk_across_the_fabric_with_labels_in_between() {
    let mut net = converged();
    let mark = net.trace.len();
    assert!(net.delivers(HE, HB, 1));
    // E → D → B: on the E-D link the frame is labelled (the route's rest, then the reroute block).
    let on_link = labels_on(&net, (E, 2), mark);
    assert_eq!(on_link.len(), 1);
    assert_eq!(on_link[0][12..14], [0x88, 0x47]);
    assert_eq!(on_link[0][14..18], [1, 4, 0, 2], "D's port 1, then B's host port 4, TTL 2");
    assert!(net.delivers(HB, HC, 2));
    assert!(net.delivers(HC, HB, 3));
    assert_eq!(net.counter(E, "pushed"), 1);
    assert_eq!(net.counter(B, "delivered"), 2);
    // The plan for hB is kept for the kernel to repeat: out port 2, the labels seen on the link.
    let kernel = net.switches[E].kernel().labels.unwrap();
    let plan = &kernel.push[&IpAddr::from(net.hosts[HB].ip)];
    assert_eq!((plan.port, &plan.stack[..4]), (2, &[1, 4, 0, 2][..]));
    assert!(kernel.edge_ports.contains(&3) && !kernel.edge_ports.contains(&2));
}

#[test]
fn ipv6_hosts_find_each_other_by_neighbour_discovery_and_talk() {
    let mut net = converged();
    // A host checking that its address is free (from ::) is neither answered nor learned.
    let b6 = net.hosts[HB].ip6;
    let dad = packet::craft::neighbour_solicitation(net.hosts[HE].mac, [0; 16], b6);
    net.host_sends(HE, dad);
    assert_eq!((net.counter(E, "nd_replies"), net.hosts[HE].nd.len()), (0, 0));
    // hE's first solicitation for hB goes across the fabric as a query; B asks hB as hE, learns it
    // from the advertisement and announces it; hE's next solicitation is answered by E.
    assert_eq!(net.solicit(HE, b6), net.hosts[HB].mac);
    assert_eq!(net.counter(E, "nd_replies"), 1);
    let mark = net.trace.len();
    let frame = net.udp6(HE, HB, 1);
    net.host_sends(HE, frame.clone());
    assert_eq!(net.hosts[HB].received.last(), Some(&frame), "arrives as it was sent");
    let on_link = labels_on(&net, (E, 2), mark);
    assert_eq!((on_link.len(), &on_link[0][12..18]), (1, &[0x88, 0x47, 1, 4, 0, 2][..]));
    // The way back: hB learned hE's address from the solicitation B made for it.
    let e6 = net.hosts[HE].ip6;
    assert_eq!(net.solicit(HB, e6), net.hosts[HE].mac);
    let back = net.udp6(HB, HE, 2);
    net.host_sends(HB, back.clone());
    assert_eq!(net.hosts[HE].received.last(), Some(&back));
    // The plan is kept for the kernel to repeat, as for IPv4: the labels seen on the link.
    let plan = &net.switches[E].kernel().labels.unwrap().push[&IpAddr::from(net.hosts[HB].ip6)];
    assert_eq!((plan.port, &plan.stack[..]), (2, &on_link[0][14..14 + plan.stack.len()]));
    // A group destination is no host's: counted, not queried.
    let all_nodes = FrameBuilder::new([0x33, 0x33, 0, 0, 0, 1], net.hosts[HE].mac).build(L3::Ipv6 {
        src: e6,
        dst: [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        hop_limit: 1,
        tc: 0,
        flow_label: 0,
        l4: L4::Udp { src: 1, dst: 2, payload: vec![] },
    });
    net.host_sends(HE, all_nodes);
    assert_eq!((net.counter(E, "multicast"), net.counter(E, "no_host")), (1, 0));
}

#[test]
fn a_host_silent_for_host_idle_is_forgotten_with_the_plans_for_it() {
    let mut net = Net::with_host_idle(2_000 * MS);
    net.advance(500);
    let b_ip = net.hosts[HB].ip;
    net.resolve(HE, b_ip);
    assert!(net.delivers(HE, HB, 1));
    assert!(net.switches[E].kernel().labels.unwrap().push.contains_key(&IpAddr::from(b_ip)), "E planned hB's route");
    // hB says nothing for longer than host_idle: B forgets it and announces so; E's plan goes,
    // in the kernel's tables too, and a frame for hB finds no host.
    net.advance(2_500);
    assert!(!net.switches[E].kernel().labels.unwrap().push.contains_key(&IpAddr::from(b_ip)));
    assert!(!net.delivers(HE, HB, 2));
    // hB speaks again (its ARP for hE): found again, and reached.
    let e_ip = net.hosts[HE].ip;
    let arp = net.arp_request(HB, e_ip);
    net.host_sends(HB, arp);
    net.advance(200);
    assert!(net.delivers(HE, HB, 3));
}

#[test]
fn case_a_a_local_backup_path() {
    let mut net = converged();
    // E's route to hB leaves by its port 2 (to D). Down: E has another address, through C.
    net.link(E, 2, false);
    assert!(net.delivers(HE, HB, 1));
    assert_eq!(net.counter(E, "rerouted_local"), 1);
}

#[test]
fn case_b_a_neighbours_path() {
    let mut net = converged();
    // Before any failure, D has planned the way around its port 1 for the kind of frame hE sends
    // hB (its reroute block): the kernel takes the first frame after the failure as the rest.
    let mark = net.trace.len();
    assert!(net.delivers(HE, HB, 0));
    let on_link = labels_on(&net, (E, 2), mark).remove(0);
    let depth = packet::less::depth(&on_link, 14, 16).unwrap();
    let split = forwarding::less::reroute::split(&on_link, 14, depth);
    let hash = packet::less::block_hash(&on_link[14 + split.route_bytes..14 + 4 * depth]);
    let planned = net.switches[D].kernel().labels.unwrap().reroute[&(1, 0, hash)].clone();
    assert_eq!(planned.port, 2, "back to E");
    // D's only way up (to B) goes: D has no address that avoids it, but E, its neighbour, has.
    net.link(D, 1, false);
    let mark = net.trace.len();
    assert!(net.delivers(HE, HB, 1));
    assert_eq!(net.counter(D, "rerouted_neighbour"), 1);
    // Userspace took the detour it had planned, and keeps the plan.
    let back_to_e = labels_on(&net, (D, 2), mark).remove(0);
    assert_eq!(back_to_e[14..14 + planned.stack.len()], planned.stack[..]);
    assert_eq!(net.switches[D].kernel().labels.unwrap().reroute[&(1, 0, hash)], planned);
}

#[test]
fn a_frame_with_no_budget_left_is_not_rerouted_but_dropped_and_counted() {
    let mut net = converged();
    net.link(D, 1, false);
    let mark = net.trace.len();
    assert!(net.delivers(HE, HB, 1));
    // The frame E sent D, its reroute block's budget spent on the way (a loop, say).
    let mut spent = labels_on(&net, (E, 2), mark).into_iter().next().expect("E labelled the frame to D");
    let block = (14..spent.len()).step_by(4).find(|&at| spent[at + 3] & 0x7f == 0).expect("a reroute block");
    spent[block] = 0;
    let (before, rerouted) = (net.counter(D, "budget_spent"), net.counter(D, "rerouted_neighbour"));
    let mark = net.trace.len();
    net.run([(D, 2, spent)].into());
    assert_eq!(net.trace.len(), mark, "nothing sent");
    assert_eq!(net.counter(D, "budget_spent"), before + 1);
    assert_eq!((net.counter(D, "rerouted_neighbour"), net.counter(D, "no_route")), (rerouted, 0));
}

#[test]
fn case_c_back_to_a_switch_that_has_a_path() {
    let mut net = converged();
    // hC → hB runs C → A → R → B. R's link to B goes: hB is under R only through it, and no
    // neighbour of R has another way, so the frame goes back to A, which takes its link to B.
    net.link(R, 2, false);
    assert!(net.delivers(HC, HB, 1));
    assert_eq!(net.counter(R, "backtracked"), 1);
    assert_eq!(net.counter(A, "rerouted_neighbour"), 1);
}

#[test]
fn after_the_hold_addresses_reconverge_and_routes_avoid_the_failure() {
    let mut net = converged();
    net.link(D, 2, false);
    net.advance(400);
    assert_eq!(net.addresses(E), 1, "E lost its address through D");
    // hB's route to hE is planned with E's one address left: no reroute needed anywhere.
    assert!(net.delivers(HB, HE, 1));
    assert_eq!((0..6).map(|s| net.counter(s, "rerouted_local") + net.counter(s, "rerouted_neighbour")).sum::<u64>(), 0);
    net.link(D, 2, true);
    net.advance(400);
    assert_eq!(net.addresses(E), 2, "and got it back with the link");
}

#[test]
fn with_every_way_gone_the_frame_is_dropped_and_counted() {
    let mut net = converged();
    net.link(B, 4, false);
    assert!(!net.delivers(HE, HB, 1));
    let no_route: u64 = (0..6).map(|s| net.counter(s, "no_route")).sum();
    assert_eq!(no_route, 1);
}

#[test]
fn a_link_that_goes_quiet_with_carrier_up_is_found_by_hello_timeout() {
    let mut net = converged();
    assert_eq!(net.counter(E, "neighbours"), 2);
    // The E-D link stops carrying frames; neither end loses carrier.
    net.down.extend([(E, 2), (D, 2)]);
    net.advance(400);
    assert_eq!(net.counter(E, "neighbours"), 1, "D's HELLOs stopped: gone after dead_ms");
    assert_eq!((net.counter(E, "neighbours_silenced"), net.counter(C, "neighbours_silenced")), (1, 0));
    assert_eq!(net.addresses(E), 1);
    assert!(net.delivers(HE, HB, 1), "E's route now avoids the quiet link");
    assert!(net.delivers(HB, HE, 2));
    // The kernel is told to hold the port down although its carrier is up.
    assert!(net.switches[E].kernel().labels.unwrap().down_ports.contains(&2));
    net.down.clear();
    net.advance(300);
    assert_eq!(net.addresses(E), 2, "HELLOs heard again: the port is back");
    assert!(!net.switches[E].kernel().labels.unwrap().down_ports.contains(&2));
}
