//! Key-Value-Pair blocks, the one layout under SETUP options, Track Properties, Object
//! Properties and the parameter blocks of drafts 14 to 16 (docs/wire-ietf.md §2.4-§2.7).
//!
//! A pair is a key then, by the key's parity, one varint (even) or a `(b)` byte string (odd),
//! so a reader can step over a key it does not know. Keys are absolute or delta-encoded
//! (each the difference from the previous one, the first absolute), and a block either
//! starts with a count or runs to the end of its message. At most 64 pairs, byte values at
//! most 65 535 bytes.

use crate::coding::{read_bytes, read_varint, write_bytes, write_varint, DecodeError, EncodeError};

use super::Draft;

/// Pairs in one block at most.
pub const MAX_PAIRS: usize = 64;
/// Bytes in one odd-keyed value at most.
pub const MAX_VALUE_LEN: usize = (1 << 16) - 1;

/// How a block's keys are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    Absolute,
    /// Each key the difference from the one before (the first absolute); keys ascend.
    Delta,
}

/// Where a block ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// A `count(i)` first.
    Counted,
    /// No count: the pairs run to the end of the bytes given.
    ToEnd,
}

/// One pair's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

/// Reads a block's pairs one at a time.
#[derive(Debug)]
pub struct PairReader {
    draft: Draft,
    keys: Keys,
    /// Pairs left, for a counted block.
    remaining: Option<usize>,
    read: usize,
    prev: u64,
}

impl PairReader {
    /// Start reading a block at the front of `r` (reads the count of a counted block).
    pub fn new(
        r: &mut &[u8],
        draft: Draft,
        keys: Keys,
        extent: Extent,
    ) -> Result<Self, DecodeError> {
        let remaining = match extent {
            Extent::Counted => Some(read_count(r, draft)?),
            Extent::ToEnd => None,
        };
        Ok(PairReader {
            draft,
            keys,
            remaining,
            read: 0,
            prev: 0,
        })
    }

    /// The next key, or `None` at the end of the block. Its value must be read next, with
    /// [`PairReader::value`] or by the caller's own typed read.
    pub fn key(&mut self, r: &mut &[u8]) -> Result<Option<u64>, DecodeError> {
        match &mut self.remaining {
            Some(0) => return Ok(None),
            Some(n) => *n -= 1,
            None if r.is_empty() => return Ok(None),
            None if self.read >= MAX_PAIRS => {
                return Err(DecodeError::BoundsExceeded("more than 64 pairs"))
            }
            None => {}
        }
        let raw = read_varint(r, self.draft)?;
        let key = match self.keys {
            Keys::Delta if self.read > 0 => self
                .prev
                .checked_add(raw)
                .ok_or(DecodeError::BoundsExceeded("parameter key"))?,
            _ => raw,
        };
        self.prev = key;
        self.read += 1;
        Ok(Some(key))
    }

    /// The value of `key`, framed by its parity.
    pub fn value<'a>(&self, key: u64, r: &mut &'a [u8]) -> Result<Value<'a>, DecodeError> {
        if key.is_multiple_of(2) {
            Ok(Value::Varint(read_varint(r, self.draft)?))
        } else {
            let bytes = read_bytes(r, self.draft)?;
            if bytes.len() > MAX_VALUE_LEN {
                return Err(DecodeError::BoundsExceeded(
                    "a parameter value over 65535 bytes",
                ));
            }
            Ok(Value::Bytes(bytes))
        }
    }
}

/// A block's `count(i)`, at most [`MAX_PAIRS`].
pub fn read_count(r: &mut &[u8], draft: Draft) -> Result<usize, DecodeError> {
    let count = read_varint(r, draft)?;
    if count > MAX_PAIRS as u64 {
        return Err(DecodeError::BoundsExceeded("more than 64 pairs"));
    }
    Ok(count as usize)
}

/// Collects a block's pairs, then writes them sorted by key (a stable sort, so repeats of
/// a key keep their order).
#[derive(Debug)]
pub struct PairWriter {
    draft: Draft,
    /// Key and its encoded value.
    pairs: Vec<(u64, Vec<u8>)>,
}

impl PairWriter {
    pub fn new(draft: Draft) -> Self {
        PairWriter {
            draft,
            pairs: Vec::new(),
        }
    }

    /// An even key's varint value.
    pub fn varint(&mut self, key: u64, value: u64) -> Result<(), EncodeError> {
        debug_assert!(key.is_multiple_of(2), "an odd key takes bytes");
        let mut out = Vec::new();
        write_varint(&mut out, value, self.draft)?;
        self.pairs.push((key, out));
        Ok(())
    }

