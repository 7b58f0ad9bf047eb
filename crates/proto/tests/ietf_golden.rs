//! The worked examples of docs/wire-ietf.md §10, byte for byte: each message decodes from
//! the bytes moq-net's encoders produce, and encodes back to exactly them.

mod common;

use bytes::BytesMut;
use common::hex;
use starling_proto::coding::Wire;
use starling_proto::ietf::fields::GroupOrder;
use starling_proto::ietf::filter::{Fill, Filter, Location};
use starling_proto::ietf::namespace::{Namespace, SubscribeNamespace};
use starling_proto::ietf::properties::TrackProperties;
use starling_proto::ietf::reply::{Goaway, RequestError, RequestOk};
use starling_proto::ietf::subscribe::{PublishDone, Subscribe, SubscribeOk};
use starling_proto::ietf::{Control, Draft};
use starling_proto::Path;

/// `bytes` decodes to `msg` on `draft`, and `msg` encodes to `bytes`.
fn golden(msg: &Control, draft: Draft, bytes: &str) {
    let bytes = hex(bytes);
    let mut out = BytesMut::new();
    msg.encode(draft, &mut out).unwrap();
    assert_eq!(hexify(&out), hexify(&bytes), "{draft}: encoding {msg:?}");
    let mut buf = BytesMut::from(&bytes[..]);
    assert_eq!(
        Control::decode(&mut buf, draft).unwrap().as_ref(),
        Some(msg),
        "{draft}"
    );
    assert!(buf.is_empty());
}

fn hexify(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn live_join(draft: Draft) -> Subscribe {
    Subscribe {
        request_id: 4,
        namespace: Path::new("bbb").unwrap(),
        track: "video".into(),
        priority: 128,
        group_order: GroupOrder::Descending,
        forward: true,
        filter: Filter::NextObject,
        fill: (draft >= Draft::D20).then_some(Fill {
            filter: Some(Filter::Relative(1)),
            range_filters: false,
        }),
        include_properties: true,
        range_filters: false,
    }
}

/// §10.3: SUBSCRIBE for a live join on every wire family.
#[test]
fn subscribe() {
    for (draft, bytes) in [
        (
            Draft::D14,
            "03 0011 04 01 03626262 05766964656f 80 02 01 02 00",
        ),
        (
            Draft::D15,
            "03 0017 04 01 03626262 05766964656f 04 10 01 20 4080 21 0102 22 02",
        ),
        (
            Draft::D17,
            "03 0017 04 00 01 03626262 05766964656f 04 10 01 10 80 01 0102 01 02",
        ),
        (
            Draft::D20,
            "03 001d 04 01 03626262 05766964656f 05 10 01 10 80 01 020000 01 02 01 0401210101",
        ),
        (
            Draft::D21,
            "03 001d 04 01 03626262 05766964656f 05 10 01 10 80 01 020000 01 02 01 0401210101",
        ),
        (
            Draft::D22,
            "03 001b 04 01 03626262 05766964656f 05 10 01 10 80 01 05 01 02 01 0401210101",
        ),
    ] {
        golden(&Control::Subscribe(live_join(draft)), draft, bytes);
    }
}

/// §10.3: the publisher's SUBSCRIBE_OK (alias 4, Largest {7, 1}).
#[test]
fn subscribe_ok() {
    let d14 = SubscribeOk {
        request_id: 4,
        track_alias: 4,
        largest: Some(Location {
            group: 7,
            object: 1,
        }),
        properties: TrackProperties {
            group_order: Some(GroupOrder::Descending),
            ..Default::default()
        },
    };
    golden(
        &Control::SubscribeOk(d14),
        Draft::D14,
        "04 0008 04 04 00 02 01 07 01 00",
    );
    let d22 = SubscribeOk {
        request_id: 0,
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
    };
    golden(
        &Control::SubscribeOk(d22),
        Draft::D22,
        "04 000d 04 01 09 07 01 08 83e8 06 8080 14 02",
    );
}

/// §10.5.
#[test]
fn replies_and_discovery() {
    let done = PublishDone {
        request_id: 0,
        status: 2,
        stream_count: 3,
        reason: "track ended".into(),
    };
    golden(
        &Control::PublishDone(done.clone()),
        Draft::D22,
        "0b 000e 02 03 0b 747261636b20656e646564",
    );
    golden(
        &Control::PublishDone(PublishDone {
            request_id: 4,
            ..done
        }),
        Draft::D14,
        "0b 000f 04 02 03 0b 747261636b20656e646564",
    );
    golden(
        &Control::RequestError {
            answers: None,
            error: RequestError {
                request_id: 0,
                code: 0x10,
                retry_interval: 0,
                reason: "not found".into(),
            },
        },
        Draft::D22,
        "05 000c 10 00 09 6e6f7420666f756e64",
    );
    golden(
        &Control::SubscribeNamespace(SubscribeNamespace {
            request_id: 2,
            prefix: Path::empty(),
            options: 1,
            hidden: false,
        }),
        Draft::D22,
        "50 0003 02 00 00",
    );
    golden(
        &Control::RequestOk {
            answers: None,
            ok: RequestOk::default(),
        },
        Draft::D22,
        "07 0001 00",
    );
    golden(
        &Control::Namespace(Namespace {
            suffix: Path::new("bbb").unwrap(),
            cluster: None,
        }),
        Draft::D22,
        "08 0005 01 03 626262",
    );
    golden(
        &Control::Goaway(Goaway::default()),
        Draft::D22,
        "10 0002 00 00",
    );
    golden(
        &Control::Goaway(Goaway::default()),
        Draft::D18,
        "10 0003 00 00 00",
    );
}

/// Types a draft does not define fail as soon as the type is read.
#[test]
fn undefined_types() {
    for (draft, code) in [
        (Draft::D22, 0x11u8),
        (Draft::D17, 0x50),
        (Draft::D17, 0x15),
        (Draft::D16, 0x51),
        (Draft::D15, 0x08),
        (Draft::D14, 0x0E),
        (Draft::D22, 0x20),
        (Draft::D22, 0x1A),
    ] {
        let mut buf = BytesMut::new();
        starling_proto::varint::encode_as(draft.flavor(), u64::from(code), &mut buf).unwrap();
        assert!(
            Control::decode(&mut buf, draft).is_err(),
            "{code:#x} on {draft}"
        );
    }
    // Draft 17 refuses the 7-byte varint form even in a type.
    let mut buf = BytesMut::from(&[0xfc, 0, 0, 0, 0, 0, 0x03][..]);
    assert!(Control::decode(&mut buf, Draft::D17).is_err());
    // A body with bytes left over is refused.
    let mut buf = BytesMut::from(&hex("07 0002 00 00")[..]);
    assert!(Control::decode(&mut buf, Draft::D22).is_err());
    // Incomplete: nothing consumed.
    let mut buf = BytesMut::from(&hex("07 0001")[..]);
    assert_eq!(Control::decode(&mut buf, Draft::D22), Ok(None));
    assert_eq!(buf.len(), 3);
}
