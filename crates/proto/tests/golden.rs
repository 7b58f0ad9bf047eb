//! Golden bytes: the lite-06 wire examples of docs/wire.md §4, the §11 worked example and the
//! §7.3 mapped codes (the other lite versions' are `golden_versions.rs`). Each decodes to the
//! stated values and re-encodes byte for byte.

mod common;

use bytes::BytesMut;
use common::golden::*;
use common::*;
use starling_proto::*;

// ---- lite-06, docs/wire.md §4 --------------------------------------------------------

#[test]
fn setup_role_subscriber() {
    let mut setup = Setup::new();
    setup.set_role(Some(Role::Subscriber));
    golden("04 01 03 01 02", V6, setup.clone());
    golden("04 01 03 01 02", V5, setup);
}

#[test]
fn setup_path_and_role() {
    let bytes = hex("13 02 02 0d 2f616e6f6e3f6a77743d616263 03 01 02");
    let s: Setup = decode(&bytes, V6).unwrap();
    assert_eq!(s.path(), Some("/anon?jwt=abc"));
    assert_eq!(s.role(), Some(Role::Subscriber));
    assert_eq!(s.probe(), ProbeLevel::None);
    assert_eq!(s.hop(), None);
    assert_eq!(encode(&s, V6), bytes);
    // Built in the golden order.
    let mut built = Setup::new();
    built.set_path(Some("/anon?jwt=abc"));
    built.set_role(Some(Role::Subscriber));
    assert_eq!(encode(&built, V6), bytes);
    // The other order is also accepted and means the same.
    let swapped = hex("13 02 03 01 02 02 0d 2f616e6f6e3f6a77743d616263");
    let s2: Setup = decode(&swapped, V6).unwrap();
    assert_eq!((s2.path(), s2.role()), (s.path(), s.role()));
    assert_eq!(encode(&s2, V6), swapped);
}

#[test]
fn setup_relay_probe_and_hop() {
    let bytes = hex("0e 02 01 01 01 05 08 c0001a2b3c4d5e6f");
    for v in [V5, V6] {
        let s: Setup = decode(&bytes, v).unwrap();
        assert_eq!(s.probe(), ProbeLevel::Report);
        assert_eq!(s.hop(), Some(0x1A2B3C4D5E6F));
        assert_eq!(s.params.len(), 2);
        assert_eq!(encode(&s, v), bytes);
        let mut built = Setup::new();
        built.set_probe(ProbeLevel::Report);
        built.set_hop(Some(0x1A2B3C4D5E6F)).unwrap();
        assert_eq!(built, s);
    }
}

#[test]
fn setup_empty_and_cost() {
    golden("01 00", V6, Setup::new());
    assert_eq!(decode::<Setup>(&hex("00"), V6), Err(DecodeError::Truncated));
    let mut cost = Setup::new();
    cost.set_cost(Some(100));
    golden("05 01 04 02 40 64", V6, cost); // §6: "06 gives 05 01 04 02 40 64"
}

#[test]
fn setup_unknown_parameters_are_kept() {
    let bytes = hex("08 02 2a 02 ab cd 03 01 01");
    let s: Setup = decode(&bytes, V6).unwrap();
    assert_eq!(s.params.get(0x2a), Some(&[0xab, 0xcd][..]));
    assert_eq!(s.role(), Some(Role::Publisher));
    assert_eq!(encode(&s, V6), bytes);
}

#[test]
fn announce_request() {
    golden(
        "01 00",
        V6,
        AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: false,
        },
    );
    golden(
        "02 00 00",
        V5,
        AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: false,
        },
    );
    golden(
        &cat(&["0b", DEMO_CLOCK]),
        V6,
        AnnounceRequest {
            prefix: path("demo/clock"),
            exclude_hop: 0,
            hidden: false,
        },
    );
}

#[test]
fn announce_ok() {
    let ok = AnnounceOk {
        hop: 0x1A2B3C4D5E6F,
        active_count: 1,
    };
    golden("09 c0001a2b3c4d5e6f 01", V6, ok);
    golden("09 c0001a2b3c4d5e6f 01", V5, ok);
    golden(
        "02 00 00",
        V6,
        AnnounceOk {
            hop: 0,
            active_count: 0,
        },
    );
}

