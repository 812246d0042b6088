//! What a LESS switch says to its neighbours and answers its hosts: the addressing protocol's
//! frames (HELLO, HOSTS, HOST-QUERY) in and out, and ARP and IPv6 neighbour discovery at the edge.
//! The forwarding of labelled and host frames is in `mod.rs`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ofp::oxm::Field;
use packet::craft::{self, FrameBuilder, L3};
use packet::parse::ipproto;
use packet::{FlowKey, Offload, Packet};

use super::edge::{self, Location};
use super::protocol::{self, HostQuery, Message};
use super::{key_mac, LessMode, CONTROL_QUEUE};
use crate::{DropReason, Egress, Nanos, Output, Verdict};

const NEIGHBOUR_SOLICITATION: u128 = 135;
const NEIGHBOUR_ADVERTISEMENT: u128 = 136;

/// An IPv6 frame that is a neighbour solicitation or advertisement: the edge answers and learns
/// from those, as from ARP.
pub(super) fn is_neighbour_discovery(key: &FlowKey) -> bool {
    key.ip_proto() == ipproto::ICMPV6
        && matches!(key.get(Field::Icmpv6Type), NEIGHBOUR_SOLICITATION | NEIGHBOUR_ADVERTISEMENT)
}

impl LessMode {
    pub(super) fn mac(&self) -> [u8; 6] {
        protocol::switch_mac(self.cfg.switch_id)
    }

    pub(super) fn send_frame(&self, frame: &[u8], port: u8, queue: Option<u32>, out: &mut dyn Output) {
        let Ok((_, layout)) = packet::parse(frame, port as u32) else { return };
        let pkt = Packet::new(frame, Offload::default(), layout);
        out.transmit(Egress { port: port as u32, queue }, &pkt);
    }

    /// Sends `msg` out every live port but `except` (fabric ports only if `fabric_only`).
    pub(super) fn flood(&mut self, msg: &Message, except: Option<u8>, fabric_only: bool, out: &mut dyn Output) {
        let frame = msg.encode(self.mac());
        let ports: Vec<u8> = self.live.iter().filter(|(_, &up)| up).map(|(&p, _)| p as u8).collect();
        for p in ports {
            if Some(p) != except && (!fabric_only || !self.fabric.is_edge(p)) {
                self.send_frame(&frame, p, Some(CONTROL_QUEUE), out);
            }
        }
    }

    pub(super) fn send_hellos(&mut self, out: &mut dyn Output) {
        let ports: Vec<u8> = self.live.iter().filter(|(_, &up)| up).map(|(&p, _)| p as u8).collect();
        for p in ports {
            let frame = Message::Hello(self.fabric.hello_for(p)).encode(self.mac());
            self.send_frame(&frame, p, Some(CONTROL_QUEUE), out);
            self.counters.hellos_sent += 1;
        }
    }

    pub(super) fn announce_hosts(&mut self, out: &mut dyn Output) {
        let addresses = self.fabric.addresses().cloned().collect();
        let parts = self.directory.announce(self.cfg.switch_id, addresses);
        self.announcement_frames = parts.len() as u64;
        for part in parts {
            self.flood(&Message::Hosts(part), None, true, out);
        }
    }

    /// A protocol frame on a port that is not a fabric port: dropped and counted. A HELLO is heard
    /// on any port the configuration does not rule out (it makes the port a fabric port when none
    /// are listed); HOSTS and HOST-QUERY only on fabric ports, so that a host cannot announce
    /// hosts or ask across the fabric in a switch's name.
    fn on_edge_port(&mut self, msg: &Message, in_port: u8) -> bool {
        let heard = match msg {
            Message::Hello(_) => self.fabric.may_hear(in_port),
            Message::Hosts(_) | Message::HostQuery(_) => !self.fabric.is_edge(in_port),
        };
        if !heard {
            self.counters.protocol_on_edge_port += 1;
        }
        !heard
    }

    pub(super) fn protocol(&mut self, pkt: &Packet, in_port: u8, now: Nanos, out: &mut dyn Output) -> Verdict {
        let l3 = pkt.layout.l3 as usize;
        let msg = match Message::decode(&pkt.data()[l3..]) {
            Ok(m) => m,
            Err(_) => {
                self.counters.protocol_bad += 1;
                return Verdict { dropped: Some(DropReason::Malformed), entry: None };
            }
        };
        if self.on_edge_port(&msg, in_port) {
            return Verdict { dropped: Some(DropReason::Filtered), entry: None };
        }
        self.counters.protocol_in += 1;
        match msg {
            Message::Hello(h) => {
                let was_edge = self.fabric.is_edge(in_port);
                let was_silent = self.fabric.is_silent(in_port);
                if self.fabric.hello(in_port, h, now) {
                    self.dirty = true;
                    self.announce = true;
                    self.invalidate();
                }
                if was_edge && !self.fabric.is_edge(in_port) {
                    if self.directory.forget_port(in_port) {
                        self.announce = true;
                    }
                    self.invalidate();
                }
                if was_silent {
                    // Back from silence: the kernel must stop holding the port down.
                    self.dirty = true;
                    self.invalidate();
                }
            }
            Message::Hosts(h) => {
                if h.origin == self.cfg.switch_id {
                    return Verdict::default();
                }
                if let Some(changed) = self.directory.hosts(h.clone(), now) {
                    self.flood(&Message::Hosts(h), Some(in_port), true, out);
                    if changed {
                        self.invalidate();
                    }
                }
            }
            Message::HostQuery(q) => {
                if q.origin != self.cfg.switch_id && self.directory.query(q.origin, q.seq, now) {
                    self.flood(&Message::HostQuery(q), Some(in_port), true, out);
                    self.ask_hosts(&q, None, out);
                }
            }
        }
        Verdict::default()
    }

