//! TLS for controller channels, as Open vSwitch does it: both sides present certificates signed by a
//! CA both trust. Like Open vSwitch, the peer's certificate is checked against the CA but not against
//! a host name (controllers are addressed by IP and their certificates rarely name it). Beyond Open
//! vSwitch, a peer's certificate may be pinned: then only that certificate (by its SHA-256) is
//! accepted, whatever else the CA signed.

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
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, RootCertStore, SignatureScheme,
};

pub use crate::tls_files::{parse_pin, TlsFiles};
pub use rustls::{ClientConfig, ServerConfig};

/// A certificate's SHA-256, as `openssl x509 -noout -fingerprint -sha256` prints it.
pub fn fingerprint(der: &[u8]) -> [u8; 32] {
    ring::digest::digest(&ring::digest::SHA256, der).as_ref().try_into().expect("SHA-256 is 32 bytes")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect::<Vec<_>>().join(":")
}

/// The pin's verdict on a certificate the CA check passed.
fn check_pin(pinned: Option<[u8; 32]>, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
    let Some(pin) = pinned else { return Ok(()) };
    let got = fingerprint(end_entity);
    if got == pin {
        return Ok(());
    }
    let why = format!("not the pinned certificate: SHA-256 {} where {} is pinned", hex(&got), hex(&pin));
    Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(PinMismatch(why))))))
}

#[derive(Debug)]
struct PinMismatch(String);

impl std::fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PinMismatch {}

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

/// Verifies the chain to our CA, accepting any name; then the pin, if any.
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>, Option<[u8; 32]>);

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
                check_pin(self.1, end_entity).map(|()| ServerCertVerified::assertion())
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
        .with_custom_certificate_verifier(Arc::new(CaOnly(verifier, files.pinned)))
        .with_client_auth_cert(certs(&files.certificate)?, key(&files.private_key)?)
        .map_err(|e| format!("certificate/key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// A peer connecting to a `ptls:` listener: the CA's check, then the pin, if any.
#[derive(Debug)]
struct PinnedClient(Arc<dyn ClientCertVerifier>, Option<[u8; 32]>);

impl ClientCertVerifier for PinnedClient {
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
        check_pin(self.1, end_entity).map(|()| ClientCertVerified::assertion())
    }

    signature_checks_of_the_inner_verifier!();
}

pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, String> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots(&files.ca_cert)?, provider())
        .build()
        .map_err(|e| format!("CA certificate: {e}"))?;
    let verifier = Arc::new(PinnedClient(verifier, files.pinned));
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

pub(crate) async fn accept(acceptor: &Acceptor, s: TcpStream) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
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
