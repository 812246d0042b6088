//! What a LESS switch says to its neighbours and answers its hosts: the addressing protocol's
//! frames (HELLO, HOSTS, ARP-QUERY) in and out, and ARP at the edge. The forwarding of labelled
//! and host frames is in `mod.rs`.

use ofp::oxm::Field;
use packet::craft::{FrameBuilder, L3};
use packet::{FlowKey, Offload, Packet};

use super::edge::Location;
use super::protocol::{self, ArpQuery, Message};
use super::{LessMode, CONTROL_QUEUE};
use crate::{DropReason, Egress, Nanos, Output, Verdict};

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
        let msg = Message::Hosts(self.directory.announce(self.cfg.switch_id, addresses));
        self.flood(&msg, None, true, out);
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
                if h.origin != self.cfg.switch_id && self.directory.hosts(h.clone(), now) {
                    self.flood(&Message::Hosts(h), Some(in_port), true, out);
                    self.invalidate();
                }
            }
            Message::ArpQuery(q) => {
                if q.origin != self.cfg.switch_id && self.directory.query(q.origin, q.seq) {
                    self.flood(&Message::ArpQuery(q), Some(in_port), true, out);
                    self.ask_hosts(&q, None, out);
                }
            }
        }
        Verdict::default()
    }

    /// An ARP request for `q.target` out of our edge ports (but `except`), as from the asker, so
    /// that the owner answers and we learn it.
    pub(super) fn ask_hosts(&mut self, q: &ArpQuery, except: Option<u8>, out: &mut dyn Output) {
        let frame = FrameBuilder::new([0xff; 6], q.sender_mac).build(L3::Arp {
            op: 1,
            sha: q.sender_mac,
            spa: q.sender_ip,
            tha: [0; 6],
            tpa: q.target,
        });
        let ports: Vec<u8> = self.live.iter().filter(|(_, &up)| up).map(|(&p, _)| p as u8).collect();
        for p in ports {
            if Some(p) != except && self.fabric.is_edge(p) {
                self.send_frame(&frame, p, None, out);
            }
        }
    }

    pub(super) fn learned(&mut self, ip: [u8; 4], mac: [u8; 6], port: u8, now: Nanos) {
        if self.directory.learn(ip, mac, port, now) {
            self.announce = true;
            self.invalidate();
        }
    }

    pub(super) fn arp(&mut self, key: &FlowKey, in_port: u8, now: Nanos, out: &mut dyn Output) -> Verdict {
        let ip = |f: Field| (key.get(f) as u32).to_be_bytes();
        let mac = |f: Field| {
            let b = (key.get(f) as u64).to_be_bytes();
            [b[2], b[3], b[4], b[5], b[6], b[7]]
        };
        let (op, spa, sha, tpa) = (key.get(Field::ArpOp), ip(Field::ArpSpa), mac(Field::ArpSha), ip(Field::ArpTpa));
        self.learned(spa, sha, in_port, now);
        if op != 1 {
            return Verdict::default();
        }
        let target_mac = match self.directory.locate(tpa) {
            Some(Location::Here(h)) if h.port != in_port => Some(h.mac),
            Some(Location::There(h, _)) => Some(h.mac),
            Some(Location::Here(_)) => return Verdict::default(),
            None => None,
        };
        match target_mac {
            Some(tmac) => {
                let reply =
                    FrameBuilder::new(sha, tmac).build(L3::Arp { op: 2, sha: tmac, spa: tpa, tha: sha, tpa: spa });
                self.send_frame(&reply, in_port, None, out);
                self.counters.arp_replies += 1;
            }
            None => {
                // Nobody announced it: ask every edge, here and across the fabric, once per interval.
                if self.asked.get(&tpa).is_none_or(|&t| now.saturating_sub(t) >= self.cfg.hello_ns) {
                    self.asked.insert(tpa, now);
                    self.arp_seq = self.arp_seq.wrapping_add(1);
                    let q = ArpQuery {
                        origin: self.cfg.switch_id,
                        seq: self.arp_seq,
                        target: tpa,
                        sender_ip: spa,
                        sender_mac: sha,
                    };
                    self.flood(&Message::ArpQuery(q), None, true, out);
                    self.ask_hosts(&q, Some(in_port), out);
                }
            }
        }
        Verdict::default()
    }
}
