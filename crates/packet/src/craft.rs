//! Building well-formed frames (with correct checksums): for tests, probes and the load generator.

use crate::csum;

pub type Mac = [u8; 6];

#[derive(Clone, Debug)]
pub struct FrameBuilder {
    dst: Mac,
    src: Mac,
    vlans: Vec<(u16, u16)>,
    mpls: Vec<u32>,
}

pub enum L3 {
    Ipv4 { src: [u8; 4], dst: [u8; 4], ttl: u8, tos: u8, l4: L4 },
    Ipv6 { src: [u8; 16], dst: [u8; 16], hop_limit: u8, tc: u8, flow_label: u32, l4: L4 },
    Arp { op: u16, sha: Mac, spa: [u8; 4], tha: Mac, tpa: [u8; 4] },
    Raw { ethertype: u16, payload: Vec<u8> },
}

pub enum L4 {
    Tcp { src: u16, dst: u16, seq: u32, flags: u8, payload: Vec<u8> },
    Udp { src: u16, dst: u16, payload: Vec<u8> },
    Sctp { src: u16, dst: u16, payload: Vec<u8> },
    Icmp { typ: u8, code: u8, payload: Vec<u8> },
    Raw { proto: u8, payload: Vec<u8> },
}

impl L4 {
    fn proto(&self, v6: bool) -> u8 {
        match self {
            L4::Tcp { .. } => 6,
            L4::Udp { .. } => 17,
            L4::Sctp { .. } => 132,
            L4::Icmp { .. } => {
                if v6 {
                    58
                } else {
                    1
                }
            }
            L4::Raw { proto, .. } => *proto,
        }
    }

    /// The segment with its checksum left zero, and where the checksum goes.
    fn bytes(&self) -> (Vec<u8>, Option<usize>) {
        match self {
            L4::Tcp { src, dst, seq, flags, payload } => {
                let mut b = Vec::with_capacity(20 + payload.len());
                b.extend_from_slice(&src.to_be_bytes());
                b.extend_from_slice(&dst.to_be_bytes());
                b.extend_from_slice(&seq.to_be_bytes());
                b.extend_from_slice(&0u32.to_be_bytes());
                b.push(5 << 4);
                b.push(*flags);
                b.extend_from_slice(&65535u16.to_be_bytes());
                b.extend_from_slice(&[0, 0, 0, 0]);
                b.extend_from_slice(payload);
                (b, Some(16))
            }
            L4::Udp { src, dst, payload } => {
                let mut b = Vec::with_capacity(8 + payload.len());
                b.extend_from_slice(&src.to_be_bytes());
                b.extend_from_slice(&dst.to_be_bytes());
                b.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
                b.extend_from_slice(&[0, 0]);
                b.extend_from_slice(payload);
                (b, Some(6))
            }
            L4::Sctp { src, dst, payload } => {
                let mut b = Vec::new();
                b.extend_from_slice(&src.to_be_bytes());
                b.extend_from_slice(&dst.to_be_bytes());
                b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
                b.extend_from_slice(payload);
                let crc = csum::crc32c(&b);
                b[8..12].copy_from_slice(&crc.to_le_bytes());
                (b, None)
            }
            L4::Icmp { typ, code, payload } => {
                let mut b = vec![*typ, *code, 0, 0];
                b.extend_from_slice(payload);
                (b, Some(2))
            }
            L4::Raw { payload, .. } => (payload.clone(), None),
        }
    }
}

impl FrameBuilder {
    pub fn new(dst: Mac, src: Mac) -> Self {
        FrameBuilder { dst, src, vlans: Vec::new(), mpls: Vec::new() }
    }

    /// Adds a VLAN tag (outermost first).
    pub fn vlan(mut self, tpid: u16, tci: u16) -> Self {
        self.vlans.push((tpid, tci));
        self
    }

    /// Adds an MPLS label stack entry (outermost first); bottom-of-stack is set on the last.
    pub fn mpls(mut self, label: u32, tc: u8, ttl: u8) -> Self {
        self.mpls.push(label << 12 | (tc as u32 & 7) << 9 | ttl as u32);
        self
    }

