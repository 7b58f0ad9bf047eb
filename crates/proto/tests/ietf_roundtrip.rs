//! Property tests of the IETF codec: arbitrary messages of every draft, in the shapes each
//! draft can say, encode and decode to themselves; every strict prefix of an encoding is
//! incomplete, never an error; and draft 17's varints never take the 7-byte form.

mod common;

use bytes::{Bytes, BytesMut};
use common::path;
use proptest::prelude::*;
use starling_proto::coding::Wire;
use starling_proto::ietf::datagram::{DatagramBody, ObjectDatagram};
use starling_proto::ietf::fetch::{Fetch, FetchKind};
use starling_proto::ietf::fetch_stream::{FetchEntry, FetchObject, FetchSubgroup};
use starling_proto::ietf::fields::GroupOrder;
use starling_proto::ietf::filter::{EndLocation, Fill, Filter, Location};
use starling_proto::ietf::namespace::{
    ClusterParams, Namespace, PublishNamespace, SubscribeNamespace,
};
use starling_proto::ietf::properties::{ObjectProperties, TrackProperties};
use starling_proto::ietf::reply::{Goaway, RequestError};
use starling_proto::ietf::setup::{ClientSetup, ServerSetup, Setup, SetupOptions};
use starling_proto::ietf::subgroup::{ObjectHeader, SubgroupFlags, SubgroupHeader};
use starling_proto::ietf::subscribe::{PublishDone, Subscribe, SubscribeOk};
use starling_proto::ietf::{Control, Draft};
use starling_proto::{varint, Hops, Path};

const MAX: u64 = varint::MAX;

fn draft() -> impl Strategy<Value = Draft> {
    prop::sample::select(Draft::ALL.to_vec())
}

fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        0..64u64,
        0..16_384u64,
        0..(1u64 << 42),
        (1u64 << 42)..(1u64 << 56),
        0..=MAX
    ]
}

fn small() -> impl Strategy<Value = u64> {
    prop_oneof![0..64u64, 0..(1u64 << 20)]
}

fn arb_path() -> impl Strategy<Value = Path> {
    prop::collection::vec("[a-z0-9._-]{1,6}", 0..=8).prop_map(|s| path(&s.join("/")))
}

fn name() -> impl Strategy<Value = String> {
    ".{0,16}"
}

fn location() -> impl Strategy<Value = Location> {
    (small(), small()).prop_map(|(group, object)| Location { group, object })
}

fn order() -> impl Strategy<Value = GroupOrder> {
    prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)]
}

/// A filter `draft` can say, in its normal form.
fn filter(draft: Draft) -> BoxedStrategy<Filter> {
    let base = prop_oneof![
        Just(Filter::Unfiltered),
        Just(Filter::NextObject),
        Just(Filter::Relative(0)),
        location().prop_map(|start| Filter::Absolute { start, end: None }),
        (location(), 0..100u64).prop_map(|(start, extra)| Filter::Absolute {
            start,
            end: Some(EndLocation {
                group: start.group + extra,
                object: None
            }),
        }),
    ];
    let filter = if draft >= Draft::D20 {
        prop_oneof![
            base,
            small().prop_map(Filter::Relative),
            (location(), 0..100u64, small()).prop_map(|(start, extra, object)| Filter::Absolute {
                start,
                end: Some(EndLocation {
                    group: start.group + extra,
                    object: Some(object)
                }),
            }),
        ]
        .boxed()
    } else {
        base.boxed()
    };
    filter
        .prop_map(|f| match f {
            Filter::Absolute {
                start:
                    Location {
                        group: 0,
                        object: 0,
                    },
                end: None,
            } => Filter::Unfiltered,
            other => other,
        })
        .boxed()
}

fn subscribe(draft: Draft) -> impl Strategy<Value = Subscribe> {
    let d20 = draft >= Draft::D20;
    let fill = if d20 {
        proptest::option::of(proptest::option::of(filter(draft)).prop_map(|filter| Fill {
            filter,
            range_filters: false,
        }))
        .boxed()
    } else {
        Just(None).boxed()
    };
    let order = if draft == Draft::D14 {
        prop_oneof![Just(GroupOrder::Any), order()].boxed()
    } else {
        order().boxed()
    };
    (
        (
            small(),
            arb_path(),
            name(),
            any::<u8>(),
            order,
            any::<bool>(),
        ),
        (filter(draft), fill, any::<bool>(), any::<bool>()),
    )
        .prop_map(
            move |(
                (request_id, namespace, track, priority, group_order, forward),
                (filter, fill, props, ranges),
            )| Subscribe {
                request_id,
                namespace,
                track,
                priority,
                group_order,
                forward,
                filter,
                fill,
                include_properties: props || !d20,
                range_filters: ranges && draft >= Draft::D19 && draft != Draft::D14,
            },
        )
}

