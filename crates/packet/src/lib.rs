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

/// The frame check sequence: on the wire, and in AFDX's and 802.1Q's frame sizes, but not in the
/// frames an interface hands over.
pub const FCS_LEN: usize = 4;
/// What the wire carries before a frame: the preamble and start-of-frame delimiter.
pub const PREAMBLE_LEN: usize = 8;
/// The idle the wire keeps after a frame: the inter-frame gap.
pub const IFG_LEN: usize = 12;
pub use packet::{Gso, GsoKind, InvalidTtl, Offload, Packet, PartialCsum};
pub use parse::{parse, Layout, Malformed};