    pub fn build(&self, l3: L3) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&self.dst);
        f.extend_from_slice(&self.src);
        for (tpid, tci) in &self.vlans {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        let (et, body) = l3_bytes(&l3);
        if self.mpls.is_empty() {
            f.extend_from_slice(&et.to_be_bytes());
        } else {
            f.extend_from_slice(&0x8847u16.to_be_bytes());
            for (i, lse) in self.mpls.iter().enumerate() {
                let bos = if i + 1 == self.mpls.len() { 0x100 } else { 0 };
                f.extend_from_slice(&(lse | bos).to_be_bytes());
            }
        }
        f.extend_from_slice(&body);
        f
    }
}

fn l3_bytes(l3: &L3) -> (u16, Vec<u8>) {
    match l3 {
        L3::Ipv4 { src, dst, ttl, tos, l4 } => {
            let (mut seg, csum_at) = l4.bytes();
            let proto = l4.proto(false);
            if let Some(at) = csum_at {
                let c = if proto == 1 {
                    csum::checksum(&seg)
                } else {
                    let pseudo = csum::pseudo_v4(src, dst, proto, seg.len() as u32);
                    let c = !csum::fold(pseudo + csum::sum(&seg, false));
                    if c == 0 && proto == 17 {
                        0xffff
                    } else {
                        c
                    }
                };
                seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
            }
            let mut h = vec![0x45, *tos];
            h.extend_from_slice(&((20 + seg.len()) as u16).to_be_bytes());
            h.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, *ttl, proto, 0, 0]);
            h.extend_from_slice(src);
            h.extend_from_slice(dst);
            csum::set_ipv4_checksum(&mut h);
            h.extend_from_slice(&seg);
            (0x0800, h)
        }
        L3::Ipv6 { src, dst, hop_limit, tc, flow_label, l4 } => {
            let (mut seg, csum_at) = l4.bytes();
            let proto = l4.proto(true);
            if let Some(at) = csum_at {
                let pseudo = csum::pseudo_v6(src, dst, proto, seg.len() as u32);
                let c = !csum::fold(pseudo + csum::sum(&seg, false));
                seg[at..at + 2].copy_from_slice(&c.to_be_bytes());
            }
            let w = 6u32 << 28 | (*tc as u32) << 20 | (flow_label & 0xfffff);
            let mut h = w.to_be_bytes().to_vec();
            h.extend_from_slice(&(seg.len() as u16).to_be_bytes());
            h.push(proto);
            h.push(*hop_limit);
            h.extend_from_slice(src);
            h.extend_from_slice(dst);
            h.extend_from_slice(&seg);
            (0x86dd, h)
        }
        L3::Arp { op, sha, spa, tha, tpa } => {
            let mut b = vec![0, 1, 8, 0, 6, 4];
            b.extend_from_slice(&op.to_be_bytes());
            b.extend_from_slice(sha);
            b.extend_from_slice(spa);
            b.extend_from_slice(tha);
            b.extend_from_slice(tpa);
            (0x0806, b)
        }
        L3::Raw { ethertype, payload } => (*ethertype, payload.clone()),
    }
}

/// The 802.3 form of an untagged Ethernet II frame (RFC 1042): a length field, an LLC/SNAP header
/// with OUI 0 and the frame's ethertype as its protocol id, then the same payload.
pub fn llc_snap(frame: &[u8]) -> Vec<u8> {
    let payload = &frame[14..];
    let mut out = frame[..12].to_vec();
    out.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    out.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0]);
    out.extend_from_slice(&frame[12..14]);
    out.extend_from_slice(payload);
    out
}

/// An 802.3 frame with an LLC header (`dsap`, `ssap`, control 0x03: unnumbered information) and
/// `payload`, e.g. a spanning-tree BPDU (DSAP = SSAP = 0x42).
pub fn llc(dst: Mac, src: Mac, dsap: u8, ssap: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = [dst, src].concat();
    out.extend_from_slice(&((3 + payload.len()) as u16).to_be_bytes());
    out.extend_from_slice(&[dsap, ssap, 0x03]);
    out.extend_from_slice(payload);
    out
}

