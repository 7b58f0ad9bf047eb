//! FETCH (`0x16`) and FETCH_OK (`0x18`) (docs/wire-ietf.md §4.12).
//!
//! Before draft 20 a FETCH is standalone (a track and a range) or joins a subscription on
//! the same session (relative: groups back from its start; absolute: from a group). From 20
//! it always names a track, and the range is a LOCATION_FILTER whose end is inclusive.

use crate::coding::{
    read_bool, read_u8, read_varint, write_bool, write_u8, write_varint, DecodeError, EncodeError,
};
use crate::path::Path;

use super::fields::{
    read_name, read_namespace, read_reply_id, read_request_id, write_name, write_namespace,
    write_reply_id, write_request_id, GroupOrder,
};
use super::filter::{Filter, Location};
use super::params::{key, ParamReader, ParamWriter};
use super::properties::TrackProperties;
use super::subscribe::{skip_params, DEFAULT_PRIORITY};
use super::Draft;

/// What a FETCH asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchKind {
    /// Type 1 (before 20): `start` to `end`, where an end object of 0 takes the whole end
    /// group and any other is exclusive.
    Standalone {
        namespace: Path,
        track: String,
        start: Location,
        end: Location,
    },
    /// Type 2 (before 20): the head of subscription `joining`, from `offset` groups before
    /// its start (moq-net sends 0).
    RelativeJoining { joining: u64, offset: u64 },
    /// Type 3 (before 20): the head of subscription `joining`, from group `group`.
    AbsoluteJoining { joining: u64, group: u64 },
    /// Draft 20 on: a track and a filter (inclusive end).
    Filtered {
        namespace: Path,
        track: String,
        filter: Filter,
    },
}

/// FETCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    pub request_id: u64,
    /// Wire priority.
    pub priority: u8,
    /// `Any` when absent.
    pub group_order: GroupOrder,
    pub kind: FetchKind,
    /// The request carried a Range Filter (19 on).
    pub range_filters: bool,
    /// FILL_TIMEOUT (18 on), which Starling refuses as moq-net does.
    pub fill_timeout: Option<u64>,
}

const STANDALONE: u64 = 1;
const RELATIVE_JOINING: u64 = 2;
const ABSOLUTE_JOINING: u64 = 3;

impl Fetch {
    fn decode_kind(r: &mut &[u8], draft: Draft) -> Result<FetchKind, DecodeError> {
        Ok(match read_varint(r, draft)? {
            STANDALONE => FetchKind::Standalone {
                namespace: read_namespace(r, draft)?,
                track: read_name(r, draft)?,
                start: Location::decode(r, draft)?,
                end: Location::decode(r, draft)?,
            },
            RELATIVE_JOINING => FetchKind::RelativeJoining {
                joining: read_varint(r, draft)?,
                offset: read_varint(r, draft)?,
            },
            ABSOLUTE_JOINING => FetchKind::AbsoluteJoining {
                joining: read_varint(r, draft)?,
                group: read_varint(r, draft)?,
            },
            _ => return Err(DecodeError::InvalidValue("fetch type")),
        })
    }

