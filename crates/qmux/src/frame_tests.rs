//! Golden and round-trip tests for every frame.

use super::*;
use crate::params::DEFAULT_MAX_RECORD_SIZE;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

fn decode_one(bytes: &[u8]) -> Result<Frame, DecodeError> {
    let mut b = Bytes::copy_from_slice(bytes);
    let frame = Frame::decode(&mut b)?;
    assert!(b.is_empty(), "trailing bytes after {frame:?}");
    Ok(frame)
}

fn golden(frame: Frame, bytes: &str) {
    let bytes = hex(bytes);
    assert_eq!(frame.to_bytes().as_ref(), &bytes[..], "encode {frame:?}");
    assert_eq!(decode_one(&bytes).unwrap(), frame, "decode {bytes:02x?}");
}

/// The relay's WebSocket transport parameters on qmux-01 (docs/wire.md §8.4), 62 bytes.
pub(crate) fn relay_params() -> TransportParams {
    TransportParams {
        max_idle_timeout: 30_000,
        initial_max_data: 1_048_576,
        initial_max_stream_data_bidi_local: 262_144,
        initial_max_stream_data_bidi_remote: 262_144,
        initial_max_stream_data_uni: 262_144,
        initial_max_streams_bidi: 100,
        initial_max_streams_uni: 100,
        max_datagram_frame_size: 16382,
        max_record_size: DEFAULT_MAX_RECORD_SIZE,
        reset_stream_at: false,
        application_protocols: Vec::new(),
    }
}

const RELAY_TP: &str = "ff 51 53 30 0d 0a 0d 0a 35  01 04 80 00 75 30  04 04 80 10 00 00  \
     05 04 80 04 00 00 06 04 80 04 00 00  07 04 80 04 00 00  08 02 40 64  09 02 40 64  \
     20 02 7f fe c5 71 c5 94 29 cd 08 45 02 7f fe";

#[test]
fn relay_transport_parameters_are_byte_exact() {
    let frame = Frame::TransportParameters(relay_params());
    assert_eq!(frame.to_bytes().len(), 62);
    golden(frame, RELAY_TP);
}

#[test]
fn moq_tokio_client_and_qmux02_variants() {
    let mut client = relay_params();
    client.initial_max_streams_bidi = 10_000;
    client.initial_max_streams_uni = 10_000;
    let bytes = Frame::TransportParameters(client).to_bytes();
    let relay = hex(RELAY_TP);
    let pos = relay
        .windows(4)
        .position(|w| w == [0x08, 0x02, 0x40, 0x64])
        .unwrap();
    assert_eq!(
        &bytes[pos..pos + 8],
        &[0x08, 0x02, 0x67, 0x10, 0x09, 0x02, 0x67, 0x10]
    );

    let mut v2 = relay_params();
    v2.reset_stream_at = true;
    let bytes = Frame::TransportParameters(v2).to_bytes();
    let mut want = relay.clone();
    want[8] = 0x37;
    want.extend_from_slice(&[0x1d, 0x00]);
    assert_eq!(bytes.as_ref(), &want[..]);
}

#[test]
fn spec_section_11_stream_frames() {
    golden(
        Frame::Stream(StreamFrame {
            id: StreamId(2),
            offset: Some(0),
            data: Bytes::from_static(&[0x01, 0x04, 0x01, 0x03, 0x01, 0x02]),
            fin: false,
            explicit_len: true,
        }),
        "0e 02 00 06 01 04 01 03 01 02",
    );
    golden(
        Frame::Stream(StreamFrame {
            id: StreamId(2),
            offset: Some(6),
            data: Bytes::new(),
            fin: true,
            explicit_len: true,
        }),
        "0f 02 06 00",
    );
}

