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
    for input in ietf_session_seeds() {
        out.push(("ietf_session", input));
    }
    for input in crate::http::seeds() {
        out.push(("http_request", input));
    }
    out.push(("announce_stream", announce_stream_seed()));
    for input in legacy_setup_seeds() {
        out.push(("legacy_setup", input));
    }
    out.extend(ietf_seeds());
    out
}

/// Every control message each draft defines, and a subgroup stream, a fetch stream and a
/// datagram per draft, behind the selector byte that picks the draft.
fn ietf_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use starling_proto::ietf::datagram::{DatagramBody, ObjectDatagram};
    use starling_proto::ietf::fetch_stream::{self, FetchEntry, FetchObject};
    use starling_proto::ietf::properties::ObjectProperties;
    use starling_proto::ietf::subgroup::{ObjectHeader, SubgroupFlags, SubgroupHeader};
    use starling_proto::ietf::Draft;

    let mut out = Vec::new();
    for (selector, &draft) in Draft::ALL.iter().enumerate() {
        let tagged = |bytes: &[u8]| {
            let mut input = vec![selector as u8];
            input.extend_from_slice(bytes);
            input
        };
        for msg in ietf_controls(draft) {
            let mut wire = BytesMut::new();
            msg.encode(draft, &mut wire)
                .unwrap_or_else(|err| panic!("{msg:?} on {draft}: {err}"));
            out.push(("ietf_control", tagged(&wire)));
        }
        let stamp = |ts| {
            Some(ObjectProperties {
                timestamp: Some(ts),
                timescale: None,
            })
        };
        let mut subgroup = vec![0u8];
        let mut wire = BytesMut::new();
        SubgroupHeader {
            flags: SubgroupFlags::default(),
            track_alias: 4,
            group: 7,
            subgroup: 0,
            priority: Some(0x80),
        }
        .encode(draft, &mut wire)
        .unwrap();
        for (ts, payload) in [(1000, &b"ab"[..]), (1033, b"")] {
            ObjectHeader {
                id_delta: 0,
                properties: stamp(ts),
                length: payload.len() as u64,
                status: payload.is_empty().then_some(3),
            }
            .encode(draft, &mut wire)
            .unwrap();
            wire.extend_from_slice(payload);
        }
        subgroup.extend_from_slice(&wire);
        out.push(("ietf_data", tagged(&subgroup)));

        let mut fetch = vec![1u8];
        let mut wire = BytesMut::new();
        fetch_stream::encode_header(6, draft, &mut wire).unwrap();
        let first = FetchObject {
            subgroup: fetch_stream::FetchSubgroup::Zero,
            group: Some(7),
            object: Some(0),
            priority: Some(0),
            properties: stamp(1000),
            length: 2,
            status: None,
        };
        FetchEntry::Object(first).encode(draft, &mut wire).unwrap();
        wire.extend_from_slice(b"ab");
        if draft > Draft::D14 {
            FetchEntry::EndOfRange {
                reason: 0x8C,
                group: 8,
                object: 0,
            }
            .encode(draft, &mut wire)
            .unwrap();
        }
        fetch.extend_from_slice(&wire);
        out.push(("ietf_data", tagged(&fetch)));

        let mut datagram = vec![2u8];
        let mut wire = BytesMut::new();
        ObjectDatagram {
            track_alias: 4,
            group: 7,
            object: None,
            priority: Some(0x80),
            end_of_group: true,
            properties: stamp(1000),
            body: DatagramBody::Payload(Bytes::from_static(b"ab")),
        }
        .encode(draft, &mut wire)
        .unwrap();
        datagram.extend_from_slice(&wire);
        out.push(("ietf_data", tagged(&datagram)));
    }
    out
}

