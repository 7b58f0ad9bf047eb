//! Fronts: readers of a learned path share one track per content identity, and a track whose
//! source is lost is handed to another route with the same first hop, continuing its
//! unfinished group at the first frame not yet held.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use starling_model::{
    BroadcastProducer, Frame, Limits, ModelError, Origin, Route, StartAt, TrackInfo, TrackRequest,
    Unit,
};
use starling_proto::{Path, RouteCost, StreamCode};

fn p(s: &str) -> Path {
    Path::new(s).unwrap()
}

fn frame(ts: u64, payload: &'static str) -> Frame {
    Frame {
        timestamp: ts,
        payload: Bytes::from_static(payload.as_bytes()),
    }
}

fn take(source: &BroadcastProducer) -> Option<TrackRequest> {
    let waker = noop_waker();
    match source.poll_requested(&mut Context::from_waker(&waker)) {
        Poll::Ready(request) => request,
        Poll::Pending => None,
    }
}

/// Two sources of one publisher (first hop 7) at different costs, and one of another.
struct Mesh {
    origin: Origin,
    near: BroadcastProducer,
    far: BroadcastProducer,
    other: BroadcastProducer,
    _routes: Vec<starling_model::RouteHandle>,
}

fn mesh() -> Mesh {
    let origin = Origin::new();
    let near = BroadcastProducer::dynamic(Limits::default());
    let far = BroadcastProducer::dynamic(Limits::default());
    let other = BroadcastProducer::dynamic(Limits::default());
    let publish = |b: &BroadcastProducer, hops: &[u64], cost: u64| {
        origin
            .publish(
                p("room/alice"),
                b.consume(),
                Route::learned(hops.to_vec(), RouteCost::new(cost), true),
            )
            .unwrap()
    };
    let routes = vec![
        publish(&near, &[7, 1], 2),
        publish(&far, &[7, 2], 5),
        publish(&other, &[9, 3], 9),
    ];
    Mesh {
        origin,
        near,
        far,
        other,
        _routes: routes,
    }
}

#[test]
fn readers_share_one_request_on_the_best_route() {
    let mesh = mesh();
    let a = mesh.origin.consume(&p("room/alice"), None).unwrap();
    let _r1 = a.subscribe_track("video", StartAt::default()).unwrap();
    let b = mesh.origin.consume(&p("room/alice"), Some(42)).unwrap();
    let _r2 = b.subscribe_track("video", StartAt::default()).unwrap();
    assert!(
        a.same(&b),
        "a reader whose hop no route uses shares the front"
    );
    let _request = take(&mesh.near).expect("the best route pulls");
    assert!(take(&mesh.near).is_none(), "one request for both readers");
    assert!(take(&mesh.far).is_none() && take(&mesh.other).is_none());
}