fn track_properties(draft: Draft) -> impl Strategy<Value = TrackProperties> {
    let modern = draft >= Draft::D17;
    (
        proptest::option::of(1..=MAX),
        proptest::option::of(any::<u8>()),
        proptest::option::of(order()),
    )
        .prop_map(move |(timescale, priority, group_order)| match draft {
            Draft::D14 => TrackProperties {
                group_order: Some(group_order.unwrap_or(GroupOrder::Ascending)),
                ..Default::default()
            },
            Draft::D15 => TrackProperties {
                group_order,
                ..Default::default()
            },
            _ if modern => TrackProperties {
                timescale,
                priority,
                group_order,
            },
            _ => TrackProperties::default(),
        })
}

fn hops() -> impl Strategy<Value = Hops> {
    prop::collection::vec(1..1000u64, 1..8).prop_map(|ids| {
        let mut hops = Hops::new();
        for id in ids {
            let _ = hops.push(id);
        }
        hops
    })
}

fn setup_options(draft: Draft) -> impl Strategy<Value = SetupOptions> {
    let modern = draft >= Draft::D17;
    (
        proptest::option::of("/[a-z]{0,8}"),
        proptest::option::of(value()),
        proptest::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        proptest::option::of(value()),
        (
            proptest::option::of(value()),
            proptest::option::of(value()),
            proptest::option::of(value()),
            proptest::option::of(value()),
        ),
    )
        .prop_map(
            move |(path, max_request_id, token, cache, (hop, cost, solicit, hidden))| {
                SetupOptions {
                    path: path.map(String::into_bytes),
                    max_request_id: max_request_id.filter(|_| !modern),
                    authorization_token: token,
                    max_auth_token_cache_size: cache,
                    authority: None,
                    implementation: Some(b"starling".to_vec()),
                    hop_id: hop.filter(|_| modern),
                    relay_cost: cost.filter(|_| modern),
                    solicit,
                    hidden,
                }
            },
        )
}

/// A control message `draft` defines, with the request ids its replies carry.
fn control() -> impl Strategy<Value = (Draft, Control)> {
    draft().prop_flat_map(|draft| {
        let reply_id = move |id: u64| if draft.has_control_stream() { id } else { 0 };
        let setup = if draft.has_control_stream() {
            prop_oneof![
                setup_options(draft).prop_map(move |options| Control::ClientSetup(ClientSetup {
                    versions: if draft == Draft::D14 {
                        vec![draft.code(), 0xff0dad02]
                    } else {
                        vec![]
                    },
                    options,
                })),
                setup_options(draft).prop_map(move |options| Control::ServerSetup(ServerSetup {
                    version: (draft == Draft::D14).then_some(draft.code()),
                    options,
                })),
            ]
            .boxed()
        } else {
            setup_options(draft)
                .prop_map(|options| Control::Setup(Setup { options }))
                .boxed()
        };
        let cluster = draft >= Draft::D17;
        let messages = prop_oneof![
            setup,
            subscribe(draft).prop_map(Control::Subscribe),
            (
                small(),
                small(),
                proptest::option::of(location()),
                track_properties(draft)
            )
                .prop_map(
                    move |(id, alias, largest, properties)| Control::SubscribeOk(SubscribeOk {
                        request_id: reply_id(id),
                        track_alias: alias,
                        largest,
                        properties,
                    })
                ),
            (small(), value(), small(), name()).prop_map(
                move |(id, status, stream_count, reason)| Control::PublishDone(PublishDone {
                    request_id: reply_id(id),
                    status,
                    stream_count,
                    reason,
                })
            ),
            (small(), value(), small(), name()).prop_map(move |(id, code, retry, reason)| {
                Control::RequestError {
                    answers: (draft == Draft::D14)
                        .then_some(starling_proto::ietf::reply::Refused::Fetch),
                    error: RequestError {
                        request_id: reply_id(id),
                        code,
                        retry_interval: if draft >= Draft::D16 { retry } else { 0 },
                        reason,
                    },
                }
            }),
            (
                small(),
                arb_path(),
                proptest::option::of(hops()),
                proptest::option::of(value())
            )
                .prop_map(move |(request_id, namespace, hop_path, route_cost)| {
                    Control::PublishNamespace(PublishNamespace {
                        request_id,
                        namespace,
                        cluster: if cluster {
                            ClusterParams {
                                hop_path,
                                route_cost,
                            }
                        } else {
                            ClusterParams::default()
                        },
                    })
                }),
            (small(), arb_path(), any::<bool>(), 0..4u64).prop_map(
                move |(request_id, prefix, hidden, options)| {
                    Control::SubscribeNamespace(SubscribeNamespace {
                        request_id,
                        prefix,
                        options: if matches!(draft, Draft::D16 | Draft::D17) {
                            options
                        } else {
                            1
                        },
                        hidden,
                    })
                }
            ),
            ("[a-z:/.]{0,40}", small()).prop_map(move |(uri, timeout)| Control::Goaway(Goaway {
                uri,
                timeout: if draft >= Draft::D17 { timeout } else { 0 },
            })),
            fetch(draft).prop_map(Control::Fetch),
        ];
        let namespace = if draft >= Draft::D16 {
            (
                arb_path(),
                proptest::option::of((proptest::option::of(hops()), proptest::option::of(value()))),
            )
                .prop_map(move |(suffix, block)| {
                    Control::Namespace(Namespace {
                        suffix,
                        cluster: block.map(|(hop_path, route_cost)| {
                            if cluster {
                                ClusterParams {
                                    hop_path,
                                    route_cost,
                                }
                            } else {
                                ClusterParams::default()
                            }
                        }),
                    })
                })
                .boxed()
        } else {
            Just(Control::MaxRequestId(7)).boxed()
        };
        prop_oneof![messages, namespace].prop_map(move |m| (draft, m))
    })
}

