//! TLS for controller channels, as Open vSwitch does it: both sides present certificates signed by a
//! CA both trust. Like Open vSwitch, the peer's certificate is checked against the CA but not against
//! a host name (controllers are addressed by IP and their certificates rarely name it). Beyond Open
//! vSwitch, a peer's certificate may be pinned: then only that certificate (by its SHA-256) is
//! accepted, whatever else the CA signed; and the names a peer's certificate may carry may be
//! listed (`--peer-name`), so that where one CA signs switches and controllers alike another
//! switch cannot pass as a controller.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpStream;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, RootCertStore, SignatureScheme};

pub use crate::tls_files::{parse_pin, TlsFiles};
pub use rustls::{ClientConfig, ServerConfig};

/// A certificate's SHA-256, as `openssl x509 -noout -fingerprint -sha256` prints it.
pub fn fingerprint(der: &[u8]) -> [u8; 32] {
    ring::digest::digest(&ring::digest::SHA256, der).as_ref().try_into().expect("SHA-256 is 32 bytes")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect::<Vec<_>>().join(":")
}

/// What a peer's certificate must be beyond the CA's signature and its extended key usage
/// (webpki requires serverAuth of a controller's and clientAuth of a listener's peer, where the
/// certificate lists any usage): the pinned certificate, if one is; one of the allowed names, if
/// any are.
#[derive(Debug)]
struct PeerRules {
    pinned: Option<[u8; 32]>,
    names: Vec<String>,
}

impl PeerRules {
    fn of(files: &TlsFiles) -> PeerRules {
        PeerRules { pinned: files.pinned, names: files.peer_names.clone() }
    }

    fn check(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        check_pin(self.pinned, end_entity)?;
        check_names(&self.names, end_entity)
    }
}

/// The pin's verdict on a certificate the CA check passed.
fn check_pin(pinned: Option<[u8; 32]>, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
    let Some(pin) = pinned else { return Ok(()) };
    let got = fingerprint(end_entity);
    if got == pin {
        return Ok(());
    }
    refused(format!("not the pinned certificate: SHA-256 {} where {} is pinned", hex(&got), hex(&pin)))
}

/// The allowed names' verdict on a certificate the CA check passed: one of its names (subject
/// common name, DNS or URI subject alternative name) must be one of `allowed`, as written (DNS
/// names and common names in any case, as DNS compares them; no wildcards either side).
fn check_names(allowed: &[String], end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
    if allowed.is_empty() {
        return Ok(());
    }
    let names = cert_names(end_entity)?;
    let permitted = names.iter().any(|(kind, name)| {
        allowed.iter().any(|a| if *kind == "URI" { a == name } else { a.eq_ignore_ascii_case(name) })
    });
    if permitted {
        return Ok(());
    }
    let named = match names.is_empty() {
        true => "none".to_string(),
        false => names.iter().map(|(kind, name)| format!("{kind}:{name}")).collect::<Vec<_>>().join(", "),
    };
    refused(format!(
        "not a permitted peer name: the certificate names {named} where {} are permitted",
        allowed.join(", ")
    ))
}

/// A certificate's names, each with its kind: `CN` (the subject's common names), `DNS` and `URI`
/// (its subject alternative names).
fn cert_names(der: &CertificateDer<'_>) -> Result<Vec<(&'static str, String)>, rustls::Error> {
    let cert = webpki::EndEntityCert::try_from(der).map_err(|_| CertificateError::BadEncoding)?;
    let mut names: Vec<_> = common_names(cert.subject()).into_iter().map(|n| ("CN", n)).collect();
    names.extend(cert.valid_dns_names().map(|n| ("DNS", n.to_string())));
    names.extend(cert.valid_uri_names().map(|n| ("URI", n.to_string())));
    Ok(names)
}

