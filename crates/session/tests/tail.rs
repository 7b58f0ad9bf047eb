//! An ended subscription's tail: QUIC does not order streams, so a group stream the publisher
//! opened before SUBSCRIBE_END can reach the relay after the subscribe stream's FIN. The relay
//! keeps such a subscription routable until every group from SUBSCRIBE_START to SUBSCRIBE_END
//! arrived (or a grace passed), so a late group still reaches the readers before the end.
//!
//! The publisher here is hand-driven at the wire level over the in-memory transport, so the
//! test chooses the order: END and FIN first, the owed group stream after. The clock is paused:
//! `settle` lets every session task run until none can make progress, the point at which the
//! relay has read the FIN.

mod common;
mod hand;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use hand::{group_head, send_group};
use starling_proto::{FrameHeader, Protocol, Role, SubscribeResponse, Version};
use starling_transport::mem::MemTransport;
use starling_transport::{SendStream, Transport};
use tokio::sync::mpsc;

const BROADCAST: &str = "room/alice";

/// Let every task run until none is ready (with the clock paused, a sleep ends only once the
/// runtime is otherwise idle).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

type Upstream = hand::Upstream<MemTransport>;

/// Connect a hand-driven publisher of [`BROADCAST`] to `relay` (see `hand`).
async fn raw_publisher(
    relay: &Relay,
    version: Version,
) -> (MemTransport, mpsc::Receiver<Upstream>) {
    raw_publisher_with(relay, version, |_| {}).await
}

/// [`raw_publisher`], adjusting the relay side's session config first.
async fn raw_publisher_with(
    relay: &Relay,
    version: Version,
    configure: impl FnOnce(&mut starling_session::SessionConfig) + Send + 'static,
) -> (MemTransport, mpsc::Receiver<Upstream>) {
    let origin = relay.origin.clone();
    let (transport, relay_side) = raw_client(relay, version, Role::Publisher, move |config| {
        config.consume = Some(origin);
        configure(config);
    })
    .await;
    let upstreams = hand::serve(transport.clone(), version, path(BROADCAST), relay_side);
    (transport, upstreams)
}

/// The hand-driven publisher's broadcast, once the relay has heard of it.
async fn announced_at(relay: &Relay) -> starling_model::BroadcastConsumer {
    let interest = relay.origin.interest(path("")).unwrap();
    let mut changed = Vec::new();
    loop {
        if let Some(broadcast) = relay.origin.consume(&path(BROADCAST), None) {
            return broadcast;
        }
        interest.changed(&mut changed).await;
    }
}

/// Write one subscribe response on the upstream subscription.
async fn respond(upstream: &mut Upstream, response: SubscribeResponse, version: Version) {
    upstream.respond(response, version).await;
}

/// The relay's reader of the track through a subscriber client, and the upstream SUBSCRIBE
/// the relay sent for it.
async fn subscribed(
    relay: &Relay,
    version: Version,
    upstreams: &mut mpsc::Receiver<Upstream>,
) -> (Subscriber, starling_model::TrackConsumer, Upstream) {
    let sub = subscriber(relay, version).await;
    let track = sub.track(BROADCAST, "data").await;
    let upstream = tokio::time::timeout(TIMEOUT, upstreams.recv())
        .await
        .expect("the relay subscribes upstream")
        .expect("the publisher is running");
    (sub, track, upstream)
}

/// A subscriber reading through the relay from the hand-driven publisher, after the publisher
/// served group 0 and then sent END (exclusive 2), and FIN when `fin`: group 1 is owed.
struct Ended {
    peer: MemTransport,
    track: starling_model::TrackConsumer,
    upstream: Upstream,
    _sub: Subscriber,
}

async fn ended_owing_group_one(version: Version) -> Ended {
    ended_owing_group_one_with(version, true).await
}

async fn ended_owing_group_one_with(version: Version, fin: bool) -> Ended {
    let relay = Relay::new();
    let (peer, mut upstreams) = raw_publisher(&relay, version).await;
    let (sub, mut track, mut upstream) = subscribed(&relay, version, &mut upstreams).await;
    respond(
        &mut upstream,
        SubscribeResponse::Start { group: 0 },
        version,
    )
    .await;
    send_group(&peer, upstream.id, 0, version).await;
    assert_eq!(read_group(&mut track).await, (0, vec!["g0".to_string()]));
    respond(
        &mut upstream,
        // lite-07 counts the streams opened: groups 0 and 1.
        SubscribeResponse::End {
            group: 2,
            streams: version.has_stream_count().then_some(2),
        },
        version,
    )
    .await;
    if fin {
        upstream.send.finish().unwrap();
    }
    Ended {
        peer,
        track,
        upstream,
        _sub: sub,
    }
}