fn fetch(draft: Draft) -> impl Strategy<Value = Fetch> {
    let kind = if draft >= Draft::D20 {
        (arb_path(), name(), filter(draft))
            .prop_map(|(namespace, track, filter)| FetchKind::Filtered {
                namespace,
                track,
                filter,
            })
            .boxed()
    } else {
        prop_oneof![
            (arb_path(), name(), location(), location()).prop_map(
                |(namespace, track, start, end)| FetchKind::Standalone {
                    namespace,
                    track,
                    start,
                    end
                }
            ),
            (small(), small())
                .prop_map(|(joining, offset)| FetchKind::RelativeJoining { joining, offset }),
            (small(), small())
                .prop_map(|(joining, group)| FetchKind::AbsoluteJoining { joining, group }),
        ]
        .boxed()
    };
    let order = prop_oneof![Just(GroupOrder::Any), order()];
    (
        small(),
        any::<u8>(),
        order,
        kind,
        any::<bool>(),
        proptest::option::of(small()),
    )
        .prop_map(
            move |(request_id, priority, group_order, kind, ranges, fill_timeout)| Fetch {
                request_id,
                priority,
                group_order,
                kind,
                range_filters: ranges && draft >= Draft::D19,
                fill_timeout: fill_timeout.filter(|_| draft >= Draft::D18),
            },
        )
}

