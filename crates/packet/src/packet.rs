//! A frame being rewritten: headroom for pushed tags, offload state, and the header actions of
//! OpenFlow 1.3 with checksums kept right.
//!
//! Over 700 lines on purpose: every header action and the checksum, offload and 802.3-length
//! bookkeeping it owes sit together, so that a rewrite and its fix-up cannot drift apart.

use crate::csum;
use crate::key::FlowKey;
use crate::parse::{ethertype, ipproto, is_mpls, reparse, Layout, Malformed};
use ofp::oxm::Field;

/// Bytes kept free in front of the frame so that pushing tags does not move the payload.
pub const HEADROOM: usize = 64;

/// The transport checksum is to be completed by whoever transmits the frame: sum from `start` to the
/// end, complement, store at `start + offset` (virtio-net `NEEDS_CSUM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialCsum {
    pub start: u16,
    pub offset: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    TcpV4,
    TcpV6,
    /// UDP segmentation (`UDP_L4`): each segment a datagram of its own.
    UdpL4,
}

/// A super-frame the kernel handed over unsegmented (GSO); `size` is the payload per segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gso {
    pub kind: GsoKind,
    pub size: u16,
    pub ecn: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offload {
    pub csum: Option<PartialCsum>,
    pub gso: Option<Gso>,
}

/// Result of a TTL decrement that found the TTL already at 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidTtl;

#[derive(Clone, Debug)]
pub struct Packet {
    buf: Vec<u8>,
    head: usize,
    pub offload: Offload,
    pub layout: Layout,
}

impl Packet {
    /// Copies `frame` into a new buffer with headroom and parses its layout.
    pub fn new(frame: &[u8], offload: Offload, layout: Layout) -> Packet {
        let mut buf = Vec::with_capacity(HEADROOM + frame.len() + 16);
        buf.resize(HEADROOM, 0);
        buf.extend_from_slice(frame);
        Packet { buf, head: HEADROOM, offload, layout }
    }

    /// An empty packet whose buffer is reused by [`Packet::load`] (no allocation per frame).
    pub fn with_capacity(capacity: usize) -> Packet {
        let mut buf = Vec::with_capacity(HEADROOM + capacity);
        buf.resize(HEADROOM, 0);
        Packet { buf, head: HEADROOM, offload: Offload::default(), layout: Layout::default() }
    }

    /// Replaces the contents with `frame`, keeping the allocation.
    pub fn load(&mut self, frame: &[u8], offload: Offload, layout: Layout) {
        self.buf.clear();
        self.buf.resize(HEADROOM, 0);
        self.buf.extend_from_slice(frame);
        self.head = HEADROOM;
        self.offload = offload;
        self.layout = layout;
    }

