//! lite-07 announce compression: the pinned stream byte for byte (moq-net's golden, and the
//! literal stream the JS client writes for the same announcements), every way a reference can
//! fail to resolve, and random announce sequences that must come back as they went.

use bytes::BytesMut;
use proptest::prelude::*;
use starling_proto::{
    decode_typed, encode_typed, AnnounceDecoder, AnnounceEncoder, Announcement,
    CompressedAnnouncement, DecodeError, Hops, HopsRef, Path, PathRef, RouteCost, Version,
};

const V7: Version = Version::Lite07Wip;

/// moq-net 0.3.18's pinned compressed stream (`lite/compress.rs`).
const GOLDEN: &str = "001600000a726f6f6d2f612f63616d00029111a222000000000d0102036d69630101b3330100000209000101c04444010000010101000c020101620201c05555010000";

/// The same announcements as `js/net` writes them: never a base.
const JS_LITERAL: &str = "001600000a726f6f6d2f612f63616d00029111a222000000001600000a726f6f6d2f612f6d69630002b333a222000000020b000002c04444a2220000000101010013000006726f6f6d2f620002c05555a222000000";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hops(ids: &[u64]) -> Hops {
    Hops::from_vec(ids.to_vec()).unwrap()
}

fn start(suffix: &str, ids: &[u64]) -> Announcement {
    Announcement::Start {
        suffix: Path::new(suffix).unwrap(),
        hops: hops(ids),
        cost: RouteCost::default(),
    }
}

fn golden() -> Vec<Announcement> {
    vec![
        start("room/a/cam", &[0x1111, 0x2222]),
        start("room/a/mic", &[0x3333, 0x2222]),
        Announcement::Update {
            id: 0,
            hops: hops(&[0x4444, 0x2222]),
            cost: RouteCost::default(),
        },
        Announcement::End { id: 1 },
        start("room/b", &[0x5555, 0x2222]),
    ]
}

fn encode_all(announcements: &[Announcement]) -> Vec<u8> {
    let mut encoder = AnnounceEncoder::new(V7);
    let mut out = BytesMut::new();
    for announcement in announcements {
        let wire = encoder.compress(announcement).unwrap();
        encode_typed(&wire, V7, &mut out).unwrap();
    }
    out.to_vec()
}

fn decode_all(bytes: &[u8]) -> Result<Vec<Announcement>, DecodeError> {
    let mut decoder = AnnounceDecoder::new();
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(wire) = decode_typed::<CompressedAnnouncement>(&mut buf, V7)? {
        out.push(decoder.resolve(wire)?);
    }
    assert!(buf.is_empty(), "a whole number of messages");
    Ok(out)
}

#[test]
fn the_pinned_stream_encodes_and_decodes_byte_for_byte() {
    assert_eq!(encode_all(&golden()), hex(GOLDEN));
    assert_eq!(decode_all(&hex(GOLDEN)).unwrap(), golden());
}

#[test]
fn the_literal_stream_of_the_js_client_decodes() {
    assert_eq!(decode_all(&hex(JS_LITERAL)).unwrap(), golden());
}

fn path_ref(base: u64, keep: u64, rest: &str) -> PathRef {
    PathRef {
        base,
        keep,
        rest: Path::new(rest).unwrap(),
    }
}

fn chain(base: u64, literal: &[u64], keep: u64) -> HopsRef {
    HopsRef {
        base,
        literal: hops(literal),
        keep,
    }
}

fn wire_start(path: PathRef, hops: HopsRef) -> CompressedAnnouncement {
    CompressedAnnouncement::Start {
        suffix: path,
        hops,
        cost: RouteCost::default(),
    }
}

fn literal_start(suffix: &str, ids: &[u64]) -> CompressedAnnouncement {
    wire_start(
        PathRef::literal(Path::new(suffix).unwrap()),
        chain(0, ids, 0),
    )
}

fn resolved_start(
    decoder: &mut AnnounceDecoder,
    wire: CompressedAnnouncement,
) -> (String, Vec<u64>) {
    match decoder.resolve(wire).unwrap() {
        Announcement::Start { suffix, hops, .. } => (suffix.to_string(), hops.as_slice().to_vec()),
        other => panic!("a start resolves to a start, got {other:?}"),
    }
}

