//! P4Runtime's values: unsigned big-endian byte strings. The server answers in the canonical
//! form (no leading zero bytes; zero is one zero byte) and takes any form whose value fits the
//! field, as the specification asks of servers (§8.4).

use tonic::Status;

pub fn encode(value: u128) -> Vec<u8> {
    let bytes = value.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(15);
    bytes[first..].to_vec()
}

/// The value of `bytes` for a field of `bitwidth` bits (`what` names it in the error).
pub fn decode(bytes: &[u8], bitwidth: u32, what: &str) -> Result<u128, Status> {
    let significant: &[u8] = match bytes.iter().position(|&b| b != 0) {
        Some(first) => &bytes[first..],
        None if bytes.is_empty() => return Err(Status::invalid_argument(format!("{what}: an empty value"))),
        None => &[],
    };
    if significant.len() > 16 {
        return Err(Status::out_of_range(format!("{what}: more than 128 bits")));
    }
    let value = significant.iter().fold(0u128, |v, &b| (v << 8) | b as u128);
    if bitwidth < 128 && value >> bitwidth != 0 {
        return Err(Status::out_of_range(format!("{what}: {value:#x} does not fit in {bitwidth} bits")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_out_any_fitting_form_in() {
        assert_eq!(encode(0), vec![0]);
        assert_eq!(encode(0x1_02), vec![1, 2]);
        assert_eq!(decode(&[0, 0, 1, 2], 9, "f").unwrap(), 0x102);
        assert_eq!(decode(&[0], 1, "f").unwrap(), 0);
        assert_eq!(decode(&[2, 0], 9, "f").unwrap_err().code(), tonic::Code::OutOfRange);
        assert_eq!(decode(&[], 8, "f").unwrap_err().code(), tonic::Code::InvalidArgument);
        let wide = [0xffu8; 16];
        assert_eq!(decode(&wide, 128, "f").unwrap(), u128::MAX);
    }
}
