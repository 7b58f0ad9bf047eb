//! Golden bytes: the lite-06 wire examples of docs/wire.md §4, the §11 worked example, the
//! §7.3 mapped codes, and the lite-05 bytes of §4 and §11.2 (the published notes' lite-05
//! worked example). Each decodes to the stated values and re-encodes byte for byte.

mod common;

use bytes::BytesMut;
use common::*;
use starling_proto::*;

const V5: Version = Version::Lite05;
const V6: Version = Version::Lite06;

const DEMO_CLOCK: &str = "0a 64656d6f2f636c6f636b";
const SECONDS: &str = "07 7365636f6e6473";
const VIDEO: &str = "05 766964656f";

fn cat(parts: &[&str]) -> String {
    parts.join(" ")
}

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
fn uni(bytes: &str) -> (UniType, BytesMut) {
    let mut buf = BytesMut::from(&hex(bytes)[..]);
    let t = UniType::decode(&mut buf, Version::Lite06).unwrap().unwrap();
    (t, buf)
}

fn bidi(bytes: &str) -> (BidiType, BytesMut) {
    let mut buf = BytesMut::from(&hex(bytes)[..]);
    let t = BidiType::decode(&mut buf, Version::Lite06)
        .unwrap()
        .unwrap();
    (t, buf)
}

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

// ---- lite-05, docs/wire.md §4 and §11.2 --------------------------------------------

