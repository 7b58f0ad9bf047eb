//! The codec errors (`DecodeError`, `EncodeError`), the session-close and stream-reset code
//! registries they map to, and the WebTransport code mapping
//! (docs/wire.md §7.1 and §7.3).
//!
//! The two registries are disjoint: a code is read according to *what* failed (the
//! connection, or one stream). Session codes always travel raw; stream codes travel
//! through [`wt_encode`] on raw QUIC and WebTransport, and raw on QMux.

use std::fmt;

/// A session (connection) close code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionCode {
    /// 0x0: clean close.
    NoError,
    /// 0x1: transport failure, unclassified local error.
    Internal,
    /// 0x2: auth refusal, expired grant.
    Unauthorized,
    /// 0x3: decode errors, bad SETUP, bad announce id, unexpected stream.
    ProtocolViolation,
    /// 0x4 (IETF drafts): a request id out of sequence or of the wrong parity.
    InvalidRequestId,
    /// 0x6: malformed key-value parameters.
    KeyValueFormatting,
    /// 0x7 (IETF drafts 14-16): a request past the MAX_REQUEST_ID granted.
    TooManyRequests,
    /// 0x10: drain deadline passed after GOAWAY.
    GoawayTimeout,
    /// 0x11: a control message never arrived (e.g. no SETUP).
    ControlTimeout,
    /// 0x15: no common version.
    VersionNegotiationFailed,
    /// 64 + n: application code (e.g. the relay's HTTP status, 502 → 566).
    App(u16),
    /// Anything unregistered (including the reserved 32–47).
    Unknown(u32),
}

impl SessionCode {
    /// The wire value.
    pub const fn to_code(self) -> u32 {
        match self {
            Self::NoError => 0x0,
            Self::Internal => 0x1,
            Self::Unauthorized => 0x2,
            Self::ProtocolViolation => 0x3,
            Self::InvalidRequestId => 0x4,
            Self::KeyValueFormatting => 0x6,
            Self::TooManyRequests => 0x7,
            Self::GoawayTimeout => 0x10,
            Self::ControlTimeout => 0x11,
            Self::VersionNegotiationFailed => 0x15,
            Self::App(n) => n as u32 + 64,
            Self::Unknown(code) => code,
        }
    }

    /// Classify a wire value; total, `from_code(c).to_code() == c` for every `c`.
    pub const fn from_code(code: u32) -> Self {
        match code {
            0x0 => Self::NoError,
            0x1 => Self::Internal,
            0x2 => Self::Unauthorized,
            0x3 => Self::ProtocolViolation,
            0x4 => Self::InvalidRequestId,
            0x6 => Self::KeyValueFormatting,
            0x7 => Self::TooManyRequests,
            0x10 => Self::GoawayTimeout,
            0x11 => Self::ControlTimeout,
            0x15 => Self::VersionNegotiationFailed,
            64..=0x1_003f => Self::App((code - 64) as u16),
            code => Self::Unknown(code),
        }
    }
}

/// A stream RESET_STREAM / STOP_SENDING code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamCode {
    /// 0x0: internal error; also what a disallowed uni stream is stopped with.
    Internal,
    /// 0x1: routine cancel.
    Cancelled,
    /// 0x2
    DeliveryTimeout,
    /// 0x3: the session is closing; its reason travels on the close.
    SessionClosed,
    /// 0x4
    GoingAway,
    /// 0x5: reader lagged; FETCH cannot start at the requested frame.
    TooFarBehind,
    /// 0x12: our decode error on a stream.
    MalformedTrack,
    /// 0x31: a request was never answered.
    ControlTimeout,
    /// 0x32: more than 32 MiB or 8192 frames in a group.
    GroupTooLarge,
    /// 0x33
    NotFound,
    /// 0x34: group expired from the cache.
    Old,
    /// 0x35: dropped under memory pressure.
    Evicted,
    /// 0x36: no route to the broadcast.
    Unroutable,
    /// 0x37: FIN inside a frame.
    WrongSize,
    /// 0x38: a frame over 32 MiB.
    FrameTooLarge,
    /// 0x39
    TimestampMismatch,
    /// 64 + n: application code.
    App(u16),
    /// Anything unregistered (0x20–0x2f, 0x30 reserved for NO_CAPACITY, …).
    Unknown(u32),
}

