//! The LESS mode (docs/less.md): a label switch with no forwarding table. Every frame carries the
//! output port of each hop in its labels; this switch reads the top one, rewrites it by the
//! per-hop rule of `packet::less`, and sends the frame out that port. A stack it cannot follow is
//! dropped and counted under its reason; a frame whose output port is down is counted as having no
//! route (rerouting, §4 of the design, comes with the addressing protocol).

use std::collections::BTreeMap;

use packet::less::{self, Rewrite, StackError};
use packet::{FlowKey, Packet};

use crate::{CounterGroup, DropReason, Egress, EntryId, KernelEntry, Mode, Nanos, Output, PortView, Verdict};

/// Entries a stack may hold by default, reroute block included.
pub const DEFAULT_MAX_LABELS: usize = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Deeper stacks are dropped as `too_many_labels`.
    pub max_labels: usize,
    /// This switch is the fabric's root (the origin of addresses).
    pub root: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config { max_labels: DEFAULT_MAX_LABELS, root: false }
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
    /// Per [`StackError`], in the order of `StackError::ALL`.
    malformed: [u64; StackError::ALL.len()],
    unknown_port: u64,
    no_route: u64,
    /// Frames that carried no label stack (and were not the addressing protocol's).
    not_less: u64,
}

pub struct LessMode {
    cfg: Config,
    /// Every port of the switch, and whether it can send (carrier up, not administratively down).
    live: BTreeMap<u32, bool>,
    counters: Counters,
}

impl LessMode {
    pub fn new(cfg: Config) -> LessMode {
        LessMode { cfg, live: BTreeMap::new(), counters: Counters::default() }
    }

    fn bad(&mut self, why: StackError) -> Verdict {
        self.counters.malformed[StackError::ALL.iter().position(|&e| e == why).unwrap()] += 1;
        Verdict { dropped: Some(DropReason::BadLabel), entry: None }
    }
}

impl Mode for LessMode {
    fn name(&self) -> &'static str {
        "less"
    }

    fn port_changed(&mut self, port: u32, view: Option<PortView>) {
        match view {
            Some(v) => {
                let up = v.state & ofp::port::state::LINK_DOWN == 0 && v.config & ofp::port::config::PORT_DOWN == 0;
                self.live.insert(port, up);
            }
            None => {
                self.live.remove(&port);
            }
        }
    }

    fn receive(&mut self, pkt: &mut Packet, _key: &FlowKey, _now: Nanos, out: &mut dyn Output) -> Verdict {
        let at = pkt.layout.l3 as usize;
        let et = pkt.layout.ethertype_at as usize;
        let ethertype = pkt.data().get(et..et + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        if ethertype != Some(less::ETHERTYPE) {
            self.counters.not_less += 1;
            return Verdict { dropped: Some(DropReason::NoAction), entry: None };
        }
        let hop = match less::hop(pkt.data(), at, self.cfg.max_labels) {
            Ok(h) => h,
            Err(why) => return self.bad(why),
        };
        let port = hop.port as u32;
        match self.live.get(&port) {
            None => {
                self.counters.unknown_port += 1;
                return Verdict { dropped: Some(DropReason::BadLabel), entry: None };
            }
            Some(false) => {
                self.counters.no_route += 1;
                return Verdict { dropped: Some(DropReason::NoAction), entry: None };
            }
            Some(true) => {}
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
        out.transmit(Egress { port, queue: None }, pkt);
        Verdict::default()
    }

    fn kernel_entry(&self, _id: EntryId) -> Option<KernelEntry<'_>> {
        None
    }

    fn generation(&self) -> u64 {
        0
    }

    fn counters(&self) -> Vec<CounterGroup> {
        let c = &self.counters;
        let mut counters = vec![("shifted", c.shifted), ("popped", c.popped), ("delivered", c.delivered)];
        counters.extend(StackError::ALL.iter().zip(c.malformed).map(|(e, n)| (e.name(), n)));
        counters.extend([("unknown_port", c.unknown_port), ("no_route", c.no_route), ("not_less", c.not_less)]);
        vec![CounterGroup { name: "labels".into(), counters }]
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
        assert_eq!(counter(&m, "not_less"), 1);
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
