//! Seed inputs for every target, built with the encoders from the values the golden tests
//! use: each target starts from valid messages of every kind and mutates from there.
//! `scripts/fuzz.sh` writes them into `fuzz/corpus/<target>/` before fuzzing.

use bytes::{Bytes, BytesMut};
use starling_proto::{
    encode_frame_header, encode_message, encode_typed, Announce, AnnounceOk, AnnounceRequest,
    AnnounceStatus, Announcement, Datagram, Fetch, FrameHeader, Goaway, GroupHeader, Hops, Message,
    Path, Probe, ProbeLevel, Role, RouteCost, Setup, Subscribe, SubscribeResponse, SubscribeUpdate,
    Track, TrackInfo, TypedMessage, Version,
};

/// (target, input) pairs.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (v, version) in crate::checks::VERSIONS.iter().enumerate() {
        let selector = |kind: u8| ((v as u8) << 4) | kind;
        let mut message = |kind: u8, encode: &dyn Fn(&mut BytesMut) -> bool| {
            let mut buf = BytesMut::new();
            if encode(&mut buf) {
                let mut input = vec![selector(kind)];
                input.extend_from_slice(&buf);
                out.push(("lite_message", input));
            }
        };
        let version = *version;
        fn plain<M: Message>(m: &M, version: Version, buf: &mut BytesMut) -> bool {
            encode_message(m, version, buf).is_ok()
        }
        fn typed<M: TypedMessage>(m: &M, version: Version, buf: &mut BytesMut) -> bool {
            encode_typed(m, version, buf).is_ok()
        }
        let path = Path::new("room/alice").unwrap();
        let hops = Hops::from_vec(vec![7, 9]).unwrap();
        let mut setup = Setup::new();
        let _ = setup.set_hop(Some(12345));
        setup.set_role(Some(Role::Subscriber));
        setup.set_path(Some("/room?jwt=abc"));
        setup.set_probe(ProbeLevel::Report);
        message(0, &|b| plain(&setup, version, b));
        message(1, &|b| {
            plain(
                &AnnounceRequest {
                    prefix: Path::new("room").unwrap(),
                    exclude_hop: 3,
                    hidden: false,
                },
                version,
                b,
            )
        });
        message(2, &|b| plain(&AnnounceOk::default(), version, b));
        message(3, &|b| {
            plain(
                &Announce {
                    status: AnnounceStatus::Active,
                    suffix: path.clone(),
                    hops: hops.clone(),
                },
                version,
                b,
            )
        });
        for announcement in [
            Announcement::Start {
                suffix: path.clone(),
                hops: hops.clone(),
                cost: RouteCost { warm: 1, cold: 2 },
            },
            Announcement::End { id: 4 },
            Announcement::Update {
                id: 0,
                hops: hops.clone(),
                cost: RouteCost { warm: 3, cold: 5 },
            },
        ] {
            message(4, &|b| typed(&announcement, version, b));
        }
        message(5, &|b| {
            plain(
                &Subscribe {
                    id: 1,
                    broadcast: path.clone(),
                    track: "video".into(),
                    priority: 2,
                    max_age_ms: 1000,
                    group_start: Some(3),
                    group_end: Some(9),
                    frame_start: 1,
                    frame_end: Some(4),
                },
                version,
                b,
            )
        });
        message(6, &|b| plain(&SubscribeUpdate::default(), version, b));
        for response in [
            SubscribeResponse::Start { group: 5 },
            SubscribeResponse::End {
                group: 9,
                streams: None,
            },
            SubscribeResponse::Drop {
                start: 1,
                end: 2,
                error: 3,
            },
        ] {
            message(7, &|b| typed(&response, version, b));
        }
        message(8, &|b| plain(&Track::default(), version, b));
        message(9, &|b| plain(&TrackInfo::default(), version, b));
        message(10, &|b| plain(&GroupHeader::default(), version, b));
        message(11, &|b| plain(&Fetch::default(), version, b));
        message(12, &|b| plain(&Probe::default(), version, b));
        let init = starling_proto::AnnounceInit {
            suffixes: vec![path.clone()],
        };
        message(13, &|b| plain(&init, version, b));
        let ok = starling_proto::LegacySubscribeOk { priority: 3 };
        message(14, &|b| plain(&ok, version, b));
        message(15, &|b| plain(&Goaway::default(), version, b));

        let mut buf = BytesMut::new();
        let header = FrameHeader {
            timestamp_delta: -40,
            size: 1200,
        };
        if encode_frame_header(&header, version, &mut buf).is_ok() {
            let mut input = vec![v as u8];
            input.extend_from_slice(&buf);
            out.push(("frame_header", input));
        }
        let datagram = Datagram {
            subscribe_id: 1,
            sequence: 2,
            timestamp: 3,
            payload: Bytes::from_static(b"hello"),
        };
        let mut buf = BytesMut::new();
        if datagram.encode(version, &mut buf).is_ok() {
            let mut input = vec![v as u8];
            input.extend_from_slice(&buf);
            out.push(("datagram", input));
        }
    }
    out.push((
        "qmux_params",
        starling_qmux::TransportParams::default().encode().to_vec(),
    ));
    for frame in qmux_seed_frames() {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf);
        out.push(("qmux_frames", buf.to_vec()));
    }
    for text in [
        r#"{"kty":"oct","alg":"HS256","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA","kid":"a"}"#,
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJyb290Ijoicm9vbSJ9.sig",
        "room/**",
        "room/*/video",
    ] {
        out.push(("auth", text.as_bytes().to_vec()));
    }
    for text in ["room/alice", "/a//b/", "c/1/open/.hidden"] {
        out.push(("paths", text.as_bytes().to_vec()));
    }
    for input in session_seeds() {
        out.push(("session", input));
    }
    out.push(("announce_stream", announce_stream_seed()));
    for input in legacy_setup_seeds() {
        out.push(("legacy_setup", input));
    }
    out
}