/// The common names (OID 2.5.4.3) in a DER subject's contents (its RDN sets, one after another),
/// those encoded as text; a subject that does not parse has none.
fn common_names(subject: &[u8]) -> Vec<String> {
    const CN: &[u8] = &[0x55, 0x04, 0x03];
    let mut out = Vec::new();
    let mut rdns = subject;
    while let Some((0x31, set, rest)) = der_next(rdns) {
        rdns = rest;
        let mut attrs = set;
        while let Some((0x30, attr, rest)) = der_next(attrs) {
            attrs = rest;
            let Some((0x06, oid, value)) = der_next(attr) else { continue };
            // UTF8String, PrintableString, IA5String, T61String (read as Latin-1 text by most).
            if let (true, Some((0x0c | 0x13 | 0x16 | 0x14, text, _))) = (oid == CN, der_next(value)) {
                out.push(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    out
}

/// One DER element: (tag, contents, what follows), for tags of one byte and lengths of up to
/// four; `None` where the bytes do not hold one.
fn der_next(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = match first {
        0..=0x7f => (first as usize, rest),
        0x81..=0x84 => {
            let n = (first & 0x7f) as usize;
            let bytes = rest.get(..n)?;
            (bytes.iter().fold(0usize, |l, &x| l << 8 | x as usize), &rest[n..])
        }
        _ => return None,
    };
    let contents = rest.get(..len)?;
    Some((tag, contents, &rest[len..]))
}

fn refused(why: String) -> Result<(), rustls::Error> {
    Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(PeerRefused(why))))))
}

/// Why a certificate the CA signed is refused all the same, as the log says it.
#[derive(Debug)]
struct PeerRefused(String);

impl std::fmt::Display for PeerRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PeerRefused {}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A PEM file's fault, worded as rustls-pemfile worded it (the switch's messages predate
/// rustls-pki-types' own reader, whose Display shows the marker as a list of bytes).
fn pem_error(path: &Path, e: pem::Error) -> String {
    let why = match e {
        pem::Error::MissingSectionEnd { end_marker } => {
            format!("section end {:?} missing", String::from_utf8_lossy(&end_marker))
        }
        pem::Error::IllegalSectionStart { line } => {
            format!("illegal section start: {:?}", String::from_utf8_lossy(&line))
        }
        pem::Error::Base64Decode(e) => e,
        pem::Error::Io(e) => e.to_string(),
        other => other.to_string(),
    };
    format!("{}: {why}", path.display())
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_reader_iter(f).collect();
    let certs = certs.map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// The file's first private key, of any kind (PKCS #1, PKCS #8, SEC1).
fn key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match PrivateKeyDer::from_pem_reader(f) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(format!("{}: no PEM private key in it", path.display())),
        Err(e) => Err(pem_error(path, e)),
    }
}

fn roots(path: &Path) -> Result<Arc<RootCertStore>, String> {
    let mut store = RootCertStore::empty();
    for c in certs(path)? {
        store.add(c).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(Arc::new(store))
}

/// The handshake-signature checks of a verifier that wraps another (in `.0`): the inner one's.
macro_rules! signature_checks_of_the_inner_verifier {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    };
}

/// Verifies the chain to our CA, accepting any host name (controllers are addressed by IP); then
/// the peer rules.
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>, PeerRules);

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Ok(_)
            | Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                self.1.check(end_entity).map(|()| ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    signature_checks_of_the_inner_verifier!();
}

