//! The announce stream (bidi 0x1): ANNOUNCE_REQUEST, ANNOUNCE_OK, lite-05 ANNOUNCE and lite-06
//! typed announcements (docs/wire.md §4.2–§4.4).

use crate::coding::{self, DecodeError, EncodeError};
use crate::cost::RouteCost;
use crate::framing::{Message, TypedMessage};
use crate::hops::Hops;
use crate::path::Path;
use crate::version::Version;

/// ANNOUNCE_REQUEST, the subscriber's first message: `Prefix Path(s) [, Exclude Hop(i) on
/// 04/05] [, Hidden bool(8) on 07]`.
///
/// `exclude_hop` is on the wire on 04/05 only; on 06+ the exclusion comes from SETUP Hop, the
/// field is not written and decodes as 0. `hidden` is on the wire on 07 only: with it, routes
/// with a `.`-segment below the prefix are announced too; before 07 it decodes as false.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnounceRequest {
    pub prefix: Path,
    pub exclude_hop: u64,
    pub hidden: bool,
}

impl Message for AnnounceRequest {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        self.prefix.encode(w, version)?;
        if version.has_exclude_hop() {
            coding::write_varint(w, self.exclude_hop, version)?;
        }
        if version.has_hidden() {
            coding::write_bool(w, self.hidden);
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        let prefix = Path::decode(r, version)?;
        let exclude_hop = if version.has_exclude_hop() {
            coding::read_varint(r, version)?
        } else {
            0
        };
        let hidden = version.has_hidden() && coding::read_bool(r)?;
        Ok(AnnounceRequest {
            prefix,
            exclude_hop,
            hidden,
        })
    }
}

/// ANNOUNCE_OK (05+), the publisher's first message: `Hop ID(i), Active Count(i)`.
///
/// `hop` is the responder's hop (0 allowed); exactly `active_count` announcements follow
/// in the same write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnnounceOk {
    pub hop: u64,
    pub active_count: u64,
}

impl Message for AnnounceOk {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_announce_ok() {
            return Err(EncodeError::Unsupported);
        }
        coding::write_varint(w, self.hop, version)?;
        coding::write_varint(w, self.active_count, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_announce_ok() {
            return Err(DecodeError::Unsupported);
        }
        Ok(AnnounceOk {
            hop: coding::read_varint(r, version)?,
            active_count: coding::read_varint(r, version)?,
        })
    }
}

/// The status byte of a lite-05 ANNOUNCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AnnounceStatus {
    /// 0: the broadcast ended (Rust sends 0 hops; receivers match on the path).
    Ended = 0,
    /// 1: the broadcast is active; a second Active for a live path is a restart.
    Active = 1,
    /// 2: explicit restart (05 only; accepted, treated as Active, never sent by Rust).
    Restart = 2,
}

/// ANNOUNCE before lite-06: `Status(8), Suffix Path(s), [hops]`, untyped and length-prefixed.
/// The hops are absent on 01/02, a bare count on 03 (decoded as that many anonymous hops, 0),
/// and a hop list on 04/05. On 03/04 the sender has appended its own hop to the chain; on 05
/// the receiver appends the hop its ANNOUNCE_OK named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    pub status: AnnounceStatus,
    pub suffix: Path,
    pub hops: Hops,
}

fn legacy_announce(version: Version) -> bool {
    !version.has_announce_id()
}

impl Message for Announce {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !legacy_announce(version) {
            return Err(EncodeError::Unsupported);
        }
        if self.status == AnnounceStatus::Restart && !version.restart_supported() {
            return Err(EncodeError::InvalidValue("announce status"));
        }
        coding::write_u8(w, self.status as u8);
        self.suffix.encode(w, version)?;
        if version.has_hop_list() {
            self.hops.encode(w, version)?;
        } else if version.has_hops() {
            coding::write_varint(w, self.hops.len() as u64, version)?;
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !legacy_announce(version) {
            return Err(DecodeError::Unsupported);
        }
        let status = match coding::read_u8(r)? {
            0 => AnnounceStatus::Ended,
            1 => AnnounceStatus::Active,
            2 if version.restart_supported() => AnnounceStatus::Restart,
            _ => return Err(DecodeError::InvalidValue("announce status")),
        };
        let suffix = Path::decode(r, version)?;
        let hops = if version.has_hop_list() {
            Hops::decode(r, version)?
        } else if version.has_hops() {
            let count = coding::read_varint(r, version)?;
            if count > crate::limits::MAX_HOPS as u64 {
                return Err(DecodeError::BoundsExceeded("hops"));
            }
            // Only the length travels: anonymous hops stand in for the ids.
            Hops::from_vec(vec![0; count as usize])
                .map_err(|_| DecodeError::BoundsExceeded("hops"))?
        } else {
            Hops::new()
        };
        Ok(Announce {
            status,
            suffix,
            hops,
        })
    }
}

/// ANNOUNCE_INIT (01/02), the publisher's first message on an announce stream: `Count(i),
/// Suffix Path(s) × Count`, the paths live when the request arrived.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnnounceInit {
    pub suffixes: Vec<Path>,
}

