//! OBJECT_DATAGRAM (docs/wire-ietf.md §5.4): one object in a QUIC datagram.
//!
//! The type's bits: `0x01` properties, `0x02` end of group, `0x04` object id 0 (no field),
//! `0x08` default priority (no byte), `0x20` a status instead of a payload. Draft 14 knows
//! `0x00`-`0x07`, `0x20` and `0x21`; later drafts any mix except a status that ends a group.

use bytes::{BufMut, Bytes, BytesMut};

use crate::coding::{
    read_bytes, read_u8, read_varint, write_bytes, DecodeError, EncodeError, Wire,
};
use crate::varint;

use super::properties::ObjectProperties;
use super::Draft;

mod bit {
    pub const PROPERTIES: u64 = 0x01;
    pub const END_OF_GROUP: u64 = 0x02;
    pub const ZERO_OBJECT_ID: u64 = 0x04;
    pub const DEFAULT_PRIORITY: u64 = 0x08;
    pub const STATUS: u64 = 0x20;
    pub const ALL: u64 = PROPERTIES | END_OF_GROUP | ZERO_OBJECT_ID | DEFAULT_PRIORITY | STATUS;
}

/// What a datagram carries after its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatagramBody {
    Payload(Bytes),
    Status(u64),
}

/// OBJECT_DATAGRAM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectDatagram {
    pub track_alias: u64,
    pub group: u64,
    /// `None` is object 0 (no field).
    pub object: Option<u64>,
    /// `None` is the track's default.
    pub priority: Option<u8>,
    pub end_of_group: bool,
    /// Never an empty block; from 17 only with a Normal status. A block holding only
    /// properties Starling does not read decodes as `None`.
    pub properties: Option<ObjectProperties>,
    pub body: DatagramBody,
}

fn valid(kind: u64, draft: Draft) -> bool {
    if draft.has_inline_fields() {
        kind <= 0x07 || kind == 0x20 || kind == 0x21
    } else {
        kind & !bit::ALL == 0 && !(kind & bit::STATUS != 0 && kind & bit::END_OF_GROUP != 0)
    }
}

impl ObjectDatagram {
    /// Decode a whole datagram.
    pub fn decode(mut datagram: &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let r = &mut datagram;
        let kind = read_varint(r, draft)?;
        if !valid(kind, draft) {
            return Err(DecodeError::UnknownType(kind));
        }
        let track_alias = read_varint(r, draft)?;
        let group = read_varint(r, draft)?;
        let object = if kind & bit::ZERO_OBJECT_ID == 0 {
            Some(read_varint(r, draft)?)
        } else {
            None
        };
        let priority = if kind & bit::DEFAULT_PRIORITY == 0 {
            Some(read_u8(r)?)
        } else {
            None
        };
        let properties = if kind & bit::PROPERTIES != 0 {
            let block = read_bytes(r, draft)?;
            if block.is_empty() {
                return Err(DecodeError::InvalidValue("an empty property block"));
            }
            // Properties none of which Starling reads are dropped, block and all.
            Some(ObjectProperties::decode(block, draft)?).filter(|p| !p.is_empty())
        } else {
            None
        };
        let body = if kind & bit::STATUS != 0 {
            let status = read_varint(r, draft)?;
            if draft.has_typed_parameters() && status != 0 && properties.is_some() {
                return Err(DecodeError::InvalidValue("properties on a status object"));
            }
            crate::coding::finish(r)?;
            DatagramBody::Status(status)
        } else {
            DatagramBody::Payload(Bytes::copy_from_slice(r))
        };
        Ok(ObjectDatagram {
            track_alias,
            group,
            object,
            priority,
            end_of_group: kind & bit::END_OF_GROUP != 0,
            properties,
            body,
        })
    }

    pub fn encode(&self, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
        let mut kind = 0;
        for (set, b) in [
            (self.properties.is_some(), bit::PROPERTIES),
            (self.end_of_group, bit::END_OF_GROUP),
            (self.object.is_none(), bit::ZERO_OBJECT_ID),
            (self.priority.is_none(), bit::DEFAULT_PRIORITY),
            (matches!(self.body, DatagramBody::Status(_)), bit::STATUS),
        ] {
            if set {
                kind |= b;
            }
        }
        if !valid(kind, draft) {
            return Err(EncodeError::InvalidValue("datagram type"));
        }
        let flavor = draft.flavor();
        varint::encode_as(flavor, kind, out)?;
        varint::encode_as(flavor, self.track_alias, out)?;
        varint::encode_as(flavor, self.group, out)?;
        if let Some(object) = self.object {
            varint::encode_as(flavor, object, out)?;
        }
        if let Some(priority) = self.priority {
            out.put_u8(priority);
        }
        if let Some(properties) = &self.properties {
            let mut block = Vec::new();
            properties.encode(&mut block, draft)?;
            if block.is_empty() {
                return Err(EncodeError::InvalidValue("an empty property block"));
            }
            let mut framed = Vec::new();
            write_bytes(&mut framed, &block, draft)?;
            out.extend_from_slice(&framed);
        }
        match &self.body {
            DatagramBody::Status(status) => {
                if draft.has_typed_parameters() && *status != 0 && self.properties.is_some() {
                    return Err(EncodeError::InvalidValue("properties on a status object"));
                }
                varint::encode_as(flavor, *status, out)?;
            }
            DatagramBody::Payload(payload) => out.extend_from_slice(payload),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/wire-ietf.md §10.5: alias 4, group 7, priority 128, timestamp 1000, `ab`.
    #[test]
    fn worked_datagram() {
        let datagram = ObjectDatagram {
            track_alias: 4,
            group: 7,
            object: None,
            priority: Some(0x80),
            end_of_group: true,
            properties: Some(ObjectProperties {
                timestamp: Some(1000),
                timescale: None,
            }),
            body: DatagramBody::Payload(Bytes::from_static(b"ab")),
        };
        let mut out = BytesMut::new();
        datagram.encode(Draft::D22, &mut out).unwrap();
        assert_eq!(
            &out[..],
            &[0x07, 0x04, 0x07, 0x80, 0x03, 0x10, 0x83, 0xe8, 0x61, 0x62]
        );
        assert_eq!(ObjectDatagram::decode(&out, Draft::D22), Ok(datagram));
    }

    #[test]
    fn types_by_draft() {
        // Status with end of group, unknown bits, and on 14 anything past its list.
        assert!(ObjectDatagram::decode(&[0x22, 1, 2, 0, 0], Draft::D16).is_err());
        assert!(ObjectDatagram::decode(&[0x10, 1, 2, 0, 0], Draft::D16).is_err());
        assert!(ObjectDatagram::decode(&[0x0C, 1, 2], Draft::D14).is_err());
        assert!(ObjectDatagram::decode(&[0x0C, 1, 2], Draft::D16).is_ok());
        // A status datagram ends at its status.
        assert!(ObjectDatagram::decode(&[0x2C, 1, 2, 0, 9], Draft::D16).is_err());
        assert_eq!(
            ObjectDatagram::decode(&[0x2C, 1, 2, 3], Draft::D16)
                .unwrap()
                .body,
            DatagramBody::Status(3)
        );
        // An empty property block is refused.
        assert!(ObjectDatagram::decode(&[0x0D, 1, 2, 0], Draft::D16).is_err());
    }
}
