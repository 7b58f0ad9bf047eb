//! Broadcasts: static track tables, on-demand track requests shared by every reader, bounds and close.

mod common;

use common::Flag;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use futures::FutureExt;
use starling_model::{
    BroadcastProducer, Frame, GroupConsumer, Limits, StartAt, TrackConsumer, TrackInfo,
    TrackProducer, TrackRequest,
};
use starling_proto::StreamCode;

fn info() -> TrackInfo {
    TrackInfo::default()
}

fn requested(b: &BroadcastProducer) -> Poll<Option<TrackRequest>> {
    let w = noop_waker();
    b.poll_requested(&mut Context::from_waker(&w))
}

fn take_request(b: &BroadcastProducer) -> Arc<TrackProducer> {
    match requested(b) {
        Poll::Ready(Some(t)) => t.track().clone(),
        Poll::Ready(None) => panic!("broadcast closed"),
        Poll::Pending => panic!("no request queued"),
    }
}

fn poll_group(r: &mut TrackConsumer) -> Poll<Result<Option<GroupConsumer>, StreamCode>> {
    let w = noop_waker();
    r.poll_group(&mut Context::from_waker(&w))
}

fn next_seq(r: &mut TrackConsumer) -> Option<u64> {
    match poll_group(r) {
        Poll::Ready(Ok(Some(g))) => Some(g.sequence()),
        _ => None,
    }
}

fn write_group(t: &TrackProducer, seq: u64) {
    let mut g = t.create_group(seq).unwrap();
    g.write_frame(Frame {
        timestamp: seq,
        payload: Bytes::from_static(b"x"),
    })
    .unwrap();
    g.finish();
}

fn limits(max_tracks: usize) -> Limits {
    Limits {
        max_tracks_per_broadcast: max_tracks,
        ..Limits::default()
    }
}

// ------------------------------------------------------------------------------------- static

#[test]
fn static_tracks_are_found_by_name() {
    let b = BroadcastProducer::new(Limits::default());
    let c = b.consume();
    assert_eq!(
        c.subscribe_track("video", StartAt::default()).unwrap_err(),
        StreamCode::NotFound
    );
    let video = b.create_track("video", info());
    assert_eq!(video.name(), "video");
    let mut r1 = c.subscribe_track("video", StartAt::default()).unwrap();
    let mut r2 = c.subscribe_track("video", StartAt::default()).unwrap();
    assert_eq!(r1.name(), "video");
    assert!(poll_group(&mut r1).is_pending());
    assert!(poll_group(&mut r2).is_pending());
    write_group(&video, 0);
    assert_eq!(next_seq(&mut r1), Some(0));
    assert_eq!(next_seq(&mut r2), Some(0));
    assert_eq!(r1.info().now_or_never(), Some(Ok(info())));
    assert_eq!(
        c.subscribe_track("audio", StartAt::default()).unwrap_err(),
        StreamCode::NotFound
    );
    // A static broadcast never queues requests.
    assert!(requested(&b).is_pending());
}

#[test]
fn the_broadcast_handle_is_not_a_reader() {
    let b = BroadcastProducer::new(Limits::default());
    let video = b.create_track("video", info());
    assert_eq!(video.consumers(), 0);
    let r = b
        .consume()
        .subscribe_track("video", StartAt::default())
        .unwrap();
    assert_eq!(video.consumers(), 1);
    drop(r);
    assert_eq!(video.consumers(), 0);
    assert!(video.unused().now_or_never().is_some());
}

#[test]
fn create_track_replaces_an_earlier_track_of_that_name() {
    let b = BroadcastProducer::new(Limits::default());
    let c = b.consume();
    let old = b.create_track("v", info());
    let mut old_reader = c.subscribe_track("v", StartAt::default()).unwrap();
    let new = b.create_track("v", info());
    let mut new_reader = c.subscribe_track("v", StartAt::default()).unwrap();
    assert!(poll_group(&mut old_reader).is_pending());
    assert!(poll_group(&mut new_reader).is_pending());
    write_group(&new, 7);
    write_group(&old, 1);
    assert_eq!(next_seq(&mut new_reader), Some(7));
    assert_eq!(next_seq(&mut old_reader), Some(1));
    // Removing the stale producer does not remove its replacement.
    b.remove_track(&old);
    assert!(c.subscribe_track("v", StartAt::default()).is_ok());
    b.remove_track(&new);
    assert_eq!(
        c.subscribe_track("v", StartAt::default()).unwrap_err(),
        StreamCode::NotFound
    );
}

