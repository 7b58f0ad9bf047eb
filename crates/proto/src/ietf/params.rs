//! Message parameter blocks (docs/wire-ietf.md §2.5): `count(i)`, then keys (absolute on 14
//! and 15, delta from 16) and values whose form depends on the draft.
//!
//! On 14 to 16 every value is framed by its key's parity (even a varint, odd a `(b)`), so an
//! unknown key can be stepped over; 14 and 15 do, 16 refuses it. From 17 the values are
//! typed (a `u8` or `bool` is one raw byte, a Location two bare varints, some values have no
//! length), so an unknown key cannot be skipped and is refused. A known key may appear once,
//! except AUTHORIZATION_TOKEN and the Range Filters.
//!
//! A message decodes its block with [`ParamReader`]: it matches each key to the typed read
//! that key takes on this draft and hands the rest to [`ParamReader::unknown`]. It writes one
//! with [`ParamWriter`], which sorts the keys.

use crate::coding::{
    read_bytes, read_u8, read_varint, write_bytes, write_varint, DecodeError, EncodeError,
};

use super::filter::{Fill, Filter, Location};
use super::kvp::{read_count, MAX_VALUE_LEN};
use super::Draft;

/// Parameter keys (docs/wire-ietf.md §2.5).
pub mod key {
    pub const DELIVERY_TIMEOUT: u64 = 0x02;
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    pub const RENDEZVOUS_TIMEOUT: u64 = 0x04;
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
    pub const EXPIRES: u64 = 0x08;
    pub const LARGEST_OBJECT: u64 = 0x09;
    pub const FILL_TIMEOUT: u64 = 0x0A;
    pub const FORWARD: u64 = 0x10;
    pub const SUBSCRIBER_PRIORITY: u64 = 0x20;
    pub const LOCATION_FILTER: u64 = 0x21;
    pub const GROUP_ORDER: u64 = 0x22;
    pub const FILL_PARAMETERS: u64 = 0x23;
    pub const SUBGROUP_FILTER: u64 = 0x25;
    pub const OBJECT_ID_FILTER: u64 = 0x26;
    pub const PRIORITY_FILTER: u64 = 0x27;
    pub const OBJECT_PROPERTY_FILTER: u64 = 0x28;
    pub const TRACK_PROPERTY_FILTER: u64 = 0x29;
    pub const NEW_GROUP_REQUEST: u64 = 0x32;
    pub const INCLUDE_PROPERTIES: u64 = 0x35;
    /// MoQ Cluster: the hop ids a route crossed, origin first.
    pub const HOP_PATH: u64 = 0x40B57;
    /// MoQ Cluster: the route's accumulated cost.
    pub const ROUTE_COST: u64 = 0x40B58;
    /// MoQ Hidden: SUBSCRIBE_NAMESPACE also wants hidden namespaces.
    pub const HIDDEN: u64 = 0x40B5E;
}

/// Whether `key` may appear more than once.
fn repeats(key: u64) -> bool {
    key == key::AUTHORIZATION_TOKEN
        || (key::SUBGROUP_FILTER..=key::TRACK_PROPERTY_FILTER).contains(&key)
}

/// Reads one message's parameter block.
#[derive(Debug)]
pub struct ParamReader {
    draft: Draft,
    remaining: usize,
    read: usize,
    prev: u64,
    /// Known keys seen so far (at most 64 in a block).
    seen: Vec<u64>,
}

impl ParamReader {
    /// Read the count at the front of `r`.
    pub fn new(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        Ok(ParamReader {
            draft,
            remaining: read_count(r, draft)?,
            read: 0,
            prev: 0,
            seen: Vec::new(),
        })
    }

    pub fn draft(&self) -> Draft {
        self.draft
    }

    /// The next key, `None` after the last.
    pub fn key(&mut self, r: &mut &[u8]) -> Result<Option<u64>, DecodeError> {
        if self.remaining == 0 {
            return Ok(None);
        }
        self.remaining -= 1;
        let raw = read_varint(r, self.draft)?;
        let key = if self.draft.has_delta_keys() && self.read > 0 {
            self.prev
                .checked_add(raw)
                .ok_or(DecodeError::BoundsExceeded("parameter key"))?
        } else {
            raw
        };
        self.prev = key;
        self.read += 1;
        Ok(Some(key))
    }

    /// Note a known key, refusing a second one that may not repeat.
    fn known(&mut self, key: u64) -> Result<(), DecodeError> {
        if !repeats(key) {
            if self.seen.contains(&key) {
                return Err(DecodeError::DuplicateParameter(key));
            }
            self.seen.push(key);
        }
        Ok(())
    }