/// The owed group 1 arrives whole, then the track finishes.
async fn group_one_then_the_end(track: &mut starling_model::TrackConsumer, version: Version) {
    assert_eq!(read_group(track).await, (1, vec!["g1".to_string()]));
    let end = tokio::time::timeout(TIMEOUT, track.next_group())
        .await
        .expect("the track ends");
    assert!(
        matches!(end, Ok(None)),
        "{version}: after the owed group the track finishes, got {end:?}"
    );
}

async fn a_group_arriving_after_the_end_is_still_delivered(version: Version) {
    tokio::time::pause();
    let mut ended = ended_owing_group_one(version).await;
    // Let the relay read END and FIN before group 1's stream opens.
    settle().await;
    send_group(&ended.peer, ended.upstream.id, 1, version).await;

    group_one_then_the_end(&mut ended.track, version).await;
}

#[tokio::test]
async fn lite06_a_group_arriving_after_the_end_is_still_delivered() {
    a_group_arriving_after_the_end_is_still_delivered(Version::Lite06).await;
}

#[tokio::test]
async fn lite05_a_group_arriving_after_the_end_is_still_delivered() {
    a_group_arriving_after_the_end_is_still_delivered(Version::Lite05).await;
}

#[tokio::test]
async fn lite07_a_group_stream_the_end_counts_is_still_delivered() {
    a_group_arriving_after_the_end_is_still_delivered(Version::Lite07Wip).await;
}

/// A track that fails right after its last group (a publisher whose session ends as its input
/// ends) still delivers that group whole: it was complete in the relay's cache when the
/// failure came, so the subscription's send of it goes on before the error ends it.
async fn a_whole_group_before_a_track_failure_is_still_delivered(version: impl Into<Protocol>) {
    let relay = Relay::new();
    let broadcast = starling_model::BroadcastProducer::new(starling_model::Limits::default());
    let producer = broadcast.create_track("video", starling_model::TrackInfo::default());
    let _route = relay
        .origin
        .publish(
            path(BROADCAST),
            broadcast.consume(),
            starling_model::Route::local(),
        )
        .unwrap();
    let sub = subscriber(&relay, version).await;
    let mut track = sub.track(BROADCAST, "video").await;
    let mut group = producer.append_group().unwrap();
    group.write_frame(frame(0, "g0")).unwrap();
    group.finish();
    assert_eq!(read_group(&mut track).await.0, 0);

    // Group 1 whole, then the failure, before the relay's subscription task runs again. The
    // group is larger than the transport's window, so its send is still writing when the
    // subscription sees the failure.
    let payload = "x".repeat(512 * 1024);
    let mut group = producer.append_group().unwrap();
    for timestamp in 1..=4 {
        group.write_frame(frame(timestamp, &payload)).unwrap();
    }
    group.finish();
    producer.abort(starling_proto::StreamCode::Cancelled);

    let (sequence, frames) = read_group(&mut track).await;
    assert_eq!(sequence, 1);
    assert_eq!(frames.len(), 4, "every frame of the whole group");
    assert!(frames.iter().all(|f| *f == payload));
}

#[tokio::test]
async fn lite06_a_whole_group_before_a_track_failure_is_still_delivered() {
    a_whole_group_before_a_track_failure_is_still_delivered(Version::Lite06).await;
}

#[tokio::test]
async fn ietf22_a_whole_group_before_a_track_failure_is_still_delivered() {
    a_whole_group_before_a_track_failure_is_still_delivered(starling_proto::ietf::Draft::D22).await;
}

/// A publisher that writes its last group and closes at once (moq-cli when its input ends):
/// the relay reads what arrived before the close, the group and the track's end, instead of
/// dropping it with the session.
async fn a_group_sent_just_before_the_publisher_closes_is_still_delivered(version: Version) {
    group_one_then_close(version, true).await;
}

