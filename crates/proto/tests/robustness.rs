//! Hostile input: every prefix of every golden message, oversized length prefixes,
//! malformed bodies, and a byte-flip fuzz loop. Nothing may panic; incomplete input is
//! `Ok(None)` (nothing consumed) or a typed error.

mod common;

use bytes::BytesMut;
use common::*;
use starling_proto::*;

const V5: Version = Version::Lite05;
const V6: Version = Version::Lite06;

type Check = fn(&[u8], Version);

/// The golden messages (without stream-type bytes), with the decoder that reads them.
fn corpus() -> Vec<(&'static str, Version, Check)> {
    vec![
        ("04 01 03 01 02", V6, check_prefixes::<Setup>),
        (
            "13 02 02 0d 2f616e6f6e3f6a77743d616263 03 01 02",
            V6,
            check_prefixes::<Setup>,
        ),
        (
            "0e 02 01 01 01 05 08 c0001a2b3c4d5e6f",
            V5,
            check_prefixes::<Setup>,
        ),
        ("01 00", V6, check_prefixes::<AnnounceRequest>),
        ("02 00 00", V5, check_prefixes::<AnnounceRequest>),
        ("09 c0001a2b3c4d5e6f 01", V6, check_prefixes::<AnnounceOk>),
        (
            "0f 01 0a 64656d6f2f636c6f636b 01 70 39",
            V5,
            check_prefixes::<Announce>,
        ),
        (
            "00 10 0a 64656d6f2f636c6f636b 01 7039 01 01",
            V6,
            check_prefixes_t::<Announcement>,
        ),
        (
            "02 06 00 01 7039 03 03",
            V6,
            check_prefixes_t::<Announcement>,
        ),
        ("01 01 00", V6, check_prefixes_t::<Announcement>),
        (
            "13 0a 64656d6f2f636c6f636b 07 7365636f6e6473",
            V6,
            check_prefixes::<Track>,
        ),
        ("05 7f 53 88 43 e8", V6, check_prefixes::<TrackInfo>),
        ("06 7f 00 53 88 43 e8", V5, check_prefixes::<TrackInfo>),
        (
            "1a 00 0a 64656d6f2f636c6f636b 07 7365636f6e6473 00 00 00 00 00 00",
            V6,
            check_prefixes::<Subscribe>,
        ),
        (
            "1b 01 0a 64656d6f2f636c6f636b 07 7365636f6e6473 02 41f4 07 0a 04 03",
            V6,
            check_prefixes::<Subscribe>,
        ),
        (
            "18 00 0a 64656d6f2f636c6f636b 05 766964656f 02 00 41 f4 00 00",
            V5,
            check_prefixes::<Subscribe>,
        ),
        (
            "06 05 00 00 00 00 00",
            V6,
            check_prefixes::<SubscribeUpdate>,
        ),
        (
            "06 05 00 41 f4 00 00",
            V5,
            check_prefixes::<SubscribeUpdate>,
        ),
        ("00 01 01", V6, check_prefixes_t::<SubscribeResponse>),
        ("02 03 03 04 00", V5, check_prefixes_t::<SubscribeResponse>),
        ("03 00 01 00", V6, check_prefixes::<GroupHeader>),
        ("02 00 2a", V5, check_prefixes::<GroupHeader>),
        (
            "17 0a 64656d6f2f636c6f636b 07 7365636f6e6473 00 01 00 00",
            V6,
            check_prefixes::<Fetch>,
        ),
        (
            "13 0a 64656d6f2f636c6f636b 05 766964656f 02 29",
            V5,
            check_prefixes::<Fetch>,
        ),
        ("05 80 26 25 a0 23", V6, check_prefixes::<Probe>),
        ("01 00", V6, check_prefixes::<Goaway>),
    ]
}

#[test]
fn every_prefix_is_incomplete_or_an_error() {
    for (bytes, v, check) in corpus() {
        check(&hex(bytes), v);
    }
}