/// One of every control message `draft` defines, with the fields moq-net fills.
fn ietf_controls(draft: starling_proto::ietf::Draft) -> Vec<starling_proto::ietf::Control> {
    use starling_proto::ietf::control::defined;
    use starling_proto::ietf::fetch::{Fetch as IetfFetch, FetchKind, FetchOk};
    use starling_proto::ietf::fields::GroupOrder;
    use starling_proto::ietf::filter::{Fill, Filter, Location};
    use starling_proto::ietf::namespace::{
        Advertisement, ClusterParams, Namespace, NamespaceDone, PublishNamespace,
        PublishNamespaceCancel, PublishNamespaceDone, SubscribeNamespace,
    };
    use starling_proto::ietf::properties::TrackProperties;
    use starling_proto::ietf::publish::{Publish, PublishOk};
    use starling_proto::ietf::reply::{Goaway as IetfGoaway, Refused, RequestError, RequestOk};
    use starling_proto::ietf::setup::{ClientSetup, ServerSetup, Setup as IetfSetup, SetupOptions};
    use starling_proto::ietf::subscribe::{
        PublishDone, RequestUpdate, Subscribe as IetfSubscribe, SubscribeOk,
    };
    use starling_proto::ietf::{Control, Draft};

    let path = |s: &str| Path::new(s).unwrap();
    let d20 = draft >= Draft::D20;
    let cluster = draft >= Draft::D17;
    let options = SetupOptions {
        path: Some(b"/anon".to_vec()),
        max_request_id: (!cluster).then_some(u32::MAX as u64),
        implementation: Some(b"moq-lite-rs".to_vec()),
        hop_id: cluster.then_some(42),
        solicit: Some(1),
        hidden: Some(1),
        ..Default::default()
    };
    let subscribe = IetfSubscribe {
        request_id: 4,
        namespace: path("bbb"),
        track: "video".into(),
        filter: Filter::NextObject,
        fill: d20.then_some(Fill {
            filter: Some(Filter::Relative(1)),
            range_filters: false,
        }),
        ..Default::default()
    };
    let advert = ClusterParams {
        hop_path: cluster.then(|| Hops::from_vec(vec![7, 9]).unwrap()),
        route_cost: cluster.then_some(2),
    };
    let fetch_kind = if d20 {
        FetchKind::Filtered {
            namespace: path("bbb"),
            track: "video".into(),
            filter: Filter::Absolute {
                start: Location {
                    group: 7,
                    object: 0,
                },
                end: Some(starling_proto::ietf::EndLocation {
                    group: 7,
                    object: None,
                }),
            },
        }
    } else {
        FetchKind::RelativeJoining {
            joining: 4,
            offset: 0,
        }
    };
    let by_id = if draft <= Draft::D15 {
        Advertisement::Namespace(path("bbb"))
    } else {
        Advertisement::Request(2)
    };
    let error = RequestError {
        request_id: 4,
        code: 0x10,
        retry_interval: 0,
        reason: "not found".into(),
    };
    let all = vec![
        Control::ClientSetup(ClientSetup {
            versions: if draft == Draft::D14 {
                vec![draft.code()]
            } else {
                vec![]
            },
            options: options.clone(),
        }),
        Control::ServerSetup(ServerSetup {
            version: (draft == Draft::D14).then_some(draft.code()),
            options: options.clone(),
        }),
        Control::Setup(IetfSetup { options }),
        Control::Subscribe(subscribe.clone()),
        Control::TrackStatus(IetfSubscribe {
            fill: None,
            ..subscribe
        }),
        Control::SubscribeOk(SubscribeOk {
            request_id: 4,
            track_alias: 4,
            largest: Some(Location {
                group: 7,
                object: 1,
            }),
            properties: TrackProperties {
                timescale: Some(1000),
                priority: Some(128),
                group_order: Some(GroupOrder::Descending),
            },
        }),
        Control::RequestUpdate(RequestUpdate {
            request_id: 6,
            subscription_id: 4,
            priority: Some(3),
            forward: Some(true),
            ..Default::default()
        }),
        Control::Unsubscribe(4),
        Control::PublishDone(PublishDone {
            request_id: 4,
            status: 2,
            stream_count: 3,
            reason: "track ended".into(),
        }),
        Control::RequestOk {
            answers: Some(Refused::PublishNamespace),
            ok: RequestOk { request_id: 2 },
        },
        Control::RequestOk {
            answers: Some(Refused::SubscribeNamespace),
            ok: RequestOk { request_id: 2 },
        },
        Control::RequestError {
            answers: Some(Refused::Fetch),
            error: error.clone(),
        },
        Control::RequestError {
            answers: Some(Refused::PublishNamespace),
            error,
        },
        Control::PublishNamespace(PublishNamespace {
            request_id: 2,
            namespace: path("room/alice"),
            cluster: advert.clone(),
        }),
        Control::PublishNamespaceDone(PublishNamespaceDone {
            advertisement: by_id.clone(),
        }),
        Control::PublishNamespaceCancel(PublishNamespaceCancel {
            advertisement: by_id,
            code: 0x20,
            reason: "loop".into(),
        }),
        Control::SubscribeNamespace(SubscribeNamespace {
            request_id: 2,
            prefix: Path::empty(),
            options: 1,
            hidden: true,
        }),
        Control::UnsubscribeNamespace(2),
        Control::Namespace(Namespace {
            suffix: path("alice"),
            cluster: cluster.then_some(advert),
        }),
        Control::NamespaceDone(NamespaceDone {
            suffix: path("alice"),
        }),
        Control::Fetch(IetfFetch {
            request_id: 6,
            priority: 128,
            group_order: GroupOrder::Ascending,
            kind: fetch_kind,
            range_filters: false,
            fill_timeout: None,
        }),
        Control::FetchOk(FetchOk {
            request_id: 6,
            group_order: GroupOrder::Descending,
            end_of_track: false,
            end: Location {
                group: 7,
                object: 2,
            },
            properties: TrackProperties::default(),
        }),
        Control::FetchCancel(6),
        Control::Publish(Publish {
            request_id: 8,
            namespace: path("bbb"),
            track: "video".into(),
            track_alias: 8,
            largest: None,
            forward: true,
            properties: TrackProperties::default(),
        }),
        Control::PublishOk(PublishOk::default()),
        Control::PublishBlocked {
            suffix: path("alice"),
            track: "video".into(),
        },
        Control::SubscribeTracks,
        Control::Goaway(IetfGoaway::default()),
        Control::MaxRequestId(100),
        Control::RequestsBlocked(100),
    ];
    // Keep the ones this draft defines.
    all.into_iter()
        .filter(|msg| {
            let mut body = Vec::new();
            msg.encode_body(&mut body, draft)
                .is_ok_and(|code| defined(code, draft))
        })
        .collect()
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

/// IETF whole-session inputs, one per draft (the first byte): a SUBSCRIBE to the honest track
/// where the draft sends requests (on the control stream, the first stream, on 14-16; on a
/// stream of its own from 17) read while groups are published, then an unsubscription.
fn ietf_session_seeds() -> Vec<Vec<u8>> {
    use starling_proto::ietf::{subscribe::Subscribe, Control};
    starling_proto::ietf::Draft::ALL
        .iter()
        .enumerate()
        .map(|(pick, &draft)| {
            let mut subscribe = BytesMut::new();
            let _ = Control::Subscribe(Subscribe {
                request_id: 0,
                namespace: Path::new("good").unwrap(),
                track: "seq".into(),
                ..Subscribe::default()
            })
            .encode(draft, &mut subscribe);
            let mut input = vec![pick as u8];
            if draft.has_control_stream() {
                // Write to stream 0 (the control stream), then UNSUBSCRIBE there.
                input.extend_from_slice(&[2, 0, subscribe.len() as u8]);
                input.extend_from_slice(&subscribe);
                input.extend_from_slice(&[7, 7, 5, 0, 6, 10]);
                let mut unsubscribe = BytesMut::new();
                let _ = Control::Unsubscribe(0).encode(draft, &mut unsubscribe);
                input.extend_from_slice(&[2, 0, unsubscribe.len() as u8]);
                input.extend_from_slice(&unsubscribe);
            } else {
                input.extend_from_slice(&[1, subscribe.len() as u8]);
                input.extend_from_slice(&subscribe);
                // Publish, read the request stream, then FIN it.
                input.extend_from_slice(&[7, 7, 5, 0, 6, 10, 3, 1]);
            }
            input
        })
        .collect()
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
