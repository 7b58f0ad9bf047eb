//! A subscriber that stops reading must never delay the publisher or a fast subscriber; its own
//! stalled group streams are reset as their groups leave the cache.

mod common;

use bytes::{Bytes, BytesMut};
use common::*;
use starling_model::{Frame, TrackInfo};
use starling_proto::{decode_message, GroupHeader, Role, Version};
use starling_transport::{RecvStream, SendStream, Transport};

const GROUPS: u64 = 12;
const FRAMES_PER_GROUP: usize = 48;
const FRAME_BYTES: usize = 32 * 1024; // 1.5 MiB groups: more than a stream's window

/// A relay with a publisher of `room/alice` whose `video` track keeps `max_age_ms` of cache.
async fn video_on_a_relay(
    version: Version,
    max_age_ms: u64,
) -> (Relay, Publisher, starling_model::TrackProducer) {
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &[]).await;
    let track = publisher.broadcast.create_track(
        "video",
        TrackInfo {
            max_age_ms,
            ..TrackInfo::default()
        },
    );
    (relay, publisher, track)
}

/// Write group `seq`: FRAMES_PER_GROUP frames of FRAME_BYTES, more than a stream's window.
fn write_big_group(track: &starling_model::TrackProducer, seq: u64) {
    let payload = Bytes::from(vec![7u8; FRAME_BYTES]);
    let mut group = track.create_group(seq).unwrap();
    for i in 0..FRAMES_PER_GROUP {
        group
            .write_frame(Frame {
                timestamp: seq * 1000 + i as u64,
                payload: payload.clone(),
            })
            .unwrap();
    }
    group.finish();
}