    /// A key this message does not take on this draft: stepped over by its parity on 14 and
    /// 15, refused from 16.
    pub fn unknown(&mut self, key: u64, r: &mut &[u8]) -> Result<(), DecodeError> {
        if !self.draft.skips_unknown_parameters() {
            return Err(DecodeError::InvalidValue("unknown parameter"));
        }
        if key.is_multiple_of(2) {
            read_varint(r, self.draft)?;
        } else if read_bytes(r, self.draft)?.len() > MAX_VALUE_LEN {
            return Err(DecodeError::BoundsExceeded(
                "a parameter value over 65535 bytes",
            ));
        }
        Ok(())
    }

    /// A varint value.
    pub fn varint(&mut self, key: u64, r: &mut &[u8]) -> Result<u64, DecodeError> {
        self.known(key)?;
        read_varint(r, self.draft)
    }

    /// A `u8` value: a varint on 14-16, one raw byte from 17.
    pub fn byte(&mut self, key: u64, r: &mut &[u8]) -> Result<u8, DecodeError> {
        self.known(key)?;
        if !self.draft.has_typed_parameters() {
            u8::try_from(read_varint(r, self.draft)?)
                .map_err(|_| DecodeError::InvalidValue("u8 parameter"))
        } else {
            read_u8(r)
        }
    }

    /// A `bool` value: 0 or 1, in the `u8` form.
    pub fn flag(&mut self, key: u64, r: &mut &[u8]) -> Result<bool, DecodeError> {
        match self.byte(key, r)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::InvalidValue("bool parameter")),
        }
    }

    /// A byte-string value.
    pub fn bytes<'a>(&mut self, key: u64, r: &mut &'a [u8]) -> Result<&'a [u8], DecodeError> {
        self.known(key)?;
        let bytes = read_bytes(r, self.draft)?;
        if bytes.len() > MAX_VALUE_LEN {
            return Err(DecodeError::BoundsExceeded(
                "a parameter value over 65535 bytes",
            ));
        }
        Ok(bytes)
    }

    /// A Location: a `(b)` holding two varints on 14-16, two bare varints from 17.
    pub fn location(&mut self, key: u64, r: &mut &[u8]) -> Result<Location, DecodeError> {
        self.known(key)?;
        if !self.draft.has_typed_parameters() {
            let mut inner = read_bytes(r, self.draft)?;
            let location = Location::decode(&mut inner, self.draft)?;
            crate::coding::finish(inner)?;
            Ok(location)
        } else {
            Location::decode(r, self.draft)
        }
    }

    pub fn filter(&mut self, key: u64, r: &mut &[u8]) -> Result<Filter, DecodeError> {
        self.known(key)?;
        Filter::decode_param(r, self.draft)
    }

    pub fn fill(&mut self, key: u64, r: &mut &[u8]) -> Result<Fill, DecodeError> {
        self.known(key)?;
        Fill::decode_param(r, self.draft)
    }
}

/// Collects one message's parameters, then writes the block sorted by key.
#[derive(Debug)]
pub struct ParamWriter {
    draft: Draft,
    pairs: Vec<(u64, Vec<u8>)>,
}

impl ParamWriter {
    pub fn new(draft: Draft) -> Self {
        ParamWriter {
            draft,
            pairs: Vec::new(),
        }
    }

    fn value(
        &mut self,
        key: u64,
        write: impl FnOnce(&mut Vec<u8>, Draft) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        let mut value = Vec::new();
        write(&mut value, self.draft)?;
        self.pairs.push((key, value));
        Ok(())
    }

    pub fn varint(&mut self, key: u64, v: u64) -> Result<(), EncodeError> {
        self.value(key, |w, d| write_varint(w, v, d))
    }

    pub fn byte(&mut self, key: u64, v: u8) -> Result<(), EncodeError> {
        self.value(key, |w, d| {
            if !d.has_typed_parameters() {
                write_varint(w, u64::from(v), d)
            } else {
                w.push(v);
                Ok(())
            }
        })
    }

    pub fn flag(&mut self, key: u64, v: bool) -> Result<(), EncodeError> {
        self.byte(key, u8::from(v))
    }

    pub fn bytes(&mut self, key: u64, v: &[u8]) -> Result<(), EncodeError> {
        if v.len() > MAX_VALUE_LEN {
            return Err(EncodeError::BoundsExceeded(
                "a parameter value over 65535 bytes",
            ));
        }
        self.value(key, |w, d| write_bytes(w, v, d))
    }

    pub fn location(&mut self, key: u64, v: Location) -> Result<(), EncodeError> {
        self.value(key, |w, d| {
            if !d.has_typed_parameters() {
                let mut inner = Vec::new();
                v.encode(&mut inner, d)?;
                write_bytes(w, &inner, d)
            } else {
                v.encode(w, d)
            }
        })
    }

    pub fn filter(&mut self, key: u64, v: Filter) -> Result<(), EncodeError> {
        self.value(key, |w, d| v.encode_param(w, d))
    }

    pub fn fill(&mut self, key: u64, v: Fill) -> Result<(), EncodeError> {
        self.value(key, |w, d| v.encode_param(w, d))
    }

