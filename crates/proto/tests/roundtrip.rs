//! Property tests: varints, paths, and a round trip of every message of every moq-lite version
//! with arbitrary field values within the limits (encode → decode → equal, decode →
//! encode → same bytes, and every strict prefix is incomplete or an error).

mod common;

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use common::*;
use proptest::prelude::*;
use starling_proto::limits::{MAX_FRAME_SIZE, MAX_ZIGZAG, MIN_ZIGZAG};
use starling_proto::*;

const MAX: u64 = varint::MAX;

fn version() -> impl Strategy<Value = Version> {
    prop_oneof![
        Just(Version::Lite05),
        Just(Version::Lite06),
        Just(Version::Lite07Wip)
    ]
}

fn any_varint() -> impl Strategy<Value = u64> {
    prop_oneof![0..64u64, 0..16_384u64, 0..(1u64 << 30), 0..=MAX]
}

/// A value whose `n+1` still fits a varint.
fn opt_value() -> impl Strategy<Value = Option<u64>> {
    proptest::option::of(prop_oneof![0..100u64, 0..MAX])
}

fn segment() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9._-]{1,8}"
}

fn arb_path() -> impl Strategy<Value = Path> {
    prop::collection::vec(segment(), 0..=32).prop_map(|s| Path::new(&s.join("/")).unwrap())
}

fn arb_hops() -> impl Strategy<Value = Hops> {
    prop::collection::vec(prop_oneof![Just(0u64), any_varint()], 0..=32).prop_map(|ids| {
        let mut hops = Hops::new();
        for id in ids {
            let _ = hops.push(id);
        }
        hops
    })
}

fn arb_cost() -> impl Strategy<Value = RouteCost> {
    (any_varint(), any_varint()).prop_map(|(warm, cold)| RouteCost { warm, cold })
}

fn track_name() -> impl Strategy<Value = String> {
    ".{0,24}"
}

/// The full round-trip check for a plain message.
fn round_trip<M: Message + PartialEq + Debug>(m: &M, v: Version) {
    let bytes = encode(m, v);
    assert_eq!(&decode::<M>(&bytes, v).unwrap(), m);
    assert_eq!(encode(&decode::<M>(&bytes, v).unwrap(), v), bytes);
    check_prefixes::<M>(&bytes, v);
}

fn round_trip_t<M: TypedMessage + PartialEq + Debug>(m: &M, v: Version) {
    let bytes = encode_t(m, v);
    assert_eq!(&decode_t::<M>(&bytes, v).unwrap(), m);
    assert_eq!(encode_t(&decode_t::<M>(&bytes, v).unwrap(), v), bytes);
    check_prefixes_t::<M>(&bytes, v);
}