    /// An ARP request (or IPv6 neighbour solicitation) for `q.target` out of our edge ports (but
    /// `except`), as from the asker, so that the owner answers and we learn it.
    pub(super) fn ask_hosts(&mut self, q: &HostQuery, except: Option<u8>, out: &mut dyn Output) {
        let frame = match (q.sender_ip, q.target) {
            (IpAddr::V4(spa), IpAddr::V4(tpa)) => FrameBuilder::new([0xff; 6], q.sender_mac).build(L3::Arp {
                op: 1,
                sha: q.sender_mac,
                spa: spa.octets(),
                tha: [0; 6],
                tpa: tpa.octets(),
            }),
            (IpAddr::V6(src), IpAddr::V6(target)) => {
                craft::neighbour_solicitation(q.sender_mac, src.octets(), target.octets())
            }
            _ => return,
        };
        let ports: Vec<u8> = self.live.iter().filter(|(_, &up)| up).map(|(&p, _)| p as u8).collect();
        for p in ports {
            if Some(p) != except && self.fabric.is_edge(p) {
                self.send_frame(&frame, p, None, out);
            }
        }
    }

    pub(super) fn learned(&mut self, ip: IpAddr, mac: [u8; 6], port: u8, now: Nanos) {
        if self.directory.learn(ip, mac, port, now) {
            self.announce = true;
            self.invalidate();
        }
    }

    pub(super) fn arp(&mut self, key: &FlowKey, in_port: u8, now: Nanos, out: &mut dyn Output) -> Verdict {
        let ip = |f: Field| IpAddr::V4(Ipv4Addr::from(key.get(f) as u32));
        let (spa, sha, tpa) = (ip(Field::ArpSpa), key_mac(key, Field::ArpSha), ip(Field::ArpTpa));
        self.learned(spa, sha, in_port, now);
        if key.get(Field::ArpOp) != 1 {
            return Verdict::default();
        }
        if let Some(tmac) = self.answer_for(tpa, spa, sha, in_port, now, out) {
            let (IpAddr::V4(spa), IpAddr::V4(tpa)) = (spa, tpa) else { unreachable!() };
            let (spa, tpa) = (spa.octets(), tpa.octets());
            let reply = FrameBuilder::new(sha, tmac).build(L3::Arp { op: 2, sha: tmac, spa: tpa, tha: sha, tpa: spa });
            self.send_frame(&reply, in_port, None, out);
            self.counters.arp_replies += 1;
        }
        Verdict::default()
    }

    /// A neighbour solicitation is answered as ARP is, with the target's own MAC; an advertisement
    /// teaches us its sender and goes no further (the host it answers was asked by us, as in
    /// `ask_hosts`). A solicitation from the unspecified address is a host checking that an address
    /// is free (duplicate address detection): it is neither learned nor answered, so that a host
    /// moved from another edge is not told its own address is taken.
    pub(super) fn neighbour_discovery(
        &mut self,
        key: &FlowKey,
        in_port: u8,
        now: Nanos,
        out: &mut dyn Output,
    ) -> Verdict {
        let v6 = |f: Field| IpAddr::V6(Ipv6Addr::from(key.get(f)));
        let (src, target, src_mac) = (v6(Field::Ipv6Src), v6(Field::Ipv6NdTarget), key_mac(key, Field::EthSrc));
        if key.get(Field::Icmpv6Type) == NEIGHBOUR_ADVERTISEMENT {
            let tll = key_mac(key, Field::Ipv6NdTll);
            self.learned(target, if tll == [0; 6] { src_mac } else { tll }, in_port, now);
            return Verdict::default();
        }
        if !edge::is_host_address(src) {
            return Verdict::default();
        }
        self.learned(src, src_mac, in_port, now);
        if let Some(tmac) = self.answer_for(target, src, src_mac, in_port, now, out) {
            let (IpAddr::V6(src), IpAddr::V6(target)) = (src, target) else { unreachable!() };
            let reply = craft::neighbour_advertisement(tmac, target.octets(), src_mac, src.octets());
            self.send_frame(&reply, in_port, None, out);
            self.counters.nd_replies += 1;
        }
        Verdict::default()
    }

    /// The MAC to answer a host on `in_port` asking for `target` with; or none, having asked the
    /// hosts of every edge (here and across the fabric, once per HELLO interval) when nobody has
    /// announced `target`.
    fn answer_for(
        &mut self,
        target: IpAddr,
        sender_ip: IpAddr,
        sender_mac: [u8; 6],
        in_port: u8,
        now: Nanos,
        out: &mut dyn Output,
    ) -> Option<[u8; 6]> {
        match self.directory.locate(target) {
            Some(Location::Here(h)) if h.port != in_port => return Some(h.mac),
            Some(Location::There(h, _)) => return Some(h.mac),
            // On the asker's own segment: the owner answers itself.
            Some(Location::Here(_)) => return None,
            None => {}
        }
        let hello = self.cfg.hello_ns;
        if self.asked.get(&target).is_none_or(|&t| now.saturating_sub(t) >= hello) {
            if self.asked.len() >= self.cfg.max_host_queries {
                self.asked.retain(|_, &mut t| now.saturating_sub(t) < hello);
            }
            if self.asked.len() >= self.cfg.max_host_queries {
                self.counters.host_queries_over_limit += 1;
                return None;
            }
            self.asked.insert(target, now);
            self.arp_seq = self.arp_seq.wrapping_add(1);
            let q = HostQuery { origin: self.cfg.switch_id, seq: self.arp_seq, target, sender_ip, sender_mac };
            self.flood(&Message::HostQuery(q), None, true, out);
            self.ask_hosts(&q, Some(in_port), out);
        }
        None
    }
}
