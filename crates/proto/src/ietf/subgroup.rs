//! Subgroup streams: the SUBGROUP_HEADER and the objects after it (docs/wire-ietf.md §5.1,
//! §5.2).
//!
//! The header's type is a set of flags over a base: `0x10` (publisher priority present) or
//! `0x30` (absent, inherited), plus `0x01` objects carry properties, `0x02` the subgroup id
//! is the first object's, `0x04` a subgroup id field, `0x08` the FIN ends the group, and
//! from draft 18 `0x40` the stream starts at the subgroup's first object. Each object is an
//! id delta (the first absolute, then `id - prev - 1`), its properties when flagged, and a
//! payload length; an empty object carries a status instead.

use bytes::{BufMut, BytesMut};

use crate::coding::{DecodeError, EncodeError, Wire};
use crate::varint;

use super::cursor::{complete, Cursor};
use super::properties::ObjectProperties;
use super::Draft;

/// The most bytes an object's property block may hold.
pub const MAX_PROPERTIES: usize = 64 * 1024;

mod bit {
    pub const PROPERTIES: u64 = 0x01;
    pub const SUBGROUP_IS_FIRST_OBJECT: u64 = 0x02;
    pub const SUBGROUP_FIELD: u64 = 0x04;
    pub const END_OF_GROUP: u64 = 0x08;
    pub const PRIORITY_BASE: u64 = 0x10;
    pub const NO_PRIORITY_BASE: u64 = 0x30;
    pub const FIRST_OBJECT: u64 = 0x40;
}

/// What a subgroup header's type says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubgroupFlags {
    pub properties: bool,
    /// The subgroup id is the first object's id (no field).
    pub subgroup_is_first_object: bool,
    /// A subgroup id field follows the group.
    pub subgroup_field: bool,
    /// The stream's FIN ends the group.
    pub end_of_group: bool,
    /// A publisher priority byte follows.
    pub priority: bool,
    /// The stream starts at the subgroup's first object (always so before draft 18, which
    /// has no way to say otherwise).
    pub first_object: bool,
}

impl Default for SubgroupFlags {
    /// moq-net's header: priority, properties, end on FIN, from the first object (`0x19`,
    /// `0x59` from 18).
    fn default() -> Self {
        SubgroupFlags {
            properties: true,
            subgroup_is_first_object: false,
            subgroup_field: false,
            end_of_group: true,
            priority: true,
            first_object: true,
        }
    }
}

impl SubgroupFlags {
    /// Whether `code` is a subgroup header type on `draft`.
    pub fn is_subgroup(code: u64, draft: Draft) -> bool {
        Self::from_code(code, draft).is_ok()
    }

    pub fn from_code(code: u64, draft: Draft) -> Result<Self, DecodeError> {
        let (first_object, code) = if draft.has_first_object_bit() {
            (code & bit::FIRST_OBJECT != 0, code & !bit::FIRST_OBJECT)
        } else {
            (true, code)
        };
        let (priority, low) = match code {
            0x10..=0x1D => (true, code - bit::PRIORITY_BASE),
            0x30..=0x3D => (false, code - bit::NO_PRIORITY_BASE),
            _ => return Err(DecodeError::UnknownType(code)),
        };
        let flags = SubgroupFlags {
            properties: low & bit::PROPERTIES != 0,
            subgroup_is_first_object: low & bit::SUBGROUP_IS_FIRST_OBJECT != 0,
            subgroup_field: low & bit::SUBGROUP_FIELD != 0,
            end_of_group: low & bit::END_OF_GROUP != 0,
            priority,
            first_object,
        };
        if flags.subgroup_field && flags.subgroup_is_first_object {
            return Err(DecodeError::InvalidValue(
                "subgroup id both a field and the first object's",
            ));
        }
        Ok(flags)
    }

    pub fn code(&self, draft: Draft) -> Result<u64, EncodeError> {
        if self.subgroup_field && self.subgroup_is_first_object {
            return Err(EncodeError::InvalidValue(
                "subgroup id both a field and the first object's",
            ));
        }
        let mut code = if self.priority {
            bit::PRIORITY_BASE
        } else {
            bit::NO_PRIORITY_BASE
        };
        for (set, b) in [
            (self.properties, bit::PROPERTIES),
            (self.subgroup_is_first_object, bit::SUBGROUP_IS_FIRST_OBJECT),
            (self.subgroup_field, bit::SUBGROUP_FIELD),
            (self.end_of_group, bit::END_OF_GROUP),
            (
                self.first_object && draft.has_first_object_bit(),
                bit::FIRST_OBJECT,
            ),
        ] {
            if set {
                code |= b;
            }
        }
        Ok(code)
    }
}