#[test]
fn announcements() {
    let hops = Hops::from_vec(vec![12345]).unwrap();
    golden_t(
        &cat(&["00 10", DEMO_CLOCK, "01 7039 01 01"]),
        V6,
        Announcement::Start {
            suffix: path("demo/clock"),
            hops: hops.clone(),
            cost: RouteCost::new(1),
        },
    );
    golden_t(
        "02 06 00 01 7039 03 03",
        V6,
        Announcement::Update {
            id: 0,
            hops,
            cost: RouteCost::new(3),
        },
    );
    golden_t("01 01 00", V6, Announcement::End { id: 0 });
}

#[test]
fn unknown_announcement_is_skipped_by_length() {
    let mut buf = BytesMut::from(&hex("07 03 aa bb cc 01 01 05")[..]);
    assert_eq!(
        decode_typed::<Announcement>(&mut buf, V6).unwrap(),
        Some(Announcement::Unknown { kind: 7 })
    );
    assert_eq!(
        decode_typed::<Announcement>(&mut buf, V6).unwrap(),
        Some(Announcement::End { id: 5 })
    );
    assert!(buf.is_empty());
    golden_t("07 00", V6, Announcement::Unknown { kind: 7 });
}

#[test]
fn lite06_wip_announce_is_refused_on_06() {
    // The older note's 06-wip START has one cost varint; on 06 the cold half is missing.
    let wip = hex(&cat(&["00 0f", DEMO_CLOCK, "01 7039 00"]));
    assert_eq!(
        decode_t::<Announcement>(&wip, V6),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn track_and_info() {
    golden(
        &cat(&["13", DEMO_CLOCK, SECONDS]),
        V6,
        Track {
            broadcast: path("demo/clock"),
            track: "seconds".into(),
        },
    );
    let info = TrackInfo {
        priority: 127,
        max_age_ms: 5000,
        timescale: 1000,
    };
    assert_eq!(info, TrackInfo::default());
    golden("05 7f 53 88 43 e8", V6, info);
    golden("06 7f 00 53 88 43 e8", V5, info);
}

#[test]
fn subscribe_live_edge() {
    golden(
        &cat(&["1a 00", DEMO_CLOCK, SECONDS, "00 00 00 00 00 00"]),
        V6,
        Subscribe {
            id: 0,
            broadcast: path("demo/clock"),
            track: "seconds".into(),
            ..Default::default()
        },
    );
}

#[test]
fn subscribe_with_bounds() {
    golden(
        &cat(&["1b 01", DEMO_CLOCK, SECONDS, "02 41f4 07 0a 04 03"]),
        V6,
        Subscribe {
            id: 1,
            broadcast: path("demo/clock"),
            track: "seconds".into(),
            priority: 2,
            max_age_ms: 500,
            group_start: Some(7),
            group_end: Some(9),
            frame_start: 4,
            frame_end: Some(2),
        },
    );
}

#[test]
fn subscribe_update() {
    golden(
        "06 05 00 00 00 00 00",
        V6,
        SubscribeUpdate {
            priority: 5,
            ..Default::default()
        },
    );
}

#[test]
fn subscribe_responses() {
    for v in [V5, V6] {
        golden_t("00 01 01", v, SubscribeResponse::Start { group: 1 });
        golden_t(
            "01 01 02",
            v,
            SubscribeResponse::End {
                group: 2,
                streams: None,
            },
        );
        golden_t(
            "02 03 03 04 00",
            v,
            SubscribeResponse::Drop {
                start: 3,
                end: 4,
                error: 0,
            },
        );
    }
    assert_eq!(
        decode_t::<SubscribeResponse>(&hex("03 00"), V6),
        Err(DecodeError::UnknownType(3))
    );
}

#[test]
fn group_and_frames() {
    golden(
        "03 00 01 00",
        V6,
        GroupHeader {
            subscribe_id: 0,
            sequence: 1,
            frame_start: 0,
        },
    );
    let mut buf = BytesMut::from(&hex("80 01 d4 c0 06 31 32 3a 33 34 3a 47 d0 02 35 36")[..]);
    let f1 = decode_frame_header(&mut buf, V6).unwrap().unwrap();
    assert_eq!(
        f1,
        FrameHeader {
            timestamp_delta: 60_000,
            size: 6
        }
    );
    assert_eq!(&buf.split_to(6)[..], b"12:34:");
    let f2 = decode_frame_header(&mut buf, V6).unwrap().unwrap();
    assert_eq!(
        f2,
        FrameHeader {
            timestamp_delta: 1_000,
            size: 2
        }
    );
    assert_eq!(&buf.split_to(2)[..], b"56");
    assert!(buf.is_empty());
    let mut out = BytesMut::new();
    encode_frame_header(&f1, V6, &mut out).unwrap();
    assert_eq!(&out[..], &hex("80 01 d4 c0 06")[..]);
}

#[test]
fn fetch() {
    golden(
        &cat(&["17", DEMO_CLOCK, SECONDS, "00 01 00 00"]),
        V6,
        Fetch {
            broadcast: path("demo/clock"),
            track: "seconds".into(),
            priority: 0,
            group: 1,
            frame_start: 0,
            frame_end: None,
        },
    );
}

#[test]
fn datagram() {
    let bytes = bytes::Bytes::from(hex("00 02 80 01 d4 c0 78"));
    let d = Datagram::decode(&bytes, V6).unwrap();
    assert_eq!(
        d,
        Datagram {
            subscribe_id: 0,
            sequence: 2,
            timestamp: 120_000,
            payload: bytes::Bytes::from_static(b"x")
        }
    );
    let mut out = Vec::new();
    d.encode(V6, &mut out).unwrap();
    assert_eq!(out, bytes);
    assert_eq!(d.encoded_len(Version::Lite06).unwrap(), bytes.len());
}

#[test]
fn probe() {
    golden(
        "05 80 26 25 a0 23",
        V6,
        Probe {
            bitrate: 2_500_000,
            rtt_ms: 35,
        },
    );
    golden(
        "05 80 26 25 a0 23",
        V5,
        Probe {
            bitrate: 2_500_000,
            rtt_ms: 35,
        },
    );
}

#[test]
fn goaway() {
    golden("01 00", V6, Goaway { uri: String::new() });
}

#[test]
fn stream_types() {
    for (byte, t) in [
        (0x01, BidiType::Announce),
        (0x02, BidiType::Subscribe),
        (0x03, BidiType::Fetch),
        (0x05, BidiType::Goaway),
        (0x06, BidiType::Track),
    ] {
        let mut buf = BytesMut::from(&[byte][..]);
        assert_eq!(
            BidiType::decode(&mut buf, Version::Lite06).unwrap(),
            Some(t)
        );
    }
    let mut buf = BytesMut::from(&[0x00, 0x01][..]);
    assert_eq!(
        UniType::decode(&mut buf, Version::Lite06).unwrap(),
        Some(UniType::Group)
    );
    assert_eq!(
        UniType::decode(&mut buf, Version::Lite06).unwrap(),
        Some(UniType::Setup)
    );
}

// ---- docs/wire.md §7.3: mapped stream codes ------------------------------------------

#[test]
fn wt_mapped_codes() {
    assert_eq!(
        varint::to_vec(wt_encode(0)).unwrap(),
        hex("c0 00 52 e4 a4 0f a8 db")
    );
    assert_eq!(
        varint::to_vec(wt_encode(StreamCode::Cancelled.to_code())).unwrap(),
        hex("c0 00 52 e4 a4 0f a8 dc")
    );
    for (code, tail) in [
        (0x5, "a8 e0"),
        (0x12, "a8 ed"),
        (0x33, "a9 0f"),
        (0x34, "a9 10"),
        (0x35, "a9 11"),
        (0x36, "a9 12"),
        (0x37, "a9 13"),
        (0x38, "a9 14"),
    ] {
        let want = hex(&format!("c0 00 52 e4 a4 0f {tail}"));
        assert_eq!(
            varint::to_vec(wt_encode(code)).unwrap(),
            want,
            "code {code:#x}"
        );
        assert_eq!(wt_decode(varint::peek(&want).unwrap().0), Some(code));
    }
}

// ---- docs/wire.md §11: the worked example, stream by stream --------------------------

/// Read a uni stream's type then the messages; returns the rest.

#[test]
fn worked_example_lite06() {
    // ① client SETUP
    let (t, mut buf) = uni("01 04 01 03 01 02");
    assert_eq!(t, UniType::Setup);
    let s = decode_message::<Setup>(&mut buf, V6).unwrap().unwrap();
    assert_eq!(s.role(), Some(Role::Subscriber));
    assert!(buf.is_empty());

    // ② relay SETUP
    let (t, mut buf) = uni("01 0e 02 01 01 01 05 08 c0 00 1a 2b 3c 4d 5e 6f");
    assert_eq!(t, UniType::Setup);
    let s = decode_message::<Setup>(&mut buf, V6).unwrap().unwrap();
    assert_eq!(
        (s.probe(), s.hop()),
        (ProbeLevel::Report, Some(0x1A2B3C4D5E6F))
    );

    // ③ ANNOUNCE_REQUEST ""
    let (t, mut buf) = bidi("01 01 00");
    assert_eq!(t, BidiType::Announce);
    assert_eq!(
        decode_message::<AnnounceRequest>(&mut buf, V6)
            .unwrap()
            .unwrap()
            .prefix,
        Path::empty()
    );

    // ④ ANNOUNCE_OK + START in one write
    let mut buf = BytesMut::from(
        &hex("09 c0 00 1a 2b 3c 4d 5e 6f 01 00 10 0a 64 65 6d 6f 2f 63 6c 6f 63 6b 01 70 39 01 01")
            [..],
    );
    let ok = decode_message::<AnnounceOk>(&mut buf, V6).unwrap().unwrap();
    assert_eq!(
        ok,
        AnnounceOk {
            hop: 0x1A2B3C4D5E6F,
            active_count: 1
        }
    );
    let Announcement::Start { suffix, hops, cost } =
        decode_typed::<Announcement>(&mut buf, V6).unwrap().unwrap()
    else {
        panic!("expected START");
    };
    assert_eq!(suffix, path("demo/clock"));
    assert_eq!(hops.as_slice(), &[12345]);
    assert_eq!(cost, RouteCost { warm: 1, cold: 1 });
    assert!(buf.is_empty());

    // ⑤ TRACK, ⑥ TRACK_INFO
    let (t, mut buf) = bidi("06 13 0a 64656d6f2f636c6f636b 07 7365636f6e6473");
    assert_eq!(t, BidiType::Track);
    let track = decode_message::<Track>(&mut buf, V6).unwrap().unwrap();
    assert_eq!(
        (track.broadcast.as_str(), track.track.as_str()),
        ("demo/clock", "seconds")
    );
    golden(
        "05 7f 53 88 43 e8",
        V6,
        TrackInfo {
            priority: 127,
            max_age_ms: 5000,
            timescale: 1000,
        },
    );

    // ⑦ SUBSCRIBE, ⑧ SUBSCRIBE_START
    let (t, mut buf) =
        bidi("02 1a 00 0a 64 65 6d 6f 2f 63 6c 6f 63 6b 07 73 65 63 6f 6e 64 73 00 00 00 00 00 00");
    assert_eq!(t, BidiType::Subscribe);
    let sub = decode_message::<Subscribe>(&mut buf, V6).unwrap().unwrap();
    assert_eq!(
        (
            sub.group_start,
            sub.group_end,
            sub.frame_start,
            sub.frame_end,
            sub.max_age_ms
        ),
        (None, None, 0, None, 0)
    );
    golden_t("00 01 01", V6, SubscribeResponse::Start { group: 1 });

    // ⑨ GROUP + FRAMEs
    let (t, mut buf) = uni("00 03 00 01 00 80 01 d4 c0 06 31 32 3a 33 34 3a 47 d0 02 35 36");
    assert_eq!(t, UniType::Group);
    let g = decode_message::<GroupHeader>(&mut buf, V6)
        .unwrap()
        .unwrap();
    assert_eq!(
        g,
        GroupHeader {
            subscribe_id: 0,
            sequence: 1,
            frame_start: 0
        }
    );
    let mut ts = 0i64;
    let mut stamps = vec![];
    while let Some(f) = decode_frame_header(&mut buf, V6).unwrap() {
        ts += f.timestamp_delta;
        stamps.push(ts);
        let _ = buf.split_to(f.size as usize);
    }
    assert_eq!(stamps, [60_000, 61_000]);

    // Ending: SUBSCRIBE_END exclusive 2, reset code 1 mapped.
    golden_t(
        "01 01 02",
        V6,
        SubscribeResponse::End {
            group: 2,
            streams: None,
        },
    );
    assert_eq!(
        varint::to_vec(wt_encode(1)).unwrap(),
        hex("c0 00 52 e4 a4 0f a8 dc")
    );
    assert_eq!(SessionCode::from_code(0), SessionCode::NoError);

    // Later UPDATE / END, and the no-Role announce exchange.
    golden_t(
        "02 06 00 01 70 39 03 03",
        V6,
        Announcement::Update {
            id: 0,
            hops: Hops::from_vec(vec![12345]).unwrap(),
            cost: RouteCost::new(3),
        },
    );
    golden_t("01 01 00", V6, Announcement::End { id: 0 });
    golden(
        "02 00 00",
        V6,
        AnnounceOk {
            hop: 0,
            active_count: 0,
        },
    );
}
