//! Records: how frames are delimited on each carrier (docs/wire.md §8.2).
//!
//! * WebSocket ([`Framing::Message`]): one binary message is one record's frames, no size
//!   prefix. On qmux-00 a message is exactly one frame.
//! * Byte streams ([`Framing::ByteStream`], TCP/unix): `Size(i) | frames` on qmux-01/02; bare
//!   self-delimiting frames on qmux-00.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{PeerError, TransportCode};
use crate::frame::Frame;
use crate::varint;
use crate::version::WireVersion;

/// draft-00's `max_frame_size`: the whole frame, header included.
pub const MAX_FRAME_SIZE_00: usize = 16384;

/// How records are delimited on the carrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Message boundaries delimit records (WebSocket).
    Message,
    /// A byte stream: size-prefixed records (TCP, unix sockets).
    ByteStream,
}

/// Wrap one record's frames for the carrier.
pub fn frame_record(framing: Framing, version: WireVersion, frames: &[u8]) -> Bytes {
    if framing == Framing::ByteStream && version.uses_records() {
        let mut out = BytesMut::with_capacity(frames.len() + 4);
        varint::put(&mut out, frames.len() as u64);
        out.put_slice(frames);
        out.freeze()
    } else {
        Bytes::copy_from_slice(frames)
    }
}

/// Splits a byte stream into records, holding at most one incomplete record.
#[derive(Debug)]
pub struct RecordReader {
    buf: BytesMut,
    version: WireVersion,
    max_record_size: u64,
}

impl RecordReader {
    /// `max_record_size` is what we advertised: larger records are a peer fault.
    pub fn new(version: WireVersion, max_record_size: u64) -> Self {
        Self {
            buf: BytesMut::new(),
            version,
            max_record_size,
        }
    }

    /// Bytes held that do not yet form a whole record.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Append bytes read from the carrier.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole record's frames, `Ok(None)` when more bytes are needed.
    pub fn next_record(&mut self) -> Result<Option<Bytes>, PeerError> {
        if self.version.uses_records() {
            let (size, header) = match varint::peek(&self.buf) {
                Ok(v) => v,
                Err(_) => return Ok(None),
            };
            if size > self.max_record_size {
                return Err(PeerError::new(
                    TransportCode::PROTOCOL_VIOLATION,
                    format!(
                        "record of {size} bytes exceeds max_record_size {}",
                        self.max_record_size
                    ),
                ));
            }
            let total = header + size as usize;
            if self.buf.len() < total {
                return Ok(None);
            }
            self.buf.advance(header);
            Ok(Some(self.buf.split_to(size as usize).freeze()))
        } else {
            self.next_bare_frame()
        }
    }

    /// qmux-00 on a byte stream: frames delimit themselves; find where the first one ends.
    fn next_bare_frame(&mut self) -> Result<Option<Bytes>, PeerError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let window = self.buf.len().min(MAX_FRAME_SIZE_00);
        let mut probe = Bytes::copy_from_slice(&self.buf[..window]);
        match Frame::decode(&mut probe) {
            Ok(frame) if !frame.is_self_delimiting() => Err(PeerError::new(
                TransportCode::FRAME_ENCODING_ERROR,
                "frame without a length on a qmux-00 byte stream",
            )),
            Ok(_) => {
                let used = window - probe.len();
                Ok(Some(self.buf.split_to(used).freeze()))
            }
            Err(crate::error::DecodeError::Truncated) if window < MAX_FRAME_SIZE_00 => Ok(None),
            Err(crate::error::DecodeError::Truncated) => Err(PeerError::new(
                TransportCode::PROTOCOL_VIOLATION,
                "frame larger than max_frame_size",
            )),
            Err(err) => Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_prefixed_records() {
        let record = [0x0e, 0x02, 0x00, 0x06, 0x01, 0x04, 0x01, 0x03, 0x01, 0x02];
        let framed = frame_record(Framing::ByteStream, WireVersion::Qmux01, &record);
        assert_eq!(framed[0], 0x0a, "spec §11: `0a 0e 02 …`");
        let mut reader = RecordReader::new(WireVersion::Qmux01, 16382);
        for b in framed.iter().take(framed.len() - 1) {
            reader.push(&[*b]);
            assert_eq!(reader.next_record(), Ok(None));
        }
        reader.push(&framed[framed.len() - 1..]);
        assert_eq!(reader.next_record().unwrap().unwrap().as_ref(), &record);
        assert_eq!(reader.buffered(), 0);
        assert_eq!(
            frame_record(Framing::Message, WireVersion::Qmux01, &record).as_ref(),
            &record
        );
    }

    #[test]
    fn oversized_record_is_refused_at_its_header() {
        let mut reader = RecordReader::new(WireVersion::Qmux01, 16382);
        reader.push(&[0x7f, 0xff]);
        let err = reader.next_record().unwrap_err();
        assert_eq!(err.code, TransportCode::PROTOCOL_VIOLATION);
    }

    #[test]
    fn bare_frames_on_qmux00() {
        let mut reader = RecordReader::new(WireVersion::Qmux00, 16382);
        reader.push(&[0x10, 0x45]);
        assert_eq!(reader.next_record(), Ok(None));
        reader.push(&[0x00, 0x13, 0x05]);
        assert_eq!(
            reader.next_record().unwrap().unwrap().as_ref(),
            &[0x10, 0x45, 0x00]
        );
        assert_eq!(
            reader.next_record().unwrap().unwrap().as_ref(),
            &[0x13, 0x05]
        );
        reader.push(&[0x09, 0x00, 0x61]);
        assert_eq!(
            reader.next_record().unwrap_err().code,
            TransportCode::FRAME_ENCODING_ERROR
        );
    }
}
