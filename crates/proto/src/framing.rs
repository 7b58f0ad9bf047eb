//! Message framing for sans-IO streaming use: `Len(i) | body` and `Type(i) | Len(i) | body`
//! (docs/wire.md §2 "Message framing", §9).
//!
//! The session keeps one buffer per stream and repeatedly asks whether a whole message is
//! there. The `decode_*` functions return `Ok(None)` and consume nothing until the buffer
//! holds the complete message; they reject an over-limit length prefix as soon as the
//! prefix itself has arrived, and require the body to be consumed exactly.

use bytes::{Buf, BytesMut};

use crate::coding::{finish, DecodeError, EncodeError};
use crate::limits::MAX_MESSAGE_SIZE;
use crate::varint;
use crate::version::Version;

/// A length-prefixed message: `Len(i) | body`.
pub trait Message: Sized {
    /// Largest body accepted (and emitted) by default.
    const MAX_SIZE: usize = MAX_MESSAGE_SIZE;

    /// Append the body (without the length prefix).
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError>;

    /// Decode a complete body. The framing checks afterwards that nothing is left.
    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError>;
}

/// A typed message: `Type(i) | Len(i) | body`.
pub trait TypedMessage: Sized {
    /// Largest body accepted (and emitted) by default.
    const MAX_SIZE: usize = MAX_MESSAGE_SIZE;

    /// Called as soon as the type varint has arrived: fail early on a type that cannot be
    /// skipped, before the body is buffered.
    fn check_type(kind: u64, version: Version) -> Result<(), DecodeError>;

    /// Append the body and return the type to write in front of it.
    fn encode_typed_body(&self, w: &mut Vec<u8>, version: Version) -> Result<u64, EncodeError>;

    /// Decode a complete body of type `kind`.
    fn decode_typed_body(kind: u64, r: &mut &[u8], version: Version) -> Result<Self, DecodeError>;
}

