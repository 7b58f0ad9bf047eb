//! Locations and the Location Filter of SUBSCRIBE, PUBLISH, FETCH and REQUEST_UPDATE, in each
//! draft's spelling (docs/wire-ietf.md §4.16), and the FILL_PARAMETERS scope of draft 20 on.
//!
//! Draft 14 writes the filter as message fields, 15 to 19 as a parameter holding a tag and
//! its fields, 20 and 21 as a parameter holding zero to four fields whose number gives the
//! meaning, and 22 as a Location Filter Type followed by the fields it names, with no length.

use crate::coding::{read_bytes, read_varint, write_bytes, write_varint, DecodeError, EncodeError};

use super::draft::FilterForm;
use super::Draft;

/// A group and an object in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub group: u64,
    pub object: u64,
}

impl Location {
    pub fn decode(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        Ok(Location {
            group: read_varint(r, draft)?,
            object: read_varint(r, draft)?,
        })
    }

    pub fn encode(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_varint(w, self.group, draft)?;
        write_varint(w, self.object, draft)
    }
}

/// The inclusive end of an absolute range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndLocation {
    pub group: u64,
    /// The last object, inclusive; `None` takes the whole group (drafts 20 on can bound it).
    pub object: Option<u64>,
}

/// Which objects a subscription (or fill) delivers. The shapes are the ones some draft can
/// say; `Absolute` from `{0, 0}` with no end reads as `Unfiltered`, which every draft treats
/// as the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Filter {
    /// Every object: an absent parameter.
    Unfiltered,
    /// From the object after the live edge, `{Largest.group, Largest.object + 1}`.
    #[default]
    NextObject,
    /// From `{Largest.group + 1 - n, 0}`, open ended: 0 is the next group, 1 the current
    /// one. Before draft 20 only 0 has a spelling (Next Group).
    Relative(u64),
    /// From `start`, to `end` inclusive when set.
    Absolute {
        start: Location,
        end: Option<EndLocation>,
    },
}

/// Draft 14-19 tags.
mod tag {
    pub const NEXT_GROUP: u64 = 0x1;
    pub const LARGEST_OBJECT: u64 = 0x2;
    pub const ABSOLUTE_START: u64 = 0x3;
    pub const ABSOLUTE_RANGE: u64 = 0x4;
}

/// Draft 22's Location Filter Types.
mod kind {
    pub const NONE: u64 = 0x0;
    pub const RELATIVE_START: u64 = 0x1;
    pub const ABSOLUTE_START: u64 = 0x2;
    pub const ABSOLUTE_GROUP_END: u64 = 0x3;
    pub const ABSOLUTE_RANGE: u64 = 0x4;
    pub const NEXT_OBJECT: u64 = 0x5;
}

impl Filter {
    /// `Absolute` from `{0, 0}` with no end is `Unfiltered`.
    fn normal(self) -> Self {
        match self {
            Filter::Absolute {
                start:
                    Location {
                        group: 0,
                        object: 0,
                    },
                end: None,
            } => Filter::Unfiltered,
            other => other,
        }
    }

    fn end_group(start: u64, delta: u64) -> Result<u64, DecodeError> {
        start
            .checked_add(delta)
            .filter(|&g| g <= crate::varint::MAX)
            .ok_or(DecodeError::BoundsExceeded("end group"))
    }

    fn end_delta(start: u64, end: u64) -> Result<u64, EncodeError> {
        end.checked_sub(start).ok_or(EncodeError::InvalidValue(
            "a range that ends before it starts",
        ))
    }

    /// The tag form (draft 14 inline, 15-19 inside the parameter).
    pub fn decode_tagged(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let filter = match read_varint(r, draft)? {
            tag::NEXT_GROUP => Filter::Relative(0),
            tag::LARGEST_OBJECT => Filter::NextObject,
            tag::ABSOLUTE_START => Filter::Absolute {
                start: Location::decode(r, draft)?,
                end: None,
            },
            tag::ABSOLUTE_RANGE => {
                let start = Location::decode(r, draft)?;
                let group = Self::end_group(start.group, read_varint(r, draft)?)?;
                Filter::Absolute {
                    start,
                    end: Some(EndLocation {
                        group,
                        object: None,
                    }),
                }
            }
            _ => return Err(DecodeError::InvalidValue("filter type")),
        };
        Ok(filter.normal())
    }