pub fn client_config(files: &TlsFiles) -> Result<Arc<ClientConfig>, String> {
    let verifier = WebPkiServerVerifier::builder_with_provider(roots(&files.ca_cert)?, provider())
        .build()
        .map_err(|e| format!("CA certificate: {e}"))?;
    let cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(CaOnly(verifier, PeerRules::of(files))))
        .with_client_auth_cert(certs(&files.certificate)?, key(&files.private_key)?)
        .map_err(|e| format!("certificate/key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// A peer connecting to a `ptls:` listener: the CA's check, then the peer rules.
#[derive(Debug)]
struct CheckedClient(Arc<dyn ClientCertVerifier>, PeerRules);

impl ClientCertVerifier for CheckedClient {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0.verify_client_cert(end_entity, intermediates, now)?;
        self.1.check(end_entity).map(|()| ClientCertVerified::assertion())
    }

    signature_checks_of_the_inner_verifier!();
}

pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, String> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(&files.ca_cert)?, provider())
        .build()
        .map_err(|e| format!("CA certificate: {e}"))?;
    let verifier = Arc::new(CheckedClient(verifier, PeerRules::of(files)));
    let cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&files.certificate)?, key(&files.private_key)?)
        .map_err(|e| format!("certificate/key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// Takes a `ptls:` listener's peers through their handshake.
pub type Acceptor = tokio_rustls::TlsAcceptor;

pub(crate) fn acceptor(cfg: Arc<ServerConfig>) -> Acceptor {
    Acceptor::from(cfg)
}

pub(crate) async fn accept(
    acceptor: &Acceptor,
    s: TcpStream,
) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
    acceptor.accept(s).await
}

/// The handshake of an active `tls:` connection to `ip` (certificates are checked against the CA,
/// not a host name).
pub(crate) async fn connect(
    cfg: &Arc<ClientConfig>,
    ip: IpAddr,
    s: TcpStream,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    tokio_rustls::TlsConnector::from(cfg.clone()).connect(ServerName::IpAddress(ip.into()), s).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn pins_parse_as_openssl_prints_them_and_only_the_pinned_certificate_passes() {
        let der = CertificateDer::from(vec![1u8, 2, 3]);
        let sum = fingerprint(&der);
        let printed = hex(&sum);
        assert_eq!(printed.len(), 32 * 3 - 1, "AB:CD:... as openssl prints it");
        assert_eq!(parse_pin(&printed), Ok(sum));
        assert_eq!(parse_pin(&printed.replace(':', "").to_lowercase()), Ok(sum));
        assert!(parse_pin("AB:CD").is_err() && parse_pin(&"zz".repeat(32)).is_err());
        assert!(check_pin(None, &der).is_ok());
        assert!(check_pin(Some(sum), &der).is_ok());
        let other = CertificateDer::from(vec![1u8, 2, 4]);
        let e = check_pin(Some(sum), &other).unwrap_err().to_string();
        assert!(e.contains("not the pinned certificate") && e.contains(&printed), "{e}");
    }

    /// A subject's common names, read from its DER: every CN of every RDN, in order, beside
    /// other attributes; bytes that end early give what came before them, not a panic.
    #[test]
    fn common_names_are_read_from_a_der_subject() {
        fn attr(oid: &[u8], tag: u8, text: &str) -> Vec<u8> {
            let mut v = vec![0x06, oid.len() as u8];
            v.extend(oid);
            v.extend([tag, text.len() as u8]);
            v.extend(text.as_bytes());
            let mut seq = vec![0x30, v.len() as u8];
            seq.extend(v);
            seq
        }
        fn set(attrs: &[Vec<u8>]) -> Vec<u8> {
            let body: Vec<u8> = attrs.concat();
            let mut v = vec![0x31, body.len() as u8];
            v.extend(body);
            v
        }
        let (cn, org) = ([0x55, 0x04, 0x03], [0x55, 0x04, 0x0a]);
        let subject = [
            set(&[attr(&org, 0x0c, "Example")]),
            set(&[attr(&cn, 0x0c, "ctl-1.example"), attr(&org, 0x13, "x")]),
            set(&[attr(&cn, 0x13, "ctl-2")]),
        ]
        .concat();
        assert_eq!(common_names(&subject), ["ctl-1.example", "ctl-2"]);
        assert_eq!(common_names(&subject[..subject.len() - 3]), ["ctl-1.example"]);
        assert!(common_names(&[0x31, 0x85, 1, 2, 3, 4, 5]).is_empty());
        // A long-form length, as a subject of more than 127 bytes has.
        let long = set(&[attr(&cn, 0x0c, &"a".repeat(120))]);
        let mut long_form = vec![0x31, 0x81, long.len() as u8 - 2];
        long_form.extend(&long[2..]);
        assert_eq!(common_names(&long_form), ["a".repeat(120)]);
    }

    /// What `--certificate`, `--ca-cert` and `--private-key` say about a file that is not what
    /// they need: the path, then what is wrong with it, as rustls-pemfile worded it.
    #[test]
    fn bad_pem_files_are_refused_saying_what_is_wrong() {
        let private = datapath::sys::PrivateDir::new("edgeflow-agent-pem").unwrap();
        let dir = private.path();
        let file = |name: &str, text: &str| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        // Any bytes do for these checks: nothing here parses the DER.
        let cert = "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n";
        let pkcs8 = "-----BEGIN PRIVATE KEY-----\nBAUG\n-----END PRIVATE KEY-----\n";
        let rsa = "-----BEGIN RSA PRIVATE KEY-----\nBwgJ\n-----END RSA PRIVATE KEY-----\n";
        let said = |r: Result<Vec<u8>, String>| r.unwrap_err().replace(&format!("{}/", dir.display()), "");

        // Good files read as before: every certificate, in order, after text and other sections;
        // the first key of any kind.
        let two = file("two.pem", &format!("text before\n{pkcs8}{cert}{}", cert.replace("AQID", "CgsM")));
        let got = certs(&two).unwrap();
        assert_eq!(got.iter().map(|c| c.as_ref().to_vec()).collect::<Vec<_>>(), [vec![1, 2, 3], vec![10, 11, 12]]);
        let k = key(&file("k.pem", &format!("{cert}{rsa}{pkcs8}"))).unwrap();
        assert!(matches!(&k, PrivateKeyDer::Pkcs1(_)) && k.secret_der() == [7, 8, 9], "{k:?}");
        let k = key(&file("k8.pem", pkcs8)).unwrap();
        assert!(matches!(&k, PrivateKeyDer::Pkcs8(_)) && k.secret_der() == [4, 5, 6], "{k:?}");

        let cert_of = |p: PathBuf| certs(&p).map(|c| c.iter().flat_map(|d| d.as_ref().to_vec()).collect());
        let key_of = |p: PathBuf| key(&p).map(|k| k.secret_der().to_vec());
        assert_eq!(said(cert_of(dir.join("absent.pem"))), "absent.pem: No such file or directory (os error 2)");
        assert_eq!(said(key_of(dir.join("absent.pem"))), "absent.pem: No such file or directory (os error 2)");
        assert_eq!(said(cert_of(file("empty.pem", ""))), "empty.pem: no PEM certificate in it");
        assert_eq!(said(cert_of(file("key-only.pem", pkcs8))), "key-only.pem: no PEM certificate in it");
        assert_eq!(said(key_of(file("cert-only.pem", cert))), "cert-only.pem: no PEM private key in it");
        let cut = file("cut.pem", "-----BEGIN CERTIFICATE-----\nAQID\n");
        assert_eq!(said(cert_of(cut.clone())), r#"cut.pem: section end "CERTIFICATE" missing"#);
        assert_eq!(said(key_of(cut)), r#"cut.pem: section end "CERTIFICATE" missing"#);
        let start = file("start.pem", "-----BEGIN CERTIFICATE----\nAQID\n-----END CERTIFICATE-----\n");
        assert_eq!(said(cert_of(start)), r#"start.pem: illegal section start: "-----BEGIN CERTIFICATE----\n""#);
        // An error in a section of another kind is one too, as it was.
        let b64 = file("b64.pem", &format!("{cert}{}", pkcs8.replace("BAUG", "B!UG")));
        assert_eq!(said(cert_of(b64.clone())), "b64.pem: InvalidCharacter(33)");
        assert_eq!(said(key_of(b64)), "b64.pem: InvalidCharacter(33)");
    }
}
