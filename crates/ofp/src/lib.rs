//! OpenFlow 1.3 wire protocol (spec 1.3.5): every message, match field, action and instruction,
//! encoded and decoded without I/O.
//!
//! Decoding never panics on any input. A malformed message yields a [`DecodeError`] whose
//! [`ErrorCode`] is the `(type, code)` pair the switch answers with in `OFPT_ERROR`.

pub mod action;
pub mod buf;
pub mod error;
pub mod group_meter;
pub mod message;
pub mod multipart;
pub mod oxm;
pub mod port;
pub mod table_features;

pub use action::{Action, Instruction};
pub use error::{DecodeError, ErrorCode};
pub use group_meter::{BandKind, Bucket, MeterBand};
pub use message::*;
pub use multipart::{MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody};
pub use oxm::{Field, Match, OxmField};
pub use port::Port;
pub use table_features::{TableFeatureProp, TableFeatures};