    pub fn encode_tagged(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        match *self {
            Filter::Unfiltered => {
                write_varint(w, tag::ABSOLUTE_START, draft)?;
                Location::default().encode(w, draft)
            }
            Filter::NextObject => write_varint(w, tag::LARGEST_OBJECT, draft),
            Filter::Relative(0) => write_varint(w, tag::NEXT_GROUP, draft),
            Filter::Relative(_) => Err(EncodeError::InvalidValue(
                "a relative start before the next group needs draft 20",
            )),
            Filter::Absolute { start, end: None } => {
                write_varint(w, tag::ABSOLUTE_START, draft)?;
                start.encode(w, draft)
            }
            Filter::Absolute {
                end: Some(EndLocation {
                    object: Some(_), ..
                }),
                ..
            } => Err(EncodeError::InvalidValue(
                "a range ending inside a group needs draft 20",
            )),
            Filter::Absolute {
                start,
                end: Some(end),
            } => {
                write_varint(w, tag::ABSOLUTE_RANGE, draft)?;
                start.encode(w, draft)?;
                write_varint(w, Self::end_delta(start.group, end.group)?, draft)
            }
        }
    }

    /// Draft 20/21's field list, the whole of `fields`.
    fn decode_fields(mut fields: &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let r = &mut fields;
        let mut values = [0u64; 4];
        let mut n = 0;
        while !r.is_empty() {
            if n == 4 {
                return Err(DecodeError::Long);
            }
            values[n] = read_varint(r, draft)?;
            n += 1;
        }
        let start = Location {
            group: values[0],
            object: values[1],
        };
        let filter = match n {
            0 => Filter::Unfiltered,
            1 => Filter::Relative(values[0]),
            2 if values[..2] == [0, 0] => Filter::NextObject,
            2 => Filter::Absolute { start, end: None },
            _ => Filter::Absolute {
                start,
                end: Some(EndLocation {
                    group: Self::end_group(start.group, values[2])?,
                    object: (n == 4).then_some(values[3]),
                }),
            },
        };
        Ok(filter)
    }