    fn encode_kind(kind: &FetchKind, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        match kind {
            FetchKind::Standalone {
                namespace,
                track,
                start,
                end,
            } => {
                write_varint(w, STANDALONE, draft)?;
                write_namespace(w, namespace, draft)?;
                write_name(w, track, draft)?;
                start.encode(w, draft)?;
                end.encode(w, draft)
            }
            FetchKind::RelativeJoining { joining, offset } => {
                write_varint(w, RELATIVE_JOINING, draft)?;
                write_varint(w, *joining, draft)?;
                write_varint(w, *offset, draft)
            }
            FetchKind::AbsoluteJoining { joining, group } => {
                write_varint(w, ABSOLUTE_JOINING, draft)?;
                write_varint(w, *joining, draft)?;
                write_varint(w, *group, draft)
            }
            FetchKind::Filtered { .. } => {
                Err(EncodeError::InvalidValue("a filtered FETCH needs draft 20"))
            }
        }
    }

    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_request_id(r, draft)?;
        if draft.has_inline_fields() {
            let priority = read_u8(r)?;
            let group_order = GroupOrder::read(r)?;
            let kind = Self::decode_kind(r, draft)?;
            skip_params(r, draft)?;
            return Ok(Fetch {
                request_id,
                priority,
                group_order,
                kind,
                range_filters: false,
                fill_timeout: None,
            });
        }
        let mut kind = if draft.has_fill() {
            FetchKind::Filtered {
                namespace: read_namespace(r, draft)?,
                track: read_name(r, draft)?,
                filter: Filter::Unfiltered,
            }
        } else {
            Self::decode_kind(r, draft)?
        };
        let mut msg = Fetch {
            request_id,
            priority: DEFAULT_PRIORITY,
            group_order: GroupOrder::Any,
            kind: FetchKind::RelativeJoining {
                joining: 0,
                offset: 0,
            },
            range_filters: false,
            fill_timeout: None,
        };
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::AUTHORIZATION_TOKEN => {
                    params.bytes(k, r)?;
                }
                key::FILL_TIMEOUT if draft.has_first_object_bit() => {
                    msg.fill_timeout = Some(params.varint(k, r)?)
                }
                key::SUBSCRIBER_PRIORITY => msg.priority = params.byte(k, r)?,
                key::LOCATION_FILTER if draft.has_fill() => {
                    let filter = params.filter(k, r)?;
                    if let FetchKind::Filtered { filter: slot, .. } = &mut kind {
                        *slot = filter;
                    }
                }
                key::GROUP_ORDER => msg.group_order = GroupOrder::from_param(params.byte(k, r)?),
                key::SUBGROUP_FILTER..=key::OBJECT_PROPERTY_FILTER if draft.has_range_filters() => {
                    params.bytes(k, r)?;
                    msg.range_filters = true;
                }
                key::INCLUDE_PROPERTIES if draft.has_fill() => {
                    params.flag(k, r)?;
                }
                _ => params.unknown(k, r)?,
            }
        }
        msg.kind = kind;
        Ok(msg)
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_request_id(w, self.request_id, draft)?;
        if draft.has_inline_fields() {
            write_u8(w, self.priority);
            self.group_order.write(w);
            Self::encode_kind(&self.kind, w, draft)?;
            return write_varint(w, 0, draft);
        }
        let mut params = ParamWriter::new(draft);
        match (&self.kind, draft.has_fill()) {
            (
                FetchKind::Filtered {
                    namespace,
                    track,
                    filter,
                },
                true,
            ) => {
                write_namespace(w, namespace, draft)?;
                write_name(w, track, draft)?;
                if *filter != Filter::Unfiltered {
                    params.filter(key::LOCATION_FILTER, *filter)?;
                }
            }
            (_, true) => {
                return Err(EncodeError::InvalidValue(
                    "from draft 20 a FETCH names its track",
                ))
            }
            (kind, false) => Self::encode_kind(kind, w, draft)?,
        }
        params.byte(key::SUBSCRIBER_PRIORITY, self.priority)?;
        if self.group_order != GroupOrder::Any {
            params.byte(key::GROUP_ORDER, self.group_order.code())?;
        }
        if let Some(timeout) = self.fill_timeout.filter(|_| draft.has_first_object_bit()) {
            params.varint(key::FILL_TIMEOUT, timeout)?;
        }
        if self.range_filters && draft.has_range_filters() {
            params.bytes(key::SUBGROUP_FILTER, &[])?;
        }
        params.finish(w)
    }
}

/// FETCH_OK.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchOk {
    /// On the wire on 14-16.
    pub request_id: u64,
    pub group_order: GroupOrder,
    /// The range reaches the end of the track.
    pub end_of_track: bool,
    /// Exclusive before 20, inclusive from 20.
    pub end: Location,
    pub properties: TrackProperties,
}

