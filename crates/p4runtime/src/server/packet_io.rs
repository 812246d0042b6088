//! The stream channel's packets and digests (P4Runtime §16, §17): a copy the program sends to the
//! CPU port becomes a PacketIn to each role's primary, its `@controller_header("packet_in")`
//! header turned into metadata; a primary's PacketOut enters the program on the CPU port with
//! its `packet_out` header put back in front; digests the frames send are gathered into
//! DigestLists per the DigestEntry a client wrote, one list per digest waiting for its ack.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use p4::info::{ControllerHeader, Info};
use tonic::Status;

use crate::codec::{decode, encode};
use crate::proto::p4::v1 as pb;

/// The bits `metadata` names, big-endian one after the other, out of `frame`'s first bytes; and
/// what follows the header.
pub(super) fn packet_in(info: &Info, frame: Vec<u8>) -> Option<pb::PacketIn> {
    let Some(header) = info.controller_header("packet_in") else {
        return Some(pb::PacketIn { payload: frame, metadata: Vec::new() });
    };
    let len = header.bytes();
    if frame.len() < len {
        return None;
    }
    let mut at = 0usize;
    let metadata = header
        .metadata
        .iter()
        .map(|m| {
            let value = (0..m.bitwidth as usize).fold(0u128, |v, i| {
                let bit = at + i;
                (v << 1) | ((frame[bit / 8] >> (7 - bit % 8)) & 1) as u128
            });
            at += m.bitwidth as usize;
            pb::PacketMetadata { metadata_id: m.id, value: encode(value) }
        })
        .collect();
    Some(pb::PacketIn { payload: frame[len..].to_vec(), metadata })
}

/// The frame a PacketOut puts on the CPU port: its `packet_out` header, each metadata field at
/// its place, then the payload. A field given twice, or one the header lacks, is INVALID_ARGUMENT
/// (§16.1: "precisely one `metadata` field for each"); one not given is 0, as BMv2's server (PI)
/// has it: clients written against BMv2 set `egress_port` and leave the padding out.
pub(super) fn packet_out(info: &Info, out: &pb::PacketOut) -> Result<Vec<u8>, Status> {
    let Some(header) = info.controller_header("packet_out") else {
        if let Some(m) = out.metadata.first() {
            return Err(Status::invalid_argument(format!(
                "metadata {}: the program has no @controller_header(\"packet_out\")",
                m.metadata_id
            )));
        }
        return Ok(out.payload.clone());
    };
    let mut values: Vec<Option<u128>> = vec![None; header.metadata.len()];
    for m in &out.metadata {
        let Some(at) = header.metadata.iter().position(|f| f.id == m.metadata_id) else {
            return Err(Status::invalid_argument(format!("packet_out has no metadata {}", m.metadata_id)));
        };
        let field = &header.metadata[at];
        if values[at].is_some() {
            return Err(Status::invalid_argument(format!("packet_out metadata {} is given twice", field.name)));
        }
        values[at] = Some(decode(&m.value, field.bitwidth, &format!("packet_out metadata {}", field.name))?);
    }
    let values: Vec<u128> = values.iter().map(|v| v.unwrap_or(0)).collect();
    let mut frame = header_bytes(header, &values);
    frame.extend_from_slice(&out.payload);
    Ok(frame)
}

fn header_bytes(header: &ControllerHeader, values: &[u128]) -> Vec<u8> {
    let mut bytes = vec![0u8; header.bytes()];
    let mut at = 0usize;
    for (field, value) in header.metadata.iter().zip(values) {
        for i in 0..field.bitwidth as usize {
            if (value >> (field.bitwidth as usize - 1 - i)) & 1 == 1 {
                bytes[(at + i) / 8] |= 0x80 >> ((at + i) % 8);
            }
        }
        at += field.bitwidth as usize;
    }
    bytes
}

/// One digest's configuration (its DigestEntry) and the data waiting to be sent.
#[derive(Clone)]
struct DigestState {
    config: pb::digest_entry::Config,
    /// Data not yet in a list, and when the first of it came.
    pending: Vec<Vec<u128>>,
    since: Option<Instant>,
    /// The list sent and not acknowledged: its id, when it was sent, its data.
    unacked: Option<(u64, Instant, Vec<Vec<u128>>)>,
    next_list: u64,
}

/// The digests clients configured, and their lists.
#[derive(Clone, Default)]
pub(super) struct Digests {
    states: BTreeMap<u32, DigestState>,
}

/// Data a digest gathers at most while its list waits: past it, new data is dropped (counted
/// by the caller). Keeps a controller that never acks from growing the switch without bound.
const PENDING_MAX: usize = 4096;

