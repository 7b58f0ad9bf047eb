//! The subscribe stream (bidi 0x2): SUBSCRIBE, SUBSCRIBE_UPDATE and the typed responses
//! SUBSCRIBE_START / END / DROP (docs/wire.md §4.6, §4.7).
//!
//! Start and end are held version-neutrally and translated per version:
//!
//! | field | meaning | lite-05 wire | lite-06 wire |
//! |---|---|---|---|
//! | `group_start: None` | no floor (06) / latest group (05) | `0` | `0` |
//! | `group_start: Some(n)` | floor / first group `n` | `n+1` | `n` (raw) |
//! | `group_end` | inclusive last group, `None` = open | `OptGroup` | `OptGroup` |
//! | `frame_start` | first frame in the start group, 0 = whole group | refused if ≠ 0 | raw |
//! | `frame_end` | inclusive last frame in the end group, `None` = whole | refused if set | `OptGroup` |
//!
//! On 06, `Some(0)` with `frame_start == 0` puts the same bytes on the wire as `None` and
//! decodes as `None` (moq-net's canonical form); group 0 is named only when a non-zero
//! `frame_start` qualifies it. A frame bound without the group bound it qualifies is
//! `InvalidSubscribeLocation` on both sides.

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::{Message, TypedMessage};
use crate::path::Path;
use crate::version::Version;

/// SUBSCRIBE: `Subscribe ID(i), Broadcast Path(s), Track Name(s), Priority(8),
/// [Ordered(8)=0 on 05], Max Age(i), Group Start, Group End, [Frame Start, Frame End on 06]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscribe {
    pub id: u64,
    pub broadcast: Path,
    pub track: String,
    /// Subscriber priority; higher is more urgent.
    pub priority: u8,
    /// Max Age in ms (called max latency on 05). On 06, 0 = the live edge.
    pub max_age_ms: u64,
    pub group_start: Option<u64>,
    pub group_end: Option<u64>,
    pub frame_start: u64,
    pub frame_end: Option<u64>,
}

/// SUBSCRIBE_UPDATE: the same tail as SUBSCRIBE, replacing priority, max age and bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscribeUpdate {
    pub priority: u8,
    pub max_age_ms: u64,
    pub group_start: Option<u64>,
    pub group_end: Option<u64>,
    pub frame_start: u64,
    pub frame_end: Option<u64>,
}

/// The shared tail `Priority(8), [Ordered(8)], Max Age(i), bounds…`.
struct Tail {
    priority: u8,
    max_age_ms: u64,
    group_start: Option<u64>,
    group_end: Option<u64>,
    frame_start: u64,
    frame_end: Option<u64>,
}

impl Tail {
    fn encode(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if (self.frame_end.is_some() && self.group_end.is_none())
            || (self.frame_start != 0 && self.group_start.is_none())
        {
            return Err(EncodeError::InvalidSubscribeLocation);
        }
        if !version.has_frame_bounds() && (self.frame_start != 0 || self.frame_end.is_some()) {
            return Err(EncodeError::FrameBoundsUnsupported);
        }
        coding::write_u8(w, self.priority);
        if !version.carries_max_age() {
            // 01/02 end at the priority: the bounds and max age stay behind, as moq-net does.
            return Ok(());
        }
        if version.has_group_order() {
            coding::write_u8(w, 0);
        }
        coding::write_varint(w, self.max_age_ms, version)?;
        if version.resolves_start() {
            coding::write_varint(w, self.group_start.unwrap_or(0), version)?;
        } else {
            coding::write_opt(w, self.group_start, version)?;
        }
        coding::write_opt(w, self.group_end, version)?;
        if version.has_frame_bounds() {
            coding::write_varint(w, self.frame_start, version)?;
            coding::write_opt(w, self.frame_end, version)?;
        }
        Ok(())
    }

