//! The frame header: round trip, sizes, and malformed headers with typed errors.

use starling_loadgen::frame::{FrameError, FrameHeader, HEADER_LEN, MAGIC, VERSION};

#[test]
fn round_trips_at_every_size() {
    for size in [HEADER_LEN, 21, 128, 1200, 64 << 10] {
        let header = FrameHeader::new(0x0102_0304_0506_0708, 1_780_000_000_123_456_789);
        let frame = header.frame(size).unwrap();
        assert_eq!(frame.len(), size);
        assert_eq!(FrameHeader::decode(&frame), Ok(header));
    }
    let prime = FrameHeader::prime(42);
    let decoded = FrameHeader::decode(&prime.frame(HEADER_LEN).unwrap()).unwrap();
    assert!(decoded.prime);
    assert_eq!(decoded.scheduled_ns, 42);
}

#[test]
fn layout_is_magic_version_flags_then_big_endian_words() {
    let frame = FrameHeader::new(1, 2).frame(24).unwrap();
    assert_eq!(&frame[..2], &MAGIC);
    assert_eq!(frame[2], VERSION);
    assert_eq!(frame[3], 0);
    assert_eq!(&frame[4..12], &1u64.to_be_bytes());
    assert_eq!(&frame[12..20], &2u64.to_be_bytes());
    assert_eq!(&frame[20..], &[0, 0, 0, 0]);
}

#[test]
fn frames_shorter_than_the_header_are_refused() {
    assert_eq!(
        FrameHeader::new(0, 0).frame(HEADER_LEN - 1),
        Err(FrameError::Short(HEADER_LEN - 1))
    );
    assert_eq!(FrameHeader::decode(b""), Err(FrameError::Short(0)));
    assert_eq!(FrameHeader::decode(b"hello"), Err(FrameError::Short(5)));
    let whole = FrameHeader::new(7, 7).frame(HEADER_LEN).unwrap();
    assert_eq!(
        FrameHeader::decode(&whole[..HEADER_LEN - 1]),
        Err(FrameError::Short(HEADER_LEN - 1))
    );
}

#[test]
fn malformed_headers_say_what_is_wrong() {
    let good = FrameHeader::new(3, 4).frame(32).unwrap().to_vec();

    let mut magic = good.clone();
    magic[0] = b'X';
    assert_eq!(
        FrameHeader::decode(&magic),
        Err(FrameError::BadMagic([b'X', b'L']))
    );

    let mut version = good.clone();
    version[2] = 9;
    assert_eq!(FrameHeader::decode(&version), Err(FrameError::Version(9)));

    let mut flags = good.clone();
    flags[3] = 0x80;
    assert_eq!(FrameHeader::decode(&flags), Err(FrameError::Flags(0x80)));

    // Each kind counts under its own name.
    let kinds = [
        FrameError::Short(0).kind(),
        FrameError::BadMagic([0, 0]).kind(),
        FrameError::Version(0).kind(),
        FrameError::Flags(0).kind(),
    ];
    let distinct: std::collections::HashSet<_> = kinds.iter().collect();
    assert_eq!(distinct.len(), kinds.len());
}