impl Digests {
    /// A DigestEntry update (§17.1): INSERT a digest's configuration, MODIFY it, DELETE it (its
    /// data waiting is dropped).
    pub(super) fn update(&mut self, info: &Info, kind: pb::update::Type, e: &pb::DigestEntry) -> Result<(), Status> {
        use pb::update::Type as U;
        let d = info
            .digest(e.digest_id)
            .ok_or_else(|| Status::not_found(format!("the program has no digest {:#x}", e.digest_id)))?;
        let name = &d.preamble.name;
        let config = match (kind, e.config) {
            (U::Delete, _) => None,
            (_, None) => return Err(Status::invalid_argument(format!("{name}: a digest entry needs its config"))),
            (_, Some(c)) if c.max_timeout_ns < 0 || c.ack_timeout_ns < 0 || c.max_list_size < 0 => {
                return Err(Status::invalid_argument(format!("{name}: timeouts and the list size are not negative")))
            }
            (_, Some(c)) => Some(c),
        };
        match (kind, self.states.get_mut(&e.digest_id)) {
            (U::Insert, Some(_)) => Err(Status::already_exists(format!("{name}: its digest entry exists"))),
            (U::Insert, None) => {
                let config = config.expect("given");
                let state = DigestState { config, pending: Vec::new(), since: None, unacked: None, next_list: 1 };
                self.states.insert(e.digest_id, state);
                Ok(())
            }
            (U::Modify, Some(state)) => {
                state.config = config.expect("given");
                Ok(())
            }
            (U::Delete, Some(_)) => {
                self.states.remove(&e.digest_id);
                Ok(())
            }
            (U::Modify | U::Delete, None) => Err(Status::not_found(format!("{name}: no digest entry"))),
            (U::Unspecified, _) => Err(Status::invalid_argument("an update of unknown type")),
        }
    }

    /// Every configuration, for a read.
    pub(super) fn entries(&self) -> Vec<pb::DigestEntry> {
        self.states.iter().map(|(&id, s)| pb::DigestEntry { digest_id: id, config: Some(s.config) }).collect()
    }

    /// Forgets every configuration (a new program's forwarding state starts empty).
    pub(super) fn clear(&mut self) {
        self.states.clear();
    }

    /// A digest a frame sent; false if it was dropped (no DigestEntry for it, or too much
    /// waiting). Data already waiting or in the list not yet acknowledged is not sent again
    /// (§17: the server suppresses duplicates until the list is acknowledged).
    pub(super) fn add(&mut self, info: &Info, name: &str, data: Vec<u128>, now: Instant) -> bool {
        let Some(id) = info.digest_named(name).map(|d| d.preamble.id) else { return false };
        let Some(state) = self.states.get_mut(&id) else { return false };
        if state.pending.contains(&data) || state.unacked.as_ref().is_some_and(|(_, _, sent)| sent.contains(&data)) {
            return true;
        }
        if state.pending.len() >= PENDING_MAX {
            return false;
        }
        state.pending.push(data);
        state.since.get_or_insert(now);
        true
    }

    /// An ack (§17.2): the digest may send its next list.
    pub(super) fn ack(&mut self, ack: &pb::DigestListAck) {
        if let Some(state) = self.states.get_mut(&ack.digest_id) {
            if state.unacked.as_ref().is_some_and(|(list, _, _)| *list == ack.list_id) {
                state.unacked = None;
            }
        }
    }

    /// The lists due at `now`: a digest sends when nothing it sent waits for an ack (or the ack
    /// timed out), and its data fills a list (`max_list_size`, 0 for no limit) or the first of
    /// it waited `max_timeout_ns`.
    pub(super) fn due(&mut self, now: Instant) -> Vec<pb::DigestList> {
        let mut lists = Vec::new();
        for (&id, state) in self.states.iter_mut() {
            let waits_ack = state.unacked.as_ref().is_some_and(|(_, sent, _)| {
                state.config.ack_timeout_ns == 0
                    || now < *sent + Duration::from_nanos(state.config.ack_timeout_ns as u64)
            });
            let Some(since) = state.since else { continue };
            let size = state.config.max_list_size as usize;
            let full = size != 0 && state.pending.len() >= size;
            let timed_out = now >= since + Duration::from_nanos(state.config.max_timeout_ns as u64);
            if waits_ack || !(full || timed_out) {
                continue;
            }
            let take = if size == 0 { state.pending.len() } else { size.min(state.pending.len()) };
            let data: Vec<Vec<u128>> = state.pending.drain(..take).collect();
            state.since = (!state.pending.is_empty()).then_some(now);
            let list_id = state.next_list;
            state.next_list += 1;
            lists.push(pb::DigestList {
                digest_id: id,
                list_id,
                data: data.iter().map(|d| p4_struct(d)).collect(),
                timestamp: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64),
            });
            state.unacked = Some((list_id, now, data));
        }
        lists
    }

    /// When [`Digests::due`] may next have a list to send.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.states
            .values()
            .filter_map(|s| {
                let since = s.since?;
                let mut at = since + Duration::from_nanos(s.config.max_timeout_ns as u64);
                if let Some((_, sent, _)) = &s.unacked {
                    if s.config.ack_timeout_ns == 0 {
                        return None; // until the ack, which wakes the sender
                    }
                    at = at.max(*sent + Duration::from_nanos(s.config.ack_timeout_ns as u64));
                }
                Some(at)
            })
            .min()
    }
}