    fn decode(r: &mut &[u8], version: Version) -> Result<Tail, DecodeError> {
        let priority = coding::read_u8(r)?;
        if !version.carries_max_age() {
            return Ok(Tail {
                priority,
                max_age_ms: 0,
                group_start: None,
                group_end: None,
                frame_start: 0,
                frame_end: None,
            });
        }
        if version.has_group_order() {
            coding::read_u8(r)?; // retired Ordered byte, ignored
        }
        let max_age_ms = coding::read_varint(r, version)?;
        let group_start = if version.resolves_start() {
            Some(coding::read_varint(r, version)?)
        } else {
            coding::read_opt(r, version)?
        };
        let group_end = coding::read_opt(r, version)?;
        let (frame_start, frame_end) = if version.has_frame_bounds() {
            (
                coding::read_varint(r, version)?,
                coding::read_opt(r, version)?,
            )
        } else {
            (0, None)
        };
        if (frame_end.is_some() && group_end.is_none())
            || (frame_start != 0 && group_start.is_none())
        {
            return Err(DecodeError::InvalidSubscribeLocation);
        }
        let group_start = match group_start {
            Some(0) if version.resolves_start() && frame_start == 0 => None,
            other => other,
        };
        Ok(Tail {
            priority,
            max_age_ms,
            group_start,
            group_end,
            frame_start,
            frame_end,
        })
    }
}

impl Message for Subscribe {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        coding::write_varint(w, self.id, version)?;
        self.broadcast.encode(w, version)?;
        coding::write_str(w, &self.track, version)?;
        Tail {
            priority: self.priority,
            max_age_ms: self.max_age_ms,
            group_start: self.group_start,
            group_end: self.group_end,
            frame_start: self.frame_start,
            frame_end: self.frame_end,
        }
        .encode(w, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        let id = coding::read_varint(r, version)?;
        let broadcast = Path::decode(r, version)?;
        let track = coding::read_str(r, version)?.to_string();
        let t = Tail::decode(r, version)?;
        Ok(Subscribe {
            id,
            broadcast,
            track,
            priority: t.priority,
            max_age_ms: t.max_age_ms,
            group_start: t.group_start,
            group_end: t.group_end,
            frame_start: t.frame_start,
            frame_end: t.frame_end,
        })
    }
}

impl Message for SubscribeUpdate {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_subscribe_update() {
            return Err(EncodeError::Unsupported);
        }
        Tail {
            priority: self.priority,
            max_age_ms: self.max_age_ms,
            group_start: self.group_start,
            group_end: self.group_end,
            frame_start: self.frame_start,
            frame_end: self.frame_end,
        }
        .encode(w, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_subscribe_update() {
            return Err(DecodeError::Unsupported);
        }
        let t = Tail::decode(r, version)?;
        Ok(SubscribeUpdate {
            priority: t.priority,
            max_age_ms: t.max_age_ms,
            group_start: t.group_start,
            group_end: t.group_end,
            frame_start: t.frame_start,
            frame_end: t.frame_end,
        })
    }
}

/// Type of SUBSCRIBE_START (05+) and of SUBSCRIBE_OK (03/04).
pub const SUBSCRIBE_START: u64 = 0x0;
/// Type of SUBSCRIBE_END (05+).
pub const SUBSCRIBE_END: u64 = 0x1;
/// Type of SUBSCRIBE_DROP on 05 and 06 (on 03/04 it is 0x1; lite-07 removed it).
pub const SUBSCRIBE_DROP: u64 = 0x2;

/// A publisher response on the subscribe stream from lite-03: `Type(i) | Len(i) | body`. An
/// unknown type is [`DecodeError::UnknownType`] (it fails the subscription); so is
/// SUBSCRIBE_DROP on lite-07, which removed it.
///
/// | type | 03/04 | 05/06 | 07 |
/// |---|---|---|---|
/// | 0x0 | OK | START | START |
/// | 0x1 | DROP | END | END (with stream count) |
/// | 0x2 | — | DROP | — |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscribeResponse {
    /// 03/04, type 0x0: `Priority(8), Ordered(8)=0, Max Age(i), Group Start, Group End` (both
    /// `OptGroup`). moq-net sends it once, carrying nothing but the priority; a subscription
    /// before 05 ends with the stream's FIN.
    Ok {
        priority: u8,
        max_age_ms: u64,
        start: Option<u64>,
        end: Option<u64>,
    },
    /// 05+, type 0x0 `Group(i)`: the first group that will be delivered.
    Start { group: u64 },
    /// 05+, type 0x1 `Group(i) [, Streams(i) on 07]`: exclusive end (0 means no groups), and
    /// on lite-07 the number of group streams the publisher opened for the subscription
    /// (`Some` exactly there: required to encode on 07, refused before it).
    End { group: u64, streams: Option<u64> },
    /// `Start(i), End(i), Error(i)`: groups `start..=end` were dropped (type 0x1 on 03/04,
    /// 0x2 on 05 and 06).
    Drop { start: u64, end: u64, error: u64 },
}

