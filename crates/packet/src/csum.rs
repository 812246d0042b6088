//! Internet checksum (RFC 1071), its incremental update (RFC 1624), and CRC32c for SCTP.

/// Sums `bytes` as big-endian 16-bit words; `odd` means the first byte sits at an odd offset of the
/// checksummed region (so it is the low byte of its word).
pub fn sum(bytes: &[u8], odd: bool) -> u32 {
    let mut acc: u64 = 0;
    let mut rest = bytes;
    if odd {
        if let Some((&first, tail)) = rest.split_first() {
            acc += first as u64;
            rest = tail;
        }
    }
    let mut chunks = rest.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes(c.try_into().unwrap());
        acc += (w >> 48) + ((w >> 32) & 0xffff) + ((w >> 16) & 0xffff) + (w & 0xffff);
    }
    let mut pairs = chunks.remainder().chunks_exact(2);
    for p in &mut pairs {
        acc += u16::from_be_bytes([p[0], p[1]]) as u64;
    }
    if let [last] = pairs.remainder() {
        acc += (*last as u64) << 8;
    }
    fold64(acc)
}

fn fold64(mut acc: u64) -> u32 {
    while acc >> 32 != 0 {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    acc as u32
}

/// Folds a 32-bit one's-complement accumulator to 16 bits.
pub fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The checksum of `bytes` (complemented folded sum).
pub fn checksum(bytes: &[u8]) -> u16 {
    !fold(sum(bytes, false))
}

/// Writes an IPv4 header's checksum (`header`: the header alone, its checksum field at 10-11),
/// computed from scratch.
pub fn set_ipv4_checksum(header: &mut [u8]) {
    header[10..12].fill(0);
    let sum = checksum(header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// One's-complement `a + b` of 16-bit values.
pub fn add(a: u16, b: u16) -> u16 {
    fold(a as u32 + b as u32)
}

/// RFC 1624 eqn. 3 on a complete checksum: `HC' = ~(~HC + ~m + m')`, where `old_sum`/`new_sum` are
/// the folded sums of the changed words before and after.
pub fn update_full(csum: u16, old_sum: u16, new_sum: u16) -> u16 {
    !add(add(!csum, !old_sum), new_sum)
}

/// The same update on a partial checksum field, which holds the (uncomplemented) pseudo-header sum
/// that the device will add the payload to.
pub fn update_partial(field: u16, old_sum: u16, new_sum: u16) -> u16 {
    add(add(field, !old_sum), new_sum)
}

/// IPv4 pseudo-header sum for a transport segment of `len` bytes.
pub fn pseudo_v4(src: &[u8], dst: &[u8], proto: u8, len: u32) -> u32 {
    sum(src, false) + sum(dst, false) + proto as u32 + len
}

pub fn pseudo_v6(src: &[u8], dst: &[u8], proto: u8, len: u32) -> u32 {
    sum(src, false) + sum(dst, false) + proto as u32 + (len >> 16) + (len & 0xffff)
}

/// CRC32c (Castagnoli) as SCTP uses it (RFC 4960 appendix B), from the `crc32c` crate (SSE 4.2
/// or ARMv8 CRC instructions where the CPU has them).
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        assert_eq!(fold(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], false)), 0xddf2);
    }

    #[test]
    fn incremental_matches_recompute() {
        let mut data: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        let csum = checksum(&data);
        let old = fold(sum(&data[12..16], false));
        data[12..16].copy_from_slice(&[10, 0, 0, 99]);
        let new = fold(sum(&data[12..16], false));
        assert_eq!(update_full(csum, old, new), checksum(&data));
    }

    #[test]
    fn odd_offset_sum() {
        let data = [0x12, 0x34, 0x56];
        assert_eq!(fold(sum(&data[1..], true)), fold(sum(&[0x00, 0x34, 0x56, 0x00], false)));
    }

    #[test]
    fn crc32c_known_value() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
    }
}
