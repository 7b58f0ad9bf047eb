//! Track Properties and Object Properties (docs/wire-ietf.md §2.6, §2.7).
//!
//! Track Properties end SUBSCRIBE_OK, PUBLISH and FETCH_OK: pairs with delta keys and no
//! count, to the end of the message; read from draft 16 (its "Track Extensions"), written
//! from 17. Object Properties sit in a `(b)` block before an object's payload: keys absolute
//! on 14 and 15, delta from 16. Unknown properties are stepped over by their key's parity
//! (so a relay could forward them); the ones moq-net acts on are typed here.

use bytes::BytesMut;

use crate::coding::{DecodeError, EncodeError, Wire};
use crate::varint;

use super::fields::GroupOrder;
use super::kvp::{Extent, Keys, PairReader, PairWriter, Value};
use super::Draft;

/// TIMESCALE: the units of every object timestamp on the track (ticks per second).
pub const TIMESCALE: u64 = 0x08;
/// DEFAULT_PUBLISHER_PRIORITY, for groups whose header omits it.
pub const DEFAULT_PUBLISHER_PRIORITY: u64 = 0x0e;
/// DEFAULT_PUBLISHER_GROUP_ORDER: 1 ascending or 2 descending.
pub const DEFAULT_PUBLISHER_GROUP_ORDER: u64 = 0x22;

/// An object's Timestamp, in the track's (or the object's own) timescale.
pub const OBJECT_TIMESTAMP: u64 = 0x10;
/// The Timestamp id of draft-ietf-moq-loc-03, read only.
pub const OBJECT_TIMESTAMP_LOC03: u64 = 0x06;
/// An object's own Timescale, overriding the track's for that object.
pub const OBJECT_TIMESCALE: u64 = 0x08;

/// The Track Properties block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackProperties {
    /// Non-zero; a zero on the wire reads as absent.
    pub timescale: Option<u64>,
    pub priority: Option<u8>,
    /// Ascending or Descending (Any is not a value here).
    pub group_order: Option<GroupOrder>,
}

impl TrackProperties {
    /// Read the rest of the message as the block (nothing on 14 and 15).
    pub fn decode(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut properties = TrackProperties::default();
        if !draft.reads_track_properties() {
            return Ok(properties);
        }
        let mut reader = PairReader::new(r, draft, Keys::Delta, Extent::ToEnd)?;
        while let Some(key) = reader.key(r)? {
            match (key, reader.value(key, r)?) {
                (TIMESCALE, Value::Varint(v)) => properties.timescale = (v != 0).then_some(v),
                (DEFAULT_PUBLISHER_PRIORITY, Value::Varint(v)) => {
                    properties.priority = Some(
                        u8::try_from(v)
                            .map_err(|_| DecodeError::InvalidValue("publisher priority"))?,
                    );
                }
                (DEFAULT_PUBLISHER_GROUP_ORDER, Value::Varint(v)) => {
                    properties.group_order = Some(match v {
                        1 => GroupOrder::Ascending,
                        2 => GroupOrder::Descending,
                        _ => return Err(DecodeError::InvalidValue("default group order")),
                    });
                }
                _ => {}
            }
        }
        Ok(properties)
    }

    /// Append the block (nothing before draft 17), which must end the message.
    pub fn encode(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        if !draft.writes_track_properties() {
            return Ok(());
        }
        let mut writer = PairWriter::new(draft);
        if let Some(timescale) = self.timescale {
            writer.varint(TIMESCALE, timescale)?;
        }
        if let Some(priority) = self.priority {
            writer.varint(DEFAULT_PUBLISHER_PRIORITY, u64::from(priority))?;
        }
        match self.group_order {
            None => {}
            Some(GroupOrder::Any) => {
                return Err(EncodeError::InvalidValue("a default group order is 1 or 2"))
            }
            Some(order) => writer.varint(DEFAULT_PUBLISHER_GROUP_ORDER, u64::from(order.code()))?,
        }
        writer.finish(w, Keys::Delta, Extent::ToEnd)
    }
}

/// What an object's property block says that moq-net acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectProperties {
    pub timestamp: Option<u64>,
    /// The object's own timescale, overriding the track's.
    pub timescale: Option<u64>,
}

impl ObjectProperties {
    fn keys(draft: Draft) -> Keys {
        if !draft.has_delta_keys() {
            Keys::Absolute
        } else {
            Keys::Delta
        }
    }

    /// Read a block's contents (the whole of `block`).
    pub fn decode(mut block: &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let r = &mut block;
        let mut properties = ObjectProperties::default();
        let mut reader = PairReader::new(r, draft, Self::keys(draft), Extent::ToEnd)?;
        while let Some(key) = reader.key(r)? {
            match (key, reader.value(key, r)?) {
                (OBJECT_TIMESTAMP | OBJECT_TIMESTAMP_LOC03, Value::Varint(v)) => {
                    properties.timestamp = Some(v);
                }
                (OBJECT_TIMESCALE, Value::Varint(v)) => properties.timescale = Some(v),
                _ => {}
            }
        }
        Ok(properties)
    }

