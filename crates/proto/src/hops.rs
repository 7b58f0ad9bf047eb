//! Hop chains, `Hops{Count(i), HopID(i)×Count}` (docs/wire.md §2 "Hop list", §4.4).
//!
//! At most [`MAX_HOPS`] entries; a non-zero id may not repeat; id 0 ("anonymous") may.
//! The chain excludes the sender: the receiver appends ANNOUNCE_OK's hop.

use crate::coding::{self, DecodeError, EncodeError};
use crate::limits::{MAX_HOPS, MAX_VARINT};
use crate::version::Version;

/// A validated hop chain, first entry the original publisher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Hops(Vec<u64>);

/// Why a hop could not join a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HopsError {
    #[error("more than {MAX_HOPS} hops")]
    TooMany,
    #[error("hop {0:#x} repeats")]
    Duplicate(u64),
    #[error("hop {0:#x} does not fit a varint")]
    OutOfRange(u64),
}

impl From<HopsError> for DecodeError {
    fn from(e: HopsError) -> Self {
        match e {
            HopsError::TooMany => DecodeError::BoundsExceeded("hops"),
            HopsError::Duplicate(_) => DecodeError::InvalidValue("repeated hop id"),
            HopsError::OutOfRange(_) => DecodeError::InvalidValue("hop id"),
        }
    }
}

impl From<HopsError> for EncodeError {
    fn from(e: HopsError) -> Self {
        match e {
            HopsError::TooMany => EncodeError::BoundsExceeded("hops"),
            HopsError::Duplicate(_) => EncodeError::InvalidValue("repeated hop id"),
            HopsError::OutOfRange(v) => EncodeError::VarintTooLarge(v),
        }
    }
}

impl Hops {
    /// The empty chain.
    pub const fn new() -> Hops {
        Hops(Vec::new())
    }

    /// Validate a whole chain.
    pub fn from_vec(ids: Vec<u64>) -> Result<Hops, HopsError> {
        let mut hops = Hops(Vec::with_capacity(ids.len().min(MAX_HOPS)));
        for id in ids {
            hops.push(id)?;
        }
        Ok(hops)
    }

    /// Append one hop, keeping the invariants.
    pub fn push(&mut self, id: u64) -> Result<(), HopsError> {
        if self.0.len() >= MAX_HOPS {
            return Err(HopsError::TooMany);
        }
        if id > MAX_VARINT {
            return Err(HopsError::OutOfRange(id));
        }
        if id != 0 && self.0.contains(&id) {
            return Err(HopsError::Duplicate(id));
        }
        self.0.push(id);
        Ok(())
    }

    /// The ids, first the original publisher.
    pub fn as_slice(&self) -> &[u64] {
        &self.0
    }

    /// Number of hops.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the chain is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a non-zero `id` is on the chain (0 names nobody, so never matches).
    pub fn contains(&self, id: u64) -> bool {
        id != 0 && self.0.contains(&id)
    }

    /// Iterate over the ids.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().copied()
    }

    /// Read a hop list; the count is checked before any id is read.
    pub fn decode(r: &mut &[u8], version: Version) -> Result<Hops, DecodeError> {
        let count = coding::read_varint(r, version)?;
        if count > MAX_HOPS as u64 {
            return Err(DecodeError::BoundsExceeded("hops"));
        }
        let mut hops = Hops(Vec::with_capacity(count as usize));
        for _ in 0..count {
            hops.push(coding::read_varint(r, version)?)?;
        }
        Ok(hops)
    }

    /// Write a hop list.
    pub fn encode(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        coding::write_varint(w, self.0.len() as u64, version)?;
        for &id in &self.0 {
            coding::write_varint(w, id, version)?;
        }
        Ok(())
    }
}

impl TryFrom<Vec<u64>> for Hops {
    type Error = HopsError;

    fn try_from(ids: Vec<u64>) -> Result<Self, Self::Error> {
        Hops::from_vec(ids)
    }
}

impl<'a> IntoIterator for &'a Hops {
    type Item = &'a u64;
    type IntoIter = std::slice::Iter<'a, u64>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invariants() {
        assert!(Hops::from_vec(vec![0, 0, 1, 2]).is_ok());
        assert_eq!(Hops::from_vec(vec![1, 2, 1]), Err(HopsError::Duplicate(1)));
        assert_eq!(Hops::from_vec((1..=33).collect()), Err(HopsError::TooMany));
        assert!(Hops::from_vec((1..=32).collect()).is_ok());
        assert!(!Hops::from_vec(vec![0]).unwrap().contains(0));
    }

    #[test]
    fn wire() {
        let mut r: &[u8] = &[0x01, 0x70, 0x39];
        assert_eq!(
            Hops::decode(&mut r, Version::Lite06).unwrap().as_slice(),
            &[12345]
        );
        assert_eq!(
            Hops::decode(&mut &[33u8][..], Version::Lite06),
            Err(DecodeError::BoundsExceeded("hops"))
        );
        assert_eq!(
            Hops::decode(&mut &[2u8, 5, 5][..], Version::Lite06),
            Err(DecodeError::InvalidValue("repeated hop id"))
        );
        assert_eq!(
            Hops::decode(&mut &[2u8, 5][..], Version::Lite06),
            Err(DecodeError::Truncated)
        );
    }
}