/// A UDP/IPv4 frame padded (or cut) to `frame_len` bytes, for load generation and tests.
pub fn udp4(
    src_mac: Mac,
    dst_mac: Mac,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    frame_len: usize,
) -> Vec<u8> {
    let payload_len = frame_len.saturating_sub(14 + 20 + 8);
    FrameBuilder::new(dst_mac, src_mac).build(L3::Ipv4 {
        src,
        dst,
        ttl: 64,
        tos: 0,
        l4: L4::Udp { src: sport, dst: dport, payload: vec![0; payload_len] },
    })
}

/// An IPv6 neighbour solicitation for `target` from `src_mac`/`src` (RFC 4861 §4.3), to the
/// target's solicited-node group, with the source link-layer option.
pub fn neighbour_solicitation(src_mac: Mac, src: [u8; 16], target: [u8; 16]) -> Vec<u8> {
    let mut group = [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
    group[13..].copy_from_slice(&target[13..]);
    let dst_mac = [0x33, 0x33, 0xff, target[13], target[14], target[15]];
    let mut body = vec![0; 4];
    body.extend_from_slice(&target);
    body.extend_from_slice(&[1, 1]);
    body.extend_from_slice(&src_mac);
    neighbour_discovery(src_mac, dst_mac, src, group, 135, body)
}

/// An IPv6 neighbour advertisement (RFC 4861 §4.4) of `target` at `target_mac`, solicited (S) and
/// overriding (O), with the target link-layer option, to `dst_mac`/`dst`.
pub fn neighbour_advertisement(target_mac: Mac, target: [u8; 16], dst_mac: Mac, dst: [u8; 16]) -> Vec<u8> {
    let mut body = vec![0x60, 0, 0, 0];
    body.extend_from_slice(&target);
    body.extend_from_slice(&[2, 1]);
    body.extend_from_slice(&target_mac);
    neighbour_discovery(target_mac, dst_mac, target, dst, 136, body)
}

/// Neighbour discovery goes with hop limit 255, which a receiver checks: it cannot have been routed.
fn neighbour_discovery(src_mac: Mac, dst_mac: Mac, src: [u8; 16], dst: [u8; 16], typ: u8, body: Vec<u8>) -> Vec<u8> {
    FrameBuilder::new(dst_mac, src_mac).build(L3::Ipv6 {
        src,
        dst,
        hop_limit: 255,
        tc: 0,
        flow_label: 0,
        l4: L4::Icmp { typ, code: 0, payload: body },
    })
}

/// Verifies the IPv4 header checksum and the TCP/UDP/ICMP checksum of a frame without VLAN tags
/// or with any number of them. Returns false on a wrong checksum or an unparseable frame.
pub fn checksums_ok(frame: &[u8]) -> bool {
    let Ok((key, layout)) = crate::parse::parse(frame, 0) else { return false };
    let l3 = layout.l3 as usize;
    let l4 = layout.l4 as usize;
    match key.eth_type() {
        0x0800 => {
            let ihl = (frame[l3] & 0xf) as usize * 4;
            if csum::fold(csum::sum(&frame[l3..l3 + ihl], false)) != 0xffff {
                return false;
            }
            if l4 == 0 {
                return true;
            }
            let total = u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]) as usize;
            let seg = &frame[l4..l3 + total];
            match key.ip_proto() {
                1 => csum::fold(csum::sum(seg, false)) == 0xffff,
                6 | 17 => {
                    if key.ip_proto() == 17 && seg[6] == 0 && seg[7] == 0 {
                        return true;
                    }
                    let pseudo = csum::pseudo_v4(
                        &frame[l3 + 12..l3 + 16],
                        &frame[l3 + 16..l3 + 20],
                        key.ip_proto(),
                        seg.len() as u32,
                    );
                    csum::fold(pseudo + csum::sum(seg, false)) == 0xffff
                }
                _ => true,
            }
        }
        0x86dd => {
            if l4 == 0 {
                return true;
            }
            let plen = u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]) as usize;
            let seg = &frame[l4..l3 + 40 + plen];
            match key.ip_proto() {
                6 | 17 | 58 => {
                    let pseudo = csum::pseudo_v6(
                        &frame[l3 + 8..l3 + 24],
                        &frame[l3 + 24..l3 + 40],
                        key.ip_proto(),
                        seg.len() as u32,
                    );
                    csum::fold(pseudo + csum::sum(seg, false)) == 0xffff
                }
                _ => true,
            }
        }
        _ => true,
    }
}
