//! Read-only statistics: per-track counters and cache occupancy, a broadcast's live tracks
//! with their reader counts, the arrival wait, and the origin's interest count. Reading them
//! never adds a reader, pulls a track or changes the cache.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use starling_model::{
    BroadcastProducer, CacheBudget, Frame, Limits, Origin, Route, StartAt, TrackInfo, TrackProducer,
};
use starling_proto::{Path, StreamCode};

fn write(track: &TrackProducer, sequence: u64, timestamp: u64, payloads: &[&'static str]) {
    let mut group = track.create_group(sequence).unwrap();
    for payload in payloads {
        group
            .write_frame(Frame {
                timestamp,
                payload: Bytes::from_static(payload.as_bytes()),
            })
            .unwrap();
    }
    group.finish();
}

#[test]
fn track_counters_are_cumulative_and_cache_occupancy_is_current() {
    let broadcast = BroadcastProducer::new(Limits::default());
    let info = TrackInfo {
        max_age_ms: 10,
        ..TrackInfo::default()
    };
    let track = broadcast.create_track("t", info);
    let reader = track.consume(StartAt::default());
    write(&track, 0, 0, &["ab", "cd"]);
    write(&track, 1, 100, &["efg"]);
    write(&track, 2, 200, &["h"]);

    let stats = track.stats();
    assert_eq!((stats.groups, stats.frames, stats.bytes), (3, 4, 8));
    assert_eq!(stats.latest_sequence, Some(2));
    // Group 0 aged out when group 2 started 100 ms after group 1.
    assert_eq!(stats.expired_through, Some(0));
    assert_eq!((stats.cached_groups, stats.cached_bytes), (2, 4));
    assert_eq!(stats.consumers, 1);
    assert!(!stats.closed);
    assert_eq!(
        reader.stats(),
        stats,
        "producer and reader see the same track"
    );

    track.finish();
    assert!(reader.stats().closed);
}

#[test]
fn listing_tracks_adds_no_reader_and_skips_closed_tracks() {
    let broadcast = BroadcastProducer::new(Limits::default());
    let video = broadcast.create_track("video", TrackInfo::default());
    let audio = broadcast.create_track("audio", TrackInfo::default());
    let consumer = broadcast.consume();
    let _a = consumer
        .subscribe_track("video", StartAt::default())
        .unwrap();
    let _b = consumer
        .subscribe_track("video", StartAt::default())
        .unwrap();
    write(&video, 0, 0, &["frame"]);

    let tracks = consumer.tracks();
    let names: Vec<&str> = tracks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["audio", "video"], "sorted by name");
    assert_eq!(tracks[0].stats.consumers, 0);
    assert_eq!(tracks[1].stats.consumers, 2);
    assert_eq!(tracks[1].stats.bytes, 5);
    assert_eq!(tracks[1].info, Some(TrackInfo::default()));
    assert_eq!(video.consumers(), 2, "listing did not subscribe");
    assert!(!consumer.is_dynamic());

    audio.abort(StreamCode::Cancelled);
    let names: Vec<String> = consumer.tracks().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["video"]);
}

#[test]
fn listing_a_dynamic_broadcast_requests_nothing() {
    let broadcast = BroadcastProducer::dynamic(Limits::default());
    let consumer = broadcast.consume();
    assert!(consumer.is_dynamic());
    assert!(consumer.tracks().is_empty());
    let _reader = consumer
        .subscribe_track("pulled", StartAt::default())
        .unwrap();
    let tracks = consumer.tracks();
    assert_eq!(tracks.len(), 1);
    assert_eq!(tracks[0].info, None, "not answered yet");
    assert_eq!(tracks[0].stats.consumers, 1);

    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let first = broadcast.poll_requested(&mut cx);
    assert!(
        matches!(first, Poll::Ready(Some(_))),
        "the one subscription"
    );
    assert!(
        broadcast.poll_requested(&mut cx).is_pending(),
        "listing queued no request"
    );
}

#[test]
fn groups_changed_wakes_on_any_arrival_without_moving_the_cursor() {
    let broadcast = BroadcastProducer::new(Limits::default());
    let track = broadcast.create_track("t", TrackInfo::default());
    let mut reader = track.consume(StartAt::default());
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);

    assert_eq!(reader.poll_groups_changed(&mut cx, 0), Poll::Pending);
    write(&track, 5, 5, &["five"]);
    assert_eq!(reader.poll_groups_changed(&mut cx, 0), Poll::Ready(1));
    // An older group arriving late still counts.
    write(&track, 3, 3, &["three"]);
    assert_eq!(reader.poll_groups_changed(&mut cx, 1), Poll::Ready(2));
    assert_eq!(reader.poll_groups_changed(&mut cx, 2), Poll::Pending);

    // The reader's own cursor is untouched: it still starts at the latest group.
    match reader.poll_group(&mut cx) {
        Poll::Ready(Ok(Some(group))) => assert_eq!(group.sequence(), 5),
        other => panic!("expected group 5, got {other:?}"),
    }
    track.finish();
    assert_eq!(reader.poll_groups_changed(&mut cx, 2), Poll::Ready(2));
}

#[test]
fn origin_counts_interests() {
    let origin = Origin::new();
    assert_eq!(origin.interest_count(), 0);
    let a = origin.interest(Path::empty()).unwrap();
    let _b = origin.interest(Path::new("room").unwrap()).unwrap();
    assert_eq!(origin.interest_count(), 2);
    drop(a);
    assert_eq!(origin.interest_count(), 1);
    let broadcast = BroadcastProducer::new(Limits::default());
    let _route = origin
        .publish(
            Path::new("room/a").unwrap(),
            broadcast.consume(),
            Route::local(),
        )
        .unwrap();
    assert_eq!(origin.interest_count(), 1, "routes are not interests");
}

#[test]
fn cache_drops_are_counted_by_reason_across_broadcasts() {
    let counters = Arc::new(CacheBudget::default());
    let limits = Limits {
        max_cached_groups: 2,
        ..Limits::default()
    };
    let broadcast = BroadcastProducer::new(limits).with_cache_budget(counters.clone());
    // One track drops by budget: five groups, two kept.
    let budget = broadcast.create_track(
        "budget",
        TrackInfo {
            max_age_ms: u64::MAX / 1000,
            ..TrackInfo::default()
        },
    );
    for sequence in 0..5 {
        write(&budget, sequence, sequence, &["x"]);
    }
    // A track of another broadcast (no group budget to speak of) drops by age: a group
    // started 100 ms after its predecessor, with a 10 ms max age.
    let other = BroadcastProducer::new(Limits::default()).with_cache_budget(counters.clone());
    let aged = other.create_track(
        "aged",
        TrackInfo {
            max_age_ms: 10,
            ..TrackInfo::default()
        },
    );
    write(&aged, 0, 0, &["a"]);
    write(&aged, 1, 100, &["b"]);
    write(&aged, 2, 200, &["c"]);
    assert_eq!(counters.evicted.load(Ordering::Relaxed), 3);
    assert_eq!(counters.aged.load(Ordering::Relaxed), 1);
    // The counts outlive the tracks.
    drop((budget, aged, broadcast, other));
    assert_eq!(counters.evicted.load(Ordering::Relaxed), 3);
}
