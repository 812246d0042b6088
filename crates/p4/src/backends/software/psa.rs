//! PSA's state on the software target (issue 52, item 2): the instances of the externs only PSA
//! has (`Hash`, `InternetChecksum`, `Checksum`, `Random`, `Digest`), made at load, and a
//! multicast group's replicas. `Counter`, `Meter` and `Register` share the software target's
//! cells with v1model's. The compiled program runs PSA's pipelines in `exec_psa.rs`.

use super::*;

pub(super) const RECIRCULATE_PORT: u32 = 0xffff_fffa;
/// As v1model's: how many times a frame's copies may come back to ingress.
pub(super) const RETURNS: usize = 16;

/// A PSA extern instance whose state is not a table of cells.
#[derive(Clone, Debug)]
pub(super) enum Extern {
    Hash(String),
    /// Its algorithm, and the bytes given since the last clear.
    Checksum(String, Vec<u8>),
    /// The running ones'-complement sum (not yet complemented).
    InternetChecksum(u16),
    Random(u128, u128),
    Digest,
}

impl Switch {
    /// Multicast group `group`'s (port, replication id) pairs.
    pub(super) fn replicas(&self, group: u16) -> Vec<(u32, u16)> {
        let ports = self.groups.get(&group).cloned().unwrap_or_default();
        let rids = self.replica_ids.get(&group).cloned().unwrap_or_default();
        ports.into_iter().enumerate().map(|(i, p)| (p, rids.get(i).copied().unwrap_or(0))).collect()
    }

    /// Every `Checksum` and `InternetChecksum` as if cleared, as each of the package's blocks
    /// starts: their state is the packet's, not the switch's ("automatically initialized as
    /// if clear() had been called on it, once for each time the parser or control it is
    /// instantiated within is executed", psa.p4). An instance of a sub-block starts clear at
    /// its package block's start, not at each of its own applications.
    pub(super) fn clear_checksums(&mut self) {
        for e in self.externs.values_mut() {
            match e {
                Extern::Checksum(_, bytes) => bytes.clear(),
                Extern::InternetChecksum(sum) => *sum = 0,
                _ => {}
            }
        }
    }

    /// An instance of one of PSA's externs without cells; false if `ty` is not one.
    pub(super) fn psa_instance(&mut self, key: &str, ty: &str, args: &[Value]) -> bool {
        let algo = |i: usize| match args.get(i) {
            Some(Value::Enum(n)) => n.clone(),
            _ => String::new(),
        };
        let made = match ty {
            "Hash" => Extern::Hash(algo(0)),
            "Checksum" => Extern::Checksum(algo(0), Vec::new()),
            "InternetChecksum" => Extern::InternetChecksum(0),
            "Random" => Extern::Random(args.first().map_or(0, Value::as_u128), args.get(1).map_or(0, Value::as_u128)),
            "Digest" => Extern::Digest,
            _ => return false,
        };
        self.externs.insert(key.to_string(), made);
        true
    }
}

/// PSA's algorithm names as v1model's (the hash functions are the same).
pub(super) fn psa_algorithm(name: &str) -> &'static str {
    match name {
        "IDENTITY" => "identity",
        "CRC32" | "CRC32_CUSTOM" => "crc32",
        "CRC16" | "CRC16_CUSTOM" | "TARGET_DEFAULT" => "crc16",
        "ONES_COMPLEMENT16" => "csum16",
        _ => "",
    }
}

/// One's-complement addition of two 16-bit sums.
pub(super) fn add_ones_complement(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}
