//! The `tls` module of a build without the `tls` feature: the same names, and no rustls or ring in
//! the binary. A `tls:` or `ptls:` target is refused when the agent starts (`client_config`,
//! `server_config`), so the configurations below never exist and their functions are never reached.

use std::net::IpAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

pub use crate::tls_files::{parse_pin, TlsFiles};

const NOT_BUILT: &str = "this edgeflow was built without TLS (cargo feature `tls`): tls: and ptls: targets need it";

pub enum ClientConfig {}
pub enum ServerConfig {}
#[derive(Clone)]
pub enum Acceptor {}

pub fn client_config(_: &TlsFiles) -> Result<Arc<ClientConfig>, String> {
    Err(NOT_BUILT.into())
}

pub fn server_config(_: &TlsFiles) -> Result<Arc<ServerConfig>, String> {
    Err(NOT_BUILT.into())
}

pub(crate) fn acceptor(cfg: Arc<ServerConfig>) -> Acceptor {
    match *cfg {}
}

pub(crate) async fn accept(acceptor: &Acceptor, _: TcpStream) -> std::io::Result<TcpStream> {
    match *acceptor {}
}

pub(crate) async fn connect(cfg: &Arc<ClientConfig>, _: IpAddr, _: TcpStream) -> std::io::Result<TcpStream> {
    match **cfg {}
}