fn drop_type(version: Version) -> Option<u64> {
    if version.has_stream_count() {
        None
    } else if version.has_track_stream() {
        Some(SUBSCRIBE_DROP)
    } else {
        Some(0x1)
    }
}

impl TypedMessage for SubscribeResponse {
    fn check_type(kind: u64, version: Version) -> Result<(), DecodeError> {
        if !version.has_typed_responses() {
            return Err(DecodeError::Unsupported);
        }
        let known = kind == SUBSCRIBE_START
            || drop_type(version) == Some(kind)
            || (version.has_track_stream() && kind == SUBSCRIBE_END);
        if known {
            Ok(())
        } else {
            Err(DecodeError::UnknownType(kind))
        }
    }

    fn encode_typed_body(&self, w: &mut Vec<u8>, version: Version) -> Result<u64, EncodeError> {
        if !version.has_typed_responses() {
            return Err(EncodeError::Unsupported);
        }
        let pre05 = !version.has_track_stream();
        Ok(match *self {
            Self::Ok {
                priority,
                max_age_ms,
                start,
                end,
            } => {
                if !pre05 {
                    return Err(EncodeError::Unsupported);
                }
                coding::write_u8(w, priority);
                coding::write_u8(w, 0);
                coding::write_varint(w, max_age_ms, version)?;
                coding::write_opt(w, start, version)?;
                coding::write_opt(w, end, version)?;
                SUBSCRIBE_START
            }
            Self::Start { group } => {
                if pre05 {
                    return Err(EncodeError::Unsupported);
                }
                coding::write_varint(w, group, version)?;
                SUBSCRIBE_START
            }
            Self::End { group, streams } => {
                if pre05 {
                    return Err(EncodeError::Unsupported);
                }
                coding::write_varint(w, group, version)?;
                match (version.has_stream_count(), streams) {
                    (true, Some(streams)) => coding::write_varint(w, streams, version)?,
                    (false, None) => {}
                    (true, None) => {
                        return Err(EncodeError::InvalidValue(
                            "SUBSCRIBE_END needs its stream count",
                        ))
                    }
                    (false, Some(_)) => {
                        return Err(EncodeError::InvalidValue("a stream count before lite-07"))
                    }
                }
                SUBSCRIBE_END
            }
            Self::Drop { start, end, error } => {
                let kind = drop_type(version).ok_or(EncodeError::Unsupported)?;
                coding::write_varint(w, start, version)?;
                coding::write_varint(w, end, version)?;
                coding::write_varint(w, error, version)?;
                kind
            }
        })
    }

    fn decode_typed_body(kind: u64, r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        Self::check_type(kind, version)?;
        let pre05 = !version.has_track_stream();
        Ok(match kind {
            SUBSCRIBE_START if pre05 => {
                let priority = coding::read_u8(r)?;
                coding::read_u8(r)?; // retired Ordered byte, ignored
                Self::Ok {
                    priority,
                    max_age_ms: coding::read_varint(r, version)?,
                    start: coding::read_opt(r, version)?,
                    end: coding::read_opt(r, version)?,
                }
            }
            SUBSCRIBE_START => Self::Start {
                group: coding::read_varint(r, version)?,
            },
            SUBSCRIBE_END if !pre05 => Self::End {
                group: coding::read_varint(r, version)?,
                streams: if version.has_stream_count() {
                    Some(coding::read_varint(r, version)?)
                } else {
                    None
                },
            },
            _ => Self::Drop {
                start: coding::read_varint(r, version)?,
                end: coding::read_varint(r, version)?,
                error: coding::read_varint(r, version)?,
            },
        })
    }
}

/// SUBSCRIBE_OK on lite-01/02: one untyped, length-prefixed message, the publisher's only
/// answer; `Priority(8)` on 01, an empty body on 02.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LegacySubscribeOk {
    pub priority: u8,
}

impl Message for LegacySubscribeOk {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        match version {
            Version::Lite01 => coding::write_u8(w, self.priority),
            Version::Lite02 => {}
            _ => return Err(EncodeError::Unsupported),
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        match version {
            Version::Lite01 => Ok(LegacySubscribeOk {
                priority: coding::read_u8(r)?,
            }),
            Version::Lite02 => Ok(LegacySubscribeOk::default()),
            _ => Err(DecodeError::Unsupported),
        }
    }
}
