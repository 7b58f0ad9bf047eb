//! Frames whose payload arrives in pieces: begun with their declared size, published whole,
//! charged to the cache when they begin, bounded by the group limits before any byte, and
//! handed to forwarding readers piece by piece as they come (cut-through).

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use starling_model::{
    Frame, GroupConsumer, Limits, ModelError, StartAt, TrackInfo, TrackProducer, Unit,
};
use starling_proto::StreamCode;

fn track(limits: Limits) -> TrackProducer {
    let info = TrackInfo {
        priority: 0,
        max_age_ms: 3_600_000,
        timescale: 1000,
    };
    TrackProducer::new("t", Some(info), limits)
}

fn poll_frame(reader: &mut GroupConsumer) -> Poll<Result<Option<Frame>, StreamCode>> {
    let waker = noop_waker();
    reader.poll_frame(&mut Context::from_waker(&waker))
}

/// What a forwarding reader can take now, and whether it saw the group's clean end.
fn units(reader: &mut GroupConsumer) -> (Vec<Unit>, bool) {
    let waker = noop_waker();
    let mut out = Vec::new();
    match reader.poll_units(&mut Context::from_waker(&waker), &mut out) {
        Poll::Ready(Ok(done)) => (out, done),
        Poll::Ready(Err(code)) => panic!("group ended {code:?}"),
        Poll::Pending => (out, false),
    }
}

fn piece(bytes: &'static [u8]) -> Unit {
    Unit::Bytes(Bytes::from_static(bytes))
}

#[test]
fn a_forwarding_reader_takes_each_piece_as_it_comes() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    let mut forward = group.consume();
    let mut whole = group.consume();
    group
        .write_frame(Frame {
            timestamp: 1,
            payload: Bytes::from_static(b"w"),
        })
        .unwrap();
    group.begin_frame(7, 10).unwrap();
    let head = Unit::Head {
        timestamp: 7,
        size: 10,
    };
    let first = Unit::Frame(Frame {
        timestamp: 1,
        payload: Bytes::from_static(b"w"),
    });
    assert_eq!(
        units(&mut forward),
        (vec![first, head.clone()], false),
        "the whole frame, then the next one's header before any of its bytes"
    );
    group.write_chunk(b"0123").unwrap();
    assert_eq!(units(&mut forward), (vec![piece(b"0123")], false));
    assert_eq!(units(&mut forward), (vec![], false), "nothing new");
    // A forwarding reader arriving mid-frame starts at the frame's first byte.
    let mut joiner = track.consume(StartAt::default());
    let waker = noop_waker();
    let Poll::Ready(Ok(Some(mut late))) = joiner.poll_group(&mut Context::from_waker(&waker))
    else {
        panic!("the open group is the latest");
    };
    late.seek(1);
    assert_eq!(
        units(&mut late),
        (vec![head.clone(), piece(b"0123")], false)
    );
    group.write_chunk(b"456").unwrap();
    assert_eq!(units(&mut forward), (vec![piece(b"456")], false));
    assert!(matches!(poll_frame(&mut whole), Poll::Ready(Ok(Some(_)))));
    assert!(poll_frame(&mut whole).is_pending(), "not whole yet");
    group.write_chunk(b"789").unwrap();
    group.finish();
    // The frame became whole between two polls: the rest comes from its joined payload.
    assert_eq!(units(&mut forward), (vec![piece(b"789")], true));
    assert_eq!(units(&mut late), (vec![piece(b"456789")], true));
    let Poll::Ready(Ok(Some(frame))) = poll_frame(&mut whole) else {
        panic!("the whole frame is readable");
    };
    assert_eq!(frame.payload, Bytes::from_static(b"0123456789"));
}

#[test]
fn a_forwarding_reader_inside_an_aborted_frame_sees_the_code() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    let mut forward = group.consume();
    group.begin_frame(0, 4).unwrap();
    group.write_chunk(b"ab").unwrap();
    assert_eq!(units(&mut forward).0.len(), 2);
    group.abort(StreamCode::Cancelled);
    let waker = noop_waker();
    let mut out = Vec::new();
    assert_eq!(
        forward.poll_units(&mut Context::from_waker(&waker), &mut out),
        Poll::Ready(Err(StreamCode::Cancelled))
    );
    assert!(out.is_empty());
}