/// SUBGROUP_HEADER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubgroupHeader {
    pub flags: SubgroupFlags,
    pub track_alias: u64,
    pub group: u64,
    /// 0 when the type carries no field (or names the first object's id).
    pub subgroup: u64,
    /// Wire priority; `None` inherits the track's default (128 when it has none).
    pub priority: Option<u8>,
}

impl SubgroupHeader {
    /// Read a header (its type first) from the front of `buf`: the header and the bytes it
    /// took, `Ok(None)` until it has all arrived.
    pub fn peek(buf: &[u8], draft: Draft) -> Result<Option<(SubgroupHeader, usize)>, DecodeError> {
        let mut c = Cursor::new(buf, draft);
        complete((|| {
            let flags = SubgroupFlags::from_code(c.varint()?, draft)?;
            let track_alias = c.varint()?;
            let group = c.varint()?;
            let subgroup = if flags.subgroup_field { c.varint()? } else { 0 };
            let priority = if flags.priority {
                Some(c.byte()?)
            } else {
                None
            };
            Ok((
                SubgroupHeader {
                    flags,
                    track_alias,
                    group,
                    subgroup,
                    priority,
                },
                c.at,
            ))
        })())
    }

    pub fn encode(&self, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
        let flavor = draft.flavor();
        if !self.flags.subgroup_field && self.subgroup != 0 {
            return Err(EncodeError::InvalidValue(
                "a subgroup id with no field for it",
            ));
        }
        if self.flags.priority != self.priority.is_some() {
            return Err(EncodeError::InvalidValue(
                "a priority exactly when the type says",
            ));
        }
        varint::encode_as(flavor, self.flags.code(draft)?, out)?;
        varint::encode_as(flavor, self.track_alias, out)?;
        varint::encode_as(flavor, self.group, out)?;
        if self.flags.subgroup_field {
            varint::encode_as(flavor, self.subgroup, out)?;
        }
        if let Some(priority) = self.priority {
            out.put_u8(priority);
        }
        Ok(())
    }
}

/// Object statuses (an empty object's).
pub mod status {
    pub const NORMAL: u64 = 0x0;
    pub const DOES_NOT_EXIST: u64 = 0x1;
    pub const END_OF_GROUP: u64 = 0x3;
    pub const END_OF_TRACK: u64 = 0x4;
}

/// One object's header on a subgroup stream; its payload (`length` bytes) follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectHeader {
    /// The first object's absolute id, then `id - prev - 1`.
    pub id_delta: u64,
    /// When the stream's type says objects carry properties.
    pub properties: Option<ObjectProperties>,
    pub length: u64,
    /// An empty object's status (`Some` exactly when `length` is 0).
    pub status: Option<u64>,
}

impl ObjectHeader {
    /// Read an object header from the front of `buf`; `with_properties` from the stream's
    /// header; a payload over `max_payload` is refused as soon as its length is read.
    pub fn peek(
        buf: &[u8],
        draft: Draft,
        with_properties: bool,
        max_payload: u64,
    ) -> Result<Option<(ObjectHeader, usize)>, DecodeError> {
        let mut c = Cursor::new(buf, draft);
        complete((|| {
            let id_delta = c.varint()?;
            let properties = if with_properties {
                Some(ObjectProperties::decode(c.bytes(MAX_PROPERTIES)?, draft)?)
            } else {
                None
            };
            let length = c.varint()?;
            if length > max_payload {
                return Err(DecodeError::FrameTooLarge {
                    size: length,
                    max: max_payload,
                }
                .into());
            }
            let status = if length == 0 { Some(c.varint()?) } else { None };
            Ok((
                ObjectHeader {
                    id_delta,
                    properties,
                    length,
                    status,
                },
                c.at,
            ))
        })())
    }