#[test]
fn a_closed_static_track_is_not_found() {
    let b = BroadcastProducer::new(Limits::default());
    let c = b.consume();
    let t = b.create_track("v", info());
    t.finish();
    assert_eq!(
        c.subscribe_track("v", StartAt::default()).unwrap_err(),
        StreamCode::NotFound
    );
    drop(t);
    let t = b.create_track("a", info());
    drop(t); // dropping the producer closes the track
    assert_eq!(
        c.subscribe_track("a", StartAt::default()).unwrap_err(),
        StreamCode::NotFound
    );
}

// ------------------------------------------------------------------------------------ dynamic

#[test]
fn the_first_reader_queues_exactly_one_request_and_later_readers_share_it() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();
    let (flag, w) = Flag::new();
    assert!(b.poll_requested(&mut Context::from_waker(&w)).is_pending());

    let mut r1 = c.subscribe_track("video", StartAt::default()).unwrap();
    assert!(flag.woken(), "a request wakes the owner");
    let mut r2 = c
        .clone()
        .subscribe_track("video", StartAt::default())
        .unwrap();
    let mut r3 = c
        .subscribe_track(
            "video",
            StartAt {
                max_age_ms: 1000,
                ..StartAt::default()
            },
        )
        .unwrap();
    let upstream = take_request(&b);
    assert_eq!(upstream.name(), "video");
    assert!(requested(&b).is_pending(), "one request for three readers");
    // All three readers count against the one upstream track.
    assert_eq!(upstream.consumers(), 3);
    assert_eq!(upstream.info(), None);

    // Info arrives when the owner learns it; groups reach every reader.
    assert!(r1.info().now_or_never().is_none());
    upstream.set_info(info());
    assert_eq!(r2.info().now_or_never(), Some(Ok(info())));
    assert!(poll_group(&mut r1).is_pending());
    assert!(poll_group(&mut r2).is_pending());
    assert!(poll_group(&mut r3).is_pending());
    write_group(&upstream, 0);
    assert_eq!(next_seq(&mut r1), Some(0));
    assert_eq!(next_seq(&mut r2), Some(0));
    assert_eq!(next_seq(&mut r3), Some(0));

    // A different name is a second request.
    let _audio = c.subscribe_track("audio", StartAt::default()).unwrap();
    assert_eq!(take_request(&b).name(), "audio");
    assert!(requested(&b).is_pending());
}

#[test]
fn readers_going_away_leave_the_upstream_unused() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();
    let r1 = c.subscribe_track("v", StartAt::default()).unwrap();
    let r2 = c.subscribe_track("v", StartAt::default()).unwrap();
    let upstream = take_request(&b);
    let (flag, w) = Flag::new();
    assert!(upstream
        .poll_unused(&mut Context::from_waker(&w))
        .is_pending());
    drop(r1);
    assert!(!flag.woken());
    drop(r2);
    assert!(flag.woken());
    assert_eq!(upstream.consumers(), 0);
}

#[test]
fn a_request_still_queued_is_shared() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();
    let mut r1 = c.subscribe_track("v", StartAt::default()).unwrap();
    let mut r2 = c.subscribe_track("v", StartAt::default()).unwrap();
    // Both readers were queued behind one request, answered later.
    let upstream = take_request(&b);
    assert!(requested(&b).is_pending());
    assert!(poll_group(&mut r1).is_pending());
    assert!(poll_group(&mut r2).is_pending());
    write_group(&upstream, 3);
    assert_eq!(next_seq(&mut r1), Some(3));
    assert_eq!(next_seq(&mut r2), Some(3));
}

#[test]
fn remove_track_makes_the_next_reader_request_afresh() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();
    let _r1 = c.subscribe_track("v", StartAt::default()).unwrap();
    let first = take_request(&b);
    b.remove_track(&first);
    let mut r2 = c.subscribe_track("v", StartAt::default()).unwrap();
    let second = take_request(&b);
    assert_eq!(second.name(), "v");
    assert_eq!(first.consumers(), 1);
    assert_eq!(second.consumers(), 1);
    assert!(poll_group(&mut r2).is_pending());
    write_group(&second, 0);
    assert_eq!(next_seq(&mut r2), Some(0));

    // Removing the old producer again leaves the current one in place.
    b.remove_track(&first);
    let _r3 = c.subscribe_track("v", StartAt::default()).unwrap();
    assert!(requested(&b).is_pending());
    assert_eq!(second.consumers(), 2);
}