#[test]
fn a_frame_in_pieces_is_seen_once_whole() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    let mut reader = group.consume();
    group.begin_frame(7, 10).unwrap();
    group.write_chunk(b"0123").unwrap();
    assert!(poll_frame(&mut reader).is_pending(), "not whole yet");
    group.write_chunk(b"456").unwrap();
    group.write_chunk(b"789").unwrap();
    let Poll::Ready(Ok(Some(frame))) = poll_frame(&mut reader) else {
        panic!("the whole frame is readable");
    };
    assert_eq!(frame.timestamp, 7);
    assert_eq!(frame.payload, Bytes::from_static(b"0123456789"));
    // A whole frame may follow a pieced one.
    group
        .write_frame(Frame {
            timestamp: 8,
            payload: Bytes::from_static(b"x"),
        })
        .unwrap();
    group.finish();
    assert!(matches!(poll_frame(&mut reader), Poll::Ready(Ok(Some(_)))));
    assert!(matches!(poll_frame(&mut reader), Poll::Ready(Ok(None))));
}

#[test]
fn the_declared_size_is_checked_and_charged_before_any_byte() {
    let limits = Limits {
        max_frame_bytes: 1000,
        max_group_bytes: 1500,
        ..Limits::default()
    };
    let track = track(limits);
    let mut group = track.create_group(0).unwrap();
    assert!(matches!(
        group.begin_frame(0, 1001),
        Err(ModelError::FrameTooLarge(1001))
    ));
    group.begin_frame(0, 1000).unwrap();
    assert_eq!(
        track.cached_bytes(),
        1000,
        "charged at once, before its bytes come"
    );
    group.write_chunk(&[0; 1000]).unwrap();
    assert!(matches!(
        group.begin_frame(0, 501),
        Err(ModelError::GroupTooLarge)
    ));
    assert_eq!(track.cached_bytes(), 1000, "charged once, not again whole");
}

#[test]
fn more_bytes_than_declared_are_refused() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    assert!(matches!(
        group.write_chunk(b"x"),
        Err(ModelError::WrongSize)
    ));
    group.begin_frame(0, 3).unwrap();
    assert!(matches!(
        group.write_chunk(b"abcd"),
        Err(ModelError::WrongSize)
    ));
    assert!(matches!(
        group.write_frame(Frame {
            timestamp: 0,
            payload: Bytes::new(),
        }),
        Err(ModelError::FrameIncomplete)
    ));
}

#[test]
fn finishing_inside_a_frame_ends_the_group_wrong_size() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    let mut reader = group.consume();
    group.begin_frame(0, 3).unwrap();
    group.write_chunk(b"ab").unwrap();
    group.finish();
    assert_eq!(
        poll_frame(&mut reader),
        Poll::Ready(Err(StreamCode::WrongSize))
    );
}

#[test]
fn an_empty_frame_begun_is_whole_at_once() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    let mut reader = group.consume();
    group.begin_frame(3, 0).unwrap();
    let Poll::Ready(Ok(Some(frame))) = poll_frame(&mut reader) else {
        panic!("an empty frame needs no piece");
    };
    assert!(frame.payload.is_empty());
}

#[test]
fn a_reader_joining_late_sees_pieced_frames_whole() {
    let track = track(Limits::default());
    let mut group = track.create_group(0).unwrap();
    group.begin_frame(1, 4).unwrap();
    group.write_chunk(b"ab").unwrap();
    let mut late = track.consume(StartAt::default());
    group.write_chunk(b"cd").unwrap();
    let waker = noop_waker();
    let Poll::Ready(Ok(Some(mut reader))) = late.poll_group(&mut Context::from_waker(&waker))
    else {
        panic!("the open group is the latest");
    };
    let Poll::Ready(Ok(Some(frame))) = poll_frame(&mut reader) else {
        panic!("whole");
    };
    assert_eq!(frame.payload, Bytes::from_static(b"abcd"));
}

#[test]
fn pieces_for_a_group_that_left_the_cache_are_refused() {
    // Room for one 1000-byte frame: the second group's frame pushes the first group out.
    let limits = Limits {
        track_cache_bytes: 1500,
        ..Limits::default()
    };
    let track = track(limits);
    let mut old = track.create_group(0).unwrap();
    old.begin_frame(0, 1000).unwrap();
    old.write_chunk(&[0; 10]).unwrap();
    let mut new = track.create_group(1).unwrap();
    new.begin_frame(1, 1000).unwrap();
    // What would still come for the old group is no longer accounted for: refused.
    assert!(matches!(
        old.write_chunk(&[0; 10]),
        Err(ModelError::Aborted(_))
    ));
    new.write_chunk(&[0; 1000]).unwrap();
}
