//! Software segmentation of GSO super-frames, for the places a super-frame cannot go as it is
//! (a packet-in to a controller, a port that cannot take it).

use crate::csum;
use crate::key::FlowKey;
use crate::packet::{GsoKind, Offload, Packet, PartialCsum};
use crate::parse::{ethertype, parse};

/// Splits a GSO frame into wire-sized frames with complete checksums. A frame that is not GSO, or
/// whose headers do not match its GSO type, comes back as it is (with its checksum completed).
pub fn segment(mut pkt: Packet) -> Vec<Packet> {
    let Some(gso) = pkt.offload.gso.take() else {
        pkt.finish_checksum();
        return vec![pkt];
    };
    let Ok((key, layout)) = parse(pkt.data(), 0) else {
        return vec![pkt];
    };
    let l3 = layout.l3 as usize;
    let l4 = layout.l4 as usize;
    let v4 = key.eth_type() == ethertype::IPV4;
    let tcp = matches!(gso.kind, GsoKind::TcpV4 | GsoKind::TcpV6);
    if l4 == 0 || gso.size == 0 {
        pkt.finish_checksum();
        return vec![pkt];
    }
    let data = pkt.data();
    let l4_hdr = if tcp { ((data[l4 + 12] >> 4) as usize) * 4 } else { 8 };
    let hdr_len = l4 + l4_hdr;
    if data.len() <= hdr_len {
        pkt.finish_checksum();
        return vec![pkt];
    }
    let payload = &data[hdr_len..];
    let mss = gso.size as usize;
    let n = payload.len().div_ceil(mss);
    let mut out = Vec::with_capacity(n);
    let seq0 = u32::from_be_bytes(data[l4 + 4..l4 + 8].try_into().unwrap());
    let id0 = if v4 { u16::from_be_bytes([data[l3 + 4], data[l3 + 5]]) } else { 0 };
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let mut frame = Vec::with_capacity(hdr_len + chunk.len());
        frame.extend_from_slice(&data[..hdr_len]);
        frame.extend_from_slice(chunk);
        let seg_len = (l4_hdr + chunk.len()) as u32;
        if v4 {
            let total = (hdr_len - l3 + chunk.len()) as u16;
            frame[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            frame[l3 + 4..l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            let ihl = ((frame[l3] & 0xf) as usize) * 4;
            csum::set_ipv4_checksum(&mut frame[l3..l3 + ihl]);
        } else {
            let plen = (hdr_len - l3 - 40 + chunk.len()) as u16;
            frame[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
        }
        let csum_at;
        if tcp {
            let seq = seq0.wrapping_add((i * mss) as u32);
            frame[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let flags = frame[l4 + 13];
            let last = i + 1 == n;
            // FIN and PSH only on the last segment, CWR only on the first.
            let mut f = flags;
            if !last {
                f &= !(0x01 | 0x08);
            }
            if i > 0 {
                f &= !0x80;
            }
            frame[l4 + 13] = f;
            csum_at = l4 + 16;
        } else {
            frame[l4 + 4..l4 + 6].copy_from_slice(&(seg_len as u16).to_be_bytes());
            csum_at = l4 + 6;
        }
        frame[csum_at..csum_at + 2].copy_from_slice(&[0, 0]);
        let proto = if tcp { 6 } else { 17 };
        let pseudo = if v4 {
            csum::pseudo_v4(&frame[l3 + 12..l3 + 16], &frame[l3 + 16..l3 + 20], proto, seg_len)
        } else {
            csum::pseudo_v6(&frame[l3 + 8..l3 + 24], &frame[l3 + 24..l3 + 40], proto, seg_len)
        };
        let mut c = !csum::fold(pseudo + csum::sum(&frame[l4..], false));
        if !tcp && c == 0 {
            c = 0xffff;
        }
        frame[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        let mut seg = Packet::new(&frame, Offload::default(), layout);
        let _ = seg.reparse(&mut FlowKey::default());
        out.push(seg);
    }
    out
}

/// A partial checksum descriptor for a frame's transport header, as a sender using checksum offload
/// would set it (used by tests and by the datapath when it builds frames itself).
pub fn partial_for(l4: u16, proto: u8) -> Option<PartialCsum> {
    match proto {
        6 => Some(PartialCsum { start: l4, offset: 16 }),
        17 => Some(PartialCsum { start: l4, offset: 6 }),
        _ => None,
    }
}
