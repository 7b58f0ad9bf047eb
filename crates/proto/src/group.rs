//! The group stream (uni 0x0): GROUP header and the FRAME header shared with FETCH
//! responses (docs/wire.md §4.8, §9).
//!
//! A group stream is `GROUP | FRAME* | FIN`. FRAME is **not** length-prefixed as a message:
//! it is `Timestamp Delta ZigZag(i), Payload Length(i)` followed by the raw payload, which
//! the session reads itself. The delta is relative to the previous frame on the same
//! stream, starting from 0. Before lite-05 a frame has no timestamp: `Payload Length(i)` only
//! (the header decodes with a zero delta and the encoder drops the delta).

use bytes::{Buf, BytesMut};

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::limits::MAX_FRAME_SIZE;
use crate::varint;
use crate::version::Version;

/// GROUP: `Subscribe ID(i), Group Sequence(i), [Frame Start(i) on 06]`.
///
/// `frame_start` is the index of the first frame on this stream (0 = from the start); it is
/// refused by the encoder on 05, whose peers would misnumber the frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupHeader {
    pub subscribe_id: u64,
    pub sequence: u64,
    pub frame_start: u64,
}

impl Message for GroupHeader {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        coding::write_varint(w, self.subscribe_id, version)?;
        coding::write_varint(w, self.sequence, version)?;
        if version.has_frame_bounds() {
            coding::write_varint(w, self.frame_start, version)?;
        } else if self.frame_start != 0 {
            return Err(EncodeError::FrameBoundsUnsupported);
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        let subscribe_id = coding::read_varint(r, version)?;
        let sequence = coding::read_varint(r, version)?;
        let frame_start = if version.has_frame_bounds() {
            coding::read_varint(r, version)?
        } else {
            0
        };
        Ok(GroupHeader {
            subscribe_id,
            sequence,
            frame_start,
        })
    }
}

/// FRAME header: `Timestamp Delta ZigZag(i), Payload Length(i)` from lite-05, `Payload
/// Length(i)` before; `size` payload bytes follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameHeader {
    /// Timestamp minus the previous frame's on this stream (first frame: absolute), in the
    /// track's timescale. Must lie in `[-2^61, 2^61)`.
    pub timestamp_delta: i64,
    /// Payload length in bytes, at most [`MAX_FRAME_SIZE`].
    pub size: u64,
}

/// Look for a whole FRAME header at the front of `buf` without consuming; returns it and
/// its length in bytes. A payload length over `max` is refused as soon as it is read.
pub fn peek_frame_header(
    buf: &[u8],
    version: Version,
    max: u64,
) -> Result<Option<(FrameHeader, usize)>, DecodeError> {
    let flavor = version.varint();
    let (zz, n) = if version.has_frame_timestamps() {
        let Some(delta) = varint::peek_as(flavor, buf)? else {
            return Ok(None);
        };
        delta
    } else {
        (0, 0)
    };
    let Some((size, m)) = varint::peek_as(flavor, &buf[n..])? else {
        return Ok(None);
    };
    let max = max.min(MAX_FRAME_SIZE);
    if size > max {
        return Err(DecodeError::FrameTooLarge { size, max });
    }
    Ok(Some((
        FrameHeader {
            timestamp_delta: varint::zigzag_decode(zz),
            size,
        },
        n + m,
    )))
}

/// Decode a FRAME header from the front of `buf`, consuming it; `Ok(None)` (nothing
/// consumed) until both varints have arrived. Payload limit: [`MAX_FRAME_SIZE`].
pub fn decode_frame_header(
    buf: &mut BytesMut,
    version: Version,
) -> Result<Option<FrameHeader>, DecodeError> {
    decode_frame_header_with_limit(buf, version, MAX_FRAME_SIZE)
}

/// [`decode_frame_header`] with a caller-chosen (tighter) payload limit.
pub fn decode_frame_header_with_limit(
    buf: &mut BytesMut,
    version: Version,
    max: u64,
) -> Result<Option<FrameHeader>, DecodeError> {
    let Some((header, used)) = peek_frame_header(buf, version, max)? else {
        return Ok(None);
    };
    buf.advance(used);
    Ok(Some(header))
}

/// Append a FRAME header (the caller appends the payload).
pub fn encode_frame_header(
    header: &FrameHeader,
    version: Version,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    if header.size > MAX_FRAME_SIZE {
        return Err(EncodeError::TooLarge {
            len: header.size,
            max: MAX_FRAME_SIZE,
        });
    }
    let flavor = version.varint();
    if version.has_frame_timestamps() {
        varint::encode_as(flavor, varint::zigzag_encode(header.timestamp_delta)?, out)?;
    }
    varint::encode_as(flavor, header.size, out)?;
    Ok(())
}