#[test]
fn frame_header_prefixes() {
    let bytes = hex("80 01 d4 c0 06");
    for n in 0..bytes.len() {
        let mut buf = BytesMut::from(&bytes[..n]);
        assert_eq!(decode_frame_header(&mut buf, V6), Ok(None));
        assert_eq!(buf.len(), n);
    }
}

#[test]
fn oversized_length_prefix_is_refused_at_once() {
    // 64 MiB + 1 as an 8-byte varint, and nothing else.
    let mut buf = BytesMut::from(&hex("c0 00 00 00 04 00 00 01")[..]);
    assert_eq!(
        decode_message::<Subscribe>(&mut buf, V6),
        Err(DecodeError::TooLarge {
            len: 64 * 1024 * 1024 + 1,
            max: 64 * 1024 * 1024
        })
    );
    // Exactly the limit is only incomplete.
    let mut buf = BytesMut::from(&hex("c0 00 00 00 04 00 00 00")[..]);
    assert_eq!(decode_message::<Subscribe>(&mut buf, V6), Ok(None));
    // SETUP: 64 KiB.
    let mut buf = BytesMut::from(&hex("80 01 00 01")[..]);
    assert_eq!(
        decode_message::<Setup>(&mut buf, V6),
        Err(DecodeError::TooLarge {
            len: 65537,
            max: 65536
        })
    );
    // Typed: after Type and Len.
    let mut buf = BytesMut::from(&hex("00 c0 00 00 00 04 00 00 01")[..]);
    assert!(matches!(
        decode_typed::<Announcement>(&mut buf, V6),
        Err(DecodeError::TooLarge { .. })
    ));
    // A caller's tighter limit.
    let mut buf = BytesMut::from(&hex("0b")[..]);
    assert_eq!(
        decode_message_with_limit::<Track>(&mut buf, V6, 10),
        Err(DecodeError::TooLarge { len: 11, max: 10 })
    );
    let mut buf = BytesMut::from(&hex("01 0b")[..]);
    assert!(matches!(
        decode_typed_with_limit::<SubscribeResponse>(&mut buf, V6, 10),
        Err(DecodeError::TooLarge { .. })
    ));
    // A frame over 32 MiB, before any payload.
    let mut buf = BytesMut::from(&hex("00 82 00 00 01")[..]);
    assert_eq!(
        decode_frame_header(&mut buf, V6),
        Err(DecodeError::FrameTooLarge {
            size: 32 * 1024 * 1024 + 1,
            max: 32 * 1024 * 1024
        })
    );
    assert_eq!(
        DecodeError::FrameTooLarge { size: 0, max: 0 }.stream_code(),
        StreamCode::FrameTooLarge
    );
}

#[test]
fn unknown_subscribe_response_type_fails_before_the_body() {
    let mut buf = BytesMut::from(&hex("05")[..]);
    assert_eq!(
        decode_typed::<SubscribeResponse>(&mut buf, V6),
        Err(DecodeError::UnknownType(5))
    );
}