fn p4_struct(members: &[u128]) -> pb::P4Data {
    use pb::p4_data::Data;
    let members = members.iter().map(|&v| pb::P4Data { data: Some(Data::Bitstring(encode(v))) }).collect::<Vec<_>>();
    pb::P4Data { data: Some(Data::Struct(pb::P4StructLike { members })) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p4::info::{DigestInfo, Param, Preamble};

    fn info() -> Info {
        let preamble = |id, name: &str| Preamble { id, name: name.into(), alias: name.into() };
        let param = |id, name: &str, bitwidth| Param { id, name: name.into(), bitwidth };
        Info {
            controller_headers: vec![
                ControllerHeader {
                    preamble: preamble(0x0400_0001, "packet_in"),
                    metadata: vec![param(1, "ingress_port", 9), param(2, "pad", 7)],
                },
                ControllerHeader {
                    preamble: preamble(0x0400_0002, "packet_out"),
                    metadata: vec![param(1, "egress_port", 9), param(2, "pad", 7)],
                },
            ],
            digests: vec![DigestInfo {
                preamble: preamble(0x1700_0001, "learn_t"),
                target: "learn_t".into(),
                type_name: "learn_t".into(),
                members: vec![param(1, "src", 48), param(2, "port", 9)],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_packet_in_header_becomes_metadata_and_a_packet_out_header_is_put_back() {
        let info = info();
        // ingress_port 3 in the first 9 bits: 0000_0001 1...
        let got = packet_in(&info, vec![0x01, 0x80, 0xaa, 0xbb]).unwrap();
        assert_eq!(got.payload, [0xaa, 0xbb]);
        let values: Vec<(u32, Vec<u8>)> = got.metadata.iter().map(|m| (m.metadata_id, m.value.clone())).collect();
        assert_eq!(values, [(1, vec![3]), (2, vec![0])]);
        assert!(packet_in(&info, vec![0x01]).is_none(), "shorter than its header");
        let out = pb::PacketOut {
            payload: vec![0xcc],
            metadata: vec![pb::PacketMetadata { metadata_id: 1, value: vec![1, 0x02] }],
        };
        assert_eq!(packet_out(&info, &out).unwrap(), [0x81, 0x00, 0xcc], "port 258, pad 0 (not given)");
        let wide = pb::PacketOut { metadata: vec![pb::PacketMetadata { metadata_id: 1, value: vec![2, 0] }], ..out };
        assert_eq!(packet_out(&info, &wide).unwrap_err().code(), tonic::Code::OutOfRange);
    }

    #[test]
    fn a_digest_sends_one_list_until_it_is_acked_or_the_ack_times_out() {
        use pb::update::Type::{Delete, Insert, Modify};
        let info = info();
        let mut digests = Digests::default();
        let t0 = Instant::now();
        assert!(!digests.add(&info, "learn_t", vec![1, 1], t0), "no digest entry: dropped");
        let config = pb::digest_entry::Config { max_timeout_ns: 1_000, max_list_size: 2, ack_timeout_ns: 1_000_000 };
        let entry = pb::DigestEntry { digest_id: 0x1700_0001, config: Some(config) };
        digests.update(&info, Insert, &entry).unwrap();
        assert_eq!(digests.update(&info, Insert, &entry).unwrap_err().code(), tonic::Code::AlreadyExists);
        let elsewhere = pb::DigestEntry { digest_id: 0x1700_0009, ..entry };
        assert_eq!(digests.update(&info, Modify, &elsewhere).unwrap_err().code(), tonic::Code::NotFound);

        assert!(digests.add(&info, "learn_t", vec![1, 1], t0));
        assert!(digests.add(&info, "learn_t", vec![1, 1], t0), "a duplicate is kept once");
        assert!(digests.due(t0).is_empty(), "neither full nor timed out");
        assert!(digests.add(&info, "learn_t", vec![2, 1], t0));
        let lists = digests.due(t0);
        assert_eq!((lists.len(), lists[0].list_id, lists[0].data.len()), (1, 1, 2), "full: sent at once");

        // Waiting for the ack: more data waits, and data in the list is not sent again.
        assert!(digests.add(&info, "learn_t", vec![2, 1], t0));
        assert!(digests.add(&info, "learn_t", vec![3, 2], t0));
        let later = t0 + Duration::from_micros(10);
        assert!(digests.due(later).is_empty(), "the list is not acked");
        digests.ack(&pb::DigestListAck { digest_id: 0x1700_0001, list_id: 7 });
        assert!(digests.due(later).is_empty(), "an ack for another list changes nothing");
        digests.ack(&pb::DigestListAck { digest_id: 0x1700_0001, list_id: 1 });
        let lists = digests.due(later);
        assert_eq!((lists[0].list_id, lists[0].data.len()), (2, 1), "timed out after the ack: [3, 2] alone");

        // Unacked, the list may go again once the ack timed out.
        assert!(digests.add(&info, "learn_t", vec![4, 2], later));
        assert_eq!(digests.next_due(), Some(later + Duration::from_millis(1)));
        assert_eq!(digests.due(later + Duration::from_millis(1)).len(), 1);
        digests.update(&info, Delete, &entry).unwrap();
        assert!(!digests.add(&info, "learn_t", vec![5, 2], later), "deleted: dropped");
    }
}