#[test]
fn a_lost_source_hands_the_track_over_without_gap_or_duplicate() {
    let mesh = mesh();
    let front = mesh.origin.consume(&p("room/alice"), None).unwrap();
    let mut reader = front
        .subscribe_track(
            "video",
            StartAt {
                max_age_ms: 60_000,
                ..Default::default()
            },
        )
        .unwrap();
    let request = take(&mesh.near).expect("the cheapest route pulls");
    assert!(!request.is_handover());
    let track = request.track().clone();
    track.set_info(TrackInfo::default());
    let mut g0 = track.create_group(0).unwrap();
    g0.write_frame(frame(0, "f0")).unwrap();
    g0.write_frame(frame(10, "f1")).unwrap();
    let mut done = track.create_group(1).unwrap();
    done.write_frame(frame(20, "h0")).unwrap();
    done.finish();

    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let Poll::Ready(Ok(Some(mut group))) = reader.poll_group(&mut cx) else {
        panic!("group 0 delivered");
    };
    assert_eq!(group.sequence(), 0);
    // A forwarding reader beside it, which takes the unfinished frame's first piece.
    let mut forward = group.clone();
    let units = |group: &mut starling_model::GroupConsumer| {
        let mut out = Vec::new();
        let waker = noop_waker();
        let _ = group.poll_units(&mut Context::from_waker(&waker), &mut out);
        out
    };
    assert_eq!(units(&mut forward).len(), 2, "two whole frames");
    let mut read = |group: &mut starling_model::GroupConsumer| match group.poll_frame(&mut cx) {
        Poll::Ready(Ok(Some(frame))) => Some(frame.payload),
        Poll::Ready(other) => panic!("group ended: {other:?}"),
        Poll::Pending => None,
    };
    assert_eq!(read(&mut group).as_deref(), Some(&b"f0"[..]));
    assert_eq!(read(&mut group).as_deref(), Some(&b"f1"[..]));

    // The session dies mid-group, inside a frame arriving in pieces: the group waits open,
    // the track goes to the same publisher's other route, never to another publisher's.
    g0.begin_frame(20, 2).unwrap();
    g0.write_chunk(b"f").unwrap();
    assert_eq!(
        units(&mut forward),
        [
            Unit::Head {
                timestamp: 20,
                size: 2
            },
            Unit::Bytes(Bytes::from_static(b"f"))
        ]
    );
    g0.source_lost();
    drop(track);
    request.source_lost();
    assert_eq!(read(&mut group), None, "the orphaned group waits");
    assert!(take(&mesh.other).is_none());
    let request = take(&mesh.far).expect("handed to the route with the same first hop");
    assert!(request.is_handover());
    assert_eq!(mesh.origin.failovers(), 1);
    let track = request.track().clone();
    assert_eq!(track.resume_point(), Some(0), "from the unfinished group");

    // The new source sends group 0 from its first frame: what is held is skipped, whole or
    // in pieces, and the frame that was half in is written again whole.
    let mut again = track.create_group(0).unwrap();
    again.write_frame(frame(0, "f0")).unwrap();
    again.begin_frame(10, 2).unwrap();
    again.write_chunk(b"f").unwrap();
    again.write_chunk(b"1").unwrap();
    again.begin_frame(20, 2).unwrap();
    again.write_chunk(b"f").unwrap();
    assert_eq!(read(&mut group), None, "not whole yet");
    again.write_chunk(b"2").unwrap();
    again.finish();
    assert_eq!(read(&mut group).as_deref(), Some(&b"f2"[..]));
    assert_eq!(
        units(&mut forward),
        [Unit::Bytes(Bytes::from_static(b"2"))],
        "the forwarding reader gets the rest of the frame once, and nothing twice"
    );
    assert!(matches!(group.poll_frame(&mut cx), Poll::Ready(Ok(None))));
    assert_eq!(
        track.create_group(1).err(),
        Some(ModelError::DuplicateGroup(1)),
        "a complete group is never taken twice"
    );
    let Poll::Ready(Ok(Some(next))) = reader.poll_group(&mut cx) else {
        panic!("group 1 still delivered once");
    };
    assert_eq!(next.sequence(), 1);
}

#[test]
fn with_no_route_of_the_same_publisher_the_track_and_its_orphans_end() {
    let mesh = mesh();
    let front = mesh.origin.consume(&p("room/alice"), None).unwrap();
    let mut reader = front.subscribe_track("video", StartAt::default()).unwrap();
    let first = take(&mesh.near).unwrap();
    let mut g0 = first.track().create_group(0).unwrap();
    g0.write_frame(frame(0, "f0")).unwrap();
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let Poll::Ready(Ok(Some(mut group))) = reader.poll_group(&mut cx) else {
        panic!("group 0 delivered");
    };
    g0.source_lost();
    mesh.near.close();
    first.source_lost();
    let second = take(&mesh.far).unwrap();
    // Dropped unanswered (its session cancelled): handed on, and nothing qualifies.
    mesh.far.close();
    drop(second);
    assert!(
        take(&mesh.other).is_none(),
        "another publisher is other content"
    );
    assert!(matches!(
        group.poll_frame(&mut cx),
        Poll::Ready(Ok(Some(_)))
    ));
    assert!(
        matches!(group.poll_frame(&mut cx), Poll::Ready(Err(_))),
        "the orphan is aborted"
    );
    assert!(matches!(
        reader.poll_group(&mut cx),
        Poll::Ready(Err(StreamCode::Internal))
    ));
}

#[test]
fn a_front_closes_with_its_last_route() {
    let mesh = mesh();
    let front = mesh.origin.consume(&p("room/alice"), None).unwrap();
    drop(mesh._routes);
    assert!(front.is_closed());
    assert!(front.subscribe_track("video", StartAt::default()).is_err());
    drop((mesh.near, mesh.far, mesh.other));
}

#[test]
fn a_track_is_never_handed_to_a_route_through_a_peer_reading_it() {
    let mesh = mesh();
    let front = mesh.origin.consume(&p("room/alice"), None).unwrap();
    let _local = front.subscribe_track("video", StartAt::default()).unwrap();
    // Peer 2 (on the far route) reads the same track from us.
    let _peer = front
        .subscribe_track("video", StartAt::default())
        .unwrap()
        .for_peer(Some(2))
        .unwrap();
    let first = take(&mesh.near).unwrap();
    mesh.near.close();
    first.source_lost();
    assert!(
        take(&mesh.far).is_none(),
        "the far route runs through the reading peer"
    );
}