/// The publisher ends the subscription (END, and FIN when `fin`), writes the owed group 1 and
/// closes at once; the relay's reader gets group 1, then the track's end.
async fn group_one_then_close(version: Version, fin: bool) {
    tokio::time::pause();
    let mut ended = ended_owing_group_one_with(version, fin).await;
    settle().await;
    // No yield between the group and the close: the relay sees both at once.
    send_group(&ended.peer, ended.upstream.id, 1, version).await;
    ended.peer.close(0, "input ended");

    group_one_then_the_end(&mut ended.track, version).await;
}

#[tokio::test]
async fn lite06_a_group_sent_just_before_the_publisher_closes_is_still_delivered() {
    a_group_sent_just_before_the_publisher_closes_is_still_delivered(Version::Lite06).await;
}

#[tokio::test]
async fn lite07_a_group_sent_just_before_the_publisher_closes_is_still_delivered() {
    a_group_sent_just_before_the_publisher_closes_is_still_delivered(Version::Lite07Wip).await;
}

/// A publisher that sends its END, its last group, and closes before finishing the
/// subscription (moq-cli at the end of its input, at times): the END says what is owed, the
/// owed group arrived, so the track is whole and finishes instead of failing with the session.
async fn a_track_whose_end_arrived_finishes_when_the_publisher_closes_before_its_fin(
    version: Version,
) {
    group_one_then_close(version, false).await;
}

#[tokio::test]
async fn lite06_a_track_whose_end_arrived_finishes_when_the_publisher_closes_before_its_fin() {
    a_track_whose_end_arrived_finishes_when_the_publisher_closes_before_its_fin(Version::Lite06)
        .await;
}

#[tokio::test]
async fn lite07_a_track_whose_end_arrived_finishes_when_the_publisher_closes_before_its_fin() {
    a_track_whose_end_arrived_finishes_when_the_publisher_closes_before_its_fin(Version::Lite07Wip)
        .await;
}

/// An owed group that never comes does not hold the track open forever: after the grace (the
/// max age asked for, else 1 s) it finishes with what arrived.
async fn an_owed_group_that_never_arrives_ends_the_track_after_the_grace(version: Version) {
    tokio::time::pause();
    let mut ended = ended_owing_group_one(version).await;
    let ended_at = tokio::time::Instant::now();

    let end = tokio::time::timeout(TIMEOUT, ended.track.next_group())
        .await
        .expect("the track ends within the step");
    assert!(matches!(end, Ok(None)), "got {end:?}");
    let waited = ended_at.elapsed();
    assert!(
        waited >= Duration::from_secs(1),
        "the relay waited {waited:?} for the owed group, less than the 1 s grace"
    );
}

#[tokio::test]
async fn lite06_an_owed_group_that_never_arrives_ends_the_track_after_the_grace() {
    an_owed_group_that_never_arrives_ends_the_track_after_the_grace(Version::Lite06).await;
}

/// On lite-07 the owed stream is counted, not ranged; the grace still bounds the wait.
#[tokio::test]
async fn lite07_an_owed_stream_that_never_arrives_ends_the_track_after_the_grace() {
    an_owed_group_that_never_arrives_ends_the_track_after_the_grace(Version::Lite07Wip).await;
}

