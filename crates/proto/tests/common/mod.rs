//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod golden;

use std::fmt::Debug;

use bytes::BytesMut;
use starling_proto::*;

/// Parse hex, ignoring whitespace and `|` separators.
pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    assert!(s.len() & 1 == 0, "odd hex length: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub fn path(s: &str) -> Path {
    Path::new(s).unwrap()
}

pub fn encode<M: Message>(m: &M, v: Version) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_message(m, v, &mut out).unwrap();
    out.to_vec()
}

pub fn encode_t_result<M: TypedMessage>(m: &M, v: Version) -> Result<Vec<u8>, EncodeError> {
    let mut buf = BytesMut::new();
    encode_typed(m, v, &mut buf)?;
    Ok(buf.to_vec())
}

pub fn encode_t<M: TypedMessage>(m: &M, v: Version) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_typed(m, v, &mut out).unwrap();
    out.to_vec()
}

/// Decode exactly one whole message from `bytes` with the streaming decoder.
pub fn decode<M: Message>(bytes: &[u8], v: Version) -> Result<M, DecodeError> {
    let mut buf = BytesMut::from(bytes);
    let m = decode_message::<M>(&mut buf, v)?.expect("whole message present");
    assert!(buf.is_empty(), "decoder left {} bytes", buf.len());
    Ok(m)
}

pub fn decode_t<M: TypedMessage>(bytes: &[u8], v: Version) -> Result<M, DecodeError> {
    let mut buf = BytesMut::from(bytes);
    let m = decode_typed::<M>(&mut buf, v)?.expect("whole message present");
    assert!(buf.is_empty(), "decoder left {} bytes", buf.len());
    Ok(m)
}

/// `bytes` decodes to `expected`, and `expected` encodes back to `bytes`.
pub fn golden<M: Message + PartialEq + Debug>(bytes: &str, v: Version, expected: M) {
    let bytes = hex(bytes);
    assert_eq!(
        decode::<M>(&bytes, v).unwrap(),
        expected,
        "decode of {bytes:02x?}"
    );
    assert_eq!(encode(&expected, v), bytes, "encode of {expected:?}");
}

pub fn golden_t<M: TypedMessage + PartialEq + Debug>(bytes: &str, v: Version, expected: M) {
    let bytes = hex(bytes);
    assert_eq!(
        decode_t::<M>(&bytes, v).unwrap(),
        expected,
        "decode of {bytes:02x?}"
    );
    assert_eq!(encode_t(&expected, v), bytes, "encode of {expected:?}");
}

/// Feed every strict prefix of a valid message to the streaming decoder: it must answer
/// `Ok(None)` without consuming, or a typed error; never panic, never a message.
pub fn check_prefixes<M: Message + Debug>(bytes: &[u8], v: Version) {
    for n in 0..bytes.len() {
        let mut buf = BytesMut::from(&bytes[..n]);
        match decode_message::<M>(&mut buf, v) {
            Ok(None) => assert_eq!(buf.len(), n, "consumed bytes on Ok(None)"),
            Ok(Some(m)) => panic!("prefix {n}/{} decoded as {m:?}", bytes.len()),
            Err(_) => {}
        }
        let mut r = &bytes[..n];
        assert!(decode_message_from::<M>(&mut r, v).is_err());
    }
}

pub fn check_prefixes_t<M: TypedMessage + Debug>(bytes: &[u8], v: Version) {
    for n in 0..bytes.len() {
        let mut buf = BytesMut::from(&bytes[..n]);
        match decode_typed::<M>(&mut buf, v) {
            Ok(None) => assert_eq!(buf.len(), n, "consumed bytes on Ok(None)"),
            Ok(Some(m)) => panic!("prefix {n}/{} decoded as {m:?}", bytes.len()),
            Err(_) => {}
        }
    }
}

/// Decode `bytes` as a message of type `M`; if it decodes, it must re-encode, and the
/// re-encoding must decode to the same value and re-encode to the same bytes.
pub fn stable<M: Message + PartialEq + Debug>(bytes: &[u8], v: Version) {
    let mut buf = BytesMut::from(bytes);
    if let Ok(Some(m)) = decode_message::<M>(&mut buf, v) {
        let mut out = BytesMut::new();
        encode_message(&m, v, &mut out)
            .unwrap_or_else(|e| panic!("decoded {m:?} but cannot re-encode: {e}"));
        let mut again = out.clone();
        let m2 = decode_message::<M>(&mut again, v).unwrap().unwrap();
        assert_eq!(m, m2);
        assert!(again.is_empty());
        assert_eq!(encode(&m2, v), out.to_vec());
    }
}

pub fn stable_t<M: TypedMessage + PartialEq + Debug>(bytes: &[u8], v: Version) {
    let mut buf = BytesMut::from(bytes);
    if let Ok(Some(m)) = decode_typed::<M>(&mut buf, v) {
        let mut out = BytesMut::new();
        encode_typed(&m, v, &mut out)
            .unwrap_or_else(|e| panic!("decoded {m:?} but cannot re-encode: {e}"));
        let mut again = out.clone();
        let m2 = decode_typed::<M>(&mut again, v).unwrap().unwrap();
        assert_eq!(m, m2);
        assert!(again.is_empty());
    }
}

/// Run every decoder of both implemented versions over `bytes`, checking stability.
pub fn exercise(bytes: &[u8]) {
    for v in [Version::Lite05, Version::Lite06] {
        stable::<Setup>(bytes, v);
        stable::<AnnounceRequest>(bytes, v);
        stable::<AnnounceOk>(bytes, v);
        stable::<Announce>(bytes, v);
        stable_t::<Announcement>(bytes, v);
        stable::<Track>(bytes, v);
        stable::<TrackInfo>(bytes, v);
        stable::<Subscribe>(bytes, v);
        stable::<SubscribeUpdate>(bytes, v);
        stable_t::<SubscribeResponse>(bytes, v);
        stable::<GroupHeader>(bytes, v);
        stable::<Fetch>(bytes, v);
        stable::<Probe>(bytes, v);
        stable::<Goaway>(bytes, v);

        let mut buf = BytesMut::from(bytes);
        if let Ok(Some(f)) = decode_frame_header(&mut buf, v) {
            let mut out = BytesMut::new();
            encode_frame_header(&f, v, &mut out).unwrap();
            assert_eq!(decode_frame_header(&mut out, v).unwrap(), Some(f));
        }
        let data = bytes::Bytes::copy_from_slice(bytes);
        if let Ok(d) = Datagram::decode(&data, v) {
            let mut out = Vec::new();
            d.encode(v, &mut out).unwrap();
            assert_eq!(Datagram::decode(&bytes::Bytes::from(out), v).unwrap(), d);
        }
    }
    let mut buf = BytesMut::from(bytes);
    let _ = BidiType::decode(&mut buf, Version::Lite06);
    let mut buf = BytesMut::from(bytes);
    let _ = UniType::decode(&mut buf, Version::Lite06);
}
