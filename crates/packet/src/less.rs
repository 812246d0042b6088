//! LESS label stacks on the wire (docs/less.md): the 32-bit label, the per-hop rule, and routes
//! between hierarchical addresses. Pure functions over bytes; the mode in `forwarding::less` applies
//! them to packets.
//!
//! A label is an MPLS stack entry read differently: three output ports (this hop's first), the
//! bottom-of-stack bit, and a 7-bit TTL counting the ports still to use. Entries with TTL 0 are
//! not routes but the reroute block that follows them.

use crate::parse::ethertype;

/// Label stacks travel as MPLS unicast.
pub const ETHERTYPE: u16 = ethertype::MPLS;
/// The addressing protocol's frames (IEEE 802 local experimental ethertype 1).
pub const PROTOCOL_ETHERTYPE: u16 = 0x88b5;
/// Ports a label holds.
pub const PORTS_PER_LABEL: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label {
    /// Output ports, this hop's first; 0 past the last.
    pub ports: [u8; 3],
    /// The last entry of the stack: IP follows.
    pub bottom: bool,
    /// Ports of this label still to use (1–3); 0 marks the reroute block.
    pub ttl: u8,
}

impl Label {
    pub fn from_word(w: u32) -> Label {
        let b = w.to_be_bytes();
        Label { ports: [b[0], b[1], b[2]], bottom: b[3] & 0x80 != 0, ttl: b[3] & 0x7f }
    }

    pub fn word(&self) -> u32 {
        u32::from_be_bytes([self.ports[0], self.ports[1], self.ports[2], (self.bottom as u8) << 7 | (self.ttl & 0x7f)])
    }

    /// Non-zero port bytes from the left.
    pub fn ports_present(&self) -> u8 {
        self.ports.iter().take_while(|&&p| p != 0).count() as u8
    }

    pub fn is_route(&self) -> bool {
        self.ttl != 0
    }
}

/// Why a stack cannot be followed. Counted per reason by the mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StackError {
    /// The frame ends inside the stack, or no entry is the bottom.
    Truncated,
    /// More entries than the switch allows.
    TooManyLabels,
    /// The top label names port 0.
    PortZero,
    /// The top label's TTL is 0 or larger than the ports it holds.
    BadTtl,
    /// After the bottom label comes neither IPv4 nor IPv6.
    NotIp,
}

impl StackError {
    pub const ALL: [StackError; 5] =
        [StackError::Truncated, StackError::TooManyLabels, StackError::PortZero, StackError::BadTtl, StackError::NotIp];

    pub fn name(self) -> &'static str {
        match self {
            StackError::Truncated => "truncated",
            StackError::TooManyLabels => "too_many_labels",
            StackError::PortZero => "port_zero",
            StackError::BadTtl => "bad_ttl",
            StackError::NotIp => "not_ip",
        }
    }
}

/// What one hop does to the stack, besides choosing `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// The top label becomes `word` (ports shifted left, TTL one less).
    Shift { word: u32 },
    /// The top label goes; more route labels follow.
    Pop,
    /// The last route label goes with everything after it up to the bottom (the reroute block):
    /// `bytes` from the stack's start, and the ethertype becomes `ethertype`.
    Deliver { bytes: usize, ethertype: u16 },
}

/// The decision of one hop for the stack that starts at `at` in `frame`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub port: u8,
    pub rewrite: Rewrite,
}

/// One stack entry at `at`, if the frame holds it.
fn entry(frame: &[u8], at: usize) -> Option<Label> {
    let b = frame.get(at..at + 4)?;
    Some(Label::from_word(u32::from_be_bytes(b.try_into().unwrap())))
}

/// Entries from `at` through the bottom one, checked against `max_labels`.
pub fn depth(frame: &[u8], at: usize, max_labels: usize) -> Result<usize, StackError> {
    let mut n = 0;
    loop {
        let label = entry(frame, at + 4 * n).ok_or(StackError::Truncated)?;
        n += 1;
        if n > max_labels {
            return Err(StackError::TooManyLabels);
        }
        if label.bottom {
            return Ok(n);
        }
    }
}

