//! Golden bytes of the lite versions beside lite-06: lite-05's of docs/wire.md §4 and §11.2
//! (the published notes' lite-05 worked example), lite-07-wip's leading-ones varints, Hidden
//! flag and SUBSCRIBE_END stream count, and lite-03/04 through the version gates. Each decodes
//! to the stated values and re-encodes byte for byte.

mod common;

use bytes::BytesMut;
use common::golden::*;
use common::*;
use starling_proto::*;

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
