//! Property tests: every frame and transport-parameter list decodes to what was encoded, and
//! re-encodes to the same bytes; records reassemble from any split.

use bytes::Bytes;
use proptest::prelude::*;
use starling_qmux::{
    Dir, Frame, RecordReader, StreamFrame, StreamId, TransportParams, WireVersion,
};

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, 0u64..16384, 0u64..(1 << 30), 0u64..(1 << 62)]
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn dir() -> impl Strategy<Value = Dir> {
    prop_oneof![Just(Dir::Bi), Just(Dir::Uni)]
}

fn params() -> impl Strategy<Value = TransportParams> {
    (
        proptest::collection::vec(varint(), 8),
        16382u64..(1 << 40),
        any::<bool>(),
        proptest::collection::vec("[a-z0-9-]{1,12}", 0..4),
    )
        .prop_map(|(v, record, reset, protocols)| TransportParams {
            max_idle_timeout: v[0],
            initial_max_data: v[1],
            initial_max_stream_data_bidi_local: v[2],
            initial_max_stream_data_bidi_remote: v[3],
            initial_max_stream_data_uni: v[4],
            initial_max_streams_bidi: v[5],
            initial_max_streams_uni: v[6],
            max_datagram_frame_size: v[7],
            max_record_size: record,
            reset_stream_at: reset,
            application_protocols: protocols,
        })
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        Just(Frame::Padding),
        (varint(), varint(), varint()).prop_map(|(i, c, f)| Frame::ResetStream {
            id: StreamId(i),
            code: c,
            final_size: f
        }),
        (varint(), varint(), varint(), varint()).prop_map(|(i, c, a, b)| Frame::ResetStreamAt {
            id: StreamId(i),
            code: c,
            final_size: a.max(b),
            reliable_size: a.min(b)
        }),
        (varint(), varint()).prop_map(|(i, c)| Frame::StopSending {
            id: StreamId(i),
            code: c
        }),
        (
            varint(),
            proptest::option::of(0u64..(1 << 40)),
            bytes(64),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(
                |(i, offset, data, fin, explicit_len)| Frame::Stream(StreamFrame {
                    id: StreamId(i),
                    offset,
                    data,
                    fin,
                    explicit_len
                })
            ),
        varint().prop_map(Frame::MaxData),
        (varint(), varint()).prop_map(|(i, m)| Frame::MaxStreamData {
            id: StreamId(i),
            max: m
        }),
        (dir(), 0u64..=(1 << 60)).prop_map(|(dir, max)| Frame::MaxStreams { dir, max }),
        varint().prop_map(Frame::DataBlocked),
        (varint(), varint()).prop_map(|(i, l)| Frame::StreamDataBlocked {
            id: StreamId(i),
            limit: l
        }),
        (dir(), 0u64..=(1 << 60)).prop_map(|(dir, limit)| Frame::StreamsBlocked { dir, limit }),
        (varint(), varint(), bytes(32)).prop_map(|(code, frame_type, reason)| {
            Frame::ConnectionClose {
                code,
                frame_type,
                reason,
            }
        }),
        (varint(), bytes(32)).prop_map(|(code, reason)| Frame::ApplicationClose { code, reason }),
        (bytes(64), any::<bool>())
            .prop_map(|(data, explicit_len)| Frame::Datagram { data, explicit_len }),
        params().prop_map(Frame::TransportParameters),
        varint().prop_map(Frame::PingRequest),
        varint().prop_map(Frame::PingResponse),
    ]
}

proptest! {
    #[test]
    fn frames_round_trip(frame in frame()) {
        let bytes = frame.to_bytes();
        let mut input = bytes.clone();
        let decoded = Frame::decode(&mut input).unwrap();
        prop_assert!(input.is_empty());
        prop_assert_eq!(&decoded, &frame);
        prop_assert_eq!(decoded.to_bytes(), bytes);
    }

    #[test]
    fn params_round_trip(params in params()) {
        let decoded = TransportParams::decode(params.encode()).unwrap();
        prop_assert_eq!(&decoded, &params);
        prop_assert_eq!(decoded.encode(), params.encode());
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(data in bytes(256)) {
        let mut input = data.clone();
        while !input.is_empty() {
            if Frame::decode(&mut input).is_err() {
                break;
            }
        }
        let _ = TransportParams::decode(data);
    }

    #[test]
    fn records_reassemble_from_any_split(
        records in proptest::collection::vec(bytes(300), 1..8),
        cut in 1usize..50,
    ) {
        let mut wire = Vec::new();
        for r in &records {
            wire.extend_from_slice(&starling_qmux::record::frame_record(
                starling_qmux::Framing::ByteStream, WireVersion::Qmux01, r));
        }
        let mut reader = RecordReader::new(WireVersion::Qmux01, 16382);
        let mut out = Vec::new();
        for piece in wire.chunks(cut) {
            reader.push(piece);
            while let Some(r) = reader.next_record().unwrap() {
                out.push(r);
            }
        }
        prop_assert_eq!(out, records);
    }
}