impl FetchOk {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_reply_id(r, draft)?;
        if draft.has_inline_fields() {
            let group_order = GroupOrder::read(r)?;
            let end_of_track = read_bool(r)?;
            let end = Location::decode(r, draft)?;
            skip_params(r, draft)?;
            return Ok(FetchOk {
                request_id,
                group_order,
                end_of_track,
                end,
                properties: TrackProperties::default(),
            });
        }
        let end_of_track = read_bool(r)?;
        let end = Location::decode(r, draft)?;
        let mut group_order = GroupOrder::Descending;
        let mut params = ParamReader::new(r, draft)?;
        while let Some(k) = params.key(r)? {
            match k {
                key::GROUP_ORDER => group_order = GroupOrder::from_param(params.byte(k, r)?),
                _ => params.unknown(k, r)?,
            }
        }
        Ok(FetchOk {
            request_id,
            group_order,
            end_of_track,
            end,
            properties: TrackProperties::decode(r, draft)?,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(w, self.request_id, draft)?;
        if draft.has_inline_fields() {
            self.group_order.write(w);
            write_bool(w, self.end_of_track);
            self.end.encode(w, draft)?;
            return write_varint(w, 0, draft);
        }
        write_bool(w, self.end_of_track);
        self.end.encode(w, draft)?;
        let mut params = ParamWriter::new(draft);
        if self.group_order == GroupOrder::Ascending {
            params.byte(key::GROUP_ORDER, self.group_order.code())?;
        }
        params.finish(w)?;
        self.properties.encode(w, draft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(fetch: &Fetch, draft: Draft) -> Vec<u8> {
        let mut out = Vec::new();
        fetch.encode_body(&mut out, draft).unwrap();
        assert_eq!(
            &Fetch::decode_body(&mut &out[..], draft).unwrap(),
            fetch,
            "{draft}"
        );
        out
    }

    #[test]
    fn kinds_by_draft() {
        let joining = Fetch {
            request_id: 6,
            priority: 128,
            group_order: GroupOrder::Ascending,
            kind: FetchKind::RelativeJoining {
                joining: 4,
                offset: 0,
            },
            range_filters: false,
            fill_timeout: None,
        };
        assert_eq!(round_trip(&joining, Draft::D14), [6, 0x80, 1, 2, 4, 0, 0]);
        round_trip(&joining, Draft::D17);
        let group = Fetch {
            kind: FetchKind::Standalone {
                namespace: Path::new("bbb").unwrap(),
                track: "video".into(),
                start: Location {
                    group: 7,
                    object: 0,
                },
                end: Location {
                    group: 7,
                    object: 0,
                },
            },
            ..joining.clone()
        };
        round_trip(&group, Draft::D15);
        assert!(group.encode_body(&mut Vec::new(), Draft::D20).is_err());
        let filtered = Fetch {
            kind: FetchKind::Filtered {
                namespace: Path::new("bbb").unwrap(),
                track: "video".into(),
                filter: Filter::Absolute {
                    start: Location {
                        group: 7,
                        object: 0,
                    },
                    end: Some(super::super::EndLocation {
                        group: 7,
                        object: None,
                    }),
                },
            },
            fill_timeout: Some(5),
            ..joining
        };
        round_trip(&filtered, Draft::D20);
        round_trip(&filtered, Draft::D22);
        // An unknown fetch type.
        assert!(Fetch::decode_body(&mut &[6, 4, 0, 0][..], Draft::D16).is_err());
    }

    #[test]
    fn fetch_ok() {
        let ok = FetchOk {
            request_id: 6,
            group_order: GroupOrder::Descending,
            end_of_track: true,
            end: Location {
                group: 7,
                object: 2,
            },
            properties: TrackProperties::default(),
        };
        for draft in [Draft::D14, Draft::D16, Draft::D22] {
            let mut out = Vec::new();
            ok.encode_body(&mut out, draft).unwrap();
            let back = FetchOk::decode_body(&mut &out[..], draft).unwrap();
            assert_eq!(back.end, ok.end);
            assert!(back.end_of_track);
        }
        let mut out = Vec::new();
        ok.encode_body(&mut out, Draft::D22).unwrap();
        assert_eq!(out, [1, 7, 2, 0]);
    }
}
