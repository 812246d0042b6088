//! v1model's state on the software target (issue 52, item 2), as BMv2's simple_switch keeps it:
//! clone sessions and multicast groups with replication ids (the control plane's side), what a
//! block asked of the switch (`Requests`, read by the compiled drivers in `exec_arch.rs` and
//! `exec_arch/passes.rs`), the random state, and the hash and checksum algorithms the compiled
//! externs and action selectors use.

use super::*;

/// The port that drops a frame (BMv2's default), and `egress_spec` as egress finds it (BMv2 sets
/// 512, which the 9-bit field keeps as 0).
pub(super) const DROP_PORT: u128 = 511;

/// A clone session, as the control plane configures it: BMv2's `mirroring_add` (a port) and
/// `mirroring_add_mc` (a multicast group's members), or P4Runtime's CloneSessionEntry (its own
/// replicas, a class of service, a length to cut the clones to).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Session {
    pub port: Option<u32>,
    pub group: Option<u16>,
    /// A clone to each (port, replication id), in order, besides `port`'s and `group`'s.
    pub replicas: Vec<(u32, u16)>,
    /// The clones' class of service: v1model's `priority` (their queue), PSA's
    /// `class_of_service`.
    pub class_of_service: u8,
    /// The clones cut to at most this many bytes as they leave (after the deparser).
    pub truncate: Option<usize>,
}

/// What a block asked of the switch with an extern call, besides the standard metadata: BMv2
/// keeps these in packet registers, read after the block.
#[derive(Clone, Debug, Default)]
pub(super) struct Requests {
    pub clone: Option<u32>,
    pub resubmit: bool,
    pub recirculate: bool,
    pub truncate: Option<usize>,
}

impl Switch {
    /// Sets clone session `id` (`mirroring_add`): its copies go to `port` and to multicast
    /// `group`'s members.
    pub fn set_clone_session(&mut self, id: u32, session: Session) {
        self.sessions.insert(id, session);
        self.generation += 1;
    }

    pub fn clone_session(&self, id: u32) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// Removes clone session `id`; whether it was set.
    pub fn delete_clone_session(&mut self, id: u32) -> bool {
        let was = self.sessions.remove(&id).is_some();
        self.generation += was as u64;
        was
    }

    /// The clone sessions' ids, in order.
    pub fn clone_session_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.sessions.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Multicast group `id`'s (port, replication id) pairs, in order; none if it is not set.
    pub fn group_replicas(&self, id: u16) -> Option<Vec<(u32, u16)>> {
        self.groups.contains_key(&id).then(|| self.replicas(id))
    }

    /// Removes multicast group `id`; whether it was set. Its frames then go nowhere, as a
    /// group never set sends them.
    pub fn delete_group(&mut self, id: u16) -> bool {
        let was = self.groups.remove(&id).is_some();
        self.replica_ids.remove(&id);
        self.generation += was as u64;
        was
    }

    /// Sets multicast group `id` to send a copy to each (port, replication id) of `replicas`,
    /// in order.
    pub fn set_replicas(&mut self, id: u16, replicas: Vec<(u32, u16)>) {
        let (ports, rids) = replicas.into_iter().unzip();
        self.groups.insert(id, ports);
        self.replica_ids.insert(id, rids);
        self.generation += 1;
    }

    pub(super) fn next_random(&mut self) -> u64 {
        // xorshift64*: the software target's randomness needs no more than spread.
        let mut x = self.random;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// v1model's `HashAlgorithm`s, resolved from a member's name once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Algorithm {
    Crc16,
    Crc32,
    Csum16,
    Xor16,
    Identity,
    Random,
    /// One the software target does not compute: 0.
    Other,
}

impl Algorithm {
    pub(super) fn named(algo: &str) -> Algorithm {
        match algo {
            "crc16" | "crc16_custom" => Algorithm::Crc16,
            "crc32" | "crc32_custom" => Algorithm::Crc32,
            "csum16" => Algorithm::Csum16,
            "xor16" => Algorithm::Xor16,
            "identity" => Algorithm::Identity,
            "random" => Algorithm::Random,
            _ => Algorithm::Other,
        }
    }

    /// The algorithm over `data`, as BMv2 computes each (its `_custom` forms with their
    /// default parameters, the same as the plain ones).
    pub(super) fn hash(self, data: &[u8]) -> u128 {
        match self {
            Algorithm::Crc16 => crc_reflected(data, 0xa001, 0, 0) as u128,
            Algorithm::Crc32 => crc_reflected(data, 0xedb8_8320, 0xffff_ffff, 0xffff_ffff) as u128,
            Algorithm::Csum16 => ones_complement(data) as u128,
            Algorithm::Xor16 => {
                data.chunks(2).fold(0u16, |x, w| x ^ u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])) as u128
            }
            Algorithm::Identity => data.iter().take(8).fold(0u128, |v, &b| (v << 8) | b as u128),
            Algorithm::Random | Algorithm::Other => 0,
        }
    }
}

/// v1model's `HashAlgorithm` named `algo` over `data`.
pub(super) fn hash(algo: &str, data: &[u8]) -> u128 {
    Algorithm::named(algo).hash(data)
}

/// A CRC computed least significant bit first (reflected input and output), with `poly`
/// reflected too: CRC-16/ARC and CRC-32 as BMv2's crc16 and crc32 give them.
fn crc_reflected(data: &[u8], poly: u32, init: u32, xor_out: u32) -> u32 {
    let mut crc = init;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ poly } else { crc >> 1 };
        }
    }
    crc ^ xor_out
}

/// The Internet checksum (RFC 1071) of `data`, an odd last byte padded with zero.
pub(super) fn ones_complement(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The ones'-complement sum of `data`'s 16-bit words (the checksum before its complement).
pub(super) fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum: u32 = data.chunks(2).map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_give_the_published_check_values() {
        // The catalogue's check value: each algorithm over the ASCII digits 1 to 9.
        assert_eq!(hash("crc16", b"123456789"), 0xbb3d);
        assert_eq!(hash("crc32", b"123456789"), 0xcbf4_3926);
        assert_eq!(hash("identity", &[1, 2, 3]), 0x010203);
        assert_eq!(hash("xor16", &[0x12, 0x34, 0x56]), 0x1234 ^ 0x5600);
        // RFC 1071's example words sum to 0xddf2; the checksum is its complement.
        assert_eq!(ones_complement(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
    }
}