    /// A block's contents (without its length).
    pub fn encode(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        let mut writer = PairWriter::new(draft);
        if let Some(timescale) = self.timescale {
            writer.varint(OBJECT_TIMESCALE, timescale)?;
        }
        if let Some(timestamp) = self.timestamp {
            writer.varint(OBJECT_TIMESTAMP, timestamp)?;
        }
        writer.finish(w, Self::keys(draft), Extent::ToEnd)
    }

    /// The block with its length before it, appended to `out`. A timestamp alone (every
    /// object Starling writes) goes straight in, with no buffer between: the same bytes the
    /// general path writes, since a lone key is written whole under either key form.
    pub fn encode_framed(&self, out: &mut BytesMut, draft: Draft) -> Result<(), EncodeError> {
        let flavor = draft.flavor();
        if let (Some(timestamp), None) = (self.timestamp, self.timescale) {
            let len = varint::encoded_len_as(flavor, OBJECT_TIMESTAMP)?
                + varint::encoded_len_as(flavor, timestamp)?;
            varint::encode_as(flavor, len as u64, out)?;
            varint::encode_as(flavor, OBJECT_TIMESTAMP, out)?;
            varint::encode_as(flavor, timestamp, out)?;
            return Ok(());
        }
        let mut block = Vec::new();
        self.encode(&mut block, draft)?;
        varint::encode_as(flavor, block.len() as u64, out)?;
        out.extend_from_slice(&block);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.timestamp.is_none() && self.timescale.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unbuffered path for a lone timestamp writes what the general one does, on every
    /// draft and for timestamps of every varint size.
    #[test]
    fn a_lone_timestamp_framed_directly_matches_the_general_block() {
        for &draft in Draft::ALL {
            for timestamp in [0, 63, 64, 16_383, 16_384, 1 << 30, (1 << 53) - 1] {
                let properties = ObjectProperties {
                    timestamp: Some(timestamp),
                    timescale: None,
                };
                let mut direct = BytesMut::new();
                properties.encode_framed(&mut direct, draft).unwrap();
                let mut block = Vec::new();
                properties.encode(&mut block, draft).unwrap();
                let mut general = Vec::new();
                crate::coding::write_bytes(&mut general, &block, draft).unwrap();
                assert_eq!(direct.as_ref(), general.as_slice(), "{draft:?} {timestamp}");
            }
        }
    }

    /// docs/wire-ietf.md §10.3: SUBSCRIBE_OK's block on draft 22.
    #[test]
    fn track_properties() {
        let properties = TrackProperties {
            timescale: Some(1000),
            priority: Some(128),
            group_order: Some(GroupOrder::Descending),
        };
        let mut out = Vec::new();
        properties.encode(&mut out, Draft::D22).unwrap();
        assert_eq!(out, [0x08, 0x83, 0xe8, 0x06, 0x80, 0x80, 0x14, 0x02]);
        assert_eq!(
            TrackProperties::decode(&mut &out[..], Draft::D22),
            Ok(properties)
        );
        // Not written before 17; read on 16, not on 15.
        let mut none = Vec::new();
        properties.encode(&mut none, Draft::D16).unwrap();
        assert!(none.is_empty());
        let d16 = [0x08, 0x43, 0xe8];
        assert_eq!(
            TrackProperties::decode(&mut &d16[..], Draft::D16)
                .unwrap()
                .timescale,
            Some(1000)
        );
        let mut r = &d16[..];
        assert_eq!(
            TrackProperties::decode(&mut r, Draft::D15),
            Ok(TrackProperties::default())
        );
        assert_eq!(r.len(), 3);
        // Unknown ones skipped, a zero timescale absent, a bad order refused.
        let mixed = [0x03, 0x01, 0xaa, 0x05, 0x00];
        assert_eq!(
            TrackProperties::decode(&mut &mixed[..], Draft::D22),
            Ok(TrackProperties::default())
        );
        assert!(TrackProperties::decode(&mut &[0x22, 0x00][..], Draft::D22).is_err());
    }

    /// §10.4: the timestamp property 1000 on draft 22 and draft 14.
    #[test]
    fn object_properties() {
        let properties = ObjectProperties {
            timestamp: Some(1000),
            timescale: None,
        };
        for (draft, bytes) in [
            (Draft::D22, &[0x10, 0x83, 0xe8][..]),
            (Draft::D14, &[0x10, 0x43, 0xe8]),
        ] {
            let mut out = Vec::new();
            properties.encode(&mut out, draft).unwrap();
            assert_eq!(out, bytes);
            assert_eq!(ObjectProperties::decode(bytes, draft), Ok(properties));
        }
        // The LOC-03 id reads as the timestamp; an object timescale overrides.
        assert_eq!(
            ObjectProperties::decode(&[0x06, 0x05, 0x02, 0x07], Draft::D22),
            Ok(ObjectProperties {
                timestamp: Some(5),
                timescale: Some(7)
            })
        );
    }
}