#[test]
fn a_closed_track_makes_the_next_reader_request_afresh() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();

    // Finished upstream.
    let mut r = c.subscribe_track("v", StartAt::default()).unwrap();
    let up = take_request(&b);
    up.finish();
    assert!(matches!(poll_group(&mut r), Poll::Ready(Ok(None))));
    let _r = c.subscribe_track("v", StartAt::default()).unwrap();
    let up = take_request(&b);

    // Aborted upstream.
    up.abort(StreamCode::NotFound);
    let _r = c.subscribe_track("v", StartAt::default()).unwrap();
    let up = take_request(&b);

    // An upstream the owner dropped (the request was refused).
    drop(up);
    let _r = c.subscribe_track("v", StartAt::default()).unwrap();
    let _up = take_request(&b);
    assert!(requested(&b).is_pending());
}

#[test]
fn a_dropped_request_cancels_its_waiting_readers() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();
    let mut r = c.subscribe_track("v", StartAt::default()).unwrap();
    let (flag, w) = Flag::new();
    assert!(r.poll_group(&mut Context::from_waker(&w)).is_pending());
    drop(take_request(&b));
    assert!(flag.woken());
    assert!(matches!(
        poll_group(&mut r),
        Poll::Ready(Err(StreamCode::Cancelled))
    ));
}

#[test]
fn max_tracks_per_broadcast_bounds_distinct_names() {
    let b = BroadcastProducer::dynamic(limits(2));
    let c = b.consume();
    let _a = c.subscribe_track("a", StartAt::default()).unwrap();
    let _b = c.subscribe_track("b", StartAt::default()).unwrap();
    assert_eq!(
        c.subscribe_track("c", StartAt::default()).unwrap_err(),
        StreamCode::Internal
    );
    // At the bound, existing names are still shared.
    let _a2 = c.subscribe_track("a", StartAt::default()).unwrap();
    let a = take_request(&b);
    let _ = take_request(&b);
    assert!(requested(&b).is_pending());
    // Removing one frees a slot.
    b.remove_track(&a);
    let _c = c.subscribe_track("c", StartAt::default()).unwrap();
    assert_eq!(take_request(&b).name(), "c");
}

#[test]
fn a_closed_track_can_be_requested_again_at_the_bound() {
    let b = BroadcastProducer::dynamic(limits(1));
    let c = b.consume();
    let _r = c.subscribe_track("v", StartAt::default()).unwrap();
    take_request(&b).finish();
    // The name was tracked once and is being replaced: the table does not grow.
    let again = c.subscribe_track("v", StartAt::default());
    assert!(again.is_ok(), "got {again:?}");
    assert_eq!(take_request(&b).name(), "v");
}

#[test]
fn closed_tracks_do_not_use_up_the_bound() {
    let b = BroadcastProducer::dynamic(limits(2));
    let c = b.consume();
    for name in ["a", "b"] {
        let _r = c.subscribe_track(name, StartAt::default()).unwrap();
        take_request(&b).finish();
    }
    // Nothing is open: a new name fits.
    let fresh = c.subscribe_track("c", StartAt::default());
    assert!(fresh.is_ok(), "got {fresh:?}");
}

// -------------------------------------------------------------------------------------- close

#[test]
fn close_fails_pending_and_future_requests_and_wakes_readers() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let c = b.consume();
    let mut answered = c.subscribe_track("answered", StartAt::default()).unwrap();
    let served = take_request(&b);

    let (owner_flag, owner_waker) = Flag::new();
    assert!(b
        .poll_requested(&mut Context::from_waker(&owner_waker))
        .is_pending());
    let mut queued = c.subscribe_track("queued", StartAt::default()).unwrap();
    assert!(owner_flag.woken());
    let (track_flag, track_waker) = Flag::new();
    assert!(queued
        .poll_group(&mut Context::from_waker(&track_waker))
        .is_pending());
    let (closed_flag, closed_waker) = Flag::new();
    assert!(c
        .poll_closed(&mut Context::from_waker(&closed_waker))
        .is_pending());
    assert!(!c.is_closed());

    b.close();
    assert!(c.is_closed());
    assert!(closed_flag.woken());
    assert!(c.closed().now_or_never().is_some());
    // The request nobody answered fails its readers.
    assert!(track_flag.woken());
    assert!(matches!(
        poll_group(&mut queued),
        Poll::Ready(Err(StreamCode::Cancelled))
    ));
    // The owner hears no more requests, and nothing new can be asked.
    assert!(matches!(requested(&b), Poll::Ready(None)));
    assert!(matches!(b.requested().now_or_never(), Some(None)));
    for name in ["queued", "answered", "new"] {
        assert_eq!(
            c.subscribe_track(name, StartAt::default()).unwrap_err(),
            StreamCode::NotFound
        );
    }
    // A track the owner already serves runs on until the owner ends it.
    assert!(poll_group(&mut answered).is_pending());
    write_group(&served, 0);
    assert_eq!(next_seq(&mut answered), Some(0));
}