/// moq-net's default CLIENT_SETUP offer, the SERVER_SETUP choosing lite-02, and a SESSION_INFO.
fn legacy_setup_seeds() -> Vec<Vec<u8>> {
    use starling_proto::legacy;
    let mut offer = BytesMut::new();
    let client = legacy::ClientSetup::offering(&[Version::Lite02, Version::Lite01], "moq-lite-rs");
    legacy::encode_client_setup(&client, &mut offer).expect("the seed encodes");
    let mut answer = BytesMut::new();
    let server = legacy::ServerSetup {
        version: Version::Lite02.code(),
        params: legacy::LegacyParams::default(),
    };
    legacy::encode_server_setup(&server, &mut answer).expect("the seed encodes");
    let mut client_input = vec![0u8];
    client_input.extend_from_slice(&offer);
    let mut server_input = vec![1u8];
    server_input.extend_from_slice(&answer);
    vec![client_input, server_input, vec![2, 0x01, 0x05]]
}

/// A lite-07 announce stream with references: moq-net's pinned stream (two STARTs sharing a
/// head and a tail, an UPDATE copying a tail, an END, a START based on an older one).
fn announce_stream_seed() -> Vec<u8> {
    let hops = |ids: &[u64]| Hops::from_vec(ids.to_vec()).unwrap();
    let start = |path: &str, ids: &[u64]| Announcement::Start {
        suffix: Path::new(path).unwrap(),
        hops: hops(ids),
        cost: RouteCost::default(),
    };
    let stream = [
        start("room/a/cam", &[0x1111, 0x2222]),
        start("room/a/mic", &[0x3333, 0x2222]),
        Announcement::Update {
            id: 0,
            hops: hops(&[0x4444, 0x2222]),
            cost: RouteCost::default(),
        },
        Announcement::End { id: 1 },
        start("room/b", &[0x5555, 0x2222]),
    ];
    let version = Version::Lite07Wip;
    let mut encoder = starling_proto::AnnounceEncoder::new(version);
    let mut out = BytesMut::new();
    for announcement in &stream {
        let wire = encoder.compress(announcement).expect("the seed compresses");
        encode_typed(&wire, version, &mut out).expect("the seed encodes");
    }
    out.to_vec()
}

/// Whole-session inputs (see crate::session for the op codes): a subscription to the honest
/// track read while groups are published; an announce interest; a stuck group header.
fn session_seeds() -> Vec<Vec<u8>> {
    let mut subscribe = BytesMut::new();
    subscribe.extend_from_slice(&[0x02]);
    let _ = encode_message(
        &Subscribe {
            id: 1,
            broadcast: Path::new("good").unwrap(),
            track: "seq".into(),
            ..Subscribe::default()
        },
        Version::Lite06,
        &mut subscribe,
    );
    let mut interest = BytesMut::new();
    interest.extend_from_slice(&[0x01]);
    let _ = encode_message(&AnnounceRequest::default(), Version::Lite06, &mut interest);
    let open_bi = |bytes: &[u8]| {
        let mut op = vec![1, bytes.len() as u8];
        op.extend_from_slice(bytes);
        op
    };
    let mut subscribed = open_bi(&subscribe);
    subscribed.extend_from_slice(&[7, 7, 5, 0, 6, 10, 7, 5, 0]);
    let mut listening = open_bi(&interest);
    listening.extend_from_slice(&[5, 0, 7, 5, 0, 3, 0]);
    let stuck = vec![0, 5, 0x00, 0x80, 0x00, 0xf0, 0x00, 2, 0, 3, 1, 2, 3, 6, 200];
    vec![subscribed, listening, stuck, evicting_session_input()]
}

/// A whole-session input that overfills the harness's receive budget: two group streams, each
/// 150 bytes into a 180-byte header, then a publish and a pause.
pub(crate) fn evicting_session_input() -> Vec<u8> {
    let mut input = Vec::new();
    for _ in 0..2 {
        input.extend_from_slice(&[0, 153, 0x00, 0x40, 180]);
        input.extend(std::iter::repeat_n(0u8, 150));
    }
    input.extend_from_slice(&[7, 6, 10]);
    input
}

fn qmux_seed_frames() -> Vec<starling_qmux::Frame> {
    use starling_qmux::{Frame, StreamFrame, StreamId};
    let id = StreamId(4);
    vec![
        Frame::Padding,
        Frame::Stream(StreamFrame {
            id,
            offset: Some(10),
            data: Bytes::from_static(b"data"),
            fin: true,
            explicit_len: true,
        }),
        Frame::ResetStream {
            id,
            code: 7,
            final_size: 14,
        },
    ]
}