#[test]
fn malformed_bodies() {
    use DecodeError::*;
    // Trailing bytes inside the declared length.
    assert_eq!(
        decode::<TrackInfo>(&hex("06 7f 53 88 43 e8 00"), V6),
        Err(Long)
    );
    assert_eq!(
        decode_t::<SubscribeResponse>(&hex("00 02 01 00"), V6),
        Err(Long)
    );
    assert_eq!(decode_t::<Announcement>(&hex("01 02 00 00"), V6), Err(Long));
    // Declared length too short for the fields.
    assert_eq!(
        decode::<TrackInfo>(&hex("04 7f 53 88 43"), V6),
        Err(Truncated)
    );
    // Timescale 0.
    assert_eq!(
        decode::<TrackInfo>(&hex("04 7f 53 88 00"), V6),
        Err(InvalidValue("timescale"))
    );
    // Bad UTF-8 in a track name.
    assert_eq!(
        decode::<Track>(&hex("04 00 02 ff fe"), V6),
        Err(InvalidUtf8)
    );
    // 33 path segments.
    let long = vec!["a"; 33].join("/");
    let mut body = varint::to_vec(long.len() as u64).unwrap();
    body.extend_from_slice(long.as_bytes());
    let mut msg = varint::to_vec(body.len() as u64).unwrap();
    msg.extend(body);
    assert_eq!(
        decode::<AnnounceRequest>(&msg, V6),
        Err(BoundsExceeded("path segments"))
    );
    // 33 hops, a repeated hop.
    assert_eq!(
        decode::<Announce>(&hex("04 01 00 21 00"), V5),
        Err(BoundsExceeded("hops"))
    );
    assert_eq!(
        decode::<Announce>(&hex("05 01 00 02 07 07"), V5),
        Err(InvalidValue("repeated hop id"))
    );
    // Announce status 3; restart is fine on 05.
    assert_eq!(
        decode::<Announce>(&hex("03 03 00 00"), V5),
        Err(InvalidValue("announce status"))
    );
    assert!(decode::<Announce>(&hex("03 02 00 00"), V5).is_ok());
    // Frame End without Group End (06).
    assert_eq!(
        decode::<SubscribeUpdate>(&hex("06 00 00 00 00 00 01"), V6),
        Err(InvalidSubscribeLocation)
    );
    // FETCH end before start.
    assert_eq!(
        decode::<Fetch>(&hex("06 00 00 00 01 05 03"), V6),
        Err(InvalidSubscribeLocation)
    );
    // GOAWAY URI over 8192 bytes: refused from its declared length.
    assert_eq!(
        decode::<Goaway>(&hex("03 60 01 00"), V6),
        Err(BoundsExceeded("GOAWAY URI"))
    );
    // Duplicate and too many SETUP parameters.
    assert_eq!(
        decode::<Setup>(&hex("05 02 09 00 09 00"), V6),
        Err(DuplicateParameter(9))
    );
    assert_eq!(
        decode::<Setup>(&hex("02 40 41"), V6),
        Err(TooManyParameters)
    );
    // Stream types.
    let mut buf = BytesMut::from(&hex("07")[..]);
    assert_eq!(
        BidiType::decode(&mut buf, Version::Lite06),
        Err(UnknownType(7))
    );
    // Version gates.
    assert_eq!(
        decode::<Track>(&hex("02 00 00"), Version::Lite04),
        Err(Unsupported)
    );
    assert_eq!(
        decode::<Announce>(&hex("03 01 00 00"), V6),
        Err(Unsupported)
    );
    assert_eq!(
        decode_t::<Announcement>(&hex("01 01 00"), V5),
        Err(Unsupported)
    );
    // Codes.
    assert_eq!(Truncated.stream_code(), StreamCode::MalformedTrack);
    assert_eq!(Truncated.session_code(), SessionCode::ProtocolViolation);
    assert_eq!(Unsupported.stream_code(), StreamCode::Internal);
}