/// The ethertype of the IP packet at `at`, from its version nibble.
pub fn ip_ethertype(frame: &[u8], at: usize) -> Result<u16, StackError> {
    match frame.get(at).map(|b| b >> 4) {
        Some(4) => Ok(ethertype::IPV4),
        Some(6) => Ok(ethertype::IPV6),
        _ => Err(StackError::NotIp),
    }
}

/// The per-hop rule (docs/less.md §1), applied to the stack at `at`: no lookup, only the top label.
/// `max_labels` bounds the whole stack, reroute block included.
pub fn hop(frame: &[u8], at: usize, max_labels: usize) -> Result<Hop, StackError> {
    hop_in_stack(frame, at, depth(frame, at, max_labels)?)
}

/// [`hop`] for a stack of `n` entries whose [`depth`] the caller has checked already.
pub fn hop_in_stack(frame: &[u8], at: usize, n: usize) -> Result<Hop, StackError> {
    let top = entry(frame, at).ok_or(StackError::Truncated)?;
    if top.ports[0] == 0 {
        return Err(StackError::PortZero);
    }
    if top.ttl == 0 || top.ttl > top.ports_present() {
        return Err(StackError::BadTtl);
    }
    let port = top.ports[0];
    let ttl = top.ttl - 1;
    if ttl > 0 {
        let shifted = Label { ports: [top.ports[1], top.ports[2], 0], bottom: top.bottom, ttl };
        return Ok(Hop { port, rewrite: Rewrite::Shift { word: shifted.word() } });
    }
    let next_is_route = !top.bottom && entry(frame, at + 4).is_some_and(|l| l.is_route());
    if next_is_route {
        return Ok(Hop { port, rewrite: Rewrite::Pop });
    }
    let bytes = 4 * n;
    Ok(Hop { port, rewrite: Rewrite::Deliver { bytes, ethertype: ip_ethertype(frame, at + bytes)? } })
}

/// The key the kernel finds a detour by for a frame whose block is `entries` (bpf/fastpath.h
/// `less_reroute_key`): the block's words hashed as the megaflow key is, budget and flags (which
/// change as the frame travels) masked out of the first.
pub fn block_hash(entries: &[u8]) -> u64 {
    const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = 0u64;
    for (i, w) in entries.chunks_exact(4).enumerate() {
        let mut word = u32::from_be_bytes(w.try_into().unwrap()) as u64;
        if i == 0 {
            word &= 0xffff;
        }
        h = (h ^ word).wrapping_mul(HASH_MUL);
    }
    h ^ (h >> 32)
}

/// A route (output ports, first hop first) as a label stack: labels of up to three ports, each with
/// TTL = its ports, the last marked bottom unless more entries (a reroute block) follow.
pub fn encode_route(ports: &[u8], more_follows: bool) -> Vec<u8> {
    let chunks: Vec<&[u8]> = ports.chunks(PORTS_PER_LABEL).collect();
    let mut out = Vec::with_capacity(4 * chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let mut label = Label { ports: [0; 3], bottom: i + 1 == chunks.len() && !more_follows, ttl: chunk.len() as u8 };
        label.ports[..chunk.len()].copy_from_slice(chunk);
        out.extend_from_slice(&label.word().to_be_bytes());
    }
    out
}

/// A node's place under the root: per hop (down, up) — the parent's port toward the node, the
/// node's port toward the parent — and, for a host, its edge port last.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address {
    pub hops: Vec<(u8, u8)>,
    /// A host's port on its edge switch.
    pub edge: Option<u8>,
}

impl Address {
    /// Leading hops two addresses share.
    pub fn common(&self, other: &Address) -> usize {
        self.hops.iter().zip(&other.hops).take_while(|(a, b)| a == b).count()
    }

    /// Whether `other` lies under this node (a switch's address is a prefix of it).
    pub fn is_prefix_of(&self, other: &Address) -> bool {
        self.edge.is_none() && self.common(other) == self.hops.len()
    }
}