impl StreamCode {
    /// The wire value (before any WebTransport mapping).
    pub const fn to_code(self) -> u32 {
        match self {
            Self::Internal => 0x0,
            Self::Cancelled => 0x1,
            Self::DeliveryTimeout => 0x2,
            Self::SessionClosed => 0x3,
            Self::GoingAway => 0x4,
            Self::TooFarBehind => 0x5,
            Self::MalformedTrack => 0x12,
            Self::ControlTimeout => 0x31,
            Self::GroupTooLarge => 0x32,
            Self::NotFound => 0x33,
            Self::Old => 0x34,
            Self::Evicted => 0x35,
            Self::Unroutable => 0x36,
            Self::WrongSize => 0x37,
            Self::FrameTooLarge => 0x38,
            Self::TimestampMismatch => 0x39,
            Self::App(n) => n as u32 + 64,
            Self::Unknown(code) => code,
        }
    }

    /// Classify a wire value; total, `from_code(c).to_code() == c` for every `c`.
    pub const fn from_code(code: u32) -> Self {
        match code {
            0x0 => Self::Internal,
            0x1 => Self::Cancelled,
            0x2 => Self::DeliveryTimeout,
            0x3 => Self::SessionClosed,
            0x4 => Self::GoingAway,
            0x5 => Self::TooFarBehind,
            0x12 => Self::MalformedTrack,
            0x31 => Self::ControlTimeout,
            0x32 => Self::GroupTooLarge,
            0x33 => Self::NotFound,
            0x34 => Self::Old,
            0x35 => Self::Evicted,
            0x36 => Self::Unroutable,
            0x37 => Self::WrongSize,
            0x38 => Self::FrameTooLarge,
            0x39 => Self::TimestampMismatch,
            64..=0x1_003f => Self::App((code - 64) as u16),
            code => Self::Unknown(code),
        }
    }
}

impl fmt::Display for SessionCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({:#x})", self, self.to_code())
    }
}

impl fmt::Display for StreamCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({:#x})", self, self.to_code())
    }
}

/// First HTTP/3 error code of the WebTransport application range.
pub const WT_FIRST: u64 = 0x52e4_a40f_a8db;
/// Last HTTP/3 error code of the WebTransport application range (the image of `u32::MAX`).
pub const WT_LAST: u64 = 0x52e5_ac98_3162;

/// Map a stream code into the WebTransport/HTTP-3 space:
/// `0x52e4a40fa8db + c + ⌊c / 0x1e⌋` (skipping the reserved GREASE code points).
pub const fn wt_encode(code: u32) -> u64 {
    let c = code as u64;
    WT_FIRST + c + c / 0x1e
}

