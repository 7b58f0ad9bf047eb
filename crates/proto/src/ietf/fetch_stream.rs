//! FETCH streams: `0x05 | Request ID`, then objects (docs/wire-ietf.md §5.3).
//!
//! Draft 14 writes every field of every object. From 15 each object starts with flags
//! saying which fields it carries, the rest inherited from the object before: the low two
//! bits the subgroup (0 zero, 1 the prior one, 2 the prior plus one, 3 a field), `0x04` an
//! object id, `0x08` a group id (a delta from the prior group from 18), `0x10` a priority,
//! `0x20` properties, `0x40` an object that travelled as a datagram. Flags `0x8C`, `0x10C`
//! and `0x20C` end the range early instead. Empty objects carry a status on 14 and 15 only.

use bytes::{BufMut, BytesMut};

use crate::coding::{write_bytes, DecodeError, EncodeError, Wire};
use crate::varint;

use super::cursor::{complete, Cursor, Need};
use super::properties::ObjectProperties;
use super::subgroup::MAX_PROPERTIES;
use super::Draft;

/// The FETCH stream type.
pub const FETCH_HEADER: u64 = 0x05;

/// `0x05 | Request ID`: the FETCH this stream answers (on 20 and later, a fill names the
/// SUBSCRIBE's).
pub fn peek_header(buf: &[u8], draft: Draft) -> Result<Option<(u64, usize)>, DecodeError> {
    let mut c = Cursor::new(buf, draft);
    complete((|| {
        if c.varint()? != FETCH_HEADER {
            return Err(Need::Bad(DecodeError::UnknownType(FETCH_HEADER)));
        }
        Ok((c.varint()?, c.at))
    })())
}

pub fn encode_header(request_id: u64, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
    varint::encode_as(draft.flavor(), FETCH_HEADER, out)?;
    Ok(varint::encode_as(draft.flavor(), request_id, out)?)
}

/// Which subgroup an object is in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FetchSubgroup {
    #[default]
    Zero,
    Prior,
    PriorPlusOne,
    Explicit(u64),
    /// The object travelled as a datagram.
    Datagram,
}

/// One object's header on a fetch stream; its payload (`length` bytes) follows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchObject {
    pub subgroup: FetchSubgroup,
    /// `None` inherits the prior object's group. From 18 a present value is a delta from the
    /// prior group (minus one) except on the first object.
    pub group: Option<u64>,
    /// `None` is the prior object's id plus one.
    pub object: Option<u64>,
    pub priority: Option<u8>,
    pub properties: Option<ObjectProperties>,
    pub length: u64,
    /// An empty object's status, on 14 and 15.
    pub status: Option<u64>,
}

/// What a fetch stream carries next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchEntry {
    Object(FetchObject),
    /// The range ends early: `reason` is the flags value (`0x8C` does not exist, `0x10C`
    /// unknown, `0x20C` timed out).
    EndOfRange {
        reason: u64,
        group: u64,
        object: u64,
    },
}

mod flag {
    pub const SUBGROUP: u64 = 0x03;
    pub const OBJECT: u64 = 0x04;
    pub const GROUP: u64 = 0x08;
    pub const PRIORITY: u64 = 0x10;
    pub const PROPERTIES: u64 = 0x20;
    pub const DATAGRAM: u64 = 0x40;
    pub const END_OF_RANGE: [u64; 3] = [0x8C, 0x10C, 0x20C];
}