/// How a message family writes its length prefix: moq-lite a varint, the IETF drafts two
/// raw bytes. The one framing below serves both.
pub trait Framing: crate::coding::Wire {
    /// The length at the front of `buf` and the bytes it takes; `None` if incomplete.
    fn peek_len(self, buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError>;

    /// Append `len`.
    fn write_len(self, len: usize, out: &mut BytesMut) -> Result<(), EncodeError>;
}

impl Framing for Version {
    fn peek_len(self, buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError> {
        varint::peek_as(self.varint(), buf)
    }

    fn write_len(self, len: usize, out: &mut BytesMut) -> Result<(), EncodeError> {
        Ok(varint::encode_as(self.varint(), len as u64, out)?)
    }
}

/// Locate `Len | body` at `buf[at..]`: `Ok(None)` if incomplete, else the body range.
fn locate(
    buf: &[u8],
    at: usize,
    max: usize,
    framing: impl Framing,
) -> Result<Option<(usize, usize)>, DecodeError> {
    let Some((len, n)) = framing.peek_len(&buf[at..])? else {
        return Ok(None);
    };
    if len > max as u64 {
        return Err(DecodeError::TooLarge {
            len,
            max: max as u64,
        });
    }
    let start = at + n;
    let end = start + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((start, end)))
}

/// Find a whole `Type(i) | Len | body` at the front of `buf`: the type (vetted by `check`
/// as soon as it has arrived, before the body is buffered), the body's range and the bytes
/// the message takes; `Ok(None)` until all of it is there.
pub fn peek_frame<F: Framing>(
    buf: &[u8],
    framing: F,
    max: usize,
    check: impl FnOnce(u64) -> Result<(), DecodeError>,
) -> Result<Option<(u64, std::ops::Range<usize>)>, DecodeError> {
    let Some((kind, n)) = varint::peek_as(framing.flavor(), buf)? else {
        return Ok(None);
    };
    check(kind)?;
    Ok(locate(buf, n, max, framing)?.map(|(start, end)| (kind, start..end)))
}

/// Append `Type(i) | Len | body`, refusing a body over `max`.
pub fn write_frame<F: Framing>(
    kind: u64,
    body: &[u8],
    framing: F,
    max: usize,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    if body.len() > max {
        return Err(EncodeError::TooLarge {
            len: body.len() as u64,
            max: max as u64,
        });
    }
    varint::encode_as(framing.flavor(), kind, out)?;
    framing.write_len(body.len(), out)?;
    out.extend_from_slice(body);
    Ok(())
}

/// Look for a whole `Len(i) | body` message at the front of `buf` without consuming.
///
/// Returns the message and the number of bytes it occupies. The limit is the smaller of
/// `max` and `M::MAX_SIZE`.
pub fn peek_message<M: Message>(
    buf: &[u8],
    version: Version,
    max: usize,
) -> Result<Option<(M, usize)>, DecodeError> {
    let Some((start, end)) = locate(buf, 0, max.min(M::MAX_SIZE), version)? else {
        return Ok(None);
    };
    let mut body = &buf[start..end];
    let msg = M::decode_body(&mut body, version)?;
    finish(body)?;
    Ok(Some((msg, end)))
}

/// Decode one `Len(i) | body` message from the front of `buf`, consuming it; `Ok(None)`
/// (nothing consumed) until the whole message has arrived. Limit: `M::MAX_SIZE`
/// (64 MiB; 64 KiB for SETUP).
pub fn decode_message<M: Message>(
    buf: &mut BytesMut,
    version: Version,
) -> Result<Option<M>, DecodeError> {
    decode_message_with_limit(buf, version, M::MAX_SIZE)
}

/// [`decode_message`] with a caller-chosen (tighter) body limit.
pub fn decode_message_with_limit<M: Message>(
    buf: &mut BytesMut,
    version: Version,
    max: usize,
) -> Result<Option<M>, DecodeError> {
    let Some((msg, used)) = peek_message::<M>(buf, version, max)? else {
        return Ok(None);
    };
    buf.advance(used);
    Ok(Some(msg))
}

/// Decode one message from a slice that must already hold all of it (e.g. tests, or a
/// stream read to FIN); advances `r`. An incomplete message is [`DecodeError::Truncated`].
pub fn decode_message_from<M: Message>(r: &mut &[u8], version: Version) -> Result<M, DecodeError> {
    let (msg, used) = peek_message::<M>(r, version, M::MAX_SIZE)?.ok_or(DecodeError::Truncated)?;
    *r = &r[used..];
    Ok(msg)
}

/// Append `Len(i) | body`. Refuses a body over `M::MAX_SIZE` and anything the decoder
/// would refuse.
pub fn encode_message<M: Message>(
    msg: &M,
    version: Version,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut body = Vec::new();
    msg.encode_body(&mut body, version)?;
    if body.len() > M::MAX_SIZE {
        return Err(EncodeError::TooLarge {
            len: body.len() as u64,
            max: M::MAX_SIZE as u64,
        });
    }
    varint::encode_as(version.varint(), body.len() as u64, out)?;
    out.extend_from_slice(&body);
    Ok(())
}

/// Look for a whole `Type(i) | Len(i) | body` message at the front of `buf` without
/// consuming. The type is vetted by [`TypedMessage::check_type`] as soon as it arrives.
pub fn peek_typed<M: TypedMessage>(
    buf: &[u8],
    version: Version,
    max: usize,
) -> Result<Option<(M, usize)>, DecodeError> {
    let Some((kind, body)) = peek_frame(buf, version, max.min(M::MAX_SIZE), |kind| {
        M::check_type(kind, version)
    })?
    else {
        return Ok(None);
    };
    let end = body.end;
    let mut body = &buf[body];
    let msg = M::decode_typed_body(kind, &mut body, version)?;
    finish(body)?;
    Ok(Some((msg, end)))
}

/// Decode one typed message from the front of `buf`, consuming it; `Ok(None)` (nothing
/// consumed) until the whole message has arrived.
pub fn decode_typed<M: TypedMessage>(
    buf: &mut BytesMut,
    version: Version,
) -> Result<Option<M>, DecodeError> {
    decode_typed_with_limit(buf, version, M::MAX_SIZE)
}

/// [`decode_typed`] with a caller-chosen (tighter) body limit.
pub fn decode_typed_with_limit<M: TypedMessage>(
    buf: &mut BytesMut,
    version: Version,
    max: usize,
) -> Result<Option<M>, DecodeError> {
    let Some((msg, used)) = peek_typed::<M>(buf, version, max)? else {
        return Ok(None);
    };
    buf.advance(used);
    Ok(Some(msg))
}

/// Decode one typed message from a slice that must hold all of it; advances `r`.
pub fn decode_typed_from<M: TypedMessage>(
    r: &mut &[u8],
    version: Version,
) -> Result<M, DecodeError> {
    let (msg, used) = peek_typed::<M>(r, version, M::MAX_SIZE)?.ok_or(DecodeError::Truncated)?;
    *r = &r[used..];
    Ok(msg)
}

/// Append `Type(i) | Len(i) | body`.
pub fn encode_typed<M: TypedMessage>(
    msg: &M,
    version: Version,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let mut body = Vec::new();
    let kind = msg.encode_typed_body(&mut body, version)?;
    write_frame(kind, &body, version, M::MAX_SIZE, out)
}