/// Issue 10 item 5: a group stream ranks in the receive budget by its subscription's real
/// priority (what the relay's readers asked for), not at priority 0. With the budget full of
/// two incomplete groups, the group of the less urgent track is the one evicted, even though
/// it is the newer group.
#[tokio::test(start_paused = true)]
async fn an_incomplete_group_of_a_less_urgent_track_is_evicted_first() {
    use starling_model::StartAt;
    let version = Version::Lite06;
    let relay = Relay::new();
    let (peer, mut upstreams) = raw_publisher_with(&relay, version, |config| {
        config.limits.recv_budget = 20 * 1024;
    })
    .await;
    // Two readers at the relay itself: "low" at priority 1, "high" at priority 9.
    let broadcast = announced_at(&relay).await;
    let reader = |name: &str, priority: u8| {
        broadcast
            .subscribe_track(
                name,
                StartAt {
                    priority,
                    ..Default::default()
                },
            )
            .unwrap()
    };
    let (_low, _high) = (reader("low", 1), reader("high", 9));
    let mut ids = std::collections::HashMap::new();
    while ids.len() < 2 {
        let upstream = tokio::time::timeout(TIMEOUT, upstreams.recv())
            .await
            .unwrap()
            .unwrap();
        ids.insert(
            upstream.track.clone(),
            (upstream.id, upstream.priority, upstream),
        );
    }
    assert_eq!(
        (ids["low"].1, ids["high"].1),
        (1, 9),
        "the readers' priorities go upstream"
    );

    // A group stream stuck inside a 16 000-byte frame (small enough to be read whole, so it
    // is held in the budget), 12 KiB in. The header goes first, so the relay knows the
    // stream's subscription (and rank) before the payload is charged.
    let head = |id: u64, sequence: u64| {
        let frame = FrameHeader {
            timestamp_delta: 0,
            size: 16_000,
        };
        group_head(id, sequence, frame, version).freeze()
    };
    let payload = Bytes::from(vec![0u8; 12 * 1024]);
    let mut low = peer.open_uni().await.unwrap();
    low.write(head(ids["low"].0, 5)).await.unwrap();
    let mut high = peer.open_uni().await.unwrap();
    high.write(head(ids["high"].0, 1)).await.unwrap();
    settle().await;
    low.write(payload.clone()).await.unwrap();
    settle().await;
    high.write(payload).await.unwrap();
    settle().await;
    let evicted = starling_proto::StreamCode::Evicted.to_code();
    assert_eq!(
        tokio::time::timeout(TIMEOUT, low.stopped()).await.ok(),
        Some(Ok(Some(evicted))),
        "the less urgent group goes"
    );
    // With every task idle (the clock is paused), the urgent group is still held.
    assert!(
        tokio::time::timeout(Duration::from_millis(1), high.stopped())
            .await
            .is_err(),
        "the urgent one stays"
    );
}

/// Issue 10, the receive-window grid: a frame larger than what is worth reading whole goes to
/// its group piece by piece, so many streams each partway through a large frame hold nothing
/// in the receive budget. 32 streams, each 128 KiB into a 256 KiB frame (4 MiB in flight), on a
/// 64 KiB budget: nothing is evicted and every frame arrives whole once its rest comes. (Read
/// whole, the first stream past 64 KiB would have evicted the others.)
#[tokio::test(start_paused = true)]
async fn frames_larger_than_the_budget_on_many_streams_are_not_evicted() {
    use starling_model::StartAt;
    const STREAMS: u64 = 32;
    const FRAME: usize = 256 * 1024;
    let version = Version::Lite06;
    let relay = Relay::new();
    let (peer, mut upstreams) = raw_publisher_with(&relay, version, |config| {
        config.limits.recv_budget = 64 * 1024;
    })
    .await;
    let broadcast = announced_at(&relay).await;
    let reader = broadcast
        .subscribe_track("big", StartAt::default())
        .unwrap();
    let upstream = tokio::time::timeout(TIMEOUT, upstreams.recv())
        .await
        .unwrap()
        .unwrap();

    let payload = |sequence: u64| -> Bytes {
        (0..FRAME)
            .map(|i| (i as u64 * 31 + sequence) as u8)
            .collect::<Vec<u8>>()
            .into()
    };
    let mut streams = Vec::new();
    for sequence in 1..=STREAMS {
        let head = group_head(
            upstream.id,
            sequence,
            FrameHeader {
                timestamp_delta: 0,
                size: FRAME as u64,
            },
            version,
        )
        .freeze();
        let mut stream = peer.open_uni().await.unwrap();
        stream.write(head).await.unwrap();
        stream
            .write(payload(sequence).slice(..FRAME / 2))
            .await
            .unwrap();
        streams.push(stream);
    }
    settle().await;
    for (stream, sequence) in streams.iter_mut().zip(1..) {
        stream
            .write(payload(sequence).slice(FRAME / 2..))
            .await
            .unwrap();
        stream.finish().unwrap();
    }
    settle().await;
    for (stream, sequence) in streams.iter_mut().zip(1..) {
        let stopped = tokio::time::timeout(Duration::from_millis(1), stream.stopped()).await;
        assert!(
            !matches!(stopped, Ok(Ok(Some(_)))),
            "group {sequence} was stopped: {stopped:?}"
        );
        let mut group = reader.group(sequence).expect("group cached");
        let frame = tokio::time::timeout(TIMEOUT, group.next_frame())
            .await
            .unwrap()
            .unwrap()
            .expect("one frame");
        assert!(
            frame.payload == payload(sequence),
            "group {sequence} intact"
        );
    }
}
