//! The primitive field codecs `(i)`, `(8)`, `(s)`, `(b)`, `OptGroup(i)`
//! (docs/wire.md §2).
//!
//! Readers work on a `&mut &[u8]` holding one complete message body, so running out of
//! bytes there is [`DecodeError::Truncated`]. Writers append to a `Vec<u8>`. Every integer
//! is written in its version's varint form (QUIC before lite-07 and draft 17, leading-ones
//! from them): the primitives take anything that fixes that form ([`Wire`]), so one reader
//! and one writer serve moq-lite and the IETF drafts.

pub use crate::error::{DecodeError, EncodeError};
use crate::varint::{self, Flavor};

/// What fixes a message's varint form: a moq-lite version, an IETF draft, or the form itself.
pub trait Wire: Copy {
    fn flavor(self) -> Flavor;
}

impl Wire for Flavor {
    fn flavor(self) -> Flavor {
        self
    }
}

impl From<varint::VarintTooLarge> for EncodeError {
    fn from(e: varint::VarintTooLarge) -> Self {
        Self::VarintTooLarge(e.0)
    }
}

// ---- readers -------------------------------------------------------------------------

/// `(i)`
pub fn read_varint(r: &mut &[u8], version: impl Wire) -> Result<u64, DecodeError> {
    varint::decode_as(version.flavor(), r)
}

/// `(8)`
pub fn read_u8(r: &mut &[u8]) -> Result<u8, DecodeError> {
    let (&b, rest) = r.split_first().ok_or(DecodeError::Truncated)?;
    *r = rest;
    Ok(b)
}

/// `bool(8)`: 0 or 1, anything else refused.
pub fn read_bool(r: &mut &[u8]) -> Result<bool, DecodeError> {
    match read_u8(r)? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::InvalidValue("bool")),
    }
}

/// `(b)`: a varint length then that many bytes, borrowed from the body.
pub fn read_bytes<'a>(r: &mut &'a [u8], version: impl Wire) -> Result<&'a [u8], DecodeError> {
    let len = read_varint(r, version)?;
    if len > r.len() as u64 {
        return Err(DecodeError::Truncated);
    }
    let (head, rest) = r.split_at(len as usize);
    *r = rest;
    Ok(head)
}

/// `(s)`: a `(b)` holding UTF-8.
pub fn read_str<'a>(r: &mut &'a [u8], version: impl Wire) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(read_bytes(r, version)?).map_err(|_| DecodeError::InvalidUtf8)
}

/// `OptGroup(i)`: 0 is `None`, `n+1` is `Some(n)`.
pub fn read_opt(r: &mut &[u8], version: impl Wire) -> Result<Option<u64>, DecodeError> {
    Ok(read_varint(r, version)?.checked_sub(1))
}

/// Require that a body was consumed exactly.
pub fn finish(r: &[u8]) -> Result<(), DecodeError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::Long)
    }
}

// ---- writers -------------------------------------------------------------------------

/// `(i)`
pub fn write_varint(w: &mut Vec<u8>, v: u64, version: impl Wire) -> Result<(), EncodeError> {
    Ok(varint::encode_as(version.flavor(), v, w)?)
}

/// `(8)`
pub fn write_u8(w: &mut Vec<u8>, v: u8) {
    w.push(v);
}

/// `bool(8)`
pub fn write_bool(w: &mut Vec<u8>, v: bool) {
    w.push(u8::from(v));
}

/// `(b)`
pub fn write_bytes(w: &mut Vec<u8>, v: &[u8], version: impl Wire) -> Result<(), EncodeError> {
    write_varint(w, v.len() as u64, version)?;
    w.extend_from_slice(v);
    Ok(())
}

/// `(s)`
pub fn write_str(w: &mut Vec<u8>, v: &str, version: impl Wire) -> Result<(), EncodeError> {
    write_bytes(w, v.as_bytes(), version)
}

/// `OptGroup(i)`: `None` is 0, `Some(n)` is `n+1` (so `n` must be below 2^62 - 1).
pub fn write_opt(w: &mut Vec<u8>, v: Option<u64>, version: impl Wire) -> Result<(), EncodeError> {
    match v {
        None => write_varint(w, 0, version),
        Some(n) => write_varint(
            w,
            n.checked_add(1).ok_or(EncodeError::VarintTooLarge(n))?,
            version,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives() {
        for version in [Flavor::Quic, Flavor::LeadingOnes] {
            let mut w = Vec::new();
            write_str(&mut w, "héllo", version).unwrap();
            write_opt(&mut w, None, version).unwrap();
            write_opt(&mut w, Some(7), version).unwrap();
            write_u8(&mut w, 0xff);
            write_bool(&mut w, true);
            let mut r = &w[..];
            assert_eq!(read_str(&mut r, version).unwrap(), "héllo");
            assert_eq!(read_opt(&mut r, version).unwrap(), None);
            assert_eq!(read_opt(&mut r, version).unwrap(), Some(7));
            assert_eq!(read_u8(&mut r).unwrap(), 0xff);
            assert!(read_bool(&mut r).unwrap());
            finish(r).unwrap();
            assert_eq!(read_u8(&mut r), Err(DecodeError::Truncated));
            assert!(write_opt(&mut w, Some(varint::MAX), version).is_err());
            assert_eq!(
                read_str(&mut &[2, 0xff, 0xfe][..], version),
                Err(DecodeError::InvalidUtf8)
            );
            assert_eq!(
                read_bytes(&mut &[5, 1][..], version),
                Err(DecodeError::Truncated)
            );
            assert_eq!(finish(&[0]), Err(DecodeError::Long));
            assert_eq!(
                read_bool(&mut &[2][..]),
                Err(DecodeError::InvalidValue("bool"))
            );
        }
    }
}