/// Bring start/end bounds into the canonical form of `v`.
fn canonical_bounds(
    v: Version,
    gs: Option<u64>,
    ge: Option<u64>,
    fs: u64,
    fe: Option<u64>,
) -> (Option<u64>, Option<u64>, u64, Option<u64>) {
    if !v.has_frame_bounds() {
        return (gs, ge, 0, None);
    }
    let fs = if gs.is_none() { 0 } else { fs };
    let fe = if ge.is_none() { None } else { fe };
    let gs = if gs == Some(0) && fs == 0 { None } else { gs };
    (gs, ge, fs, fe)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // ---- varints --------------------------------------------------------------------

    #[test]
    fn varint_round_trips(v in any_varint()) {
        let bytes = varint::to_vec(v).unwrap();
        prop_assert_eq!(bytes.len(), varint::encoded_len(v).unwrap());
        prop_assert_eq!(varint::peek(&bytes), Some((v, bytes.len())));
        for n in 0..bytes.len() {
            prop_assert_eq!(varint::peek(&bytes[..n]), None);
        }
    }

    #[test]
    fn varint_refuses_2_62_and_up(v in (MAX + 1)..=u64::MAX) {
        prop_assert!(varint::to_vec(v).is_err());
        prop_assert!(varint::encoded_len(v).is_err());
    }

    #[test]
    fn leading_ones_varint_round_trips(v in any_varint()) {
        use varint::Flavor::LeadingOnes;
        let mut bytes = Vec::new();
        varint::encode_as(LeadingOnes, v, &mut bytes).unwrap();
        prop_assert_eq!(bytes.len(), varint::encoded_len_as(LeadingOnes, v).unwrap());
        prop_assert!(bytes.len() != 7, "the 7-byte form is never written");
        prop_assert_eq!(varint::peek_as(LeadingOnes, &bytes), Ok(Some((v, bytes.len()))));
        for n in 0..bytes.len() {
            prop_assert_eq!(varint::peek_as(LeadingOnes, &bytes[..n]), Ok(None));
        }
    }

    #[test]
    fn leading_ones_decodes_any_bytes_within_range(bytes in proptest::collection::vec(any::<u8>(), 0..10)) {
        use varint::Flavor::LeadingOnes;
        match varint::peek_as(LeadingOnes, &bytes) {
            Ok(Some((v, n))) => {
                prop_assert!(v <= MAX);
                prop_assert_eq!(n, bytes[0].leading_ones() as usize + 1);
                // What decodes re-encodes (minimally) to the same value.
                let mut again = Vec::new();
                varint::encode_as(LeadingOnes, v, &mut again).unwrap();
                prop_assert_eq!(varint::peek_as(LeadingOnes, &again), Ok(Some((v, again.len()))));
            }
            Ok(None) => prop_assert!(bytes.is_empty() || bytes.len() <= bytes[0].leading_ones() as usize),
            Err(_) => prop_assert_eq!(bytes[0], 0xff),
        }
    }

    #[test]
    fn varint_non_minimal_decodes(v in 0..64u64) {
        for len in [2usize, 4, 8] {
            let mut b = vec![0u8; len];
            b[len - 1] = v as u8;
            b[0] |= match len { 2 => 0x40, 4 => 0x80, _ => 0xc0 };
            prop_assert_eq!(varint::peek(&b), Some((v, len)));
        }
    }

    #[test]
    fn zigzag_round_trips(n in MIN_ZIGZAG..=MAX_ZIGZAG) {
        let u = varint::zigzag_encode(n).unwrap();
        prop_assert!(u <= MAX);
        prop_assert_eq!(varint::zigzag_decode(u), n);
    }

    // ---- paths ----------------------------------------------------------------------

    #[test]
    fn path_normalization_is_idempotent(s in "[a-c/]{0,64}") {
        let p = Path::new(&s).unwrap();
        prop_assert_eq!(Path::new(p.as_str()).unwrap(), p.clone());
        prop_assert!(!p.as_str().starts_with('/') && !p.as_str().ends_with('/') && !p.as_str().contains("//"));
        let segs: Vec<&str> = s.split('/').filter(|x| !x.is_empty()).collect();
        prop_assert_eq!(p.segments().collect::<Vec<_>>(), segs.clone());
        prop_assert_eq!(p.len_segments(), segs.len());
        // The wire form normalizes the same way.
        let mut body = Vec::new();
        varint::encode(s.len() as u64, &mut body).unwrap();
        body.extend_from_slice(s.as_bytes());
        prop_assert_eq!(Path::decode(&mut &body[..], Version::Lite06).unwrap(), p);
    }

    #[test]
    fn path_join_and_strip_are_inverse(a in prop::collection::vec(segment(), 0..=16), b in prop::collection::vec(segment(), 0..=16)) {
        let a = Path::new(&a.join("/")).unwrap();
        let b = Path::new(&b.join("/")).unwrap();
        let joined = a.join(&b).unwrap();
        prop_assert_eq!(joined.len_segments(), a.len_segments() + b.len_segments());
        prop_assert!(joined.has_prefix(&a));
        prop_assert_eq!(joined.strip_prefix(&a), Some(b.clone()));
        prop_assert!(joined.ancestors().any(|x| x == a));
        prop_assert_eq!(joined.ancestors().count(), joined.len_segments() + 1);
    }

    #[test]
    fn path_prefix_is_whole_segment(p in prop::collection::vec("[ab]{1,2}", 0..6), q in prop::collection::vec("[ab]{1,2}", 0..6)) {
        let pp = Path::new(&p.join("/")).unwrap();
        let qq = Path::new(&q.join("/")).unwrap();
        let model = q.len() <= p.len() && p[..q.len()] == q[..];
        prop_assert_eq!(pp.has_prefix(&qq), model);
        prop_assert_eq!(pp.strip_prefix(&qq).is_some(), model);
        if let Some(rest) = pp.strip_prefix(&qq) {
            prop_assert_eq!(qq.join(&rest).unwrap(), pp.clone());
        }
        // Extending the last segment never keeps the prefix.
        if !q.is_empty() {
            let longer = Path::new(&format!("{}x", qq)).unwrap();
            prop_assert!(!longer.has_prefix(&qq));
        }
    }

    // ---- messages -------------------------------------------------------------------

    #[test]
    fn setup_round_trips(
        v in version(),
        probe in proptest::option::of(0u64..4),
        path in proptest::option::of("[ -~]{1,40}"),
        role in proptest::option::of(0u64..4),
        cost in proptest::option::of(any_varint()),
        hop in proptest::option::of(any_varint()),
        unknown in prop::collection::btree_map(6u64..10_000, prop::collection::vec(any::<u8>(), 0..16), 0..40),
    ) {
        let mut s = Setup::new();
        if let Some(p) = probe { s.params.set_varint(setup::param::PROBE, p).unwrap(); }
        if let Some(p) = &path { s.set_path(Some(p)); }
        if let Some(r) = role { s.params.set_varint(setup::param::ROLE, r).unwrap(); }
        if let Some(c) = cost { s.set_cost(Some(c)); }
        if let Some(h) = hop { s.params.set_varint(setup::param::HOP, h).unwrap(); }
        for (id, value) in unknown { s.params.set(id, value); }
        round_trip(&s, v);
        let d: Setup = decode(&encode(&s, v), v).unwrap();
        prop_assert_eq!(d.probe(), probe.map(ProbeLevel::from_code).unwrap_or_default());
        prop_assert_eq!(d.path(), path.as_deref());
        prop_assert_eq!(d.role(), role.and_then(Role::from_code));
        prop_assert_eq!(d.cost(), cost);
        prop_assert_eq!(d.hop(), hop.filter(|&h| h != 0));
    }

    #[test]
    fn announce_request_round_trips(v in version(), prefix in arb_path(), hop in any_varint(), hidden in any::<bool>()) {
        let exclude_hop = if v.has_exclude_hop() { hop } else { 0 };
        let hidden = hidden && v.has_hidden();
        round_trip(&AnnounceRequest { prefix, exclude_hop, hidden }, v);
    }

    #[test]
    fn announce_ok_round_trips(v in version(), hop in any_varint(), active_count in any_varint()) {
        round_trip(&AnnounceOk { hop, active_count }, v);
    }

    #[test]
    fn lite05_announce_round_trips(status in 0u8..3, suffix in arb_path(), hops in arb_hops()) {
        let status = [AnnounceStatus::Ended, AnnounceStatus::Active, AnnounceStatus::Restart][status as usize];
        round_trip(&Announce { status, suffix, hops }, Version::Lite05);
    }

    #[test]
    fn lite06_announcement_round_trips(
        kind in 0u8..4, suffix in arb_path(), hops in arb_hops(), cost in arb_cost(), id in any_varint(), unknown in 3..=MAX,
    ) {
        let a = match kind {
            0 => Announcement::Start { suffix, hops, cost },
            1 => Announcement::End { id },
            2 => Announcement::Update { id, hops, cost },
            _ => Announcement::Unknown { kind: unknown },
        };
        round_trip_t(&a, Version::Lite06);
    }

    #[test]
    fn track_round_trips(v in version(), broadcast in arb_path(), track in track_name()) {
        round_trip(&Track { broadcast, track }, v);
    }

    #[test]
    fn track_info_round_trips(v in version(), priority in any::<u8>(), max_age_ms in any_varint(), timescale in 1..=MAX) {
        round_trip(&TrackInfo { priority, max_age_ms, timescale }, v);
    }

    #[test]
    fn subscribe_round_trips(
        v in version(), id in any_varint(), broadcast in arb_path(), track in track_name(),
        priority in any::<u8>(), max_age_ms in any_varint(),
        gs in opt_value(), ge in opt_value(), fs in any_varint(), fe in opt_value(),
    ) {
        let (group_start, group_end, frame_start, frame_end) = canonical_bounds(v, gs, ge, fs, fe);
        let s = Subscribe { id, broadcast, track, priority, max_age_ms, group_start, group_end, frame_start, frame_end };
        round_trip(&s, v);
        let u = SubscribeUpdate { priority, max_age_ms, group_start, group_end, frame_start, frame_end };
        round_trip(&u, v);
    }

    #[test]
    fn subscribe_response_round_trips(v in version(), kind in 0u8..3, a in any_varint(), b in any_varint(), c in any_varint()) {
        let r = match kind {
            0 => SubscribeResponse::Start { group: a },
            1 => SubscribeResponse::End { group: a, streams: v.has_stream_count().then_some(b) },
            // Lite-07 removed DROP.
            _ if v.has_stream_count() => SubscribeResponse::Start { group: c },
            _ => SubscribeResponse::Drop { start: a, end: b, error: c },
        };
        round_trip_t(&r, v);
    }

    #[test]
    fn group_header_round_trips(v in version(), subscribe_id in any_varint(), sequence in any_varint(), fs in any_varint()) {
        let frame_start = if v.has_frame_bounds() { fs } else { 0 };
        round_trip(&GroupHeader { subscribe_id, sequence, frame_start }, v);
    }

    #[test]
    fn frame_header_round_trips(v in version(), timestamp_delta in MIN_ZIGZAG..=MAX_ZIGZAG, size in 0..=MAX_FRAME_SIZE) {
        let f = FrameHeader { timestamp_delta, size };
        let mut out = BytesMut::new();
        encode_frame_header(&f, v, &mut out).unwrap();
        let bytes = out.to_vec();
        for n in 0..bytes.len() {
            let mut part = BytesMut::from(&bytes[..n]);
            prop_assert_eq!(decode_frame_header(&mut part, v), Ok(None));
        }
        prop_assert_eq!(decode_frame_header(&mut out, v), Ok(Some(f)));
        prop_assert!(out.is_empty());
    }

    #[test]
    fn fetch_round_trips(
        v in version(), broadcast in arb_path(), track in track_name(), priority in any::<u8>(),
        group in any_varint(), fs in any_varint(), len in opt_value(),
    ) {
        let (frame_start, frame_end) = if v.has_frame_bounds() {
            (fs / 2, len.map(|l| fs / 2 + l % (MAX - fs / 2)))
        } else {
            (0, None)
        };
        round_trip(&Fetch { broadcast, track, priority, group, frame_start, frame_end }, v);
    }

    #[test]
    fn probe_round_trips(v in version(), bitrate in any_varint(), rtt_ms in any_varint()) {
        round_trip(&Probe { bitrate, rtt_ms }, v);
    }

    #[test]
    fn goaway_round_trips(v in version(), uri in ".{0,64}") {
        round_trip(&Goaway { uri }, v);
    }

    #[test]
    fn datagram_round_trips(
        v in version(), subscribe_id in any_varint(), sequence in any_varint(), timestamp in any_varint(),
        payload in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let d = Datagram { subscribe_id, sequence, timestamp, payload: Bytes::from(payload) };
        let mut out = Vec::new();
        d.encode(v, &mut out).unwrap();
        prop_assert_eq!(out.len(), d.encoded_len(v).unwrap());
        let back = Datagram::decode(&Bytes::from(out.clone()), v).unwrap();
        prop_assert_eq!(&back, &d);
        let mut again = Vec::new();
        back.encode(v, &mut again).unwrap();
        prop_assert_eq!(again, out);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        exercise(&bytes);
    }

    #[test]
    fn session_and_stream_codes_round_trip(code in any::<u32>()) {
        prop_assert_eq!(SessionCode::from_code(code).to_code(), code);
        prop_assert_eq!(StreamCode::from_code(code).to_code(), code);
        prop_assert_eq!(wt_decode(wt_encode(code)), Some(code));
    }
}

