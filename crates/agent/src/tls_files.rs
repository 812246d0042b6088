//! What a TLS channel is configured with: parsed in every build, so a configuration reads the same
//! with or without the `tls` feature (a build without it refuses the targets that need it).

use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_cert: PathBuf,
    /// The SHA-256 of the one peer certificate accepted (`--peer-cert-sha256`), if pinned.
    pub pinned: Option<[u8; 32]>,
    /// The names a peer's certificate may carry (`--peer-name`): when any is given, a peer whose
    /// certificate names none of them (its subject's common name, a DNS or a URI subject
    /// alternative name) is refused, however good its CA's signature. One CA often signs the
    /// switches and the controllers alike; without names, a switch's certificate passes as a
    /// controller's.
    pub peer_names: Vec<String>,
}

/// 64 hex digits, with or without colons between the bytes.
pub fn parse_pin(s: &str) -> Result<[u8; 32], String> {
    let hex: String = s.chars().filter(|&c| c != ':').collect();
    let bytes: Option<Vec<u8>> =
        (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect();
    match bytes {
        Some(b) if b.len() == 32 => Ok(b.try_into().unwrap()),
        _ => Err(format!("'{s}': expected a SHA-256 fingerprint, 64 hex digits (colons allowed)")),
    }
}
