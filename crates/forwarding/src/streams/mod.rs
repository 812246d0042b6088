//! The streams mode: TSN streams identified once and handed to the per-stream functions 802.1
//! defines for them — IEEE 802.1Qci's filtering and policing (`psfp`) and IEEE 802.1CB's frame
//! replication and elimination for reliability (FRER: `recovery`). A stream's frames are numbered
//! and copied onto disjoint paths at one switch, and the copies after the first are eliminated at
//! another, so that a stream survives the loss of a path without a frame lost or duplicated at
//! the listener; on the way each switch can hold it to its size, its gate and its rate.
//!
//! Per stream, as configured on each switch, in this order:
//! - **identification** (802.1CB 6.4, null stream identification): destination MAC and VLAN id
//!   (or none, untagged), arriving on one of the stream's `in_ports`;
//! - **filtering and policing** (802.1Qci): the largest service data unit, a stream gate (a gate
//!   control list on ingress, whose open entries may set the egress queue) and a flow meter
//!   (two rates, three colours; yellow frames leave marked drop-eligible or are dropped);
//! - **sequence generation** (`generate`, 802.1CB 7.4.1): an R-TAG (EtherType 0xF1C1, 16 reserved
//!   bits, the 16-bit sequence number) after the addresses and VLAN tags, numbered from 0;
//! - **replication**: a copy to every one of `out_ports`;
//! - **sequence recovery** (`recover`, 7.4.3, the vector recovery algorithm): the first copy of
//!   each number passes, its R-TAG removed; later copies and rogue numbers are discarded.
//!
//! A switch between the two edges relays a stream's frames, R-TAG and all. Frames of no stream
//! are dropped and counted: this mode carries streams only (a port can run another mode beside it
//! for the rest, `[[port]] mode`). The kernel fast path holds no stream state: the frames come up
//! to this mode on every datapath.

pub mod psfp;
pub mod recovery;

use ofp::oxm::{Field, OFPVID_PRESENT};
use packet::{FlowKey, Packet};

use self::psfp::{Policed, Psfp};
use self::recovery::{Recovered, VectorRecovery};
use crate::{CounterGroup, DropReason, Egress, Mode, Nanos, Output, PortView, Verdict};

/// The R-TAG's EtherType (802.1CB 7.8).
pub const ETHERTYPE_RTAG: u16 = 0xf1c1;
/// What the R-TAG puts after its EtherType: 16 reserved bits and the sequence number.
const RTAG_BODY: usize = 4;

/// One stream as this switch handles it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    pub name: String,
    pub dst: [u8; 6],
    /// The VLAN id it is tagged with; `None`: untagged.
    pub vid: Option<u16>,
    pub in_ports: Vec<u32>,
    pub out_ports: Vec<u32>,
    /// Number its frames and tag them (the talker's edge).
    pub generate: bool,
    /// Eliminate duplicates and untag (the listener's edge): history length and reset time.
    pub recover: Option<(u32, Nanos)>,
    /// 802.1Qci: the largest service data unit (bytes after the Ethernet header and tags), the
    /// stream gate and the flow meter, each if any.
    pub max_sdu: Option<usize>,
    pub gate: Option<psfp::Gate>,
    pub meter: Option<psfp::MeterConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct StreamCounters {
    received: u64,
    generated: u64,
    /// Frames that reached a recovery function without an R-TAG.
    tagless: u64,
    wrong_port: u64,
}

struct StreamState {
    stream: Stream,
    next_seq: u16,
    psfp: Psfp,
    recovery: Option<VectorRecovery>,
    counters: StreamCounters,
}

pub struct StreamsMode {
    streams: Vec<StreamState>,
    not_stream: u64,
}

impl StreamsMode {
    pub fn new(streams: &[Stream]) -> StreamsMode {
        let streams = streams
            .iter()
            .map(|s| StreamState {
                stream: s.clone(),
                next_seq: 0,
                psfp: Psfp {
                    max_sdu: s.max_sdu,
                    gate: s.gate.clone(),
                    meter: s.meter.map(psfp::Meter::new),
                    counters: Default::default(),
                },
                recovery: s.recover.map(|(history, reset_ns)| VectorRecovery::new(history, reset_ns)),
                counters: StreamCounters::default(),
            })
            .collect();
        StreamsMode { streams, not_stream: 0 }
    }
}

/// The sequence number of a frame whose EtherType (at `et`) is the R-TAG's.
fn rtag_seq(data: &[u8], et: usize) -> Option<u16> {
    let t = data.get(et..et + 2 + RTAG_BODY + 2)?;
    (u16::from_be_bytes([t[0], t[1]]) == ETHERTYPE_RTAG).then(|| u16::from_be_bytes([t[4], t[5]]))
}