/// Inverse of [`wt_encode`]. `None` outside `[WT_FIRST, WT_LAST]` or on a reserved
/// (GREASE) code point, which has no stream-code pre-image.
pub const fn wt_decode(wire: u64) -> Option<u32> {
    if wire < WT_FIRST || wire > WT_LAST {
        return None;
    }
    let d = wire - WT_FIRST;
    if d % 0x1f == 0x1e {
        return None;
    }
    Some((d - d / 0x1f) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_round_trip() {
        for c in (0..0x200u32).chain([0xffff + 64, 0xffff + 65, u32::MAX]) {
            assert_eq!(SessionCode::from_code(c).to_code(), c);
            assert_eq!(StreamCode::from_code(c).to_code(), c);
        }
        for c in 0x20..0x30 {
            assert_eq!(StreamCode::from_code(c), StreamCode::Unknown(c));
            assert_eq!(SessionCode::from_code(c), SessionCode::Unknown(c));
        }
        assert_eq!(SessionCode::from_code(566), SessionCode::App(502));
        assert_eq!(StreamCode::from_code(0x30), StreamCode::Unknown(0x30));
        assert_eq!(StreamCode::Cancelled.to_code(), 1);
        assert_eq!(SessionCode::ProtocolViolation.to_code(), 3);
    }

    #[test]
    fn wt_mapping() {
        assert_eq!(wt_encode(0), 0x52e4a40fa8db);
        assert_eq!(wt_encode(1), 0x52e4a40fa8dc);
        for (c, tail) in [
            (0x5, 0xa8e0),
            (0x12, 0xa8ed),
            (0x33, 0xa90f),
            (0x34, 0xa910),
            (0x35, 0xa911),
            (0x36, 0xa912),
            (0x37, 0xa913),
            (0x38, 0xa914),
        ] {
            assert_eq!(wt_encode(c) & 0xffff, tail, "code {c:#x}");
        }
        assert_eq!(wt_encode(u32::MAX), WT_LAST);
        for c in (0..100_000u32).chain([u32::MAX - 1, u32::MAX]) {
            assert_eq!(wt_decode(wt_encode(c)), Some(c));
        }
        assert_eq!(wt_decode(WT_FIRST - 1), None);
        assert_eq!(wt_decode(WT_LAST + 1), None);
        assert_eq!(wt_decode(WT_FIRST + 0x1e), None); // GREASE
        assert_eq!(wt_decode(0), None);
    }
}

/// Why bytes from the wire were refused.
///
/// Every variant except [`DecodeError::Unsupported`] is the **peer's** fault: it sent
/// bytes that are not a valid message of the negotiated version. `Unsupported` is ours:
/// the negotiated version's layout is not implemented by this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A length prefix (or a FRAME payload length) over the limit; reported as soon as
    /// the prefix is read, before any body byte is buffered.
    #[error("message length {len} exceeds the {max}-byte limit")]
    TooLarge { len: u64, max: u64 },
    /// The body held bytes after its last field.
    #[error("trailing bytes after the message body")]
    Long,
    /// The body (or a one-shot input) ended inside a field.
    #[error("message ends inside a field")]
    Truncated,
    /// A string field was not UTF-8.
    #[error("invalid UTF-8 in a string field")]
    InvalidUtf8,
    /// A count or length bound was exceeded; names the bound.
    #[error("bounds exceeded: {0}")]
    BoundsExceeded(&'static str),
    /// A field held a value its type forbids; names the field.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// A SETUP parameter id appeared twice.
    #[error("duplicate parameter id {0:#x}")]
    DuplicateParameter(u64),
    /// More than 64 SETUP parameters.
    #[error("too many parameters")]
    TooManyParameters,
    /// An unknown stream type or message type where unknown types are not skipped.
    #[error("unknown type {0:#x}")]
    UnknownType(u64),
    /// A frame bound without the group bound it qualifies, or a FETCH range that ends
    /// before it starts.
    #[error("invalid subscribe location")]
    InvalidSubscribeLocation,
    /// A FRAME payload length over the frame limit.
    #[error("frame of {size} bytes exceeds the {max}-byte limit")]
    FrameTooLarge { size: u64, max: u64 },
    /// A lite-07 announce reference that does not resolve (session-fatal); names why.
    #[error("invalid announce reference: {0}")]
    InvalidReference(&'static str),
    /// The negotiated version's layout for this message is not implemented (our side).
    #[error("message layout not supported on this version")]
    Unsupported,
}

impl DecodeError {
    /// The code to reset / stop the offending stream with (docs/wire.md §7.1, §9): MALFORMED_TRACK
    /// (0x12) for malformed bytes, FRAME_TOO_LARGE (0x38) for an oversized frame, and
    /// INTERNAL (0x0) for our own `Unsupported`.
    ///
    /// Note that moq-net answers a *request* (SUBSCRIBE, TRACK, FETCH) that fails to decode
    /// by dropping the stream, which resets it with CANCELLED (0x1); the session layer
    /// applies that per-stream policy.
    pub const fn stream_code(&self) -> StreamCode {
        match self {
            Self::FrameTooLarge { .. } => StreamCode::FrameTooLarge,
            Self::Unsupported => StreamCode::Internal,
            _ => StreamCode::MalformedTrack,
        }
    }

    /// The code to close the session with when this error is session-fatal (SETUP,
    /// announce streams as subscriber): PROTOCOL_VIOLATION (0x3), as moq-net does for every
    /// decode error including too many SETUP parameters; INTERNAL (0x1) for `Unsupported`.
    pub const fn session_code(&self) -> SessionCode {
        match self {
            Self::Unsupported => SessionCode::Internal,
            _ => SessionCode::ProtocolViolation,
        }
    }
}

/// Why a value could not be encoded. Always the **caller's** fault: the encoder refuses
/// anything its own decoder would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The body is larger than the message limit.
    #[error("message body of {len} bytes exceeds the {max}-byte limit")]
    TooLarge { len: u64, max: u64 },
    /// An integer field is ≥ 2^62 (or an `n+1` field would be).
    #[error("value {0} does not fit a varint")]
    VarintTooLarge(u64),
    /// A count or length bound was exceeded; names the bound.
    #[error("bounds exceeded: {0}")]
    BoundsExceeded(&'static str),
    /// A field holds a value its type forbids; names the field.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// A SETUP parameter id appears twice.
    #[error("duplicate parameter id {0:#x}")]
    DuplicateParameter(u64),
    /// More than 64 SETUP parameters.
    #[error("too many parameters")]
    TooManyParameters,
    /// A frame bound without its group bound, or a FETCH range that ends before it starts.
    #[error("invalid subscribe location")]
    InvalidSubscribeLocation,
    /// Frame bounds requested on a version without them (before lite-06); the peer would
    /// silently serve whole groups.
    #[error("frame bounds need lite-06 or later")]
    FrameBoundsUnsupported,
    /// The message does not exist on this version, or its layout is not implemented.
    #[error("message not supported on this version")]
    Unsupported,
}
