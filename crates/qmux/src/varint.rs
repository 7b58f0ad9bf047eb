//! QUIC variable-length integers (RFC 9000 §16), the only integer encoding QMux uses.

use bytes::{Buf, BufMut};

/// Largest value a varint can carry.
pub const MAX: u64 = (1 << 62) - 1;

/// The input ended inside a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("truncated varint")]
pub struct Truncated;

/// Bytes the minimal encoding of `v` takes (values above [`MAX`] count as 8).
pub const fn size(v: u64) -> usize {
    if v < (1 << 6) {
        1
    } else if v < (1 << 14) {
        2
    } else if v < (1 << 30) {
        4
    } else {
        8
    }
}

/// Append the minimal encoding of `v`. Values above [`MAX`] are a caller bug; they are
/// clamped to [`MAX`] rather than corrupting the stream.
pub fn put(buf: &mut impl BufMut, v: u64) {
    debug_assert!(v <= MAX, "varint {v} out of range");
    let v = v.min(MAX);
    match size(v) {
        1 => buf.put_u8(v as u8),
        2 => buf.put_u16(0x4000 | v as u16),
        4 => buf.put_u32(0x8000_0000 | v as u32),
        _ => buf.put_u64(0xc000_0000_0000_0000 | v),
    }
}

/// Read one varint, advancing `buf` past it.
pub fn get(buf: &mut impl Buf) -> Result<u64, Truncated> {
    if !buf.has_remaining() {
        return Err(Truncated);
    }
    let first = buf.chunk()[0];
    let len = 1usize << (first >> 6);
    if buf.remaining() < len {
        return Err(Truncated);
    }
    let mut v = u64::from(buf.get_u8() & 0x3f);
    for _ in 1..len {
        v = (v << 8) | u64::from(buf.get_u8());
    }
    Ok(v)
}

/// Read a varint from the front of `data` without consuming: `(value, length)`.
pub fn peek(data: &[u8]) -> Result<(u64, usize), Truncated> {
    let mut slice = data;
    let v = get(&mut slice)?;
    Ok((v, data.len() - slice.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9000_examples() {
        let cases: &[(&[u8], u64)] = &[
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            (&[0x40, 0x25], 37),
        ];
        for (bytes, value) in cases {
            let mut b = *bytes;
            assert_eq!(get(&mut b), Ok(*value));
            assert!(b.is_empty());
        }
        let mut out = Vec::new();
        put(&mut out, 15_293);
        assert_eq!(out, [0x7b, 0xbd]);
    }

    #[test]
    fn truncation_is_an_error() {
        assert_eq!(get(&mut &[][..]), Err(Truncated));
        assert_eq!(get(&mut &[0x40][..]), Err(Truncated));
        assert_eq!(peek(&[0x80, 0, 0]), Err(Truncated));
        assert_eq!(peek(&[0x40, 1, 9]), Ok((1, 2)));
    }
}
