//! The virtio-net header that AF_PACKET (PACKET_VNET_HDR) and tap (IFF_VNET_HDR) put in front of a
//! frame: how a frame with an offloaded checksum or a GSO super-frame is described.

use packet::{Gso, GsoKind, Offload, PartialCsum};

pub const LEN: usize = 10;

const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

/// Reads a header. Its fields are in the host's byte order (the kernel's legacy virtio rule for
/// AF_PACKET and tap), so a big-endian target reads them as big-endian.
pub fn decode(h: &[u8]) -> Offload {
    if h.len() < LEN {
        return Offload::default();
    }
    let host_u16 = |i: usize| u16::from_ne_bytes([h[i], h[i + 1]]);
    let csum = (h[0] & F_NEEDS_CSUM != 0).then(|| PartialCsum { start: host_u16(6), offset: host_u16(8) });
    let kind = match h[1] & !GSO_ECN {
        GSO_TCPV4 => Some(GsoKind::TcpV4),
        GSO_TCPV6 => Some(GsoKind::TcpV6),
        GSO_UDP_L4 => Some(GsoKind::UdpL4),
        _ => None,
    };
    let gso = kind.map(|kind| Gso { kind, size: host_u16(4), ecn: h[1] & GSO_ECN != 0 });
    Offload { csum, gso }
}

/// Writes the header for `frame`. `hdr_len` tells the kernel how much to copy into the linear part
/// of the socket buffer; for ring frames we make it the whole frame, so that the skb never points
/// into ring memory we are about to reuse.
pub fn encode(o: &Offload, frame: &[u8], whole_frame_linear: bool) -> [u8; LEN] {
    let mut h = [0u8; LEN];
    let mut hdr_len = 0u16;
    if let Some(c) = o.csum {
        h[0] = F_NEEDS_CSUM;
        h[6..8].copy_from_slice(&c.start.to_ne_bytes());
        h[8..10].copy_from_slice(&c.offset.to_ne_bytes());
        hdr_len = c.start + c.offset + 2;
    }
    if let (Some(g), Some(c)) = (o.gso, o.csum) {
        h[1] = match g.kind {
            GsoKind::TcpV4 => GSO_TCPV4,
            GsoKind::TcpV6 => GSO_TCPV6,
            GsoKind::UdpL4 => GSO_UDP_L4,
        } | if g.ecn { GSO_ECN } else { 0 };
        h[4..6].copy_from_slice(&g.size.to_ne_bytes());
        let l4 = c.start as usize;
        let l4_len = match g.kind {
            GsoKind::TcpV4 | GsoKind::TcpV6 => frame.get(l4 + 12).map(|b| (b >> 4) as u16 * 4).unwrap_or(20),
            GsoKind::UdpL4 => 8,
        };
        hdr_len = c.start + l4_len;
    } else {
        h[1] = GSO_NONE;
    }
    if whole_frame_linear {
        hdr_len = frame.len() as u16;
    }
    h[2..4].copy_from_slice(&hdr_len.to_ne_bytes());
    h
}