impl Message for AnnounceInit {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_announce_init() {
            return Err(EncodeError::Unsupported);
        }
        coding::write_varint(w, self.suffixes.len() as u64, version)?;
        for suffix in &self.suffixes {
            suffix.encode(w, version)?;
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_announce_init() {
            return Err(DecodeError::Unsupported);
        }
        let count = coding::read_varint(r, version)?;
        // Every path takes at least its length byte: a count past the body is refused before
        // anything is allocated for it.
        if count > r.len() as u64 {
            return Err(DecodeError::Truncated);
        }
        let mut suffixes = Vec::with_capacity(count as usize);
        for _ in 0..count {
            suffixes.push(Path::decode(r, version)?);
        }
        Ok(AnnounceInit { suffixes })
    }
}

/// Type of ANNOUNCE_START.
pub const ANNOUNCE_START: u64 = 0x0;
/// Type of ANNOUNCE_END.
pub const ANNOUNCE_END: u64 = 0x1;
/// Type of ANNOUNCE_UPDATE.
pub const ANNOUNCE_UPDATE: u64 = 0x2;

/// A typed announcement (06+), `Type(i) | Len(i) | body`, with implicit ids: the k-th `Start`
/// on a stream is id k (from 0); `End` retires an id, `Update` keeps it live. Generic over how
/// its path and chain travel: literally on lite-06 ([`Announcement`]), as references to live
/// announcements on lite-07 ([`crate::CompressedAnnouncement`], resolved by
/// [`crate::AnnounceDecoder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypedAnnouncement<P, H> {
    /// 0x0: `Suffix, Hops, Warm(i), Cold(i)`; assigns the next id.
    Start { suffix: P, hops: H, cost: RouteCost },
    /// 0x1: `Announce ID(i)`.
    End { id: u64 },
    /// 0x2: `Announce ID(i), Hops, Warm(i), Cold(i)`; replaces chain and cost in place.
    Update { id: u64, hops: H, cost: RouteCost },
    /// Any other type: its body was skipped by length; assigns no id. Encodes with an
    /// empty body (so it round-trips), and only for a `kind` outside 0..=2.
    Unknown { kind: u64 },
}

/// A lite-06 typed announcement: the path and chain as they are.
pub type Announcement = TypedAnnouncement<Path, Hops>;

/// A field of a typed announcement, in the form one version family carries it.
pub trait AnnounceField: Sized {
    /// Whether this is lite-07's compressed form (else lite-06's literal one).
    const COMPRESSED: bool;
    fn encode_field(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError>;
    fn decode_field(r: &mut &[u8], version: Version) -> Result<Self, DecodeError>;
}

impl AnnounceField for Path {
    const COMPRESSED: bool = false;
    fn encode_field(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        self.encode(w, version)
    }
    fn decode_field(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        Path::decode(r, version)
    }
}

impl AnnounceField for Hops {
    const COMPRESSED: bool = false;
    fn encode_field(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        self.encode(w, version)
    }
    fn decode_field(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        Hops::decode(r, version)
    }
}

/// Whether `version` carries announcements whose fields are `P`.
fn carries<P: AnnounceField>(version: Version) -> bool {
    version.has_announce_id() && version.has_announce_compression() == P::COMPRESSED
}

impl<P: AnnounceField, H: AnnounceField> TypedMessage for TypedAnnouncement<P, H> {
    fn check_type(_kind: u64, version: Version) -> Result<(), DecodeError> {
        if !carries::<P>(version) {
            return Err(DecodeError::Unsupported);
        }
        Ok(())
    }

    fn encode_typed_body(&self, w: &mut Vec<u8>, version: Version) -> Result<u64, EncodeError> {
        if !carries::<P>(version) {
            return Err(EncodeError::Unsupported);
        }
        Ok(match self {
            Self::Start { suffix, hops, cost } => {
                suffix.encode_field(w, version)?;
                hops.encode_field(w, version)?;
                cost.encode(w, version)?;
                ANNOUNCE_START
            }
            Self::End { id } => {
                coding::write_varint(w, *id, version)?;
                ANNOUNCE_END
            }
            Self::Update { id, hops, cost } => {
                coding::write_varint(w, *id, version)?;
                hops.encode_field(w, version)?;
                cost.encode(w, version)?;
                ANNOUNCE_UPDATE
            }
            Self::Unknown { kind } => {
                if *kind <= ANNOUNCE_UPDATE {
                    return Err(EncodeError::InvalidValue(
                        "unknown announcement uses a known type",
                    ));
                }
                *kind
            }
        })
    }

    fn decode_typed_body(kind: u64, r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        Self::check_type(kind, version)?;
        Ok(match kind {
            ANNOUNCE_START => Self::Start {
                suffix: P::decode_field(r, version)?,
                hops: H::decode_field(r, version)?,
                cost: RouteCost::decode(r, version)?,
            },
            ANNOUNCE_END => Self::End {
                id: coding::read_varint(r, version)?,
            },
            ANNOUNCE_UPDATE => Self::Update {
                id: coding::read_varint(r, version)?,
                hops: H::decode_field(r, version)?,
                cost: RouteCost::decode(r, version)?,
            },
            kind => {
                *r = &[];
                Self::Unknown { kind }
            }
        })
    }
}