#[test]
fn worked_example_lite05() {
    let mut setup = Setup::new();
    setup.set_role(Some(Role::Subscriber));
    golden("04 01 03 01 02", V5, setup);

    let path_setup = hex("13 02 02 0d 2f 61 6e 6f 6e 3f 6a 77 74 3d 61 62 63 03 01 02");
    let s: Setup = decode(&path_setup, V5).unwrap();
    assert_eq!(
        (s.path(), s.role()),
        (Some("/anon?jwt=abc"), Some(Role::Subscriber))
    );
    assert_eq!(encode(&s, V5), path_setup);

    golden(
        &cat(&["11", DEMO_CLOCK, VIDEO]),
        V5,
        Track {
            broadcast: path("demo/clock"),
            track: "video".into(),
        },
    );
    golden(
        "08 00 00 53 88 80 0f 42 40",
        V5,
        TrackInfo {
            priority: 0,
            max_age_ms: 5000,
            timescale: 1_000_000,
        },
    );

    golden(
        &cat(&["18 00", DEMO_CLOCK, VIDEO, "02 00 41 f4 00 00"]),
        V5,
        Subscribe {
            id: 0,
            broadcast: path("demo/clock"),
            track: "video".into(),
            priority: 2,
            max_age_ms: 500,
            ..Default::default()
        },
    );
    golden(
        "06 05 00 41 f4 00 00",
        V5,
        SubscribeUpdate {
            priority: 5,
            max_age_ms: 500,
            ..Default::default()
        },
    );
    golden_t("00 01 2a", V5, SubscribeResponse::Start { group: 42 });
    golden_t(
        "01 01 2b",
        V5,
        SubscribeResponse::End {
            group: 43,
            streams: None,
        },
    );

    let (t, mut buf) = uni("00 02 00 2a 80 98 96 80 04 66 72 6d 31 80 01 04 6a 04 66 72 6d 32");
    assert_eq!(t, UniType::Group);
    assert_eq!(
        decode_message::<GroupHeader>(&mut buf, V5)
            .unwrap()
            .unwrap(),
        GroupHeader {
            subscribe_id: 0,
            sequence: 42,
            frame_start: 0
        }
    );
    let mut ts = 0i64;
    let mut frames = vec![];
    while let Some(f) = decode_frame_header(&mut buf, V5).unwrap() {
        ts += f.timestamp_delta;
        frames.push((ts, buf.split_to(f.size as usize).to_vec()));
    }
    assert_eq!(
        frames,
        [(5_000_000, b"frm1".to_vec()), (5_033_333, b"frm2".to_vec())]
    );
    let mut out = BytesMut::new();
    encode_frame_header(
        &FrameHeader {
            timestamp_delta: 33_333,
            size: 4,
        },
        V5,
        &mut out,
    )
    .unwrap();
    assert_eq!(&out[..], &hex("80 01 04 6a 04")[..]);

    // Announce stream.
    let (t, mut buf) = bidi("01 02 00 00");
    assert_eq!(t, BidiType::Announce);
    assert_eq!(
        decode_message::<AnnounceRequest>(&mut buf, V5)
            .unwrap()
            .unwrap(),
        AnnounceRequest::default()
    );
    golden(
        "09 c0 00 1a 2b 3c 4d 5e 6f 01",
        V5,
        AnnounceOk {
            hop: 0x1A2B3C4D5E6F,
            active_count: 1,
        },
    );
    golden(
        &cat(&["0f 01", DEMO_CLOCK, "01 70 39"]),
        V5,
        Announce {
            status: AnnounceStatus::Active,
            suffix: path("demo/clock"),
            hops: Hops::from_vec(vec![12345]).unwrap(),
        },
    );
    golden(
        &cat(&["0d 00", DEMO_CLOCK, "00"]),
        V5,
        Announce {
            status: AnnounceStatus::Ended,
            suffix: path("demo/clock"),
            hops: Hops::new(),
        },
    );

    // Other messages.
    golden(
        &cat(&["13", DEMO_CLOCK, VIDEO, "02 29"]),
        V5,
        Fetch {
            broadcast: path("demo/clock"),
            track: "video".into(),
            priority: 2,
            group: 41,
            frame_start: 0,
            frame_end: None,
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
    let dg = bytes::Bytes::from(hex("00 2b 80 4d 4f aa 64 67 72 6d"));
    let d = Datagram::decode(&dg, V5).unwrap();
    assert_eq!(
        (d.subscribe_id, d.sequence, d.timestamp, &d.payload[..]),
        (0, 43, 5_066_666, &b"dgrm"[..])
    );
    let mut out = Vec::new();
    d.encode(V5, &mut out).unwrap();
    assert_eq!(out, dg);
}

// ---- lite-07-wip: leading-ones varints, the Hidden flag, SUBSCRIBE_END's stream count --

#[test]
fn lite07_messages() {
    let v = Version::Lite07Wip;
    golden(
        "05 7f 9388 83e8",
        v,
        TrackInfo {
            priority: 0x7f,
            max_age_ms: 5000,
            timescale: 1000,
        },
    );
    let mut setup = Setup::new();
    setup.set_cost(Some(100));
    golden("04 01 04 01 64", v, setup.clone());
    // The same SETUP on lite-06: the value is a QUIC varint there.
    golden("05 01 04 02 40 64", Version::Lite06, setup);
    golden(
        "02 00 01",
        v,
        AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: true,
        },
    );
    golden_t(
        "01 02 02 01",
        v,
        SubscribeResponse::End {
            group: 2,
            streams: Some(1),
        },
    );
    // A hop in the 8-byte form, and a 3-byte frame delta.
    let mut setup = Setup::new();
    setup.set_hop(Some(0x1A2B3C4D5E6F)).unwrap();
    golden("0b 01 05 08 fe 00 1a2b 3c4d 5e6f", v, setup);
    let mut buf = BytesMut::new();
    encode_frame_header(
        &FrameHeader {
            timestamp_delta: 60_000,
            size: 5,
        },
        v,
        &mut buf,
    )
    .unwrap();
    assert_eq!(&buf[..], &hex("c1 d4 c0 05")[..]);
}

#[test]
fn lite07_refuses_what_it_removed_or_never_had() {
    let v = Version::Lite07Wip;
    // SUBSCRIBE_DROP no longer exists.
    let mut buf = BytesMut::from(&hex("02 03 01 02 03")[..]);
    assert_eq!(
        decode_typed::<SubscribeResponse>(&mut buf, v),
        Err(DecodeError::UnknownType(2))
    );
    let drop = SubscribeResponse::Drop {
        start: 1,
        end: 2,
        error: 3,
    };
    assert!(encode_typed(&drop, v, &mut BytesMut::new()).is_err());
    // END must carry its count on 07, and may not before.
    let bare = SubscribeResponse::End {
        group: 2,
        streams: None,
    };
    assert!(encode_typed(&bare, v, &mut BytesMut::new()).is_err());
    let counted = SubscribeResponse::End {
        group: 2,
        streams: Some(1),
    };
    assert!(encode_typed(&counted, Version::Lite06, &mut BytesMut::new()).is_err());
    // Hidden is a bool: 2 is not one.
    let mut buf = BytesMut::from(&hex("02 00 02")[..]);
    assert!(decode_message::<AnnounceRequest>(&mut buf, v).is_err());
    // Lite-06's typed announcements are not lite-07's.
    let mut buf = BytesMut::from(&hex("01 01 00")[..]);
    assert_eq!(
        decode_typed::<Announcement>(&mut buf, v),
        Err(DecodeError::Unsupported)
    );
}

// ---- lite-03/04: shared layouts work through the gates, differing ones are refused ----

#[test]
fn older_versions_through_gates() {
    let v4 = Version::Lite04;
    let v3 = Version::Lite03;
    golden(
        "02 00 05",
        v4,
        AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 5,
            hidden: false,
        },
    );
    golden(
        "01 00",
        v3,
        AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: false,
        },
    );
    golden(
        "04 80 26 25 a0",
        v3,
        Probe {
            bitrate: 2_500_000,
            rtt_ms: 0,
        },
    );
    let mut out = BytesMut::new();
    assert_eq!(
        encode_message(
            &Probe {
                bitrate: 1,
                rtt_ms: 1
            },
            v3,
            &mut out
        ),
        Err(EncodeError::Unsupported)
    );
    assert_eq!(
        encode_message(&Goaway::default(), v3, &mut out),
        Err(EncodeError::Unsupported)
    );
    golden("01 00", v4, Goaway::default());
    golden(
        "02 00 2a",
        v4,
        GroupHeader {
            subscribe_id: 0,
            sequence: 42,
            frame_start: 0,
        },
    );
    // lite-04: DROP is type 1 (moq-net's `subscribe_drop_is_type_1_on_lite04`), OK type 0.
    golden_t(
        "01 03 01 03 00",
        v4,
        SubscribeResponse::Drop {
            start: 1,
            end: 3,
            error: 0,
        },
    );
    golden_t(
        "00 05 03 00 00 00 00",
        v3,
        SubscribeResponse::Ok {
            priority: 3,
            max_age_ms: 0,
            start: None,
            end: None,
        },
    );
    assert_eq!(
        decode_t::<SubscribeResponse>(&hex("02 01 01"), v4),
        Err(DecodeError::UnknownType(2))
    );
    assert_eq!(
        encode_t_result(&SubscribeResponse::Start { group: 1 }, v4),
        Err(EncodeError::Unsupported)
    );
    assert_eq!(
        decode::<AnnounceOk>(&hex("02 00 00"), v4),
        Err(DecodeError::Unsupported)
    );
    // Announcements: 03 carries the chain's length only (anonymous hops stand in), 04 the
    // chain with the sender last.
    let cam = Path::new("room/cam").unwrap();
    golden(
        "0b 01 08 726f6f6d2f63616d 02",
        v3,
        Announce {
            status: AnnounceStatus::Active,
            suffix: cam.clone(),
            hops: Hops::from_vec(vec![0, 0]).unwrap(),
        },
    );
    golden(
        "0d 01 08 726f6f6d2f63616d 02 07 09",
        v4,
        Announce {
            status: AnnounceStatus::Active,
            suffix: cam.clone(),
            hops: Hops::from_vec(vec![7, 9]).unwrap(),
        },
    );
    golden(
        "0b 00 08 726f6f6d2f63616d 00",
        v3,
        Announce {
            status: AnnounceStatus::Ended,
            suffix: cam.clone(),
            hops: Hops::new(),
        },
    );
    // No timestamp before 05: a frame header is its size alone.
    let mut buf = BytesMut::from(&hex("04")[..]);
    assert_eq!(
        decode_frame_header(&mut buf, v4),
        Ok(Some(FrameHeader {
            timestamp_delta: 0,
            size: 4
        }))
    );
    let mut out = BytesMut::new();
    encode_frame_header(
        &FrameHeader {
            timestamp_delta: 99,
            size: 2,
        },
        v3,
        &mut out,
    )
    .unwrap();
    assert_eq!(&out[..], &[0x02]);
    assert!(Datagram::decode(&bytes::Bytes::from_static(&[0, 0, 0]), v4).is_err());
    // lite-04 has no restart status.
    assert_eq!(
        decode::<Announce>(&hex("03 02 00 00"), v4),
        Err(DecodeError::InvalidValue("announce status"))
    );
    // SUBSCRIBE on 03/04 (moq-net's group start values: latest 0, group n as n+1).
    golden(
        "12 01 04 726f6f6d 05 766964656f 03 00 40fa 00 00",
        v4,
        Subscribe {
            id: 1,
            broadcast: Path::new("room").unwrap(),
            track: "video".into(),
            priority: 3,
            max_age_ms: 250,
            ..Default::default()
        },
    );
    golden(
        "05 05 00 00 00 0a",
        v3,
        SubscribeUpdate {
            priority: 5,
            group_end: Some(9),
            ..Default::default()
        },
    );
}