#[tokio::test]
async fn slow_subscriber_never_delays_a_fast_one() {
    let version = Version::Lite06;
    // A short cache window: each group expires as soon as the next one is a second newer.
    let (relay, _publisher, track) = video_on_a_relay(version, 100).await;
    let fast = subscriber(&relay, version).await;
    let mut fast_track = fast.track("room/alice", "video").await;

    // The slow peer: a hand-driven client that subscribes and then never reads a group stream.
    let (client, slow_relay_side) = raw_client(&relay, version, Role::Subscriber, |_| {}).await;
    let (mut send, mut recv) = client.open_bi().await.unwrap();
    send.write(subscribe_bytes(version, 0, "room/alice", "video", 0))
        .await
        .unwrap();

    for seq in 0..GROUPS {
        // The publisher writes every group without waiting on anyone.
        write_big_group(&track, seq);
        if seq == 0 {
            // The slow peer's subscription is live (SUBSCRIBE_START arrived) before we go on.
            let start = tokio::time::timeout(TIMEOUT, recv.read(64)).await.unwrap();
            assert!(start.unwrap().is_some());
        }
        // The fast subscriber gets every group whole, in step with the publisher.
        let mut got = tokio::time::timeout(TIMEOUT, fast_track.next_group())
            .await
            .expect("fast subscriber is not delayed")
            .unwrap()
            .unwrap();
        assert_eq!(got.sequence(), seq);
        let mut frames = 0;
        while let Some(frame) = tokio::time::timeout(TIMEOUT, got.next_frame())
            .await
            .unwrap()
            .unwrap()
        {
            assert_eq!(frame.payload.len(), FRAME_BYTES);
            frames += 1;
        }
        assert_eq!(frames, FRAMES_PER_GROUP);
    }

    // The slow peer's stalled streams were reset as their groups expired, so the relay holds
    // at most its bounded window of unread bytes for it.
    let buffered = slow_relay_side.budget().held;
    assert_eq!(buffered, 0);
    // Drain what the slow peer was sent, until the stream of the last group (which stays in
    // the cache and so completes).
    let mut resets = 0;
    let mut streams = 0;
    loop {
        let mut stream = tokio::time::timeout(TIMEOUT, client.accept_uni())
            .await
            .expect("relay's next group stream")
            .unwrap();
        streams += 1;
        let mut head = BytesMut::new();
        let mut sequence = None;
        loop {
            match stream.read(1 << 20).await {
                Ok(Some(chunk)) => {
                    if sequence.is_none() {
                        head.extend_from_slice(&chunk);
                        if head[0] == 0x01 {
                            break; // the relay's SETUP stream
                        }
                        if head.len() > 1 {
                            let mut rest = head.split_off(1);
                            let header = decode_message::<GroupHeader>(&mut rest, version)
                                .unwrap()
                                .expect("group header in the first chunk");
                            sequence = Some(header.sequence);
                        }
                    }
                }
                Ok(None) => break,
                Err(starling_transport::TransportError::Reset(code)) => {
                    assert_eq!(code, starling_proto::StreamCode::Old.to_code());
                    resets += 1;
                    break;
                }
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
        if sequence == Some(GROUPS - 1) {
            break;
        }
    }
    assert!(streams > 0);
    assert!(
        resets > 0,
        "stalled group streams are reset with OLD ({streams} streams)"
    );
}

/// A subscriber that keeps up with nothing, on a track whose groups stay cached: past the
/// in-flight bound, the oldest group stream is reset with TOO_FAR_BEHIND as each newer group
/// starts, and counted (issue 10 item 7: nothing triggered this before).
#[tokio::test]
async fn past_the_in_flight_bound_the_oldest_stream_is_reset_too_far_behind() {
    const IN_FLIGHT: usize = 3;
    const SKIP_GROUPS: u64 = 8;
    let version = Version::Lite06;
    // A long window: no group leaves the cache, so only the bound can end a stream.
    let (relay, _publisher, track) = video_on_a_relay(version, 600_000).await;
    let (client, relay_side) = raw_client(&relay, version, Role::Subscriber, |config| {
        config.limits.max_inflight_groups = IN_FLIGHT;
    })
    .await;
    let (mut send, mut recv) = client.open_bi().await.unwrap();
    send.write(subscribe_bytes(version, 0, "room/alice", "video", 0))
        .await
        .unwrap();
    for seq in 0..SKIP_GROUPS {
        write_big_group(&track, seq);
        if seq == 0 {
            let start = tokio::time::timeout(TIMEOUT, recv.read(64)).await.unwrap();
            assert!(start.unwrap().is_some(), "SUBSCRIBE_START");
        }
    }
    let skipped = SKIP_GROUPS - IN_FLIGHT as u64;
    tokio::time::timeout(TIMEOUT, async {
        while relay_side
            .stats()
            .groups_skipped
            .load(std::sync::atomic::Ordering::Relaxed)
            < skipped
        {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the oldest streams are skipped as newer groups start");
    // Each group stream the relay opened ends reset with TOO_FAR_BEHIND (a reset drops what
    // it had buffered) or, for the newest, whole once read; a group skipped before its stream
    // opened never shows up at all.
    let (mut too_far_behind, mut whole) = (0u64, 0usize);
    while whole < IN_FLIGHT {
        let mut stream = tokio::time::timeout(TIMEOUT, client.accept_uni())
            .await
            .expect("the relay's next stream")
            .unwrap();
        let mut first = None;
        loop {
            match tokio::time::timeout(TIMEOUT, stream.read(1 << 20)).await {
                Ok(Ok(Some(chunk))) => {
                    first = first.or(chunk.first().copied());
                }
                Ok(Ok(None)) => {
                    // A group (type 0x00) read to its end; else the relay's SETUP stream.
                    whole += usize::from(first == Some(0x00));
                    break;
                }
                Ok(Err(starling_transport::TransportError::Reset(code))) => {
                    assert_eq!(code, starling_proto::StreamCode::TooFarBehind.to_code());
                    too_far_behind += 1;
                    break;
                }
                other => panic!("a group stream ends whole or reset, got {other:?}"),
            }
        }
    }
    assert!(
        too_far_behind >= 1,
        "the skipped streams are reset TOO_FAR_BEHIND"
    );
    assert!(too_far_behind <= skipped);
}