impl FetchEntry {
    /// Read the next entry; a payload over `max_payload` is refused once its length is read.
    pub fn peek(
        buf: &[u8],
        draft: Draft,
        max_payload: u64,
    ) -> Result<Option<(FetchEntry, usize)>, DecodeError> {
        let mut c = Cursor::new(buf, draft);
        complete((|| {
            let entry = if draft.has_inline_fields() {
                let group = c.varint()?;
                let subgroup = FetchSubgroup::Explicit(c.varint()?);
                let object = c.varint()?;
                let priority = c.byte()?;
                let properties = ObjectProperties::decode(c.bytes(MAX_PROPERTIES)?, draft)?;
                FetchEntry::Object(FetchObject {
                    subgroup,
                    group: Some(group),
                    object: Some(object),
                    priority: Some(priority),
                    properties: Some(properties),
                    ..Default::default()
                })
            } else {
                let flags = c.varint()?;
                if flags >= 0x80 {
                    if !flag::END_OF_RANGE.contains(&flags) {
                        return Err(DecodeError::InvalidValue("fetch object flags").into());
                    }
                    return Ok((
                        FetchEntry::EndOfRange {
                            reason: flags,
                            group: c.varint()?,
                            object: c.varint()?,
                        },
                        c.at,
                    ));
                }
                let group = if flags & flag::GROUP != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                let subgroup = if flags & flag::DATAGRAM != 0 {
                    FetchSubgroup::Datagram
                } else {
                    match flags & flag::SUBGROUP {
                        0 => FetchSubgroup::Zero,
                        1 => FetchSubgroup::Prior,
                        2 => FetchSubgroup::PriorPlusOne,
                        _ => FetchSubgroup::Explicit(c.varint()?),
                    }
                };
                let object = if flags & flag::OBJECT != 0 {
                    Some(c.varint()?)
                } else {
                    None
                };
                let priority = if flags & flag::PRIORITY != 0 {
                    Some(c.byte()?)
                } else {
                    None
                };
                let properties = if flags & flag::PROPERTIES != 0 {
                    Some(ObjectProperties::decode(c.bytes(MAX_PROPERTIES)?, draft)?)
                } else {
                    None
                };
                FetchEntry::Object(FetchObject {
                    subgroup,
                    group,
                    object,
                    priority,
                    properties,
                    ..Default::default()
                })
            };
            let FetchEntry::Object(mut object) = entry else {
                unreachable!("end of range returned above")
            };
            object.length = c.varint()?;
            if object.length > max_payload {
                return Err(DecodeError::FrameTooLarge {
                    size: object.length,
                    max: max_payload,
                }
                .into());
            }
            if object.length == 0 && draft.has_fetch_object_status() {
                object.status = Some(c.varint()?);
            }
            Ok((FetchEntry::Object(object), c.at))
        })())
    }

