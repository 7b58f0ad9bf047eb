//! Codec errors and the primitive field codecs `(i)`, `(8)`, `(s)`, `(b)`, `OptGroup(i)`
//! (docs/wire.md §2).
//!
//! Readers work on a `&mut &[u8]` holding one complete message body, so running out of
//! bytes there is [`DecodeError::Truncated`]. Writers append to a `Vec<u8>`. Every integer
//! is written in its version's varint form (QUIC before lite-07 and draft 17, leading-ones
//! from them): the primitives take anything that fixes that form ([`Wire`]), so one reader
//! and one writer serve moq-lite and the IETF drafts.

use crate::error::{SessionCode, StreamCode};
use crate::varint::{self, Flavor};

/// What fixes a message's varint form: a moq-lite version, an IETF draft, or the form itself.
pub trait Wire: Copy {
    fn flavor(self) -> Flavor;
}

impl Wire for Flavor {
    fn flavor(self) -> Flavor {
        self
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

impl From<varint::VarintTooLarge> for EncodeError {
    fn from(e: varint::VarintTooLarge) -> Self {
        Self::VarintTooLarge(e.0)
    }
}

// ---- readers -------------------------------------------------------------------------

/// `(i)`
pub fn read_varint(r: &mut &[u8], version: impl Wire) -> Result<u64, DecodeError> {
    varint::decode_as(version.flavor(), r)
}

/// `(8)`
pub fn read_u8(r: &mut &[u8]) -> Result<u8, DecodeError> {
    let (&b, rest) = r.split_first().ok_or(DecodeError::Truncated)?;
    *r = rest;
    Ok(b)
}

/// `bool(8)`: 0 or 1, anything else refused.
pub fn read_bool(r: &mut &[u8]) -> Result<bool, DecodeError> {
    match read_u8(r)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::InvalidValue("bool")),
    }
}

/// `(b)`: a varint length then that many bytes, borrowed from the body.
pub fn read_bytes<'a>(r: &mut &'a [u8], version: impl Wire) -> Result<&'a [u8], DecodeError> {
    let len = read_varint(r, version)?;
    if len > r.len() as u64 {
        return Err(DecodeError::Truncated);
    }
    let (head, rest) = r.split_at(len as usize);
    *r = rest;
    Ok(head)
}

/// `(s)`: a `(b)` holding UTF-8.
pub fn read_str<'a>(r: &mut &'a [u8], version: impl Wire) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(read_bytes(r, version)?).map_err(|_| DecodeError::InvalidUtf8)
}

/// `OptGroup(i)`: 0 is `None`, `n+1` is `Some(n)`.
pub fn read_opt(r: &mut &[u8], version: impl Wire) -> Result<Option<u64>, DecodeError> {
    Ok(read_varint(r, version)?.checked_sub(1))
}

/// Require that a body was consumed exactly.
pub fn finish(r: &[u8]) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::Long)
    }
}

// ---- writers -------------------------------------------------------------------------

/// `(i)`
pub fn write_varint(w: &mut Vec<u8>, v: u64, version: impl Wire) -> Result<(), EncodeError> {
    Ok(varint::encode_as(version.flavor(), v, w)?)
}

/// `(8)`
pub fn write_u8(w: &mut Vec<u8>, v: u8) {
    w.push(v);
}

/// `bool(8)`
pub fn write_bool(w: &mut Vec<u8>, v: bool) {
    w.push(u8::from(v));
}

/// `(b)`
pub fn write_bytes(w: &mut Vec<u8>, v: &[u8], version: impl Wire) -> Result<(), EncodeError> {
    write_varint(w, v.len() as u64, version)?;
    w.extend_from_slice(v);
    Ok(())
}

/// `(s)`
pub fn write_str(w: &mut Vec<u8>, v: &str, version: impl Wire) -> Result<(), EncodeError> {
    write_bytes(w, v.as_bytes(), version)
}

/// `OptGroup(i)`: `None` is 0, `Some(n)` is `n+1` (so `n` must be below 2^62 - 1).
pub fn write_opt(w: &mut Vec<u8>, v: Option<u64>, version: impl Wire) -> Result<(), EncodeError> {
    match v {
        None => write_varint(w, 0, version),
        Some(n) => write_varint(
            w,
            n.checked_add(1).ok_or(EncodeError::VarintTooLarge(n))?,
            version,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::Version;

    #[test]
    fn primitives() {
        for version in [Version::Lite06, Version::Lite07Wip] {
            let mut w = Vec::new();
            write_str(&mut w, "héllo", version).unwrap();
            write_opt(&mut w, None, version).unwrap();
            write_opt(&mut w, Some(7), version).unwrap();
            write_u8(&mut w, 0xff);
            write_bool(&mut w, true);
            let mut r = &w[..];
            assert_eq!(read_str(&mut r, version).unwrap(), "héllo");
            assert_eq!(read_opt(&mut r, version).unwrap(), None);
            assert_eq!(read_opt(&mut r, version).unwrap(), Some(7));
            assert_eq!(read_u8(&mut r).unwrap(), 0xff);
            assert!(read_bool(&mut r).unwrap());
            finish(r).unwrap();
            assert_eq!(read_u8(&mut r), Err(DecodeError::Truncated));
            assert!(write_opt(&mut w, Some(varint::MAX), version).is_err());
            assert_eq!(
                read_str(&mut &[2, 0xff, 0xfe][..], version),
                Err(DecodeError::InvalidUtf8)
            );
            assert_eq!(
                read_bytes(&mut &[5, 1][..], version),
                Err(DecodeError::Truncated)
            );
            assert_eq!(finish(&[0]), Err(DecodeError::Long));
            assert_eq!(
                read_bool(&mut &[2][..]),
                Err(DecodeError::InvalidValue("bool"))
            );
        }
    }
}