    /// Append the block: the count, then the pairs by ascending key.
    pub fn finish(mut self, w: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.pairs.len() > super::kvp::MAX_PAIRS {
            return Err(EncodeError::BoundsExceeded("more than 64 parameters"));
        }
        self.pairs.sort_by_key(|(key, _)| *key);
        write_varint(w, self.pairs.len() as u64, self.draft)?;
        let mut prev = 0;
        for (i, (key, value)) in self.pairs.iter().enumerate() {
            let written = if self.draft.has_delta_keys() && i > 0 {
                key - prev
            } else {
                *key
            };
            write_varint(w, written, self.draft)?;
            w.extend_from_slice(value);
            prev = *key;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_by_draft() {
        for (draft, expected) in [
            // Absolute keys, varint bytes, Location in (b).
            (
                Draft::D15,
                vec![3, 0x09, 2, 7, 1, 0x10, 1, 0x20, 0x40, 0x80],
            ),
            // Delta keys.
            (
                Draft::D16,
                vec![3, 0x09, 2, 7, 1, 0x07, 1, 0x10, 0x40, 0x80],
            ),
            // Raw bytes, bare Location.
            (Draft::D17, vec![3, 0x09, 7, 1, 0x07, 1, 0x10, 0x80]),
        ] {
            let mut writer = ParamWriter::new(draft);
            writer.byte(key::SUBSCRIBER_PRIORITY, 128).unwrap();
            writer.flag(key::FORWARD, true).unwrap();
            writer
                .location(
                    key::LARGEST_OBJECT,
                    Location {
                        group: 7,
                        object: 1,
                    },
                )
                .unwrap();
            let mut out = Vec::new();
            writer.finish(&mut out).unwrap();
            assert_eq!(out, expected, "{draft}");

            let mut r = &out[..];
            let mut reader = ParamReader::new(&mut r, draft).unwrap();
            assert_eq!(reader.key(&mut r).unwrap(), Some(key::LARGEST_OBJECT));
            assert_eq!(
                reader.location(key::LARGEST_OBJECT, &mut r).unwrap(),
                Location {
                    group: 7,
                    object: 1
                }
            );
            assert_eq!(reader.key(&mut r).unwrap(), Some(key::FORWARD));
            assert!(reader.flag(key::FORWARD, &mut r).unwrap());
            assert_eq!(reader.key(&mut r).unwrap(), Some(key::SUBSCRIBER_PRIORITY));
            assert_eq!(reader.byte(key::SUBSCRIBER_PRIORITY, &mut r).unwrap(), 128);
            assert_eq!(reader.key(&mut r).unwrap(), None);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn unknown_and_repeated_keys() {
        // An unknown even key (0x2A) then an unknown odd one: skipped on 14 and 15.
        let block = [2, 0x2A, 5, 0x2B, 1, 0xff];
        for draft in [Draft::D14, Draft::D15] {
            let mut r = &block[..];
            let mut reader = ParamReader::new(&mut r, draft).unwrap();
            while let Some(key) = reader.key(&mut r).unwrap() {
                reader.unknown(key, &mut r).unwrap();
            }
            assert!(r.is_empty());
        }
        for draft in [Draft::D16, Draft::D17, Draft::D22] {
            let mut r = &block[..];
            let mut reader = ParamReader::new(&mut r, draft).unwrap();
            let key = reader.key(&mut r).unwrap().unwrap();
            assert!(reader.unknown(key, &mut r).is_err(), "{draft}");
        }
        // FORWARD twice is refused; the token may repeat.
        let mut r = &[2, 0x10, 1, 0x10, 1][..];
        let mut reader = ParamReader::new(&mut r, Draft::D15).unwrap();
        let key = reader.key(&mut r).unwrap().unwrap();
        reader.flag(key, &mut r).unwrap();
        let key = reader.key(&mut r).unwrap().unwrap();
        assert_eq!(
            reader.flag(key, &mut r),
            Err(DecodeError::DuplicateParameter(0x10))
        );
        let mut r = &[2, 0x03, 1, 0xaa, 0x00, 1, 0xbb][..];
        let mut reader = ParamReader::new(&mut r, Draft::D16).unwrap();
        while let Some(key) = reader.key(&mut r).unwrap() {
            reader.bytes(key, &mut r).unwrap();
        }
        // A u8 over 255 on 16, a bool of 2.
        let mut r = &[1, 0x20, 0x41, 0x00][..];
        let mut reader = ParamReader::new(&mut r, Draft::D16).unwrap();
        let key = reader.key(&mut r).unwrap().unwrap();
        assert!(reader.byte(key, &mut r).is_err());
        let mut r = &[1, 0x10, 2][..];
        let mut reader = ParamReader::new(&mut r, Draft::D18).unwrap();
        let key = reader.key(&mut r).unwrap().unwrap();
        assert!(reader.flag(key, &mut r).is_err());
    }
}