    pub fn encode(&self, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
        let flavor = draft.flavor();
        let put = |v: u64, out: &mut BytesMut| varint::encode_as(flavor, v, out);
        let object = match self {
            FetchEntry::EndOfRange {
                reason,
                group,
                object,
            } => {
                if draft.has_inline_fields() || !flag::END_OF_RANGE.contains(reason) {
                    return Err(EncodeError::InvalidValue("end of range"));
                }
                put(*reason, out)?;
                put(*group, out)?;
                return Ok(put(*object, out)?);
            }
            FetchEntry::Object(object) => object,
        };
        let properties = match &object.properties {
            Some(properties) => {
                let mut block = Vec::new();
                properties.encode(&mut block, draft)?;
                let mut framed = Vec::new();
                write_bytes(&mut framed, &block, draft)?;
                Some(framed)
            }
            None => None,
        };
        if draft.has_inline_fields() {
            let subgroup = match object.subgroup {
                FetchSubgroup::Zero => 0,
                FetchSubgroup::Explicit(subgroup) => subgroup,
                _ => {
                    return Err(EncodeError::InvalidValue(
                        "draft 14 writes every object field",
                    ))
                }
            };
            let (Some(group), Some(id), Some(priority)) =
                (object.group, object.object, object.priority)
            else {
                return Err(EncodeError::InvalidValue(
                    "draft 14 writes every object field",
                ));
            };
            put(group, out)?;
            put(subgroup, out)?;
            put(id, out)?;
            out.put_u8(priority);
            out.extend_from_slice(properties.as_deref().unwrap_or(&[0]));
        } else {
            let mut flags = match object.subgroup {
                FetchSubgroup::Zero => 0,
                FetchSubgroup::Prior => 1,
                FetchSubgroup::PriorPlusOne => 2,
                FetchSubgroup::Explicit(_) => 3,
                FetchSubgroup::Datagram => flag::DATAGRAM,
            };
            for (set, f) in [
                (object.group.is_some(), flag::GROUP),
                (object.object.is_some(), flag::OBJECT),
                (object.priority.is_some(), flag::PRIORITY),
                (properties.is_some(), flag::PROPERTIES),
            ] {
                if set {
                    flags |= f;
                }
            }
            put(flags, out)?;
            if let Some(group) = object.group {
                put(group, out)?;
            }
            if let FetchSubgroup::Explicit(subgroup) = object.subgroup {
                put(subgroup, out)?;
            }
            if let Some(id) = object.object {
                put(id, out)?;
            }
            if let Some(priority) = object.priority {
                out.put_u8(priority);
            }
            if let Some(properties) = &properties {
                out.extend_from_slice(properties);
            }
        }
        put(object.length, out)?;
        if object.length == 0 && draft.has_fetch_object_status() {
            put(object.status.unwrap_or(0), out)?;
        } else if object.status.is_some() {
            return Err(EncodeError::InvalidValue("a status on this object"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/wire-ietf.md §10.5: a fill stream for request 6, group 7, two objects.
    #[test]
    fn worked_fill() {
        let draft = Draft::D22;
        let mut out = BytesMut::new();
        encode_header(6, draft, &mut out).unwrap();
        let first = FetchObject {
            group: Some(7),
            object: Some(0),
            priority: Some(0),
            properties: Some(ObjectProperties {
                timestamp: Some(1000),
                timescale: None,
            }),
            length: 2,
            ..Default::default()
        };
        FetchEntry::Object(first.clone())
            .encode(draft, &mut out)
            .unwrap();
        out.extend_from_slice(b"ab");
        let second = FetchObject {
            properties: Some(ObjectProperties {
                timestamp: Some(1033),
                timescale: None,
            }),
            length: 2,
            ..Default::default()
        };
        FetchEntry::Object(second.clone())
            .encode(draft, &mut out)
            .unwrap();
        out.extend_from_slice(b"cd");
        let hex: Vec<String> = out.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex.join(" "),
            "05 06 3c 07 00 00 03 10 83 e8 02 61 62 20 03 10 84 09 02 63 64"
        );

        let (id, mut at) = peek_header(&out, draft).unwrap().unwrap();
        assert_eq!(id, 6);
        for expected in [first, second] {
            let (entry, n) = FetchEntry::peek(&out[at..], draft, 1 << 20)
                .unwrap()
                .unwrap();
            assert_eq!(entry, FetchEntry::Object(expected));
            at += n + 2;
        }
        assert_eq!(at, out.len());
    }

    #[test]
    fn draft14_and_end_of_range() {
        let object = FetchObject {
            subgroup: FetchSubgroup::Explicit(0),
            group: Some(7),
            object: Some(3),
            priority: Some(0x80),
            properties: Some(ObjectProperties::default()),
            length: 0,
            status: Some(0),
        };
        let mut out = BytesMut::new();
        FetchEntry::Object(object.clone())
            .encode(Draft::D14, &mut out)
            .unwrap();
        assert_eq!(&out[..], &[7, 0, 3, 0x80, 0, 0, 0]);
        assert_eq!(
            FetchEntry::peek(&out, Draft::D14, 10).unwrap(),
            Some((FetchEntry::Object(object), 7))
        );

        let end = FetchEntry::EndOfRange {
            reason: 0x8C,
            group: 9,
            object: 0,
        };
        let mut out = BytesMut::new();
        end.encode(Draft::D16, &mut out).unwrap();
        assert_eq!(
            FetchEntry::peek(&out, Draft::D16, 10).unwrap(),
            Some((end, out.len()))
        );
        // Other flags at or above 0x80 are refused; a truncated entry waits.
        assert!(FetchEntry::peek(&[0x40, 0x90, 0, 0], Draft::D16, 10).is_err());
        assert_eq!(FetchEntry::peek(&[0x1C, 7], Draft::D16, 10), Ok(None));
    }
}
