//! Test frames: a template built once, with the probe rewritten per frame.

/// Where the probe starts: after Ethernet (14), IPv4 (20) and UDP (8) headers.
pub const PROBE_AT: usize = 42;
pub const PROBE_LEN: usize = 16;
pub const MAGIC: u16 = 0xef1c;
/// Frame sizes count the 4-byte FCS the NIC appends, as RFC 2544 sizes do.
pub const FCS: usize = 4;
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
    frame[24..26].fill(0);
    let sum = packet::csum::checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
}

/// The IPv4 DSCP of a frame [`read_probe`] accepted.
pub fn dscp(frame: &[u8]) -> u8 {
    frame[15] >> 2
}

pub fn write_probe(frame: &mut [u8], p: Probe) {
    let b = &mut frame[PROBE_AT..PROBE_AT + PROBE_LEN];
    b[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    b[2..4].copy_from_slice(&p.flow.to_be_bytes());
    b[4..8].copy_from_slice(&p.seq.to_be_bytes());
    b[8..16].copy_from_slice(&p.tx_ns.to_be_bytes());
}

/// The probe in a received frame, if it is one of ours (IPv4/UDP, right magic).
pub fn read_probe(frame: &[u8]) -> Option<Probe> {
    if frame.len() < PROBE_AT + PROBE_LEN || frame[12..14] != [0x08, 0x00] || frame[23] != 17 || frame[14] != 0x45 {
        return None;
    }
    let b = &frame[PROBE_AT..PROBE_AT + PROBE_LEN];
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
    }
}