#[test]
fn encoder_refuses_what_the_decoder_refuses() {
    use EncodeError::*;
    let mut out = BytesMut::new();
    let frame_bounds = SubscribeUpdate {
        group_start: Some(1),
        frame_start: 2,
        ..Default::default()
    };
    assert_eq!(
        encode_message(&frame_bounds, V5, &mut out),
        Err(FrameBoundsUnsupported)
    );
    let no_end = SubscribeUpdate {
        frame_end: Some(1),
        ..Default::default()
    };
    assert_eq!(
        encode_message(&no_end, V6, &mut out),
        Err(InvalidSubscribeLocation)
    );
    let no_start = SubscribeUpdate {
        frame_start: 1,
        ..Default::default()
    };
    assert_eq!(
        encode_message(&no_start, V6, &mut out),
        Err(InvalidSubscribeLocation)
    );
    let fetch = Fetch {
        frame_start: 3,
        frame_end: Some(2),
        ..Default::default()
    };
    assert_eq!(
        encode_message(&fetch, V6, &mut out),
        Err(InvalidSubscribeLocation)
    );
    let fetch = Fetch {
        frame_start: 3,
        ..Default::default()
    };
    assert_eq!(
        encode_message(&fetch, V5, &mut out),
        Err(FrameBoundsUnsupported)
    );
    let group = GroupHeader {
        frame_start: 1,
        ..Default::default()
    };
    assert_eq!(
        encode_message(&group, V5, &mut out),
        Err(FrameBoundsUnsupported)
    );
    let info = TrackInfo {
        timescale: 0,
        ..Default::default()
    };
    assert_eq!(
        encode_message(&info, V6, &mut out),
        Err(InvalidValue("timescale"))
    );
    let goaway = Goaway {
        uri: "x".repeat(8193),
    };
    assert_eq!(
        encode_message(&goaway, V6, &mut out),
        Err(BoundsExceeded("GOAWAY URI"))
    );
    assert!(encode_message(
        &Goaway {
            uri: "x".repeat(8192)
        },
        V6,
        &mut out
    )
    .is_ok());
    out.clear();
    let ok = AnnounceOk {
        hop: 1 << 62,
        active_count: 0,
    };
    assert_eq!(
        encode_message(&ok, V6, &mut out),
        Err(VarintTooLarge(1 << 62))
    );
    let end = SubscribeUpdate {
        group_end: Some(varint::MAX),
        ..Default::default()
    };
    assert_eq!(
        encode_message(&end, V6, &mut out),
        Err(VarintTooLarge(varint::MAX + 1))
    );
    let mut setup = Setup::new();
    for id in 0..65 {
        setup.params.set(100 + id, vec![]);
    }
    assert_eq!(encode_message(&setup, V6, &mut out), Err(TooManyParameters));
    let big = Setup {
        params: {
            let mut p = Parameters::new();
            p.set(9, vec![0u8; 70_000]);
            p
        },
    };
    assert!(matches!(
        encode_message(&big, V6, &mut out),
        Err(TooLarge { .. })
    ));
    assert_eq!(
        encode_message(&Setup::new(), Version::Lite04, &mut out),
        Err(Unsupported)
    );
    assert_eq!(
        encode_typed(&Announcement::Unknown { kind: 1 }, V6, &mut out),
        Err(InvalidValue("unknown announcement uses a known type"))
    );
    assert_eq!(
        encode_frame_header(
            &FrameHeader {
                timestamp_delta: 0,
                size: 32 * 1024 * 1024 + 1
            },
            V6,
            &mut out
        ),
        Err(TooLarge {
            len: 32 * 1024 * 1024 + 1,
            max: 32 * 1024 * 1024
        })
    );
    assert!(encode_frame_header(
        &FrameHeader {
            timestamp_delta: i64::MAX,
            size: 0
        },
        V6,
        &mut out
    )
    .is_err());
    assert!(out.is_empty(), "a refused encode wrote bytes");
}

/// Flip bytes of every golden message (several masks per position, plus insertions and
/// deletions) and run every decoder over the result: no panics, and anything that
/// decodes re-encodes stably.
#[test]
fn byte_flip_fuzz() {
    let mut seen = 0usize;
    for (bytes, _, _) in corpus() {
        let base = hex(bytes);
        exercise(&base);
        for i in 0..base.len() {
            for mask in [
                0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff, 0x3f, 0xc0,
            ] {
                let mut b = base.clone();
                b[i] ^= mask;
                exercise(&b);
                seen += 1;
            }
            let mut del = base.clone();
            del.remove(i);
            exercise(&del);
            let mut ins = base.clone();
            ins.insert(i, 0x00);
            exercise(&ins);
        }
    }
    assert!(seen > 1000);
}

/// A deterministic pseudo-random soup, so the loop is reproducible without a seed file.
#[test]
fn random_bytes_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let mut b = Vec::with_capacity(len);
        let mut y = x;
        for _ in 0..len {
            y = y
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b.push((y >> 56) as u8);
        }
        exercise(&b);
    }
}