#[test]
fn a_head_and_a_tail_resolve_and_an_update_may_copy_its_own_chain() {
    let mut decoder = AnnounceDecoder::new();
    decoder
        .resolve(literal_start("pid/private/channel_1/health-1", &[1, 2, 3]))
        .unwrap();
    let got = resolved_start(
        &mut decoder,
        wire_start(path_ref(1, 3, "health-2"), chain(1, &[7], 2)),
    );
    assert_eq!(
        got,
        ("pid/private/channel_1/health-2".into(), vec![7, 2, 3])
    );
    // A whole keep with a rest extending it.
    let got = resolved_start(
        &mut decoder,
        wire_start(path_ref(2, 4, "x"), chain(2, &[], 3)),
    );
    assert_eq!(
        got,
        ("pid/private/channel_1/health-1/x".into(), vec![1, 2, 3])
    );
    // An update resolving against the chain it replaces.
    let update = CompressedAnnouncement::Update {
        id: 0,
        hops: chain(3, &[9], 3),
        cost: RouteCost::default(),
    };
    assert_eq!(
        decoder.resolve(update).unwrap(),
        Announcement::Update {
            id: 0,
            hops: hops(&[9, 1, 2, 3]),
            cost: RouteCost::default()
        }
    );
}

#[test]
fn every_unresolvable_reference_is_refused() {
    let refused = |setup: &[CompressedAnnouncement], bad: CompressedAnnouncement| {
        let mut decoder = AnnounceDecoder::new();
        for wire in setup {
            decoder.resolve(wire.clone()).unwrap();
        }
        let result = decoder.resolve(bad);
        assert!(
            matches!(result, Err(DecodeError::InvalidReference(_))),
            "{result:?}"
        );
        // Refusals are session-fatal: PROTOCOL_VIOLATION.
        assert_eq!(
            result.unwrap_err().session_code(),
            starling_proto::SessionCode::ProtocolViolation
        );
    };
    // A base on a new stream (never assigned).
    refused(&[], wire_start(path_ref(1, 0, "a"), chain(0, &[], 0)));
    refused(&[], wire_start(path_ref(0, 0, "a"), chain(1, &[], 0)));
    // A retired base.
    let two = [literal_start("a", &[1]), literal_start("b", &[2])];
    let mut after_end = two.to_vec();
    after_end.push(CompressedAnnouncement::End { id: 0 });
    refused(
        &after_end,
        wire_start(path_ref(2, 1, "x"), chain(0, &[], 0)),
    );
    // Base out of range.
    refused(&two, wire_start(path_ref(3, 0, "x"), chain(0, &[], 0)));
    // A keep past the base, for paths and chains.
    refused(
        &[literal_start("a/b", &[1])],
        wire_start(path_ref(1, 3, "x"), chain(0, &[], 0)),
    );
    refused(
        &[literal_start("a/b", &[1])],
        CompressedAnnouncement::Update {
            id: 0,
            hops: chain(1, &[], 2),
            cost: RouteCost::default(),
        },
    );
    // A resolved path over 32 segments.
    let deep = vec!["x"; 32].join("/");
    refused(
        &[literal_start(&deep, &[])],
        wire_start(path_ref(1, 32, "y"), chain(0, &[], 0)),
    );
    // A resolved chain repeating a hop, or over 32 hops.
    refused(
        &[literal_start("a", &[1, 2])],
        wire_start(path_ref(0, 0, "b"), chain(1, &[2], 1)),
    );
    let full: Vec<u64> = (1..=32).collect();
    refused(
        &[literal_start("e", &full)],
        wire_start(path_ref(0, 0, "f"), chain(1, &[100], 32)),
    );
    // END or UPDATE of an id not live.
    refused(&two, CompressedAnnouncement::End { id: 5 });
    refused(
        &two,
        CompressedAnnouncement::Update {
            id: 7,
            hops: chain(0, &[], 0),
            cost: RouteCost::default(),
        },
    );
}

#[test]
fn a_keep_without_a_base_does_not_decode() {
    // START: PathRef base 0, keep 1.
    let mut buf =
        BytesMut::from(&hex("00 07 00 01 01 61 00 00 00 00 00".replace(' ', "").as_str())[..]);
    assert!(matches!(
        decode_typed::<CompressedAnnouncement>(&mut buf, V7),
        Err(DecodeError::InvalidValue(_))
    ));
}

#[test]
fn anonymous_hops_may_repeat_across_the_halves() {
    let mut decoder = AnnounceDecoder::new();
    decoder.resolve(literal_start("c", &[0])).unwrap();
    let got = resolved_start(
        &mut decoder,
        wire_start(path_ref(0, 0, "d"), chain(1, &[0], 1)),
    );
    assert_eq!(got.1, vec![0, 0]);
}