#[test]
fn a_peer_on_the_route_the_front_reads_through_is_refused() {
    let mesh = mesh();
    // Our best route to the content runs through hop 1: hop 1 asking us for it is a loop.
    assert!(mesh.origin.consume(&p("room/alice"), Some(1)).is_none());
    assert!(mesh.origin.consume(&p("room/alice"), Some(2)).is_some());
}

#[test]
fn a_peer_on_the_route_a_track_is_pulled_through_is_refused_as_its_reader() {
    let mesh = mesh();
    let front = mesh.origin.consume(&p("room/alice"), None).unwrap();
    let _local = front.subscribe_track("video", StartAt::default()).unwrap();
    // Pulled through hop 1.
    let _pulled = take(&mesh.near).unwrap();
    // A better route comes (or the one through hop 1 goes stale): the track stays where it
    // is pulled, while the front's best route no longer runs through hop 1.
    let better = BroadcastProducer::dynamic(Limits::default());
    let _route = mesh
        .origin
        .publish(
            p("room/alice"),
            better.consume(),
            Route::learned(vec![7, 3], RouteCost::new(1), true),
        )
        .unwrap();
    let asked = mesh.origin.consume(&p("room/alice"), Some(1)).unwrap();
    assert!(asked.same(&front));
    // Hop 1 reading the track from us would feed it to itself: a loop nothing breaks.
    let reader = asked.subscribe_track("video", StartAt::default()).unwrap();
    assert!(matches!(
        reader.for_peer(Some(1)),
        Err(StreamCode::Unroutable)
    ));
    // A peer off that route reads it, and a track not pulled yet goes to the best route.
    let reader = asked.subscribe_track("video", StartAt::default()).unwrap();
    assert!(reader.for_peer(Some(3)).is_ok());
    let audio = asked.subscribe_track("audio", StartAt::default()).unwrap();
    assert!(audio.for_peer(Some(1)).is_ok());
    assert!(take(&better).is_some());
}

#[test]
fn a_publisher_that_unannounces_still_ends_the_tracks_it_serves() {
    // moq-cli's import unannounces when its input ends, then finishes its last group and its
    // tracks: what it still writes is owed to the readers.
    let origin = Origin::new();
    let publisher = BroadcastProducer::dynamic(Limits::default());
    let route = origin
        .publish(
            p("room/alice"),
            publisher.consume(),
            Route::learned(vec![7], RouteCost::new(1), false),
        )
        .unwrap();
    let front = origin.consume(&p("room/alice"), None).unwrap();
    let mut reader = front.subscribe_track("video", StartAt::default()).unwrap();
    let request = take(&publisher).unwrap();
    let track = request.track().clone();
    track.set_info(TrackInfo::default());
    let mut last = track.create_group(0).unwrap();
    last.write_frame(frame(0, "f0")).unwrap();
    drop(route);
    assert!(front.is_closed(), "the broadcast is gone with its route");
    last.write_frame(frame(1, "f1")).unwrap();
    last.finish();
    request.finish();
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    let Poll::Ready(Ok(Some(mut group))) = reader.poll_group(&mut cx) else {
        panic!("the last group delivered");
    };
    let mut frames = Vec::new();
    while let Poll::Ready(Ok(Some(f))) = group.poll_frame(&mut cx) {
        frames.push(f.payload);
    }
    assert_eq!(frames, [&b"f0"[..], &b"f1"[..]]);
    assert!(matches!(group.poll_frame(&mut cx), Poll::Ready(Ok(None))));
    assert!(
        matches!(reader.poll_group(&mut cx), Poll::Ready(Ok(None))),
        "the track ends as its publisher ended it"
    );
}

#[test]
fn a_track_pulled_through_a_peer_is_marked_when_its_front_loses_its_last_route() {
    // The pull gives such a track a grace to end as the publisher ends it (moq-cli finishes
    // its last group after unannouncing), then ends it: a dead pull between relays lets go.
    let mesh = mesh();
    let front = mesh.origin.consume(&p("room/alice"), None).unwrap();
    let _reader = front.subscribe_track("video", StartAt::default()).unwrap();
    let pulled = take(&mesh.near).unwrap();
    let track = pulled.track().clone();
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(track.poll_front_gone(&mut cx).is_pending());
    drop(mesh._routes);
    assert!(front.is_closed());
    assert!(track.poll_front_gone(&mut cx).is_ready());
    assert!(!track.is_closed(), "left to the pull's grace");
    pulled.finish();
    assert!(track.is_closed());
    drop((mesh.near, mesh.far, mesh.other));
}