/// The route from the switch at `from` to the node at `to`: up to where their paths from the root
/// part, then down. Empty when `to` is `from` itself.
pub fn route(from: &Address, to: &Address) -> Vec<u8> {
    let k = from.common(to);
    let up = from.hops[k..].iter().rev().map(|&(_, up)| up);
    let down = to.hops[k..].iter().map(|&(down, _)| down);
    up.chain(down).chain(to.edge).collect()
}

impl std::fmt::Display for Address {
    /// `2/1.4/1` for a switch two hops down; a host adds `.e3` for edge port 3; the root is `-`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.hops.is_empty() && self.edge.is_none() {
            return f.write_str("-");
        }
        let mut parts: Vec<String> = self.hops.iter().map(|(d, u)| format!("{d}/{u}")).collect();
        parts.extend(self.edge.map(|e| format!("e{e}")));
        f.write_str(&parts.join("."))
    }
}

impl std::str::FromStr for Address {
    type Err = String;

    /// Reads what `Display` writes: `2/1.4/1`, `2/1.4/1.e3`, `-` (the root), `e3` (a host on the root).
    fn from_str(s: &str) -> Result<Address, String> {
        let bad = || format!("'{s}' is not a LESS address: down/up port pairs and an optional eN, dot-separated");
        let mut a = Address::default();
        if s == "-" {
            return Ok(a);
        }
        let parts: Vec<&str> = s.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if let Some(e) = part.strip_prefix('e') {
                if i + 1 != parts.len() {
                    return Err(bad());
                }
                a.edge = Some(e.parse::<u8>().ok().filter(|&p| p != 0).ok_or_else(bad)?);
                continue;
            }
            let (d, u) = part.split_once('/').ok_or_else(bad)?;
            let port = |x: &str| x.parse::<u8>().ok().filter(|&p| p != 0).ok_or_else(bad);
            a.hops.push((port(d)?, port(u)?));
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip_frame_with(stack: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ETHERTYPE.to_be_bytes());
        f.extend_from_slice(stack);
        f.extend_from_slice(&[0x45, 0, 0, 20]);
        f
    }

    fn word(ports: [u8; 3], bottom: bool, ttl: u8) -> [u8; 4] {
        Label { ports, bottom, ttl }.word().to_be_bytes()
    }

    #[test]
    fn label_bits_are_where_the_seed_puts_them() {
        let l = Label { ports: [2, 8, 2], bottom: true, ttl: 3 };
        assert_eq!(l.word(), 0x0208_0283);
        assert_eq!(Label::from_word(0x0208_0283), l);
        assert_eq!(Label::from_word(0x0100_0001).ports_present(), 1);
    }

    #[test]
    fn the_seeds_example_shifts_then_pops() {
        // Fig. 2: "2.8.2" leaves on 2 and becomes "8.2", then 8, then 2 and the label is gone.
        let mut f = ip_frame_with(&word([2, 8, 2], true, 3));
        let h = hop(&f, 14, 16).unwrap();
        assert_eq!(h.port, 2);
        let Rewrite::Shift { word: w } = h.rewrite else { panic!("{h:?}") };
        assert_eq!(Label::from_word(w), Label { ports: [8, 2, 0], bottom: true, ttl: 2 });
        f[14..18].copy_from_slice(&w.to_be_bytes());
        let h = hop(&f, 14, 16).unwrap();
        assert_eq!(h.port, 8);
        let Rewrite::Shift { word: w } = h.rewrite else { panic!() };
        f[14..18].copy_from_slice(&w.to_be_bytes());
        assert_eq!(
            hop(&f, 14, 16).unwrap(),
            Hop { port: 2, rewrite: Rewrite::Deliver { bytes: 4, ethertype: 0x0800 } }
        );
    }

    #[test]
    fn a_spent_label_over_another_route_label_is_popped_alone() {
        let mut stack = word([5, 0, 0], false, 1).to_vec();
        stack.extend_from_slice(&word([1, 2, 0], true, 2));
        assert_eq!(hop(&ip_frame_with(&stack), 14, 16).unwrap(), Hop { port: 5, rewrite: Rewrite::Pop });
    }

