//! OpenFlow error types and codes (spec 1.3.5 §A.4.4), and the decoder's typed error.
//!
//! A [`DecodeError`] carries exactly the `(type, code)` pair that the switch must put in its
//! `OFPT_ERROR` reply, so the agent never has to guess how a parse failure maps onto the wire.

use std::fmt;

macro_rules! codes {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $value:expr),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum $name { $($variant = $value),* }

        impl $name {
            pub fn from_u16(v: u16) -> Option<Self> {
                match v { $($value => Some(Self::$variant),)* _ => None }
            }
        }
    };
}

codes!(HelloFailed { Incompatible = 0, Eperm = 1 });
codes!(BadRequest {
    BadVersion = 0, BadType = 1, BadMultipart = 2, BadExperimenter = 3, BadExpType = 4, Eperm = 5,
    BadLen = 6, BufferEmpty = 7, BufferUnknown = 8, BadTableId = 9, IsSlave = 10, BadPort = 11,
    BadPacket = 12, MultipartBufferOverflow = 13,
});
codes!(BadAction {
    BadType = 0, BadLen = 1, BadExperimenter = 2, BadExpType = 3, BadOutPort = 4, BadArgument = 5,
    Eperm = 6, TooMany = 7, BadQueue = 8, BadOutGroup = 9, MatchInconsistent = 10, UnsupportedOrder = 11,
    BadTag = 12, BadSetType = 13, BadSetLen = 14, BadSetArgument = 15,
});
codes!(BadInstruction {
    UnknownInst = 0, UnsupInst = 1, BadTableId = 2, UnsupMetadata = 3, UnsupMetadataMask = 4,
    BadExperimenter = 5, BadExpType = 6, BadLen = 7, Eperm = 8,
});
codes!(BadMatch {
    BadType = 0, BadLen = 1, BadTag = 2, BadDlAddrMask = 3, BadNwAddrMask = 4, BadWildcards = 5,
    BadField = 6, BadValue = 7, BadMask = 8, BadPrereq = 9, DupField = 10, Eperm = 11,
});
codes!(FlowModFailed {
    Unknown = 0, TableFull = 1, BadTableId = 2, Overlap = 3, Eperm = 4, BadTimeout = 5, BadCommand = 6,
    BadFlags = 7,
});
codes!(GroupModFailed {
    GroupExists = 0, InvalidGroup = 1, WeightUnsupported = 2, OutOfGroups = 3, OutOfBuckets = 4,
    ChainingUnsupported = 5, WatchUnsupported = 6, Loop = 7, UnknownGroup = 8, ChainedGroup = 9,
    BadType = 10, BadCommand = 11, BadBucket = 12, BadWatch = 13, Eperm = 14,
});
codes!(PortModFailed { BadPort = 0, BadHwAddr = 1, BadConfig = 2, BadAdvertise = 3, Eperm = 4 });
codes!(TableModFailed { BadTable = 0, BadConfig = 1, Eperm = 2 });
codes!(QueueOpFailed { BadPort = 0, BadQueue = 1, Eperm = 2 });
codes!(SwitchConfigFailed { BadFlags = 0, BadLen = 1, Eperm = 2 });
codes!(RoleRequestFailed { Stale = 0, Unsup = 1, BadRole = 2 });
codes!(MeterModFailed {
    Unknown = 0, MeterExists = 1, InvalidMeter = 2, UnknownMeter = 3, BadCommand = 4, BadFlags = 5,
    BadRate = 6, BadBurst = 7, BadBand = 8, BadBandValue = 9, OutOfMeters = 10, OutOfBands = 11,
});
codes!(TableFeaturesFailed { BadTable = 0, BadMetadata = 1, BadType = 2, BadLen = 3, BadArgument = 4, Eperm = 5 });

