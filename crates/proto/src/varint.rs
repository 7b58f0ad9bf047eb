//! Variable-length integers in both of their wire forms, and the ZigZag mapping (docs/wire.md
//! §2; RFC 9000 §16).
//!
//! **QUIC varints** (every moq-lite version before 07, and QMux): the top two bits of the
//! first byte give the length (`00`→1, `01`→2, `10`→4, `11`→8 bytes), the rest is the
//! big-endian value. [`encode`] always writes the minimal form and refuses values ≥ 2^62 with
//! [`VarintTooLarge`]; [`decode`] and [`peek`] accept any form, minimal or not.
//!
//! **Leading-ones varints** (lite-07-wip): the number of leading one bits of the first byte
//! gives the length: `0xxxxxxx` 1 byte (7 bits), `10` 2 (14), `110` 3 (21), `1110` 4 (28),
//! `11110` 5 (35), `111110` 6 (42), `1111110x` 7 (49), `11111110` 8 (56), `11111111` 9 (64).
//! The encoder writes the minimal form but never the 7-byte one (a value of 43 to 56 bits
//! takes 8 bytes); the decoder accepts every form and refuses a value above 2^62 - 1, the
//! range every moq-lite field shares. [`Flavor`] picks one; `*_as` functions take it.

use bytes::BufMut;

use crate::error::DecodeError;
use crate::limits;

/// Largest encodable value, 2^62 - 1.
pub const MAX: u64 = limits::MAX_VARINT;

/// A value that does not fit a QUIC varint (≥ 2^62). Our fault when encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("varint value {0} exceeds 2^62-1")]
pub struct VarintTooLarge(pub u64);

/// Number of bytes the minimal encoding of `v` takes.
pub fn encoded_len(v: u64) -> Result<usize, VarintTooLarge> {
    match v {
        0..=0x3f => Ok(1),
        0x40..=0x3fff => Ok(2),
        0x4000..=0x3fff_ffff => Ok(4),
        0x4000_0000..=MAX => Ok(8),
        _ => Err(VarintTooLarge(v)),
    }
}

/// Append the minimal encoding of `v`.
pub fn encode<B: BufMut + ?Sized>(v: u64, out: &mut B) -> Result<(), VarintTooLarge> {
    match encoded_len(v)? {
        1 => out.put_u8(v as u8),
        2 => out.put_u16(0x4000 | v as u16),
        4 => out.put_u32(0x8000_0000 | v as u32),
        _ => out.put_u64(0xc000_0000_0000_0000 | v),
    }
    Ok(())
}

/// The minimal encoding of `v` as a vector (convenience for SETUP parameter values).
pub fn to_vec(v: u64) -> Result<Vec<u8>, VarintTooLarge> {
    let mut out = Vec::with_capacity(8);
    encode(v, &mut out)?;
    Ok(out)
}

/// Look at the varint at the start of `buf` without consuming it.
///
/// Returns the value and the number of bytes it occupies, or `None` when `buf` does not
/// yet hold the whole varint. A QUIC varint can never be malformed, only incomplete.
pub fn peek(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        v = (v << 8) | u64::from(*b);
    }
    Some((v, len))
}

/// Read one varint from the front of `r`, advancing it; [`DecodeError::Truncated`] if
/// `r` ends inside it.
pub fn decode(r: &mut &[u8]) -> Result<u64, DecodeError> {
    let (v, n) = peek(r).ok_or(DecodeError::Truncated)?;
    *r = &r[n..];
    Ok(v)
}

/// Which wire form a version writes its integers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// RFC 9000 §16: a 2-bit length tag.
    Quic,
    /// The length in leading one bits (MoQT draft 18 on, moq-lite-07).
    LeadingOnes,
    /// Draft 17's leading-ones form, which reserves the 7-byte prefix `1111110x`: a value
    /// starting with it is refused. Written exactly as [`Flavor::LeadingOnes`] (the encoder
    /// never emits the 7-byte form).
    LeadingOnesDraft17,
}

/// Bytes the minimal `flavor` encoding of `v` takes.
pub fn encoded_len_as(flavor: Flavor, v: u64) -> Result<usize, VarintTooLarge> {
    match flavor {
        Flavor::Quic => encoded_len(v),
        Flavor::LeadingOnes | Flavor::LeadingOnesDraft17 => match v {
            _ if v > MAX => Err(VarintTooLarge(v)),
            _ if v < 1 << 7 => Ok(1),
            _ if v < 1 << 14 => Ok(2),
            _ if v < 1 << 21 => Ok(3),
            _ if v < 1 << 28 => Ok(4),
            _ if v < 1 << 35 => Ok(5),
            _ if v < 1 << 42 => Ok(6),
            // The 7-byte form is never written: 8 bytes carry 56 bits.
            _ if v < 1 << 56 => Ok(8),
            _ => Ok(9),
        },
    }
}