    pub fn encode(&self, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
        let flavor = draft.flavor();
        varint::encode_as(flavor, self.id_delta, out)?;
        if let Some(properties) = &self.properties {
            properties.encode_framed(out, draft)?;
        }
        varint::encode_as(flavor, self.length, out)?;
        match (self.length, self.status) {
            (0, Some(status)) => varint::encode_as(flavor, status, out)?,
            (0, None) => varint::encode_as(flavor, status::NORMAL, out)?,
            (_, None) => {}
            (_, Some(_)) => {
                return Err(EncodeError::InvalidValue(
                    "a status on an object with a payload",
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SubgroupHeader {
        SubgroupHeader {
            flags: SubgroupFlags::default(),
            track_alias: 4,
            group: 7,
            subgroup: 0,
            priority: Some(0x80),
        }
    }

    fn object(ts: u64, payload: &[u8], draft: Draft, out: &mut BytesMut) {
        ObjectHeader {
            id_delta: 0,
            properties: Some(ObjectProperties {
                timestamp: Some(ts),
                timescale: None,
            }),
            length: payload.len() as u64,
            status: None,
        }
        .encode(draft, out)
        .unwrap();
        out.extend_from_slice(payload);
    }

    /// docs/wire-ietf.md §10.4: two objects on draft 22 and draft 14.
    #[test]
    fn worked_stream() {
        for (draft, expected) in [
            (
                Draft::D22,
                "59 04 07 80 00 03 10 83 e8 02 61 62 00 03 10 84 09 02 63 64",
            ),
            (
                Draft::D14,
                "19 04 07 80 00 03 10 43 e8 02 61 62 00 03 10 44 09 02 63 64",
            ),
        ] {
            let mut out = BytesMut::new();
            header().encode(draft, &mut out).unwrap();
            object(1000, b"ab", draft, &mut out);
            object(1033, b"cd", draft, &mut out);
            let hex: Vec<String> = out.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex.join(" "), expected);

            let (h, mut at) = SubgroupHeader::peek(&out, draft).unwrap().unwrap();
            assert_eq!(h, header());
            for (ts, payload) in [(1000, b"ab"), (1033, b"cd")] {
                let (o, n) = ObjectHeader::peek(&out[at..], draft, true, 1 << 20)
                    .unwrap()
                    .unwrap();
                assert_eq!(o.properties.unwrap().timestamp, Some(ts));
                at += n;
                assert_eq!(&out[at..at + o.length as usize], payload);
                at += o.length as usize;
            }
            assert_eq!(at, out.len());
            // Every prefix is incomplete, never an error.
            for cut in 0..4 {
                assert_eq!(SubgroupHeader::peek(&out[..cut], draft), Ok(None));
            }
        }
    }

    /// §10.5: the END_OF_TRACK stream.
    #[test]
    fn end_of_track() {
        let draft = Draft::D22;
        let mut out = BytesMut::new();
        SubgroupHeader {
            flags: SubgroupFlags {
                properties: false,
                ..Default::default()
            },
            group: 9,
            ..header()
        }
        .encode(draft, &mut out)
        .unwrap();
        ObjectHeader {
            status: Some(status::END_OF_TRACK),
            ..Default::default()
        }
        .encode(draft, &mut out)
        .unwrap();
        assert_eq!(&out[..], &[0x58, 0x04, 0x09, 0x80, 0x00, 0x00, 0x04]);
        let (o, _) = ObjectHeader::peek(&out[4..], draft, false, 0)
            .unwrap()
            .unwrap();
        assert_eq!(o.status, Some(status::END_OF_TRACK));
    }

    #[test]
    fn types_by_draft() {
        // 0x59 is a subgroup type from 18 only; the 0x30 range on every draft.
        assert!(SubgroupFlags::from_code(0x59, Draft::D17).is_err());
        assert!(
            SubgroupFlags::from_code(0x59, Draft::D18)
                .unwrap()
                .first_object
        );
        assert!(
            !SubgroupFlags::from_code(0x19, Draft::D18)
                .unwrap()
                .first_object
        );
        assert!(
            SubgroupFlags::from_code(0x19, Draft::D17)
                .unwrap()
                .first_object
        );
        assert!(!SubgroupFlags::from_code(0x38, Draft::D14).unwrap().priority);
        // A subgroup field and first-object id together, and types outside the ranges.
        assert!(SubgroupFlags::from_code(0x16, Draft::D22).is_err());
        for code in [0x0F, 0x1E, 0x2F, 0x3E, 0x05] {
            assert!(
                SubgroupFlags::from_code(code, Draft::D22).is_err(),
                "{code:#x}"
            );
        }
        // A header without priority reads none; one with a subgroup field reads it.
        let (h, n) = SubgroupHeader::peek(&[0x3C, 1, 2, 3], Draft::D16)
            .unwrap()
            .unwrap();
        assert_eq!((h.priority, h.subgroup, n), (None, 3, 4));
        assert_eq!(h.flags.code(Draft::D16).unwrap(), 0x3C);
    }

    #[test]
    fn bounds() {
        // A properties block over 64 KiB is refused as soon as its length is read.
        let mut big = BytesMut::new();
        varint::encode_as(Draft::D16.flavor(), 0, &mut big).unwrap();
        varint::encode_as(Draft::D16.flavor(), (MAX_PROPERTIES + 1) as u64, &mut big).unwrap();
        assert!(ObjectHeader::peek(&big, Draft::D16, true, 1 << 20).is_err());
        // A payload over the limit likewise.
        assert!(ObjectHeader::peek(&[0, 0x80, 0x10, 0, 0], Draft::D16, false, 1000).is_err());
    }
}
