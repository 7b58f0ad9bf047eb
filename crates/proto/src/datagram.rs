//! DATAGRAM bodies (05+; one QUIC/WebTransport datagram or QMux DATAGRAM frame each)
//! (docs/wire.md §4.10).

use bytes::{BufMut, Bytes};

use crate::coding::{self, DecodeError, EncodeError};
use crate::varint;
use crate::version::Version;

/// DATAGRAM: `Subscribe ID(i), Group Sequence(i), Timestamp(i), Payload (rest)`. No length
/// prefix, no type. One datagram is one single-frame group; the timestamp is absolute, in
/// the track's timescale.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Datagram {
    pub subscribe_id: u64,
    pub sequence: u64,
    pub timestamp: u64,
    pub payload: Bytes,
}

fn check(version: Version) -> bool {
    version.has_datagrams()
}

impl Datagram {
    /// Decode a whole datagram; the payload shares `data`'s storage.
    pub fn decode(data: &Bytes, version: Version) -> Result<Datagram, DecodeError> {
        if !check(version) {
            return Err(DecodeError::Unsupported);
        }
        let mut r = &data[..];
        let subscribe_id = coding::read_varint(&mut r, version)?;
        let sequence = coding::read_varint(&mut r, version)?;
        let timestamp = coding::read_varint(&mut r, version)?;
        let payload = data.slice(data.len() - r.len()..);
        Ok(Datagram {
            subscribe_id,
            sequence,
            timestamp,
            payload,
        })
    }

    /// Append the datagram.
    pub fn encode<B: BufMut>(&self, version: Version, out: &mut B) -> Result<(), EncodeError> {
        if !check(version) {
            return Err(EncodeError::Unsupported);
        }
        // Check all three before writing anything.
        let flavor = version.varint();
        for v in [self.subscribe_id, self.sequence, self.timestamp] {
            varint::encoded_len_as(flavor, v)?;
        }
        varint::encode_as(flavor, self.subscribe_id, out)?;
        varint::encode_as(flavor, self.sequence, out)?;
        varint::encode_as(flavor, self.timestamp, out)?;
        out.put_slice(&self.payload);
        Ok(())
    }

    /// Encoded size in bytes (to compare with the transport's max datagram size).
    pub fn encoded_len(&self, version: Version) -> Result<usize, EncodeError> {
        let flavor = version.varint();
        Ok(varint::encoded_len_as(flavor, self.subscribe_id)?
            + varint::encoded_len_as(flavor, self.sequence)?
            + varint::encoded_len_as(flavor, self.timestamp)?
            + self.payload.len())
    }
}
