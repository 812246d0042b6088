//! Packets and flow keys: parsing a frame into the fields an OpenFlow 1.3 match can name, and the
//! header rewrites of its actions (set-field, push/pop VLAN and MPLS, TTLs) with checksums kept
//! right, including frames whose transport checksum is left to offload and GSO super-frames.

pub mod afdx;
pub mod craft;
pub mod csum;
pub mod key;
pub mod less;
pub mod packet;
pub mod parse;
pub mod segment;

pub use key::{FlowKey, KEY_BYTES, KEY_WORDS};
pub use packet::{Gso, GsoKind, InvalidTtl, Offload, Packet, PartialCsum};
pub use parse::{parse, Layout, Malformed};