#[test]
fn lite01_and_02() {
    let (v1, v2) = (Version::Lite01, Version::Lite02);
    // SUBSCRIBE ends at the priority.
    for v in [v1, v2] {
        golden(
            "0d 01 04 726f6f6d 05 766964656f 03",
            v,
            Subscribe {
                id: 1,
                broadcast: Path::new("room").unwrap(),
                track: "video".into(),
                priority: 3,
                ..Default::default()
            },
        );
        assert!(decode::<SubscribeUpdate>(&hex("01 03"), v).is_err());
        assert!(decode_t::<SubscribeResponse>(&hex("00 01 01"), v).is_err());
        // Announcements have no hops; ANNOUNCE_INIT lists the live suffixes.
        golden(
            "0a 01 08 726f6f6d2f63616d",
            v,
            Announce {
                status: AnnounceStatus::Active,
                suffix: Path::new("room/cam").unwrap(),
                hops: Hops::new(),
            },
        );
        golden(
            "0a 01 08 726f6f6d2f63616d",
            v,
            AnnounceInit {
                suffixes: vec![Path::new("room/cam").unwrap()],
            },
        );
        assert!(decode::<Probe>(&hex("01 00"), v).is_err());
    }
    // The untyped SUBSCRIBE_OK: the priority on 01, empty on 02.
    golden("01 03", v1, LegacySubscribeOk { priority: 3 });
    golden("00", v2, LegacySubscribeOk { priority: 0 });
}