/// Append the minimal `flavor` encoding of `v`.
pub fn encode_as<B: BufMut + ?Sized>(
    flavor: Flavor,
    v: u64,
    out: &mut B,
) -> Result<(), VarintTooLarge> {
    let len = encoded_len_as(flavor, v)?;
    if flavor == Flavor::Quic {
        return encode(v, out);
    }
    match len {
        1 => out.put_u8(v as u8),
        9 => {
            out.put_u8(0xff);
            out.put_u64(v);
        }
        8 => {
            out.put_u8(0xfe);
            out.put_slice(&v.to_be_bytes()[1..]);
        }
        _ => {
            // `len - 1` leading ones, a zero, then the value's top bits; the rest follows.
            let tag = !(0xffu8 >> (len - 1));
            let bytes = v.to_be_bytes();
            let rest = &bytes[8 - (len - 1)..];
            out.put_u8(tag | (v >> (8 * (len - 1))) as u8);
            out.put_slice(rest);
        }
    }
    Ok(())
}

/// Look at the `flavor` varint at the start of `buf` without consuming it: the value and its
/// length, `None` when `buf` does not yet hold all of it. A leading-ones value above 2^62 - 1
/// is refused (a QUIC varint cannot be malformed, only incomplete).
pub fn peek_as(flavor: Flavor, buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError> {
    if flavor == Flavor::Quic {
        return Ok(peek(buf));
    }
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let ones = first.leading_ones() as usize;
    if ones == 6 && flavor == Flavor::LeadingOnesDraft17 {
        return Err(DecodeError::InvalidValue(
            "the 7-byte varint form on draft 17",
        ));
    }
    let len = ones + 1;
    let Some(bytes) = buf.get(..len) else {
        return Ok(None);
    };
    // The bits of the first byte below its tag (none for the 8- and 9-byte forms).
    let mut v = if ones >= 7 {
        0
    } else {
        u64::from(first & (0x7f >> ones))
    };
    for b in &bytes[1..] {
        v = (v << 8) | u64::from(*b);
    }
    if v > MAX {
        return Err(DecodeError::BoundsExceeded("varint above 2^62 - 1"));
    }
    Ok(Some((v, len)))
}

/// Read one `flavor` varint from the front of `r`, advancing it; [`DecodeError::Truncated`]
/// if `r` ends inside it.
pub fn decode_as(flavor: Flavor, r: &mut &[u8]) -> Result<u64, DecodeError> {
    let (v, n) = peek_as(flavor, r)?.ok_or(DecodeError::Truncated)?;
    *r = &r[n..];
    Ok(v)
}

/// ZigZag-map a signed value: `(n << 1) ^ (n >> 63)`.
///
/// The result must fit a varint, so `n` must lie in `[-2^61, 2^61)`.
pub fn zigzag_encode(n: i64) -> Result<u64, VarintTooLarge> {
    if !(limits::MIN_ZIGZAG..=limits::MAX_ZIGZAG).contains(&n) {
        // Report the unsigned image the caller would have put on the wire.
        return Err(VarintTooLarge(((n << 1) ^ (n >> 63)) as u64));
    }
    Ok(((n << 1) ^ (n >> 63)) as u64)
}

/// Inverse of [`zigzag_encode`]: `(u >> 1) ^ -(u & 1)`. Total for every varint value.
pub fn zigzag_decode(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        to_vec(v).unwrap()
    }

    #[test]
    fn rfc9000_examples() {
        assert_eq!(enc(151_288_809_941_952_652), hex("c2197c5eff14e88c"));
        assert_eq!(enc(494_878_333), hex("9d7f3e7d"));
        assert_eq!(enc(15_293), hex("7bbd"));
        assert_eq!(enc(37), hex("25"));
        // Non-minimal forms decode.
        assert_eq!(peek(&hex("4025")), Some((37, 2)));
        assert_eq!(peek(&hex("8000 0025")), Some((37, 4)));
        assert_eq!(peek(&hex("c000 0000 0000 0025")), Some((37, 8)));
    }

    #[test]
    fn boundaries() {
        for (v, n) in [
            (0x3f, 1),
            (0x40, 2),
            (0x3fff, 2),
            (0x4000, 4),
            (0x3fff_ffff, 4),
            (0x4000_0000, 8),
            (MAX, 8),
        ] {
            assert_eq!(encoded_len(v), Ok(n));
            assert_eq!(peek(&enc(v)), Some((v, n)));
        }
        assert_eq!(encoded_len(MAX + 1), Err(VarintTooLarge(MAX + 1)));
        assert!(encode(u64::MAX, &mut Vec::new()).is_err());
    }

    #[test]
    fn incomplete() {
        assert_eq!(peek(&[]), None);
        assert_eq!(peek(&[0x40]), None);
        assert_eq!(peek(&[0xc0, 0, 0, 0, 0, 0, 0]), None);
        let mut r: &[u8] = &[0x80, 1];
        assert_eq!(decode(&mut r), Err(DecodeError::Truncated));
    }

    #[test]
    fn zigzag() {
        assert_eq!(zigzag_encode(60_000), Ok(120_000));
        assert_eq!(zigzag_encode(1_000), Ok(2_000));
        assert_eq!(zigzag_encode(-1), Ok(1));
        assert_eq!(zigzag_decode(1), -1);
        assert_eq!(zigzag_encode(limits::MIN_ZIGZAG), Ok(MAX));
        assert_eq!(zigzag_encode(limits::MAX_ZIGZAG), Ok(MAX - 1));
        assert!(zigzag_encode(limits::MAX_ZIGZAG + 1).is_err());
        assert!(zigzag_encode(limits::MIN_ZIGZAG - 1).is_err());
        assert_eq!(zigzag_decode(MAX), limits::MIN_ZIGZAG);
    }

    fn lo(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_as(Flavor::LeadingOnes, v, &mut out).unwrap();
        out
    }

    /// The spec's lite-07 examples, and the form boundaries both ways.
    #[test]
    fn leading_ones() {
        assert_eq!(lo(1000), hex("83e8"));
        assert_eq!(lo(5000), hex("9388"));
        assert_eq!(lo(120_000), hex("c1d4c0"));
        assert_eq!(lo(0x1A2B_3C4D_5E6F), hex("fe00 1a2b 3c4d 5e6f"));
        assert_eq!(lo(100), hex("64"));
        for (v, n) in [
            (0x7f, 1),
            (0x80, 2),
            ((1 << 14) - 1, 2),
            (1 << 14, 3),
            ((1 << 21) - 1, 3),
            (1 << 21, 4),
            ((1 << 28) - 1, 4),
            (1 << 28, 5),
            ((1 << 35) - 1, 5),
            (1 << 35, 6),
            ((1 << 42) - 1, 6),
            (1 << 42, 8),
            ((1 << 56) - 1, 8),
            (1 << 56, 9),
            (MAX, 9),
        ] {
            let bytes = lo(v);
            assert_eq!(bytes.len(), n, "{v:#x}");
            assert_eq!(encoded_len_as(Flavor::LeadingOnes, v), Ok(n));
            assert_eq!(peek_as(Flavor::LeadingOnes, &bytes), Ok(Some((v, n))));
            assert_eq!(peek_as(Flavor::LeadingOnes, &bytes[..n - 1]), Ok(None));
        }
        // The 7-byte form decodes, though it is never written.
        assert_eq!(
            peek_as(Flavor::LeadingOnes, &hex("fd 0000 0000 0001")),
            Ok(Some(((1 << 48) | 1, 7)))
        );
        // Draft 17 reserves it: refused as soon as its first byte is seen.
        assert!(peek_as(Flavor::LeadingOnesDraft17, &hex("fd 0000 0000 0001")).is_err());
        assert!(peek_as(Flavor::LeadingOnesDraft17, &hex("fc")).is_err());
        assert_eq!(
            peek_as(Flavor::LeadingOnesDraft17, &hex("fe00 1a2b 3c4d 5e6f")),
            Ok(Some((0x1A2B_3C4D_5E6F, 8)))
        );
        let mut draft17 = Vec::new();
        encode_as(Flavor::LeadingOnesDraft17, 1 << 50, &mut draft17).unwrap();
        assert_eq!(draft17, lo(1 << 50));
        // Non-minimal forms decode.
        assert_eq!(peek_as(Flavor::LeadingOnes, &hex("8005")), Ok(Some((5, 2))));
        // Past 2^62 - 1: refused, never truncated.
        assert!(peek_as(Flavor::LeadingOnes, &hex("ff 4000 0000 0000 0000")).is_err());
        assert!(encode_as(Flavor::LeadingOnes, MAX + 1, &mut Vec::new()).is_err());
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