#[test]
fn every_frame_golden() {
    golden(Frame::Padding, "00");
    golden(
        Frame::ResetStream {
            id: StreamId(4),
            code: 0x35,
            final_size: 300,
        },
        "04 04 35 41 2c",
    );
    golden(
        Frame::ResetStreamAt {
            id: StreamId(4),
            code: 1,
            final_size: 10,
            reliable_size: 3,
        },
        "24 04 01 0a 03",
    );
    golden(
        Frame::StopSending {
            id: StreamId(3),
            code: 0,
        },
        "05 03 00",
    );
    golden(Frame::MaxData(1_048_576), "10 80 10 00 00");
    golden(
        Frame::MaxStreamData {
            id: StreamId(1),
            max: 64,
        },
        "11 01 40 40",
    );
    golden(
        Frame::MaxStreams {
            dir: Dir::Bi,
            max: 100,
        },
        "12 40 64",
    );
    golden(
        Frame::MaxStreams {
            dir: Dir::Uni,
            max: 5,
        },
        "13 05",
    );
    golden(Frame::DataBlocked(7), "14 07");
    golden(
        Frame::StreamDataBlocked {
            id: StreamId(8),
            limit: 9,
        },
        "15 08 09",
    );
    golden(
        Frame::StreamsBlocked {
            dir: Dir::Bi,
            limit: 1,
        },
        "16 01",
    );
    golden(
        Frame::StreamsBlocked {
            dir: Dir::Uni,
            limit: 2,
        },
        "17 02",
    );
    golden(
        Frame::ConnectionClose {
            code: 0x3,
            frame_type: 0,
            reason: Bytes::from_static(b"fc"),
        },
        "1c 03 00 02 66 63",
    );
    golden(
        Frame::ApplicationClose {
            code: 0x15,
            reason: Bytes::from_static(b"bye"),
        },
        "1d 15 03 62 79 65",
    );
    golden(
        Frame::Datagram {
            data: Bytes::from_static(b"ab"),
            explicit_len: true,
        },
        "31 02 61 62",
    );
    golden(
        Frame::Datagram {
            data: Bytes::from_static(b"ab"),
            explicit_len: false,
        },
        "30 61 62",
    );
    golden(Frame::PingRequest(5), "f4 8c 67 52 9e f8 c7 bd 05");
    golden(Frame::PingResponse(5), "f4 8c 67 52 9e f8 c7 be 05");
    // STREAM without OFF and LEN: data to the end.
    golden(
        Frame::Stream(StreamFrame {
            id: StreamId(0),
            offset: None,
            data: Bytes::from_static(b"xyz"),
            fin: true,
            explicit_len: false,
        }),
        "09 00 78 79 7a",
    );
}

#[test]
fn malformed_frames() {
    assert_eq!(decode_one(&[0x21]), Err(DecodeError::UnknownType(0x21)));
    assert_eq!(decode_one(&[0x1e]), Err(DecodeError::UnknownType(0x1e)));
    assert_eq!(decode_one(&[0x04, 0x00, 0x01]), Err(DecodeError::Truncated));
    assert_eq!(
        decode_one(&[0x0e, 0x00, 0x00, 0x05, 0x01]),
        Err(DecodeError::Truncated)
    );
    assert_eq!(
        decode_one(&[0x1d, 0x00, 0x05, 0x61]),
        Err(DecodeError::Truncated)
    );
    assert!(matches!(
        decode_one(&[0x24, 0x00, 0x00, 0x01, 0x02]),
        Err(DecodeError::Malformed(_))
    ));
    // 2^60 + 1 streams.
    assert!(matches!(
        decode_one(&hex("12 d0 00 00 00 00 00 00 01")),
        Err(DecodeError::Malformed(_))
    ));
    // A TP frame with a duplicate parameter.
    assert!(matches!(
        decode_one(&hex("ff 51 53 30 0d 0a 0d 0a 06 04 01 05 04 01 05")),
        Err(DecodeError::Params(crate::error::ParamsError::Duplicate(4)))
    ));
}

#[test]
fn several_frames_per_record() {
    let mut buf = BytesMut::new();
    Frame::MaxData(5).encode(&mut buf);
    Frame::PingRequest(1).encode(&mut buf);
    Frame::Datagram {
        data: Bytes::from_static(b"tail"),
        explicit_len: false,
    }
    .encode(&mut buf);
    let frames = decode_all(buf.freeze()).unwrap();
    assert_eq!(frames.len(), 3);
    assert_eq!(frames[0], Frame::MaxData(5));
}

#[test]
fn stream_payload_fills_budget_tightly() {
    for budget in (10..=80).chain(16_370..=16_400) {
        for (id, offset) in [(StreamId(0), 0), (StreamId(1 << 20), 1 << 20)] {
            let n = max_stream_payload(budget, id, offset);
            let size = |n: u64| {
                1 + varint::size(id.0) + varint::size(offset) + varint::size(n) + n as usize
            };
            assert!(size(n) as u64 <= budget, "budget {budget}: {n} overflows");
            assert!(
                size(n + 1) as u64 > budget,
                "budget {budget}: {n} underfills"
            );
        }
    }
}
