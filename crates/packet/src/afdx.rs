//! AFDX (ARINC 664 part 7, 3.2.5) addressing, shared by the switch mode that checks it and the
//! end systems that produce it.
//!
//! - Destination MAC: a 32-bit constant field (group and locally administered bits set) followed
//!   by the 16-bit virtual-link id.
//! - Source MAC: the constant `02:00:00`, a 16-bit user-defined end-system id, then one octet with
//!   the 3-bit interface id (`001` network A, `010` network B) over five zero bits.
//! - The last byte before the FCS is the frame's sequence number: 0 for the first frame after an
//!   end system starts, then 1, 2 … 255, 1, 2 …

/// The destination constant field unless a network names another.
pub const DEFAULT_MAC_CONSTANT: u32 = 0x0300_0000;
/// The source MAC's constant field (`0000 0010 0000 0000 0000 0000`).
pub const SOURCE_CONSTANT: [u8; 3] = [0x02, 0x00, 0x00];
/// Interface ids in the source MAC's last octet (bits 7..5).
pub const NETWORK_A: u8 = 0b001;
pub const NETWORK_B: u8 = 0b010;

/// Whether a source MAC has the end-system format: constant, id, interface A or B, zeros.
pub fn is_end_system_mac(mac: &[u8]) -> bool {
    let interface = mac[5] >> 5;
    mac[..3] == SOURCE_CONSTANT && mac[5] & 0x1f == 0 && (interface == NETWORK_A || interface == NETWORK_B)
}

/// An end system's MAC on one network (`NETWORK_A` or `NETWORK_B`).
pub fn end_system_mac(es_id: u16, interface: u8) -> [u8; 6] {
    let [hi, lo] = es_id.to_be_bytes();
    [SOURCE_CONSTANT[0], SOURCE_CONSTANT[1], SOURCE_CONSTANT[2], hi, lo, interface << 5]
}

/// The destination MAC of a virtual link under a constant field.
pub fn vl_mac(mac_constant: u32, vl: u16) -> [u8; 6] {
    let [a, b, c, d] = mac_constant.to_be_bytes();
    let [hi, lo] = vl.to_be_bytes();
    [a, b, c, d, hi, lo]
}

/// Lays an untagged IPv4/UDP frame (without FCS) out as part 7 sends it: the datagram ends one
/// byte before the frame, whose last byte is the sequence number. Sets the IP total length, the
/// UDP length and the header checksum.
pub fn end_datagram_before_sn(frame: &mut [u8]) {
    let total = (frame.len() - 14 - 1) as u16;
    frame[16..18].copy_from_slice(&total.to_be_bytes());
    frame[38..40].copy_from_slice(&(total - 20).to_be_bytes());
    crate::csum::set_ipv4_checksum(&mut frame[14..34]);
}

/// The sequence number that follows `sn` (0 is used once, after a reset).
pub fn next_sn(sn: u8) -> u8 {
    if sn == 255 {
        1
    } else {
        sn + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_sequence_numbers() {
        assert_eq!(end_system_mac(0x1234, NETWORK_B), [2, 0, 0, 0x12, 0x34, 0x40]);
        assert!(is_end_system_mac(&end_system_mac(7, NETWORK_A)));
        assert!(!is_end_system_mac(&end_system_mac(7, 0b011)));
        assert!(!is_end_system_mac(&[2, 0, 0, 0, 7, 0x21]));
        assert!(!is_end_system_mac(&[6, 0, 0, 0, 7, 0x20]));
        assert_eq!(vl_mac(DEFAULT_MAC_CONSTANT, 0x0102), [3, 0, 0, 0, 1, 2]);
        assert_eq!((next_sn(0), next_sn(1), next_sn(255)), (1, 2, 1));
    }
}