    #[test]
    fn the_last_route_label_takes_the_reroute_block_with_it() {
        let mut stack = word([5, 0, 0], false, 1).to_vec();
        stack.extend_from_slice(&word([8, 0, 3], false, 0));
        stack.extend_from_slice(&word([1, 2, 0], true, 0));
        let mut f = ip_frame_with(&stack);
        assert_eq!(hop(&f, 14, 16).unwrap().rewrite, Rewrite::Deliver { bytes: 12, ethertype: 0x0800 });
        f[26] = 0x60;
        assert_eq!(hop(&f, 14, 16).unwrap().rewrite, Rewrite::Deliver { bytes: 12, ethertype: 0x86dd });
        f[26] = 0x00;
        assert_eq!(hop(&f, 14, 16), Err(StackError::NotIp));
    }

    #[test]
    fn malformed_stacks_name_their_fault() {
        let f = ip_frame_with(&word([0, 1, 0], true, 1));
        assert_eq!(hop(&f, 14, 16), Err(StackError::PortZero));
        assert_eq!(hop(&ip_frame_with(&word([3, 0, 0], true, 2)), 14, 16), Err(StackError::BadTtl));
        assert_eq!(hop(&ip_frame_with(&word([3, 0, 4], true, 2)), 14, 16), Err(StackError::BadTtl));
        assert_eq!(hop(&ip_frame_with(&word([3, 4, 0], true, 0)), 14, 16), Err(StackError::BadTtl));
        // A TTL below the ports present is the seed's rule: the rest are never used.
        assert!(hop(&ip_frame_with(&word([3, 4, 5], true, 1)), 14, 16).is_ok());
        let deep: Vec<u8> = (0..5).flat_map(|i| word([1, 0, 0], i == 4, 1)).collect();
        assert_eq!(hop(&ip_frame_with(&deep), 14, 4), Err(StackError::TooManyLabels));
        assert!(hop(&ip_frame_with(&deep), 14, 5).is_ok());
        let no_bottom: Vec<u8> =
            [0u8; 12].iter().chain(&ETHERTYPE.to_be_bytes()).chain(&word([1, 0, 0], false, 1)).copied().collect();
        assert_eq!(hop(&no_bottom, 14, 16), Err(StackError::Truncated));
    }

    #[test]
    fn routes_climb_to_where_paths_part_then_descend() {
        let a = |hops: &[(u8, u8)], edge: Option<u8>| Address { hops: hops.to_vec(), edge };
        let s3 = a(&[(1, 1), (2, 1)], None);
        let host = a(&[(1, 1), (4, 2)], Some(5));
        assert_eq!(route(&s3, &host), vec![1, 4, 5]);
        let root = a(&[], None);
        assert_eq!(route(&root, &host), vec![1, 4, 5]);
        let elsewhere = a(&[(3, 2)], Some(7));
        assert_eq!(route(&s3, &elsewhere), vec![1, 1, 3, 7]);
        assert!(s3.is_prefix_of(&a(&[(1, 1), (2, 1), (6, 1)], Some(2))));
        assert!(!host.is_prefix_of(&host));
        assert_eq!(host.to_string(), "1/1.4/2.e5");
        assert_eq!(encode_route(&[1, 4, 5, 6], false), [word([1, 4, 5], false, 3), word([6, 0, 0], true, 1)].concat());
    }

    #[test]
    fn addresses_read_back_what_they_print() {
        for text in ["-", "2/1", "2/1.4/1", "2/1.4/1.e3", "e7"] {
            let a: Address = text.parse().unwrap();
            assert_eq!(a.to_string(), text);
        }
        let a: Address = "2/1.4/3.e5".parse().unwrap();
        assert_eq!(a, Address { hops: vec![(2, 1), (4, 3)], edge: Some(5) });
        for bad in ["", "2", "2/0", "e3.2/1", "2/1.e0", "x/1", "2/1/3", "300/1"] {
            assert!(bad.parse::<Address>().is_err(), "{bad}");
        }
    }
}