proptest! {
    // Nine drafts times a dozen message shapes: enough cases that each pair is met.
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn control_messages_round_trip((draft, msg) in control()) {
        let mut out = BytesMut::new();
        msg.encode(draft, &mut out).unwrap_or_else(|e| panic!("{msg:?} on {draft}: {e}"));
        let mut buf = out.clone();
        prop_assert_eq!(Control::decode(&mut buf, draft).unwrap(), Some(msg));
        prop_assert!(buf.is_empty());
        for cut in 0..out.len() {
            let mut prefix = BytesMut::from(&out[..cut]);
            prop_assert_eq!(Control::decode(&mut prefix, draft), Ok(None), "prefix {}", cut);
        }
    }

    #[test]
    fn subgroup_streams_round_trip(
        draft in draft(),
        (alias, group, subgroup) in (value(), value(), value()),
        (properties, field, end, priority) in (any::<bool>(), any::<bool>(), any::<bool>(), proptest::option::of(any::<u8>())),
        first in any::<bool>(),
        objects in prop::collection::vec((value(), proptest::option::of(value()), 0..300u64, 0..8u64), 0..6),
    ) {
        let flags = SubgroupFlags {
            properties,
            subgroup_is_first_object: false,
            subgroup_field: field,
            end_of_group: end,
            priority: priority.is_some(),
            first_object: first || draft < Draft::D18,
        };
        let header = SubgroupHeader { flags, track_alias: alias, group, subgroup: if field { subgroup } else { 0 }, priority };
        let mut out = BytesMut::new();
        header.encode(draft, &mut out).unwrap();
        let mut expected = Vec::new();
        for (delta, ts, len, status) in objects {
            let object = ObjectHeader {
                id_delta: delta,
                properties: properties.then_some(ObjectProperties { timestamp: ts, timescale: None }),
                length: len,
                status: (len == 0).then_some(status),
            };
            object.encode(draft, &mut out).unwrap();
            out.extend(std::iter::repeat_n(0xAB, len as usize));
            expected.push(object);
        }
        let (back, mut at) = SubgroupHeader::peek(&out, draft).unwrap().unwrap();
        prop_assert_eq!(back, header);
        for object in expected {
            for cut in 0..out.len() - at {
                if let Ok(Some((_, used))) = ObjectHeader::peek(&out[at..at + cut], draft, properties, 1 << 20) {
                    prop_assert!(used <= cut);
                    break;
                }
            }
            let (back, used) = ObjectHeader::peek(&out[at..], draft, properties, 1 << 20).unwrap().unwrap();
            prop_assert_eq!(&back, &object);
            at += used + object.length as usize;
        }
        prop_assert_eq!(at, out.len());
    }

    #[test]
    fn fetch_entries_round_trip(
        draft in draft(),
        entries in prop::collection::vec(
            (0..5u8, proptest::option::of(value()), proptest::option::of(value()), proptest::option::of(any::<u8>()), proptest::option::of(proptest::option::of(value())), 0..300u64, 0..8u64),
            0..6),
    ) {
        let mut out = BytesMut::new();
        let mut expected = Vec::new();
        for (sub, group, object, priority, props, len, status) in entries {
            let entry = if draft == Draft::D14 {
                FetchObject {
                    subgroup: FetchSubgroup::Explicit(u64::from(sub)),
                    group: Some(group.unwrap_or(1)),
                    object: Some(object.unwrap_or(2)),
                    priority: Some(priority.unwrap_or(3)),
                    properties: Some(ObjectProperties { timestamp: props.flatten(), timescale: None }),
                    length: len,
                    status: (len == 0).then_some(status),
                }
            } else {
                FetchObject {
                    subgroup: match sub { 0 => FetchSubgroup::Zero, 1 => FetchSubgroup::Prior, 2 => FetchSubgroup::PriorPlusOne, 3 => FetchSubgroup::Explicit(9), _ => FetchSubgroup::Datagram },
                    group,
                    object,
                    priority,
                    properties: props.map(|ts| ObjectProperties { timestamp: ts, timescale: None }),
                    length: len,
                    status: (len == 0 && draft <= Draft::D15).then_some(status),
                }
            };
            FetchEntry::Object(entry.clone()).encode(draft, &mut out).unwrap();
            out.extend(std::iter::repeat_n(0xCD, len as usize));
            expected.push(entry);
        }
        let mut at = 0;
        for entry in expected {
            let (back, used) = FetchEntry::peek(&out[at..], draft, 1 << 20).unwrap().unwrap();
            prop_assert_eq!(back, FetchEntry::Object(entry.clone()));
            at += used + entry.length as usize;
        }
        prop_assert_eq!(at, out.len());
    }

    #[test]
    fn datagrams_round_trip(
        draft in draft(),
        (alias, group) in (value(), value()),
        object in proptest::option::of(value()),
        priority in proptest::option::of(any::<u8>()),
        ts in proptest::option::of(value()),
        end_of_group in any::<bool>(),
        status in proptest::option::of(0..8u64),
        payload in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let datagram = ObjectDatagram {
            track_alias: alias,
            group,
            object,
            priority,
            end_of_group,
            properties: ts.map(|t| ObjectProperties { timestamp: Some(t), timescale: None }),
            body: match status {
                Some(s) => DatagramBody::Status(s),
                None => DatagramBody::Payload(Bytes::from(payload)),
            },
        };
        let mut out = BytesMut::new();
        if datagram.encode(draft, &mut out).is_ok() {
            prop_assert_eq!(ObjectDatagram::decode(&out, draft).unwrap(), datagram);
        } else {
            // Refused only for what the draft cannot say.
            let d14 = draft == Draft::D14 && (object.is_none() || priority.is_none() || status.is_some());
            let status_end = status.is_some() && end_of_group;
            let props_status = draft >= Draft::D17 && ts.is_some() && status.is_some_and(|s| s != 0);
            prop_assert!(d14 || status_end || props_status);
        }
    }

    #[test]
    fn leading_ones_draft17(v in 0..=MAX) {
        let mut out = BytesMut::new();
        varint::encode_as(Draft::D17.flavor(), v, &mut out).unwrap();
        prop_assert_ne!(out[0].leading_ones(), 6);
        prop_assert_eq!(varint::peek_as(Draft::D17.flavor(), &out).unwrap(), Some((v, out.len())));
    }
}