    pub fn data(&self) -> &[u8] {
        &self.buf[self.head..]
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.head..]
    }

    pub fn len(&self) -> usize {
        self.buf.len() - self.head
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Re-parses the header stack into `key` (keeping pipeline-only fields) and the layout.
    pub fn reparse(&mut self, key: &mut FlowKey) -> Result<(), Malformed> {
        self.layout = reparse(&self.buf[self.head..], key)?;
        Ok(())
    }

    fn u16_at(&self, at: usize) -> u16 {
        let d = self.data();
        u16::from_be_bytes([d[at], d[at + 1]])
    }

    fn put_u16_at(&mut self, at: usize, v: u16) {
        self.data_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_be_bytes(self.data()[at..at + 4].try_into().unwrap())
    }

    fn put_u32_at(&mut self, at: usize, v: u32) {
        self.data_mut()[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    /// Opens `n` bytes at `at`, moving the headers in front of it (never the payload) into headroom.
    fn insert_gap(&mut self, at: usize, n: usize) {
        if self.head < n {
            let grow = HEADROOM.max(n);
            self.buf.splice(0..0, std::iter::repeat_n(0, grow));
            self.head += grow;
        }
        let start = self.head;
        self.buf.copy_within(start..start + at, start - n);
        self.head -= n;
        self.shift_offload(n as i32);
        self.resize_8023_payload(at, n as i32);
    }

    /// Removes `n` bytes at `at`, moving the headers in front of it.
    fn remove_gap(&mut self, at: usize, n: usize) {
        let start = self.head;
        self.buf.copy_within(start..start + at, start + n);
        self.head += n;
        self.shift_offload(-(n as i32));
        self.resize_8023_payload(at, -(n as i32));
    }

    /// An 802.3 frame's length field counts what follows it: bytes inserted or removed there (a
    /// label pushed behind an LLC/SNAP header) change it by as much, so that the receiver's LLC
    /// layer still finds the end of the payload. A tag pushed in front of it leaves it alone.
    fn resize_8023_payload(&mut self, at: usize, by: i32) {
        let length_at = self.layout.length_at as usize;
        if length_at != 0 && at > length_at {
            let length = self.u16_at(length_at) as i32 + by;
            self.put_u16_at(length_at, length.clamp(0, ethertype::MIN as i32 - 1) as u16);
        }
    }

    fn shift_offload(&mut self, by: i32) {
        if let Some(c) = &mut self.offload.csum {
            c.start = (c.start as i32 + by) as u16;
        }
    }

    // ---- VLAN ----

    /// Pushes a VLAN tag with `tpid`. The new tag copies VID and PCP from the tag it covers, or is
    /// zero when there is none (spec §5.12.1).
    pub fn push_vlan(&mut self, tpid: u16) {
        let tci = if self.layout.n_vlans > 0 { self.u16_at(14) } else { 0 };
        self.insert_gap(12, 4);
        self.put_u16_at(12, tpid);
        self.put_u16_at(14, tci);
        self.layout.n_vlans += 1;
        self.layout.ethertype_at += 4;
        self.shift_layout(4);
    }

    /// Pops the outermost VLAN tag; a frame without one is left alone.
    pub fn pop_vlan(&mut self) {
        if self.layout.n_vlans == 0 {
            return;
        }
        self.remove_gap(12, 4);
        self.layout.n_vlans -= 1;
        self.layout.ethertype_at -= 4;
        self.shift_layout(-4);
    }

    fn shift_layout(&mut self, by: i32) {
        let s = |v: u16| if v == 0 { 0 } else { (v as i32 + by) as u16 };
        self.layout.l3 = s(self.layout.l3);
        self.layout.l4 = s(self.layout.l4);
        self.layout.length_at = s(self.layout.length_at);
    }

    fn ethertype(&self) -> u16 {
        self.u16_at(self.layout.ethertype_at as usize)
    }

    /// The ethertype, if the frame holds all of the network header it names (IPv4, IPv6, ARP);
    /// else 0. A rewritten ethertype, or a pop, can name a header the frame is too short for:
    /// found by fuzzing, an ARP frame retyped IPv4 whose DSCP and TTL were then read past its end.
    fn network(&self) -> u16 {
        let l3 = self.layout.l3 as usize;
        match self.ethertype() {
            ethertype::IPV4 if self.len() >= l3 + 20 => ethertype::IPV4,
            ethertype::IPV6 if self.len() >= l3 + 40 => ethertype::IPV6,
            ethertype::ARP if self.len() >= l3 + 28 => ethertype::ARP,
            ethertype::IPV4 | ethertype::IPV6 | ethertype::ARP => 0,
            other => other,
        }
    }

    // ---- MPLS ----

    /// Pushes an MPLS label stack entry after the VLAN tags (OpenFlow 1.3 placement).
    pub fn push_mpls(&mut self, new_ethertype: u16) {
        let l3 = self.layout.l3 as usize;
        let lse = match self.mpls_lse() {
            // Copy label, TC and TTL; the new entry is not bottom of stack.
            Some(lse) => lse & !0x100,
            // (Also an MPLS ethertype the frame holds no entry for: a rewritten one, fuzzing found.)
            None => 0x100 | self.ip_ttl().unwrap_or(0) as u32,
        };
        self.insert_gap(l3, 4);
        self.put_u32_at(l3, lse);
        let at = self.layout.ethertype_at as usize;
        self.put_u16_at(at, new_ethertype);
        if at == self.layout.length_at as usize {
            // A plain 802.3 frame's length became the label's ethertype: its LLC header is payload.
            self.layout.length_at = 0;
        }
        // The IP header is now under the label: nothing above L2.5 is parseable.
        self.layout.l4 = 0;
    }

    /// Pops the outermost MPLS entry, setting the ethertype to what is below it.
    pub fn pop_mpls(&mut self, new_ethertype: u16) {
        if !is_mpls(self.ethertype()) {
            return;
        }
        let l3 = self.layout.l3 as usize;
        if self.len() < l3 + 4 {
            return;
        }
        let before = self.len();
        self.remove_gap(l3, 4);
        let at = self.layout.ethertype_at as usize;
        self.put_u16_at(at, new_ethertype);
        self.keep_minimum_size(before);
        // What was opaque under the label is now the packet: later rewrites need its offsets.
        self.relayout();
    }

    /// A minimum-size frame that lost a header is padded back to the Ethernet minimum, as the
    /// sender's MAC padded it: a veth does not pad, and a runt would reach the next hop. (Only
    /// for the pops that stay in userspace; the kernel pops VLAN tags without padding, and the
    /// userspace pop_vlan matches it byte for byte.)
    fn keep_minimum_size(&mut self, before: usize) {
        const ETH_MIN: usize = 60;
        if before >= ETH_MIN && self.len() < ETH_MIN {
            self.buf.resize(self.head + ETH_MIN, 0);
        }
    }

    /// Derives the layout again from the bytes, after an action changed what the headers are.
    /// A header that no longer parses leaves only the L2 part known (nothing above it is touched).
    fn relayout(&mut self) {
        match reparse(self.data(), &mut FlowKey::default()) {
            Ok(layout) => self.layout = layout,
            Err(_) => self.layout.l4 = 0,
        }
    }

    fn mpls_lse(&self) -> Option<u32> {
        let l3 = self.layout.l3 as usize;
        (is_mpls(self.ethertype()) && self.len() >= l3 + 4).then(|| self.u32_at(l3))
    }

    fn set_mpls_lse(&mut self, lse: u32) {
        let l3 = self.layout.l3 as usize;
        self.put_u32_at(l3, lse);
    }

    pub fn set_mpls_ttl(&mut self, ttl: u8) {
        if let Some(lse) = self.mpls_lse() {
            self.set_mpls_lse((lse & !0xff) | ttl as u32);
        }
    }

    pub fn dec_mpls_ttl(&mut self) -> Result<(), InvalidTtl> {
        if let Some(lse) = self.mpls_lse() {
            let ttl = lse & 0xff;
            if ttl <= 1 {
                return Err(InvalidTtl);
            }
            self.set_mpls_lse((lse & !0xff) | (ttl - 1));
        }
        Ok(())
    }

    /// Replaces the first `remove` bytes of the label stack (after the ethertype) with `insert`
    /// and sets the ethertype: one primitive for LESS's shift, pop, delivery and reroute.
    pub fn replace_stack(&mut self, remove: usize, insert: &[u8], new_ethertype: u16) {
        let l3 = self.layout.l3 as usize;
        if self.len() < l3 + remove {
            return;
        }
        let before = self.len();
        if insert.len() > remove {
            self.insert_gap(l3, insert.len() - remove);
        } else if insert.len() < remove {
            self.remove_gap(l3, remove - insert.len());
        }
        self.data_mut()[l3..l3 + insert.len()].copy_from_slice(insert);
        let at = self.layout.ethertype_at as usize;
        self.put_u16_at(at, new_ethertype);
        if insert.len() != remove || !is_mpls(new_ethertype) {
            self.keep_minimum_size(before);
            self.relayout();
        }
    }

    // ---- PBB (802.1ah) ----

    /// Encapsulates the whole frame behind a new backbone header: B-DA and B-SA copied from the
    /// frame's addresses, ethertype 0x88e7 and an I-TAG with I-SID 0 (set it with set-field).
    pub fn push_pbb(&mut self, ethertype: u16) {
        let addrs: [u8; 12] = self.data()[..12].try_into().unwrap();
        self.insert_gap(0, 18);
        let d = self.data_mut();
        d[..12].copy_from_slice(&addrs);
        d[12..14].copy_from_slice(&ethertype.to_be_bytes());
        d[14..18].copy_from_slice(&[0; 4]);
        self.layout = Layout { ethertype_at: 12, n_vlans: 0, l3: 14, ..Layout::default() };
    }

    /// Removes the backbone header (and any tags before it), leaving the customer frame.
    pub fn pop_pbb(&mut self) {
        if self.ethertype() != ethertype::PBB {
            return;
        }
        let outer = self.layout.l3 as usize + 4;
        if self.len() < outer + 14 {
            return;
        }
        let before = self.len();
        self.remove_gap(0, outer);
        self.keep_minimum_size(before);
        self.relayout();
    }

    // ---- IP TTL ----

    fn ip_ttl(&self) -> Option<u8> {
        let l3 = self.layout.l3 as usize;
        match self.network() {
            ethertype::IPV4 => Some(self.data()[l3 + 8]),
            ethertype::IPV6 => Some(self.data()[l3 + 7]),
            _ => None,
        }
    }

    fn set_ip_ttl(&mut self, ttl: u8) {
        let l3 = self.layout.l3 as usize;
        match self.network() {
            ethertype::IPV4 => self.rewrite_ipv4_header(l3 + 8, &[ttl]),
            ethertype::IPV6 => self.data_mut()[l3 + 7] = ttl,
            _ => {}
        }
    }

    pub fn set_nw_ttl(&mut self, ttl: u8) {
        self.set_ip_ttl(ttl);
    }

    pub fn dec_nw_ttl(&mut self) -> Result<(), InvalidTtl> {
        if let Some(ttl) = self.ip_ttl() {
            if ttl <= 1 {
                return Err(InvalidTtl);
            }
            self.set_ip_ttl(ttl - 1);
        }
        Ok(())
    }

    /// Copies the TTL from the header below the outermost one to the outermost (MPLS only).
    pub fn copy_ttl_out(&mut self) {
        let Some(lse) = self.mpls_lse() else { return };
        let inner = if lse & 0x100 == 0 {
            let l3 = self.layout.l3 as usize;
            (self.len() >= l3 + 8).then(|| self.u32_at(l3 + 4) as u8)
        } else {
            self.ip_under_mpls_ttl()
        };
        if let Some(ttl) = inner {
            self.set_mpls_ttl(ttl);
        }
    }

    /// Copies the outermost TTL inwards (MPLS to the next MPLS entry or to IP).
    pub fn copy_ttl_in(&mut self) {
        let Some(lse) = self.mpls_lse() else { return };
        let ttl = lse as u8;
        let l3 = self.layout.l3 as usize;
        if lse & 0x100 == 0 {
            if self.len() >= l3 + 8 {
                let inner = self.u32_at(l3 + 4);
                self.put_u32_at(l3 + 4, (inner & !0xff) | ttl as u32);
            }
        } else if let Some(version) = self.data().get(l3 + 4).map(|b| b >> 4) {
            let ip = l3 + 4;
            if version == 4 && self.len() >= ip + 20 {
                let old = self.data()[ip + 8];
                self.data_mut()[ip + 8] = ttl;
                let c = u16::from_be_bytes([self.data()[ip + 10], self.data()[ip + 11]]);
                let c = csum::update_full(c, (old as u16) << 8, (ttl as u16) << 8);
                self.put_u16_at(ip + 10, c);
            } else if version == 6 && self.len() >= ip + 40 {
                self.data_mut()[ip + 7] = ttl;
            }
        }
    }

    fn ip_under_mpls_ttl(&self) -> Option<u8> {
        let ip = self.layout.l3 as usize + 4;
        match self.data().get(ip).map(|b| b >> 4)? {
            4 => self.data().get(ip + 8).copied(),
            6 => self.data().get(ip + 7).copied(),
            _ => None,
        }
    }

    // ---- checksummed rewrites ----

    /// Writes `new` at `at` inside the IPv4 header and fixes the header checksum.
    fn rewrite_ipv4_header(&mut self, at: usize, new: &[u8]) {
        let l3 = self.layout.l3 as usize;
        let odd = (at - l3) % 2 == 1;
        let old_sum = csum::fold(csum::sum(&self.data()[at..at + new.len()], odd));
        self.data_mut()[at..at + new.len()].copy_from_slice(new);
        let new_sum = csum::fold(csum::sum(new, odd));
        let c = self.u16_at(l3 + 10);
        self.put_u16_at(l3 + 10, csum::update_full(c, old_sum, new_sum));
    }

    /// Where the transport checksum lives, and the protocol, if this frame has one that covers
    /// its payload.
    fn l4_csum_at(&self) -> Option<(usize, u8)> {
        let l4 = self.layout.l4 as usize;
        if l4 == 0 {
            return None;
        }
        let proto = match self.ethertype() {
            ethertype::IPV4 => self.data()[self.layout.l3 as usize + 9],
            ethertype::IPV6 => self.ipv6_upper_proto()?,
            _ => return None,
        };
        let at = match proto {
            ipproto::TCP => l4 + 16,
            ipproto::UDP => l4 + 6,
            ipproto::ICMP | ipproto::ICMPV6 => l4 + 2,
            _ => return None,
        };
        (self.len() >= at + 2).then_some((at, proto))
    }

    fn ipv6_upper_proto(&self) -> Option<u8> {
        // The layout's l4 is only set when the walk reached an upper-layer header; find its
        // protocol by walking again (rare path: only on IPv6 rewrites).
        let mut key = FlowKey::default();
        crate::parse::reparse(self.data(), &mut key).ok()?;
        Some(key.ip_proto())
    }

    /// The protocol is part of the transport checksum's pseudo-header (the low byte of a word):
    /// the checksum where the old protocol keeps it follows the change, as a full recompute would.
    fn fix_pseudo_header_proto(&mut self, new_proto: u8) {
        let Some((csum_at, proto)) = self.l4_csum_at() else { return };
        let v4 = self.ethertype() == ethertype::IPV4;
        if proto == ipproto::ICMP || (v4 && proto == ipproto::UDP && self.u16_at(csum_at) == 0) {
            return; // no pseudo-header, or no checksum
        }
        let c = self.u16_at(csum_at);
        let partial = self.offload.csum.is_some_and(|p| p.start as usize == self.layout.l4 as usize);
        let updated = if partial {
            csum::update_partial(c, proto as u16, new_proto as u16)
        } else {
            csum::update_full(c, proto as u16, new_proto as u16)
        };
        self.put_u16_at(csum_at, updated);
    }

    /// Offset of the next-header byte that names the upper-layer protocol (after any extension
    /// headers the parser walks).
    fn ipv6_upper_proto_at(&self) -> Option<usize> {
        let d = self.data();
        let l3 = self.layout.l3 as usize;
        let mut at = l3 + 6;
        let mut hdr = l3 + 40;
        loop {
            let next = *d.get(at)?;
            let len = match next {
                ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS => (*d.get(hdr + 1)? as usize + 1) * 8,
                ipproto::FRAGMENT => 8,
                ipproto::AH => (*d.get(hdr + 1)? as usize + 2) * 4,
                _ => return Some(at),
            };
            at = hdr;
            hdr += len;
        }
    }

    /// Writes `new` at `at` and updates the transport checksum. `in_pseudo` says the bytes are part of
    /// the pseudo-header (IP addresses), which a partial checksum already accounts for; bytes inside the
    /// transport segment are summed by whoever completes a partial checksum and need no update.
    fn rewrite_with_l4(&mut self, at: usize, new: &[u8], in_pseudo: bool) {
        let csum_at = self.l4_csum_at();
        let old_sum;
        {
            // Parity relative to the checksummed region: addresses sit at even offsets of the pseudo
            // header, transport fields at their offset from l4.
            let odd = !in_pseudo && (at - self.layout.l4 as usize) % 2 == 1;
            old_sum = csum::fold(csum::sum(&self.data()[at..at + new.len()], odd));
        }
        self.data_mut()[at..at + new.len()].copy_from_slice(new);
        let Some((csum_at, proto)) = csum_at else { return };
        // ICMPv4 has no pseudo-header: an IP address is outside its checksum.
        if in_pseudo && proto == ipproto::ICMP {
            return;
        }
        // Over IPv4 a UDP checksum of 0 means "none" (RFC 768) and stays so.
        if proto == ipproto::UDP && self.ethertype() == ethertype::IPV4 && self.u16_at(csum_at) == 0 {
            return;
        }
        let odd = !in_pseudo && (at - self.layout.l4 as usize) % 2 == 1;
        let new_sum = csum::fold(csum::sum(new, odd));
        let c = self.u16_at(csum_at);
        let partial = self.offload.csum.is_some_and(|p| p.start as usize == self.layout.l4 as usize);
        let updated = if partial {
            if !in_pseudo {
                return;
            }
            csum::update_partial(c, old_sum, new_sum)
        } else {
            let v = csum::update_full(c, old_sum, new_sum);
            // A computed UDP checksum of 0 is sent as all ones: 0 would read as "none".
            if v == 0 && proto == ipproto::UDP {
                0xffff
            } else {
                v
            }
        };
        self.put_u16_at(csum_at, updated);
    }

    /// End of the IP payload: short frames carry Ethernet padding after it, which no checksum covers.
    fn l3_end(&self) -> usize {
        let l3 = self.layout.l3 as usize;
        let end = match self.ethertype() {
            ethertype::IPV4 => l3 + self.u16_at(l3 + 2) as usize,
            ethertype::IPV6 => l3 + 40 + self.u16_at(l3 + 4) as usize,
            _ => self.len(),
        };
        end.min(self.len())
    }

    /// SCTP's checksum is a CRC32c over the whole packet (RFC 4960 §6.8), stored little-endian.
    fn fix_sctp_crc(&mut self) {
        let l4 = self.layout.l4 as usize;
        let end = self.l3_end();
        if end < l4 + 12 {
            return;
        }
        self.put_u32_at(l4 + 8, 0);
        let crc = csum::crc32c(&self.data()[l4..end]);
        self.data_mut()[l4 + 8..l4 + 12].copy_from_slice(&crc.to_le_bytes());
    }

    /// Applies a set-field action. Fields whose header is absent are left alone (a valid flow's
    /// prerequisites rule that out); pipeline-only fields (metadata, tunnel id) only touch the key.
    pub fn set_field(&mut self, field: Field, value: u128, key: &mut FlowKey) {
        use Field::*;
        key.set(field, value);
        let l3 = self.layout.l3 as usize;
        let l4 = self.layout.l4 as usize;
        let et = self.network();
        let bytes = value.to_be_bytes();
        match field {
            EthDst => self.data_mut()[0..6].copy_from_slice(&bytes[10..]),
            EthSrc => self.data_mut()[6..12].copy_from_slice(&bytes[10..]),
            EthType => {
                // Exactly the field (the innermost ethertype), no re-encapsulation: what follows
                // is now read as the new type.
                let at = self.layout.ethertype_at as usize;
                self.put_u16_at(at, value as u16);
                self.relayout();
            }
            IpProto if et == ethertype::IPV4 => {
                self.fix_pseudo_header_proto(value as u8);
                self.rewrite_ipv4_header(l3 + 9, &[value as u8]);
                self.relayout();
            }
            IpProto if et == ethertype::IPV6 => {
                if let Some(at) = self.ipv6_upper_proto_at() {
                    self.fix_pseudo_header_proto(value as u8);
                    self.data_mut()[at] = value as u8;
                    self.relayout();
                }
            }
            VlanVid if self.layout.n_vlans > 0 => {
                let tci = self.u16_at(14);
                self.put_u16_at(14, (tci & 0xf000) | (value as u16 & 0x0fff));
                key.set(VlanVid, (value & 0xfff) | 0x1000);
            }
            VlanPcp if self.layout.n_vlans > 0 => {
                let tci = self.u16_at(14);
                self.put_u16_at(14, (tci & 0x1fff) | ((value as u16 & 7) << 13));
            }
            IpDscp | IpEcn if et == ethertype::IPV4 => {
                let tos = self.data()[l3 + 1];
                let tos =
                    if field == IpDscp { (tos & 3) | ((value as u8) << 2) } else { (tos & 0xfc) | (value as u8 & 3) };
                self.rewrite_ipv4_header(l3 + 1, &[tos]);
            }
            IpDscp | IpEcn if et == ethertype::IPV6 => {
                let w = self.u32_at(l3);
                let tc = (w >> 20) as u8;
                let tc =
                    if field == IpDscp { (tc & 3) | ((value as u8) << 2) } else { (tc & 0xfc) | (value as u8 & 3) };
                self.put_u32_at(l3, (w & 0xf00f_ffff) | (tc as u32) << 20);
            }
            Ipv4Src | Ipv4Dst if et == ethertype::IPV4 => {
                let at = l3 + if field == Ipv4Src { 12 } else { 16 };
                let new = &bytes[12..];
                // The transport checksum first (it reads the old address), then the header.
                let old: [u8; 4] = self.data()[at..at + 4].try_into().unwrap();
                self.rewrite_with_l4(at, new, true);
                self.data_mut()[at..at + 4].copy_from_slice(&old);
                self.rewrite_ipv4_header(at, new);
            }
            ArpSpa | ArpTpa if et == ethertype::ARP => {
                let at = l3 + if field == ArpSpa { 14 } else { 24 };
                self.data_mut()[at..at + 4].copy_from_slice(&bytes[12..]);
            }
            ArpSha | ArpTha if et == ethertype::ARP => {
                let at = l3 + if field == ArpSha { 8 } else { 18 };
                self.data_mut()[at..at + 6].copy_from_slice(&bytes[10..]);
            }
            ArpOp if et == ethertype::ARP => self.put_u16_at(l3 + 6, value as u16),
            TcpSrc | TcpDst | UdpSrc | UdpDst if l4 != 0 => {
                let at = l4 + if matches!(field, TcpSrc | UdpSrc) { 0 } else { 2 };
                self.rewrite_with_l4(at, &bytes[14..], false);
            }
            SctpSrc | SctpDst if l4 != 0 => {
                let at = l4 + if field == SctpSrc { 0 } else { 2 };
                self.data_mut()[at..at + 2].copy_from_slice(&bytes[14..]);
                self.fix_sctp_crc();
            }
            Icmpv4Type | Icmpv6Type if l4 != 0 => self.rewrite_with_l4(l4, &bytes[15..], false),
            Icmpv4Code | Icmpv6Code if l4 != 0 => self.rewrite_with_l4(l4 + 1, &bytes[15..], false),
            Ipv6Src | Ipv6Dst if et == ethertype::IPV6 => {
                let at = l3 + if field == Ipv6Src { 8 } else { 24 };
                self.rewrite_with_l4(at, &bytes, true);
            }
            Ipv6Flabel if et == ethertype::IPV6 => {
                let w = self.u32_at(l3);
                self.put_u32_at(l3, (w & 0xfff0_0000) | (value as u32 & 0xfffff));
            }
            Ipv6NdTarget if l4 != 0 && self.len() >= l4 + 24 => self.rewrite_with_l4(l4 + 8, &bytes, false),
            Ipv6NdSll | Ipv6NdTll if l4 != 0 => {
                let want = if field == Ipv6NdSll { 1 } else { 2 };
                if let Some(at) = self.nd_option(want) {
                    self.rewrite_with_l4(at, &bytes[10..], false);
                }
            }
            MplsLabel | MplsTc | MplsBos => {
                if let Some(lse) = self.mpls_lse() {
                    let v = value as u32;
                    let lse = match field {
                        MplsLabel => (lse & 0xfff) | (v & 0xfffff) << 12,
                        MplsTc => (lse & !0xe00) | (v & 7) << 9,
                        _ => (lse & !0x100) | (v & 1) << 8,
                    };
                    self.set_mpls_lse(lse);
                }
            }
            PbbIsid if et == ethertype::PBB && self.len() >= l3 + 4 => {
                let itag = self.u32_at(l3);
                self.put_u32_at(l3, (itag & 0xff00_0000) | (value as u32 & 0x00ff_ffff));
            }
            _ => {}
        }
    }

    /// Offset of the link-layer address in the ND option of type `want`.
    fn nd_option(&self, want: u8) -> Option<usize> {
        let d = self.data();
        let mut at = self.layout.l4 as usize + 24;
        while at + 8 <= d.len() {
            let len = d[at + 1] as usize * 8;
            if len == 0 {
                return None;
            }
            if d[at] == want && len == 8 {
                return Some(at + 2);
            }
            at += len;
        }
        None
    }

    /// Completes a partial transport checksum in software (for a receiver that cannot, such as a
    /// controller reading a packet-in).
    pub fn finish_checksum(&mut self) {
        if let Some(p) = self.offload.csum.take() {
            let (start, at) = (p.start as usize, p.start as usize + p.offset as usize);
            if at + 2 <= self.len() && start <= self.len() {
                let c = !csum::fold(csum::sum(&self.data()[start..], false));
                self.put_u16_at(at, c);
            }
        }
    }

    pub fn into_vec(mut self) -> Vec<u8> {
        self.buf.drain(..self.head);
        self.buf
    }
}