#[test]
fn the_encoder_picks_the_longest_shared_head_and_tail_and_else_sends_literals() {
    let mut encoder = AnnounceEncoder::new(V7);
    encoder
        .compress(&start("a/b/c", &[1 << 50, 1 << 51]))
        .unwrap();
    // Shares bytes with `a/b/d` but only one segment.
    encoder.compress(&start("a/b-z", &[3])).unwrap();
    let wire = encoder.compress(&start("a/b/d", &[5, 1 << 51])).unwrap();
    assert_eq!(wire, wire_start(path_ref(2, 2, "d"), chain(2, &[5], 1)));
    let wire = encoder.compress(&start("q", &[8])).unwrap();
    assert_eq!(wire, literal_start("q", &[8]));
    // An END or UPDATE for an id never announced is the caller's bug.
    assert!(encoder.compress(&Announcement::End { id: 99 }).is_err());
}

/// One step of a random announce stream.
#[derive(Debug, Clone)]
enum Step {
    Start { segments: Vec<u8>, hops: Vec<u8> },
    Update { pick: usize, hops: Vec<u8> },
    End { pick: usize },
}

fn step() -> impl Strategy<Value = Step> {
    // Small alphabets so paths and chains share heads and tails often.
    prop_oneof![
        3 => (proptest::collection::vec(0u8..4, 1..6), proptest::collection::vec(0u8..6, 0..5))
            .prop_map(|(segments, hops)| Step::Start { segments, hops }),
        1 => (any::<usize>(), proptest::collection::vec(0u8..6, 0..5))
            .prop_map(|(pick, hops)| Step::Update { pick, hops }),
        1 => any::<usize>().prop_map(|pick| Step::End { pick }),
    ]
}

/// A chain from small values: distinct non-zero ids (a repeat would be invalid), some large.
fn chain_of(values: &[u8]) -> Hops {
    let mut seen = Vec::new();
    for &v in values {
        let id = if v % 2 == 0 {
            u64::from(v)
        } else {
            (1 << 45) + u64::from(v)
        };
        if id == 0 || !seen.contains(&id) {
            seen.push(id);
        }
    }
    Hops::from_vec(seen).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the encoder picks, the decoder resolves to the same paths and chains, and the
    /// stream is never longer than the literal one.
    #[test]
    fn random_streams_come_back_as_they_went(steps in proptest::collection::vec(step(), 1..60)) {
        let mut sent = Vec::new();
        let mut live: Vec<u64> = Vec::new();
        let mut next = 0;
        for step in steps {
            match step {
                Step::Start { segments, hops } => {
                    let path: Vec<String> = segments.iter().map(|s| format!("s{s}")).collect();
                    sent.push(Announcement::Start {
                        suffix: Path::new(&path.join("/")).unwrap(),
                        hops: chain_of(&hops),
                        cost: RouteCost { warm: 1, cold: 2 },
                    });
                    live.push(next);
                    next += 1;
                }
                Step::Update { pick, hops } if !live.is_empty() => {
                    sent.push(Announcement::Update {
                        id: live[pick % live.len()],
                        hops: chain_of(&hops),
                        cost: RouteCost { warm: 3, cold: 4 },
                    });
                }
                Step::End { pick } if !live.is_empty() => {
                    let id = live.remove(pick % live.len());
                    sent.push(Announcement::End { id });
                }
                _ => {}
            }
        }
        let compressed = encode_all(&sent);
        prop_assert_eq!(decode_all(&compressed).unwrap(), sent.clone());
        // The literal form of the same stream, for the size bound.
        let mut literal = BytesMut::new();
        for announcement in &sent {
            let wire = match announcement {
                Announcement::Start { suffix, hops, cost } => CompressedAnnouncement::Start {
                    suffix: PathRef::literal(suffix.clone()),
                    hops: HopsRef::literal(hops.clone()),
                    cost: *cost,
                },
                Announcement::Update { id, hops, cost } => CompressedAnnouncement::Update {
                    id: *id,
                    hops: HopsRef::literal(hops.clone()),
                    cost: *cost,
                },
                Announcement::End { id } => CompressedAnnouncement::End { id: *id },
                Announcement::Unknown { kind } => CompressedAnnouncement::Unknown { kind: *kind },
            };
            encode_typed(&wire, V7, &mut literal).unwrap();
        }
        prop_assert!(compressed.len() <= literal.len());
        prop_assert_eq!(decode_all(&literal).unwrap(), sent);
    }
}