/// lite-01 to lite-04.
fn older() -> impl Strategy<Value = Version> {
    prop_oneof![
        Just(Version::Lite01),
        Just(Version::Lite02),
        Just(Version::Lite03),
        Just(Version::Lite04)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// SUBSCRIBE ends at the priority on 01/02; 03/04 carry max age and OptGroup bounds.
    #[test]
    fn older_subscribe_round_trips(
        v in older(), id in any_varint(), broadcast in arb_path(), track in track_name(),
        priority in any::<u8>(), max_age_ms in any_varint(), gs in opt_value(), ge in opt_value(),
    ) {
        let (max_age_ms, group_start, group_end) = if v.carries_max_age() {
            (max_age_ms, gs, ge)
        } else {
            (0, None, None)
        };
        round_trip(
            &Subscribe { id, broadcast, track, priority, max_age_ms, group_start, group_end, frame_start: 0, frame_end: None },
            v,
        );
    }

    #[test]
    fn older_responses_round_trip(
        v in older(), priority in any::<u8>(), max_age_ms in any_varint(), start in opt_value(),
        end in opt_value(), a in any_varint(), b in any_varint(), c in any_varint(), drop in any::<bool>(),
    ) {
        if v.has_typed_responses() {
            let response = if drop {
                SubscribeResponse::Drop { start: a, end: b, error: c }
            } else {
                SubscribeResponse::Ok { priority, max_age_ms, start, end }
            };
            round_trip_t(&response, v);
            round_trip(&SubscribeUpdate { priority, max_age_ms, group_start: start, group_end: end, ..Default::default() }, v);
        } else {
            let priority = if v == Version::Lite01 { priority } else { 0 };
            round_trip(&LegacySubscribeOk { priority }, v);
        }
    }

    /// Hops: none on 01/02, a count of anonymous stand-ins on 03, a list on 04.
    #[test]
    fn older_announce_round_trips(v in older(), suffix in arb_path(), hops in arb_hops(), active in any::<bool>()) {
        let hops = if v.has_hop_list() {
            hops
        } else if v.has_hops() {
            Hops::from_vec(vec![0; hops.len()]).unwrap()
        } else {
            Hops::new()
        };
        let status = if active { AnnounceStatus::Active } else { AnnounceStatus::Ended };
        round_trip(&Announce { status, suffix: suffix.clone(), hops }, v);
        if v.has_announce_init() {
            round_trip(&AnnounceInit { suffixes: vec![suffix.clone(), suffix] }, v);
        }
    }

    #[test]
    fn older_probe_goaway_and_frames_round_trip(
        v in older(), bitrate in any_varint(), rtt in any_varint(), size in 0..=MAX_FRAME_SIZE,
        subscribe_id in any_varint(), sequence in any_varint(),
    ) {
        if v.has_probe() {
            let rtt_ms = if v.has_probe_rtt() { rtt } else { 0 };
            round_trip(&Probe { bitrate, rtt_ms }, v);
        }
        if v.has_goaway() {
            round_trip(&Goaway { uri: "https://elsewhere/".into() }, v);
        }
        round_trip(&GroupHeader { subscribe_id, sequence, frame_start: 0 }, v);
        let mut out = BytesMut::new();
        encode_frame_header(&FrameHeader { timestamp_delta: 0, size }, v, &mut out).unwrap();
        let mut again = out.clone();
        prop_assert_eq!(
            decode_frame_header(&mut again, v).unwrap(),
            Some(FrameHeader { timestamp_delta: 0, size })
        );
    }
}
