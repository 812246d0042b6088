//! `ofp_port` and the reserved port numbers (spec §7.2.1).

use crate::buf::{Reader, Writer};
use crate::error::DecodeError;

pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_IN_PORT: u32 = 0xffff_fff8;
pub const OFPP_TABLE: u32 = 0xffff_fff9;
pub const OFPP_NORMAL: u32 = 0xffff_fffa;
pub const OFPP_FLOOD: u32 = 0xffff_fffb;
pub const OFPP_ALL: u32 = 0xffff_fffc;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_LOCAL: u32 = 0xffff_fffe;
pub const OFPP_ANY: u32 = 0xffff_ffff;

/// `ofp_port_config` bits.
pub mod config {
    pub const PORT_DOWN: u32 = 1 << 0;
    pub const NO_RECV: u32 = 1 << 2;
    pub const NO_FWD: u32 = 1 << 5;
    pub const NO_PACKET_IN: u32 = 1 << 6;
    pub const ALL: u32 = PORT_DOWN | NO_RECV | NO_FWD | NO_PACKET_IN;
}

/// `ofp_port_state` bits.
pub mod state {
    pub const LINK_DOWN: u32 = 1 << 0;
    pub const BLOCKED: u32 = 1 << 1;
    pub const LIVE: u32 = 1 << 2;
}

/// `ofp_port_features` bits.
pub mod features {
    pub const F_10MB_HD: u32 = 1 << 0;
    pub const F_10MB_FD: u32 = 1 << 1;
    pub const F_100MB_HD: u32 = 1 << 2;
    pub const F_100MB_FD: u32 = 1 << 3;
    pub const F_1GB_HD: u32 = 1 << 4;
    pub const F_1GB_FD: u32 = 1 << 5;
    pub const F_10GB_FD: u32 = 1 << 6;
    pub const F_40GB_FD: u32 = 1 << 7;
    pub const F_100GB_FD: u32 = 1 << 8;
    pub const F_1TB_FD: u32 = 1 << 9;
    pub const OTHER: u32 = 1 << 10;
    pub const COPPER: u32 = 1 << 11;
    pub const FIBER: u32 = 1 << 12;
    pub const AUTONEG: u32 = 1 << 13;
}

/// Formats a reserved or numbered port the way `ovs-ofctl` prints it.
pub fn port_name(port: u32) -> String {
    match port {
        OFPP_IN_PORT => "IN_PORT".into(),
        OFPP_TABLE => "TABLE".into(),
        OFPP_NORMAL => "NORMAL".into(),
        OFPP_FLOOD => "FLOOD".into(),
        OFPP_ALL => "ALL".into(),
        OFPP_CONTROLLER => "CONTROLLER".into(),
        OFPP_LOCAL => "LOCAL".into(),
        OFPP_ANY => "ANY".into(),
        n => n.to_string(),
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl Port {
    pub const LEN: usize = 64;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.put_u32(self.port_no);
        out.put_zeros(4);
        out.extend_from_slice(&self.hw_addr);
        out.put_zeros(2);
        out.put_string(&self.name, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.put_u32(v);
        }
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Port, DecodeError> {
        let port_no = r.u32("port_no")?;
        r.skip(4, "pad")?;
        let hw_addr = r.array("hw_addr")?;
        r.skip(2, "pad")?;
        let name = r.string(16, "port name")?;
        Ok(Port {
            port_no,
            hw_addr,
            name,
            config: r.u32("config")?,
            state: r.u32("state")?,
            curr: r.u32("curr")?,
            advertised: r.u32("advertised")?,
            supported: r.u32("supported")?,
            peer: r.u32("peer")?,
            curr_speed: r.u32("curr_speed")?,
            max_speed: r.u32("max_speed")?,
        })
    }
}