    fn encode_fields(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        match self.normal() {
            Filter::Unfiltered => Ok(()),
            Filter::NextObject => {
                write_varint(w, 0, draft)?;
                write_varint(w, 0, draft)
            }
            Filter::Relative(n) => write_varint(w, n, draft),
            Filter::Absolute { start, end } => {
                if start == Location::default() && end.is_none() {
                    return Ok(());
                }
                start.encode(w, draft)?;
                if let Some(end) = end {
                    write_varint(w, Self::end_delta(start.group, end.group)?, draft)?;
                    if let Some(object) = end.object {
                        write_varint(w, object, draft)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Draft 22's typed form.
    fn decode_typed(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let filter = match read_varint(r, draft)? {
            kind::NONE => Filter::Unfiltered,
            kind::RELATIVE_START => Filter::Relative(read_varint(r, draft)?),
            k @ (kind::ABSOLUTE_START | kind::ABSOLUTE_GROUP_END | kind::ABSOLUTE_RANGE) => {
                let start = Location::decode(r, draft)?;
                let end = match k {
                    kind::ABSOLUTE_START => None,
                    _ => Some(EndLocation {
                        group: Self::end_group(start.group, read_varint(r, draft)?)?,
                        object: match k {
                            kind::ABSOLUTE_RANGE => Some(read_varint(r, draft)?),
                            _ => None,
                        },
                    }),
                };
                Filter::Absolute { start, end }
            }
            kind::NEXT_OBJECT => Filter::NextObject,
            _ => return Err(DecodeError::InvalidValue("location filter type")),
        };
        Ok(filter.normal())
    }

    fn encode_typed(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        match self.normal() {
            Filter::Unfiltered => write_varint(w, kind::NONE, draft),
            Filter::NextObject => write_varint(w, kind::NEXT_OBJECT, draft),
            Filter::Relative(n) => {
                write_varint(w, kind::RELATIVE_START, draft)?;
                write_varint(w, n, draft)
            }
            Filter::Absolute { start, end } => {
                let k = match end {
                    None => kind::ABSOLUTE_START,
                    Some(EndLocation { object: None, .. }) => kind::ABSOLUTE_GROUP_END,
                    Some(EndLocation {
                        object: Some(_), ..
                    }) => kind::ABSOLUTE_RANGE,
                };
                write_varint(w, k, draft)?;
                start.encode(w, draft)?;
                if let Some(end) = end {
                    write_varint(w, Self::end_delta(start.group, end.group)?, draft)?;
                    if let Some(object) = end.object {
                        write_varint(w, object, draft)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// The LOCATION_FILTER parameter's value (drafts 15 on): a `(b)` holding the tag form
    /// (15-19) or the field list (20, 21); draft 22's typed form with no length.
    pub fn decode_param(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        match draft.filter_form() {
            FilterForm::Typed => Self::decode_typed(r, draft),
            FilterForm::Fields => Self::decode_fields(read_bytes(r, draft)?, draft),
            FilterForm::Tagged => {
                let mut inner = read_bytes(r, draft)?;
                let filter = Self::decode_tagged(&mut inner, draft)?;
                crate::coding::finish(inner)?;
                Ok(filter)
            }
        }
    }

    pub fn encode_param(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        let mut inner = Vec::new();
        match draft.filter_form() {
            FilterForm::Typed => return self.encode_typed(w, draft),
            FilterForm::Fields => self.encode_fields(&mut inner, draft)?,
            FilterForm::Tagged => self.encode_tagged(&mut inner, draft)?,
        }
        write_bytes(w, &inner, draft)
    }
}

/// FILL_PARAMETERS (drafts 20 on): a nested scope asking for what came before the
/// subscription's start. Its only parameter that changes delivery is LOCATION_FILTER; the
/// others the scope allows are read and dropped, except that a Range Filter is recorded (it
/// narrows the fill, which Starling does not implement, so such a fill is refused).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fill {
    /// `None` inherits the subscription's filter.
    pub filter: Option<Filter>,
    pub range_filters: bool,
}

impl Fill {
    const LOCATION_FILTER: u64 = 0x21;
    const SUBGROUP_FILTER: u64 = 0x25;

    pub fn decode_param(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let mut scope = read_bytes(r, draft)?;
        let r = &mut scope;
        let count = super::kvp::read_count(r, draft)?;
        let mut fill = Fill::default();
        let mut key = 0u64;
        for i in 0..count {
            let delta = read_varint(r, draft)?;
            key = if i == 0 {
                delta
            } else {
                key.checked_add(delta)
                    .ok_or(DecodeError::BoundsExceeded("parameter key"))?
            };
            match key {
                Self::LOCATION_FILTER => {
                    if fill.filter.is_some() {
                        return Err(DecodeError::DuplicateParameter(key));
                    }
                    fill.filter = Some(Filter::decode_param(r, draft)?);
                }
                // FILL_TIMEOUT
                0x0A => {
                    read_varint(r, draft)?;
                }
                // SUBSCRIBER_PRIORITY and GROUP_ORDER, one raw byte each.
                0x20 | 0x22 => {
                    crate::coding::read_u8(r)?;
                }
                // Range Filters, length-prefixed whatever their parity.
                0x25..=0x28 => {
                    read_bytes(r, draft)?;
                    fill.range_filters = true;
                }
                _ => return Err(DecodeError::InvalidValue("fill parameter")),
            }
        }
        crate::coding::finish(r)?;
        Ok(fill)
    }

    pub fn encode_param(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        let mut scope = Vec::new();
        let count = u64::from(self.filter.is_some()) + u64::from(self.range_filters);
        write_varint(&mut scope, count, draft)?;
        if let Some(filter) = self.filter {
            write_varint(&mut scope, Self::LOCATION_FILTER, draft)?;
            filter.encode_param(&mut scope, draft)?;
        }
        if self.range_filters {
            // Only so a decoded fill can be written again: an empty SUBGROUP_FILTER.
            let key = Self::SUBGROUP_FILTER;
            let written = if self.filter.is_some() {
                key - Self::LOCATION_FILTER
            } else {
                key
            };
            write_varint(&mut scope, written, draft)?;
            write_bytes(&mut scope, &[], draft)?;
        }
        write_bytes(w, &scope, draft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(filter: Filter, draft: Draft) -> Vec<u8> {
        let mut out = Vec::new();
        filter.encode_param(&mut out, draft).unwrap();
        out
    }

    fn read(bytes: &[u8], draft: Draft) -> Filter {
        let mut r = bytes;
        let filter = Filter::decode_param(&mut r, draft).unwrap();
        assert!(r.is_empty());
        filter
    }

    const START: Location = Location {
        group: 7,
        object: 3,
    };

    /// docs/wire-ietf.md §4.16, draft by draft.
    #[test]
    fn spellings() {
        let whole = Filter::Absolute {
            start: START,
            end: Some(EndLocation {
                group: 9,
                object: None,
            }),
        };
        let bounded = Filter::Absolute {
            start: START,
            end: Some(EndLocation {
                group: 9,
                object: Some(4),
            }),
        };
        let open = Filter::Absolute {
            start: START,
            end: None,
        };
        for (filter, d17, d20, d22) in [
            (Filter::NextObject, &[1, 2][..], &[2, 0, 0][..], &[5][..]),
            (Filter::Relative(0), &[1, 1], &[1, 0], &[1, 0]),
            (open, &[3, 3, 7, 3], &[2, 7, 3], &[2, 7, 3]),
            (whole, &[4, 4, 7, 3, 2], &[3, 7, 3, 2], &[3, 7, 3, 2]),
            (Filter::Unfiltered, &[3, 3, 0, 0], &[0], &[0]),
        ] {
            assert_eq!(param(filter, Draft::D17), d17, "{filter:?}");
            assert_eq!(param(filter, Draft::D20), d20, "{filter:?}");
            assert_eq!(param(filter, Draft::D21), d20, "{filter:?}");
            assert_eq!(param(filter, Draft::D22), d22, "{filter:?}");
            for draft in [Draft::D15, Draft::D17, Draft::D20, Draft::D22] {
                assert_eq!(
                    read(&param(filter, draft), draft),
                    filter,
                    "{filter:?} {draft}"
                );
            }
        }
        assert_eq!(param(bounded, Draft::D20), [4, 7, 3, 2, 4]);
        assert_eq!(param(bounded, Draft::D22), [4, 7, 3, 2, 4]);
        assert_eq!(read(&[4, 7, 3, 2, 4], Draft::D22), bounded);
        assert!(bounded.encode_param(&mut Vec::new(), Draft::D19).is_err());
        assert!(Filter::Relative(1)
            .encode_param(&mut Vec::new(), Draft::D19)
            .is_err());
        assert_eq!(read(&[1, 1], Draft::D20), Filter::Relative(1));
        // Above 63 the leading-ones form shows.
        assert_eq!(param(Filter::Relative(128), Draft::D20), [2, 0x80, 0x80]);
        assert_eq!(param(Filter::Relative(128), Draft::D22), [1, 0x80, 0x80]);
    }

    #[test]
    fn refusals() {
        // Five fields, an unknown tag, an unknown type, trailing bytes inside the tag form.
        assert!(Filter::decode_param(&mut &[5, 0, 0, 0, 0, 0][..], Draft::D20).is_err());
        assert!(Filter::decode_param(&mut &[1, 9][..], Draft::D17).is_err());
        assert!(Filter::decode_param(&mut &[6][..], Draft::D22).is_err());
        assert!(Filter::decode_param(&mut &[2, 2, 0][..], Draft::D16).is_err());
        // A range that ends before it starts cannot be written.
        let backwards = Filter::Absolute {
            start: START,
            end: Some(EndLocation {
                group: 6,
                object: None,
            }),
        };
        assert!(backwards.encode_param(&mut Vec::new(), Draft::D22).is_err());
    }

    /// docs/wire-ietf.md §10.3: FILL_PARAMETERS = Relative(1).
    #[test]
    fn fill() {
        let fill = Fill {
            filter: Some(Filter::Relative(1)),
            range_filters: false,
        };
        for draft in [Draft::D20, Draft::D22] {
            let mut out = Vec::new();
            fill.encode_param(&mut out, draft).unwrap();
            assert_eq!(out, [4, 1, 0x21, 1, 1]);
            assert_eq!(Fill::decode_param(&mut &out[..], draft).unwrap(), fill);
        }
        let mut out = Vec::new();
        Fill::default().encode_param(&mut out, Draft::D20).unwrap();
        assert_eq!(out, [1, 0]);
        // A range filter inside is recorded; an unknown key refused.
        let scoped = [5, 1, 0x25, 2, 0xaa, 0xbb];
        assert!(
            Fill::decode_param(&mut &scoped[..], Draft::D20)
                .unwrap()
                .range_filters
        );
        assert!(Fill::decode_param(&mut &[3, 1, 0x30, 0][..], Draft::D20).is_err());
    }
}