#[test]
fn close_wakes_an_owner_waiting_for_requests() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let (flag, w) = Flag::new();
    assert!(b.poll_requested(&mut Context::from_waker(&w)).is_pending());
    b.close();
    assert!(flag.woken());
    assert!(matches!(requested(&b), Poll::Ready(None)));
    b.close(); // idempotent
    assert!(matches!(requested(&b), Poll::Ready(None)));
}

#[test]
fn dropping_the_producer_closes_the_broadcast() {
    let b = BroadcastProducer::new(Limits::default());
    let _t = b.create_track("v", info());
    let c = b.consume();
    let other = BroadcastProducer::new(Limits::default()).consume();
    assert!(c.same(&c.clone()));
    assert!(!c.same(&other));
    assert!(!c.is_closed());
    drop(b);
    assert!(c.is_closed());
    assert!(c.closed().now_or_never().is_some());
    assert_eq!(
        c.subscribe_track("v", StartAt::default()).unwrap_err(),
        StreamCode::NotFound
    );
}

fn reader_at(priority: u8, max_age_ms: u64) -> StartAt {
    StartAt {
        priority,
        max_age_ms,
        ..StartAt::default()
    }
}

#[test]
fn a_watcher_pulls_the_track_and_keeps_it_used_but_asks_nothing() {
    let b = BroadcastProducer::dynamic(Limits::default());
    let watcher = b.consume().watch_track("video").unwrap();
    let upstream = take_request(&b);
    assert_eq!(
        upstream.consumers(),
        1,
        "the watcher keeps the track in use"
    );
    assert_eq!(upstream.demand(), None, "a watcher adds no demand");
    let (flag, w) = Flag::new();
    assert!(upstream
        .poll_demand(&mut Context::from_waker(&w), None)
        .is_pending());

    // The first reader of groups brings the demand, and wakes whoever waits for it.
    let _reader = b
        .consume()
        .subscribe_track("video", reader_at(3, 60_000))
        .unwrap();
    assert!(flag.woken());
    assert!(
        requested(&b).is_pending(),
        "the reader shares the watched track"
    );
    let first = match upstream.poll_demand(&mut Context::from_waker(&w), None) {
        Poll::Ready(demand) => demand,
        Poll::Pending => panic!("no demand after a reader arrived"),
    };
    assert_eq!((first.priority, first.max_age_ms), (3, 60_000));

    // More watchers change nothing; a demanding reader raises what it exceeds only.
    let _more = watcher.watch();
    let _other = b.consume().watch_track("video").unwrap();
    assert_eq!(upstream.demand(), Some(first));
    let _urgent = b
        .consume()
        .subscribe_track("video", reader_at(7, 1_000))
        .unwrap();
    let raised = upstream.demand().unwrap();
    assert_eq!((raised.priority, raised.max_age_ms), (7, 60_000));
    assert!(upstream
        .poll_demand(&mut Context::from_waker(&w), Some(raised))
        .is_pending());
}

#[test]
fn a_static_tracks_table_handle_asks_nothing() {
    let b = BroadcastProducer::new(Limits::default());
    let track = b.create_track("video", info());
    assert_eq!(track.demand(), None);
    let _watcher = b.consume().watch_track("video").unwrap();
    assert_eq!(track.demand(), None);
    let _reader = b
        .consume()
        .subscribe_track("video", reader_at(1, 500))
        .unwrap();
    let demand = track.demand().unwrap();
    assert_eq!((demand.priority, demand.max_age_ms), (1, 500));
}
