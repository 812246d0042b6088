//! Test frames: a template built once, with the probe rewritten per frame.

/// Where the probe starts: after Ethernet (14), IPv4 (20) and UDP (8) headers.
pub const PROBE_AT: usize = 42;
pub const PROBE_LEN: usize = 16;
pub const MAGIC: u16 = 0xef1c;
/// Frame sizes count the 4-byte FCS the NIC appends, as RFC 2544 sizes do.
pub const FCS: usize = packet::FCS_LEN;
pub const MIN_SIZE: usize = 64;
pub const MAX_SIZE: usize = 1518;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub flow: u16,
    pub seq: u32,
    pub tx_ns: u64,
}

#[derive(Clone, Debug)]
pub struct Endpoints {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
}

/// A frame of `size` bytes on the wire (FCS included) carrying `flow`'s probes.
pub fn template(ep: &Endpoints, size: usize, flow: u16) -> Vec<u8> {
    let size = size.clamp(MIN_SIZE, MAX_SIZE);
    let len = size - FCS;
    let payload = len - PROBE_AT;
    let mut f = packet::craft::udp4(ep.src_mac, ep.dst_mac, ep.src_ip, ep.dst_ip, ep.src_port, ep.dst_port, len);
    // No UDP checksum (allowed for IPv4): the probe changes in every frame.
    f[40] = 0;
    f[41] = 0;
    debug_assert_eq!(f.len(), len);
    debug_assert!(payload >= PROBE_LEN);
    write_probe(&mut f, Probe { flow, seq: 0, tx_ns: 0 });
    f
}

/// Sets the IPv4 DSCP (the upper six bits of the TOS byte) and the header checksum after it.
pub fn set_dscp(frame: &mut [u8], dscp: u8) {
    frame[15] = (dscp << 2) | (frame[15] & 3);
    packet::csum::set_ipv4_checksum(&mut frame[14..34]);
}

/// The IPv4 DSCP of a frame [`read_probe`] accepted.
pub fn dscp(frame: &[u8]) -> u8 {
    ip_at(frame).map_or(0, |ip| frame[ip + 1] >> 2)
}

pub fn write_probe(frame: &mut [u8], p: Probe) {
    let at = probe_at(frame).unwrap_or(PROBE_AT);
    let b = &mut frame[at..at + PROBE_LEN];
    b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    b[2..4].copy_from_slice(&p.flow.to_be_bytes());
    b[4..8].copy_from_slice(&p.seq.to_be_bytes());
    b[8..16].copy_from_slice(&p.tx_ns.to_be_bytes());
}

/// Where the IP header starts: after Ethernet, and after a LESS/MPLS label stack if there is one.
fn ip_at(frame: &[u8]) -> Option<usize> {
    match frame.get(12..14)? {
        [0x08, 0x00] => Some(14),
        [0x88, 0x47] => Some(14 + 4 * packet::less::depth(frame, 14, MAX_LABELS).ok()?),
        _ => None,
    }
}

/// Label stack entries a probe frame may carry.
pub const MAX_LABELS: usize = 64;

fn probe_at(frame: &[u8]) -> Option<usize> {
    Some(ip_at(frame)? + PROBE_AT - 14)
}

/// Puts a LESS label stack (`packet::less::encode_route`) between the Ethernet header and IP, for a
/// sender that addresses the switches itself.
pub fn push_labels(frame: &mut Vec<u8>, stack: &[u8]) {
    frame.splice(14..14, stack.iter().copied());
    frame[12..14].copy_from_slice(&packet::less::ETHERTYPE.to_be_bytes());
}

/// The probe in a received frame, if it is one of ours (IPv4/UDP, right magic), under a label
/// stack or not.
pub fn read_probe(frame: &[u8]) -> Option<Probe> {
    let ip = ip_at(frame)?;
    let at = ip + PROBE_AT - 14;
    if frame.len() < at + PROBE_LEN || frame[ip + 9] != 17 || frame[ip] != 0x45 {
        return None;
    }
    let b = &frame[at..at + PROBE_LEN];
    if u16::from_be_bytes([b[0], b[1]]) != MAGIC {
        return None;
    }
    Some(Probe {
        flow: u16::from_be_bytes([b[2], b[3]]),
        seq: u32::from_be_bytes(b[4..8].try_into().unwrap()),
        tx_ns: u64::from_be_bytes(b[8..16].try_into().unwrap()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_probe_round_trip() {
        let ep = Endpoints {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            src_port: 1,
            dst_port: 2,
        };
        for size in [64, 128, 1518] {
            let mut f = template(&ep, size, 3);
            assert_eq!(f.len() + FCS, size);
            write_probe(&mut f, Probe { flow: 3, seq: 77, tx_ns: 123456789 });
            assert_eq!(read_probe(&f), Some(Probe { flow: 3, seq: 77, tx_ns: 123456789 }));
            let (key, _) = packet::parse(&f, 1).unwrap();
            assert_eq!(key.ip_proto(), 17);
        }
        assert!(read_probe(&[0u8; 60]).is_none());
        let mut f = template(&ep, 100, 1);
        set_dscp(&mut f, 18);
        assert_eq!((dscp(&f), f[15]), (18, 72));
        assert!(packet::craft::checksums_ok(&f), "the IPv4 header checksum follows the TOS byte");
        assert!(read_probe(&f).is_some());
        let stack = packet::less::encode_route(&[2, 8, 2, 5], false);
        push_labels(&mut f, &stack);
        assert_eq!(f[12..22], [0x88, 0x47, 2, 8, 2, 0x03, 5, 0, 0, 0x81]);
        write_probe(&mut f, Probe { flow: 1, seq: 9, tx_ns: 5 });
        assert_eq!(read_probe(&f), Some(Probe { flow: 1, seq: 9, tx_ns: 5 }), "the probe moves with the labels");
        assert_eq!(dscp(&f), 18);
    }
}