    /// An odd key's byte-string value.
    pub fn bytes(&mut self, key: u64, value: &[u8]) -> Result<(), EncodeError> {
        debug_assert!(key % 2 == 1, "an even key takes a varint");
        if value.len() > MAX_VALUE_LEN {
            return Err(EncodeError::BoundsExceeded(
                "a parameter value over 65535 bytes",
            ));
        }
        let mut out = Vec::new();
        write_bytes(&mut out, value, self.draft)?;
        self.pairs.push((key, out));
        Ok(())
    }

    /// A value already encoded in whatever form its key takes on this draft.
    pub fn encoded(&mut self, key: u64, value: Vec<u8>) {
        self.pairs.push((key, value));
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Append the block.
    pub fn finish(
        mut self,
        w: &mut Vec<u8>,
        keys: Keys,
        extent: Extent,
    ) -> Result<(), EncodeError> {
        if self.pairs.len() > MAX_PAIRS {
            return Err(EncodeError::BoundsExceeded("more than 64 pairs"));
        }
        self.pairs.sort_by_key(|(key, _)| *key);
        if extent == Extent::Counted {
            write_varint(w, self.pairs.len() as u64, self.draft)?;
        }
        let mut prev = 0;
        for (i, (key, value)) in self.pairs.iter().enumerate() {
            let written = match keys {
                Keys::Delta if i > 0 => key - prev,
                _ => *key,
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

    fn block(draft: Draft, keys: Keys, extent: Extent) -> Vec<u8> {
        let mut writer = PairWriter::new(draft);
        writer.bytes(7, b"impl").unwrap();
        writer.varint(2, 300).unwrap();
        writer.varint(0x40B5A, 1).unwrap();
        let mut out = Vec::new();
        writer.finish(&mut out, keys, extent).unwrap();
        out
    }

    fn read_all(bytes: &[u8], draft: Draft, keys: Keys, extent: Extent) -> Vec<(u64, Value<'_>)> {
        let mut r = bytes;
        let mut reader = PairReader::new(&mut r, draft, keys, extent).unwrap();
        let mut out = Vec::new();
        while let Some(key) = reader.key(&mut r).unwrap() {
            out.push((key, reader.value(key, &mut r).unwrap()));
        }
        assert!(r.is_empty());
        out
    }

    #[test]
    fn every_form_round_trips_sorted() {
        let expected = vec![
            (2, Value::Varint(300)),
            (7, Value::Bytes(b"impl")),
            (0x40B5A, Value::Varint(1)),
        ];
        for (draft, keys, extent) in [
            (Draft::D14, Keys::Absolute, Extent::Counted),
            (Draft::D16, Keys::Delta, Extent::Counted),
            (Draft::D22, Keys::Delta, Extent::ToEnd),
        ] {
            let bytes = block(draft, keys, extent);
            assert_eq!(read_all(&bytes, draft, keys, extent), expected);
        }
        // Delta keys on draft 16: 2, +5, +0x40B53.
        assert_eq!(
            block(Draft::D16, Keys::Delta, Extent::Counted),
            [
                &[3, 2, 0x41, 0x2c, 5, 4][..],
                b"impl",
                &[0x80, 0x04, 0x0b, 0x53, 1]
            ]
            .concat()
        );
    }

    #[test]
    fn bounds() {
        // A count over 64.
        assert!(
            PairReader::new(&mut &[65][..], Draft::D14, Keys::Absolute, Extent::Counted).is_err()
        );
        // 65 pairs in a block that runs to its end.
        let bytes: Vec<u8> = (0..65).flat_map(|_| [0u8, 0]).collect();
        let mut r = &bytes[..];
        let mut reader = PairReader::new(&mut r, Draft::D22, Keys::Delta, Extent::ToEnd).unwrap();
        let mut result = Ok(None);
        for _ in 0..65 {
            result = reader.key(&mut r);
            if let Ok(Some(key)) = result {
                reader.value(key, &mut r).unwrap();
            } else {
                break;
            }
        }
        assert!(result.is_err());
        // A value over 65 535 bytes is refused both ways.
        let big = vec![0u8; MAX_VALUE_LEN + 1];
        assert!(PairWriter::new(Draft::D16).bytes(1, &big).is_err());
        let mut bytes = vec![1, 1, 0x80, 0x01, 0x00, 0x00];
        bytes.extend_from_slice(&big);
        let mut r = &bytes[..];
        let mut reader = PairReader::new(&mut r, Draft::D16, Keys::Delta, Extent::Counted).unwrap();
        let key = reader.key(&mut r).unwrap().unwrap();
        assert!(reader.value(key, &mut r).is_err());
    }
}
