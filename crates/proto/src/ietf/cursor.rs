//! A read cursor for the headers of data streams, which arrive a piece at a time: each read
//! either succeeds, finds the buffer too short ([`Need::More`]: try again when more has
//! arrived, nothing consumed), or finds the bytes malformed.

use crate::coding::{DecodeError, Wire};
use crate::varint::{self, Flavor};

/// Why a header could not be read yet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Need {
    More,
    Bad(DecodeError),
}

impl From<DecodeError> for Need {
    fn from(e: DecodeError) -> Self {
        Need::Bad(e)
    }
}

/// `Ok(None)` for [`Need::More`].
pub(crate) fn complete<T>(result: Result<T, Need>) -> Result<Option<T>, DecodeError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(Need::More) => Ok(None),
        Err(Need::Bad(e)) => Err(e),
    }
}

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pub(crate) at: usize,
    flavor: Flavor,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8], wire: impl Wire) -> Self {
        Cursor {
            buf,
            at: 0,
            flavor: wire.flavor(),
        }
    }

    pub(crate) fn varint(&mut self) -> Result<u64, Need> {
        let (v, n) = varint::peek_as(self.flavor, &self.buf[self.at..])?.ok_or(Need::More)?;
        self.at += n;
        Ok(v)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, Need> {
        let b = *self.buf.get(self.at).ok_or(Need::More)?;
        self.at += 1;
        Ok(b)
    }

    /// A `(b)` of at most `max` bytes, refused as soon as its length is read.
    pub(crate) fn bytes(&mut self, max: usize) -> Result<&'a [u8], Need> {
        let len = self.varint()?;
        if len > max as u64 {
            return Err(Need::Bad(DecodeError::TooLarge {
                len,
                max: max as u64,
            }));
        }
        let end = self.at + len as usize;
        let bytes = self.buf.get(self.at..end).ok_or(Need::More)?;
        self.at = end;
        Ok(bytes)
    }
}
