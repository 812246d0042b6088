//! Connection targets in Open vSwitch syntax: `tcp:IP[:PORT]`, `tls:IP[:PORT]`, `unix:PATH`,
//! `ptcp:[PORT][:IP]`, `ptls:[PORT][:IP]`, `punix:PATH`.
//!
//! Unlike Open vSwitch, `ptcp:` and `ptls:` without an address listen on loopback only: whoever
//! reaches a plain-TCP listener controls the switch, and whoever holds any certificate the CA
//! signed (another switch's, where one CA signs both) reaches a TLS one, so exposing either is said
//! in the address (`ptls:6653:0.0.0.0`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

pub const DEFAULT_PORT: u16 = 6653;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Tcp(SocketAddr),
    Tls(SocketAddr),
    Unix(PathBuf),
    PTcp(SocketAddr),
    PTls(SocketAddr),
    PUnix(PathBuf),
}

impl Target {
    pub fn is_passive(&self) -> bool {
        matches!(self, Target::PTcp(_) | Target::PTls(_) | Target::PUnix(_))
    }

    pub fn uses_tls(&self) -> bool {
        matches!(self, Target::Tls(_) | Target::PTls(_))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "tcp:{a}"),
            Target::Tls(a) => write!(f, "tls:{a}"),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::PTcp(a) => write!(f, "ptcp:{}:{}", a.port(), a.ip()),
            Target::PTls(a) => write!(f, "ptls:{}:{}", a.port(), a.ip()),
            Target::PUnix(p) => write!(f, "punix:{}", p.display()),
        }
    }
}

fn parse_ip(s: &str) -> Result<IpAddr, String> {
    s.trim_start_matches('[').trim_end_matches(']').parse().map_err(|_| format!("'{s}' is not an IP address"))
}

fn parse_port(s: &str) -> Result<u16, String> {
    s.parse().map_err(|_| format!("'{s}' is not a port number"))
}

/// `IP[:PORT]`, with IPv6 in brackets.
fn active_addr(rest: &str) -> Result<SocketAddr, String> {
    if rest.is_empty() {
        return Err("an address is required".into());
    }
    let (ip, port) = if let Some(end) = rest.strip_prefix('[').and_then(|r| r.find(']').map(|i| (r, i))) {
        let (r, i) = end;
        let ip = &r[..i];
        let after = &r[i + 1..];
        (ip, after.strip_prefix(':'))
    } else {
        match rest.rsplit_once(':') {
            Some((ip, port)) if !ip.contains(':') => (ip, Some(port)),
            _ => (rest, None),
        }
    };
    let port = port.map(parse_port).transpose()?.unwrap_or(DEFAULT_PORT);
    Ok(SocketAddr::new(parse_ip(ip)?, port))
}

/// `[PORT][:IP]`; without an IP, `default_ip`.
fn passive_addr(rest: &str, default_ip: IpAddr) -> Result<SocketAddr, String> {
    let (port, ip) = match rest.split_once(':') {
        Some((p, ip)) => (p, Some(ip)),
        None => (rest, None),
    };
    let port = if port.is_empty() { DEFAULT_PORT } else { parse_port(port)? };
    let ip = ip.map(parse_ip).transpose()?.unwrap_or(default_ip);
    Ok(SocketAddr::new(ip, port))
}

impl std::str::FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        let (kind, rest) =
            s.split_once(':').ok_or_else(|| format!("'{s}': expected KIND:ADDRESS (e.g. tcp:127.0.0.1:6653)"))?;
        let t = match kind {
            "tcp" => Target::Tcp(active_addr(rest)?),
            "tls" | "ssl" => Target::Tls(active_addr(rest)?),
            "unix" if !rest.is_empty() => Target::Unix(PathBuf::from(rest)),
            "ptcp" => Target::PTcp(passive_addr(rest, IpAddr::V4(Ipv4Addr::LOCALHOST))?),
            "ptls" | "pssl" => Target::PTls(passive_addr(rest, IpAddr::V4(Ipv4Addr::LOCALHOST))?),
            "punix" if !rest.is_empty() => Target::PUnix(PathBuf::from(rest)),
            "unix" | "punix" => return Err(format!("'{s}': a socket path is required")),
            _ => return Err(format!("'{s}': unknown connection type '{kind}' (tcp, tls, unix, ptcp, ptls, punix)")),
        };
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ovs_syntax() {
        assert_eq!("tcp:127.0.0.1:6633".parse(), Ok(Target::Tcp("127.0.0.1:6633".parse().unwrap())));
        assert_eq!("tcp:10.0.0.1".parse(), Ok(Target::Tcp("10.0.0.1:6653".parse().unwrap())));
        assert_eq!("tcp:[::1]:7000".parse(), Ok(Target::Tcp("[::1]:7000".parse().unwrap())));
        assert_eq!("ptcp:6634:127.0.0.1".parse(), Ok(Target::PTcp("127.0.0.1:6634".parse().unwrap())));
        // Plain TCP is reachable from where the address says, loopback unless it says more.
        assert_eq!("ptcp:".parse(), Ok(Target::PTcp("127.0.0.1:6653".parse().unwrap())));
        assert_eq!("ptcp:6634".parse(), Ok(Target::PTcp("127.0.0.1:6634".parse().unwrap())));
        assert_eq!("ptcp:6634:0.0.0.0".parse(), Ok(Target::PTcp("0.0.0.0:6634".parse().unwrap())));
        assert_eq!("ptls:".parse(), Ok(Target::PTls("127.0.0.1:6653".parse().unwrap())));
        assert_eq!("pssl:6634".parse(), Ok(Target::PTls("127.0.0.1:6634".parse().unwrap())));
        assert_eq!("ptls:6634:0.0.0.0".parse(), Ok(Target::PTls("0.0.0.0:6634".parse().unwrap())));
        assert_eq!("punix:/tmp/x.sock".parse(), Ok(Target::PUnix("/tmp/x.sock".into())));
        assert_eq!("ssl:1.2.3.4:99".parse(), Ok(Target::Tls("1.2.3.4:99".parse().unwrap())));
        assert!("udp:1.2.3.4".parse::<Target>().is_err());
        assert!("tcp:nonsense".parse::<Target>().is_err());
        assert!("tcp:1.2.3.4:99999".parse::<Target>().is_err());
    }
}