impl Mode for StreamsMode {
    fn name(&self) -> &'static str {
        "streams"
    }

    fn port_changed(&mut self, _port: u32, _view: Option<PortView>) {}

    fn receive(&mut self, pkt: &mut Packet, key: &FlowKey, now: Nanos, out: &mut dyn Output) -> Verdict {
        let drop = |why| Verdict { dropped: Some(why), entry: None };
        // The outer tag's VLAN id, as the parser put it in the key, and where the EtherType is,
        // after every tag.
        let vlan = key.get(Field::VlanVid) as u16;
        let vid = (vlan & OFPVID_PRESENT != 0).then_some(vlan & 0xfff);
        let et = 12 + 4 * pkt.layout.n_vlans as usize;
        let dst: [u8; 6] = pkt.data()[..6].try_into().unwrap();
        let Some(s) = self.streams.iter_mut().find(|s| s.stream.dst == dst && s.stream.vid == vid) else {
            self.not_stream += 1;
            return drop(DropReason::NoAction);
        };
        s.counters.received += 1;
        if !s.stream.in_ports.contains(&key.in_port()) {
            s.counters.wrong_port += 1;
            return drop(DropReason::Filtered);
        }
        // Filtering and policing see the frame as it came (an R-TAG counts in its SDU).
        let tci_at = (et > 12).then_some(14);
        let yellow_in = tci_at.is_some_and(|at| pkt.data()[at] & 0x10 != 0);
        let sdu = pkt.len() - et - 2;
        let queue = match s.psfp.police(sdu, pkt.len() + 4, yellow_in, now) {
            Policed::Drop => return drop(DropReason::Policed),
            Policed::Pass { mark, queue } => {
                if let (true, Some(at)) = (mark, tci_at) {
                    pkt.data_mut()[at] |= 0x10;
                }
                queue.map(u32::from)
            }
        };
        let seq = rtag_seq(pkt.data(), et);
        if let Some(r) = s.recovery.as_mut() {
            let Some(seq) = seq else {
                s.counters.tagless += 1;
                return drop(DropReason::Filtered);
            };
            if matches!(r.frame(seq, now), Recovered::Duplicate | Recovered::Rogue) {
                return drop(DropReason::Filtered);
            }
            let inner = u16::from_be_bytes([pkt.data()[et + 6], pkt.data()[et + 7]]);
            pkt.replace_stack(RTAG_BODY + 2, &[], inner);
        } else if s.stream.generate && seq.is_none() {
            // The R-TAG sits where no NIC or kernel finishes a checksum or cuts a super-frame.
            let mut pieces = if pkt.offload.gso.is_none() && pkt.offload.csum.is_none() {
                vec![pkt.clone()]
            } else {
                packet::segment::segment(pkt.clone())
            };
            for piece in &mut pieces {
                let [hi, lo] = s.next_seq.to_be_bytes();
                let (et_hi, et_lo) = (piece.data()[et], piece.data()[et + 1]);
                piece.replace_stack(0, &[0, 0, hi, lo, et_hi, et_lo], ETHERTYPE_RTAG);
                s.next_seq = s.next_seq.wrapping_add(1);
                s.counters.generated += 1;
                for &port in &s.stream.out_ports {
                    out.transmit(Egress { port, queue }, piece);
                }
            }
            return Verdict::default();
        }
        for &port in &s.stream.out_ports {
            out.transmit(Egress { port, queue }, pkt);
        }
        Verdict::default()
    }

    fn generation(&self) -> u64 {
        0
    }

    fn counters(&self) -> Vec<CounterGroup> {
        let mut groups = vec![CounterGroup { name: "switch".into(), counters: vec![("not_stream", self.not_stream)] }];
        for s in &self.streams {
            let c = &s.counters;
            let mut counters = vec![("received", c.received), ("wrong_port", c.wrong_port)];
            let p = s.psfp.counters;
            if s.stream.max_sdu.is_some() {
                counters.push(("sdu_too_large", p.sdu_too_large));
            }
            if s.stream.gate.is_some() {
                counters.push(("gate_closed", p.gate_closed));
            }
            if s.stream.meter.is_some() {
                counters.extend([("green", p.green), ("yellow", p.yellow), ("red", p.red)]);
            }
            if s.stream.generate {
                counters.push(("generated", c.generated));
            }
            if let Some(r) = &s.recovery {
                let k = r.counters;
                counters.extend([
                    ("passed", k.passed),
                    ("discarded", k.discarded),
                    ("out_of_order", k.out_of_order),
                    ("rogue", k.rogue),
                    ("lost", k.lost),
                    ("resets", k.resets),
                    ("tagless", c.tagless),
                ]);
            }
            groups.push(CounterGroup { name: format!("stream {}", s.stream.name), counters });
        }
        groups
    }
}