/// One `(type, code)` pair of `ofp_error_msg`, typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    HelloFailed(HelloFailed),
    BadRequest(BadRequest),
    BadAction(BadAction),
    BadInstruction(BadInstruction),
    BadMatch(BadMatch),
    FlowModFailed(FlowModFailed),
    GroupModFailed(GroupModFailed),
    PortModFailed(PortModFailed),
    TableModFailed(TableModFailed),
    QueueOpFailed(QueueOpFailed),
    SwitchConfigFailed(SwitchConfigFailed),
    RoleRequestFailed(RoleRequestFailed),
    MeterModFailed(MeterModFailed),
    TableFeaturesFailed(TableFeaturesFailed),
    /// A pair this implementation has no name for (received from a peer); kept verbatim.
    Other {
        typ: u16,
        code: u16,
    },
}

pub const OFPET_EXPERIMENTER: u16 = 0xffff;

impl ErrorCode {
    pub fn type_code(self) -> (u16, u16) {
        use ErrorCode::*;
        match self {
            HelloFailed(c) => (0, c as u16),
            BadRequest(c) => (1, c as u16),
            BadAction(c) => (2, c as u16),
            BadInstruction(c) => (3, c as u16),
            BadMatch(c) => (4, c as u16),
            FlowModFailed(c) => (5, c as u16),
            GroupModFailed(c) => (6, c as u16),
            PortModFailed(c) => (7, c as u16),
            TableModFailed(c) => (8, c as u16),
            QueueOpFailed(c) => (9, c as u16),
            SwitchConfigFailed(c) => (10, c as u16),
            RoleRequestFailed(c) => (11, c as u16),
            MeterModFailed(c) => (12, c as u16),
            TableFeaturesFailed(c) => (13, c as u16),
            Other { typ, code } => (typ, code),
        }
    }

    pub fn from_type_code(typ: u16, code: u16) -> Self {
        let named = match typ {
            0 => self::HelloFailed::from_u16(code).map(ErrorCode::HelloFailed),
            1 => self::BadRequest::from_u16(code).map(ErrorCode::BadRequest),
            2 => self::BadAction::from_u16(code).map(ErrorCode::BadAction),
            3 => self::BadInstruction::from_u16(code).map(ErrorCode::BadInstruction),
            4 => self::BadMatch::from_u16(code).map(ErrorCode::BadMatch),
            5 => self::FlowModFailed::from_u16(code).map(ErrorCode::FlowModFailed),
            6 => self::GroupModFailed::from_u16(code).map(ErrorCode::GroupModFailed),
            7 => self::PortModFailed::from_u16(code).map(ErrorCode::PortModFailed),
            8 => self::TableModFailed::from_u16(code).map(ErrorCode::TableModFailed),
            9 => self::QueueOpFailed::from_u16(code).map(ErrorCode::QueueOpFailed),
            10 => self::SwitchConfigFailed::from_u16(code).map(ErrorCode::SwitchConfigFailed),
            11 => self::RoleRequestFailed::from_u16(code).map(ErrorCode::RoleRequestFailed),
            12 => self::MeterModFailed::from_u16(code).map(ErrorCode::MeterModFailed),
            13 => self::TableFeaturesFailed::from_u16(code).map(ErrorCode::TableFeaturesFailed),
            _ => None,
        };
        named.unwrap_or(ErrorCode::Other { typ, code })
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Other { typ, code } => write!(f, "type {typ} code {code}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Why a message could not be decoded (or executed), and the error to answer it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub code: ErrorCode,
    /// What was being parsed; for logs only, never on the wire.
    pub context: &'static str,
}

impl DecodeError {
    pub fn new(code: ErrorCode, context: &'static str) -> Self {
        DecodeError { code, context }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.code, self.context)
    }
}

impl std::error::Error for DecodeError {}

/// Shorthands used throughout the decoder.
pub(crate) mod short {
    use super::*;
    pub const REQ_LEN: ErrorCode = ErrorCode::BadRequest(BadRequest::BadLen);
    pub const ACT_LEN: ErrorCode = ErrorCode::BadAction(BadAction::BadLen);
    pub const INST_LEN: ErrorCode = ErrorCode::BadInstruction(BadInstruction::BadLen);
    pub const MATCH_LEN: ErrorCode = ErrorCode::BadMatch(BadMatch::BadLen);
    pub const TF_LEN: ErrorCode = ErrorCode::TableFeaturesFailed(TableFeaturesFailed::BadLen);
}
