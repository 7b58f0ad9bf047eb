//! Track group cache: expiry, budgets, reader cursors, late join and limits, plus a random-operation test against a reference cache.

mod common;

use common::Flag;
use std::collections::BTreeSet;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use futures::FutureExt;
use proptest::prelude::*;
use starling_model::{
    Frame, GroupConsumer, GroupProducer, Limits, ModelError, StartAt, TrackConsumer, TrackInfo,
    TrackProducer,
};
use starling_proto::StreamCode;

fn info(max_age_ms: u64, timescale: u64) -> TrackInfo {
    TrackInfo {
        priority: 0,
        max_age_ms,
        timescale,
    }
}

/// No age expiry to speak of (an hour at ms timescale).
fn ageless() -> TrackInfo {
    info(3_600_000, 1000)
}

fn frame(timestamp: u64, len: usize) -> Frame {
    Frame {
        timestamp,
        payload: Bytes::from(vec![0xAB; len]),
    }
}

fn track(info: Option<TrackInfo>, limits: Limits) -> TrackProducer {
    TrackProducer::new("t", info, limits)
}

fn start(max_age_ms: u64, floor: Option<u64>) -> StartAt {
    StartAt {
        max_age_ms,
        floor,
        ..StartAt::default()
    }
}

/// A group with one frame of `len` bytes at `timestamp`, still open.
fn group_with(track: &TrackProducer, seq: u64, timestamp: u64, len: usize) -> GroupProducer {
    let mut g = track.create_group(seq).unwrap();
    g.write_frame(frame(timestamp, len)).unwrap();
    g
}

fn poll(reader: &mut TrackConsumer) -> Poll<Result<Option<GroupConsumer>, StreamCode>> {
    let w = noop_waker();
    reader.poll_group(&mut Context::from_waker(&w))
}

/// The next group's sequence; panics unless one is ready.
fn next(reader: &mut TrackConsumer) -> u64 {
    match poll(reader) {
        Poll::Ready(Ok(Some(g))) => g.sequence(),
        other => panic!(
            "expected a group, got {:?}",
            other.map(|r| r.map(|g| g.map(|g| g.sequence())))
        ),
    }
}

/// Every group ready now, until the reader would block or the track ends.
fn ready(reader: &mut TrackConsumer) -> Vec<u64> {
    let mut out = Vec::new();
    while let Poll::Ready(Ok(Some(g))) = poll(reader) {
        out.push(g.sequence());
    }
    out
}

fn frame_result(g: &mut GroupConsumer) -> Poll<Result<Option<Frame>, StreamCode>> {
    let w = noop_waker();
    g.poll_frame(&mut Context::from_waker(&w))
}

fn aborted(g: &GroupConsumer) -> Option<StreamCode> {
    let w = noop_waker();
    match g.poll_aborted(&mut Context::from_waker(&w)) {
        Poll::Ready(code) => Some(code),
        Poll::Pending => None,
    }
}

fn live(reader: &TrackConsumer, seqs: impl IntoIterator<Item = u64>) -> Vec<u64> {
    seqs.into_iter()
        .filter(|s| reader.group(*s).is_some())
        .collect()
}

// ------------------------------------------------------------------------------ cache policy

#[test]
fn latest_group_is_always_kept() {
    let limits = Limits {
        track_cache_bytes: 0,
        max_cached_groups: 0,
        ..Limits::default()
    };
    // Every budget at zero and an age of zero: only the latest group stays.
    let t = track(Some(info(0, 1000)), limits);
    let probe = t.consume(StartAt::default());
    let mut g0 = group_with(&t, 0, 0, 10);
    assert_eq!(live(&probe, 0..3), [0]);
    g0.write_frame(frame(50, 10)).unwrap(); // the latest group grows past the budget
    assert_eq!(live(&probe, 0..3), [0]);
    let _g1 = group_with(&t, 1, 100, 10);
    assert_eq!(live(&probe, 0..3), [1]);
    assert_eq!(t.cached_bytes(), 10);
    let _g2 = t.create_group(2).unwrap(); // even an empty latest group
    assert_eq!(live(&probe, 0..3), [2]);
    assert_eq!(t.cached_bytes(), 0);
    assert_eq!(t.latest_sequence(), Some(2));
    assert_eq!(probe.latest_sequence(), Some(2));
}

#[test]
fn a_group_expires_once_its_successor_is_older_than_max_age() {
    // 1000 ms at timescale 1000: 1000 ticks.
    let t = track(Some(info(1000, 1000)), Limits::default());
    let probe = t.consume(StartAt::default());
    let mut g0 = t.create_group(0).unwrap();
    g0.write_frame(frame(0, 4)).unwrap();
    g0.write_frame(frame(40, 4)).unwrap();
    let mut inside = probe.group(0).unwrap();
    assert_eq!(
        frame_result(&mut inside),
        Poll::Ready(Ok(Some(frame(0, 4))))
    );

    let mut g1 = group_with(&t, 1, 100, 4);
    g1.write_frame(frame(1100, 4)).unwrap(); // 1000 ticks after the successor started: not yet
    assert_eq!(live(&probe, 0..2), [0, 1]);
    assert_eq!(aborted(&inside), None);

    g1.write_frame(frame(1101, 4)).unwrap(); // 1001 ticks: group 0 is old
    assert_eq!(live(&probe, 0..2), [1]);
    // The reader inside group 0 stops at once with Old, even with a frame left unread.
    assert_eq!(frame_result(&mut inside), Poll::Ready(Err(StreamCode::Old)));
    assert_eq!(aborted(&inside), Some(StreamCode::Old));
    assert_eq!(t.cached_bytes(), 12);
    // Its producer can no longer write.
    assert_eq!(
        g0.write_frame(frame(1200, 1)),
        Err(ModelError::Aborted(StreamCode::Old))
    );
    // The latest group never ages out, however far time moves.
    g1.write_frame(frame(1_000_000, 4)).unwrap();
    assert_eq!(live(&probe, 0..2), [1]);
}

#[test]
fn max_age_scales_with_the_timescale() {
    // 500 ms at 90 kHz: 45 000 ticks.
    let t = track(Some(info(500, 90_000)), Limits::default());
    let probe = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    let mut g1 = group_with(&t, 1, 90_000, 1);
    g1.write_frame(frame(135_000, 1)).unwrap(); // exactly 45 000 after the successor start
    assert_eq!(live(&probe, 0..2), [0, 1]);
    g1.write_frame(frame(135_001, 1)).unwrap();
    assert_eq!(live(&probe, 0..2), [1]);
}

#[test]
fn age_counts_from_the_successor_start_not_the_group_itself() {
    let t = track(Some(info(1000, 1000)), Limits::default());
    let probe = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    // Group 0 started 5000 ticks ago, but its successor has no frame yet: it stays.
    let mut g1 = t.create_group(1).unwrap();
    let mut g2 = group_with(&t, 2, 5000, 1);
    assert_eq!(live(&probe, 0..3), [0, 1, 2]);
    // Group 1 starts late: group 0 ages against group 1's start, not its own.
    g1.write_frame(frame(4500, 1)).unwrap();
    assert_eq!(live(&probe, 0..3), [0, 1, 2]);
    g2.write_frame(frame(5501, 1)).unwrap(); // 1001 after group 1 started, 501 after group 2
    assert_eq!(live(&probe, 0..3), [1, 2]);
    g2.write_frame(frame(6001, 1)).unwrap(); // 1001 after group 2 started
    assert_eq!(live(&probe, 0..3), [2]);
}

#[test]
fn a_huge_max_age_saturates_instead_of_overflowing() {
    let t = track(Some(info(u64::MAX, u64::MAX)), Limits::default());
    let probe = t.consume(start(u64::MAX, None));
    let _g0 = group_with(&t, 0, 0, 1);
    let _g1 = group_with(&t, 1, 1, 1);
    let _g2 = group_with(&t, 2, u64::MAX, 1);
    assert_eq!(live(&probe, 0..3), [0, 1, 2]);
    let mut reader = probe.resubscribe(start(u64::MAX, None));
    assert_eq!(ready(&mut reader), [0, 1, 2]);
}

#[test]
fn a_track_without_info_never_ages() {
    let t = track(None, Limits::default());
    let probe = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    let _g1 = group_with(&t, 1, u64::MAX / 2, 1);
    let _g2 = group_with(&t, 2, u64::MAX, 1);
    assert_eq!(live(&probe, 0..3), [0, 1, 2]);
}

#[test]
fn byte_budget_evicts_oldest_with_evicted() {
    let limits = Limits {
        track_cache_bytes: 100,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let probe = t.consume(StartAt::default());
    // Empty groups first so the budget is compared with the latest group empty: the test holds
    // whether or not the latest group counts against the budget.
    let mut g0 = t.create_group(0).unwrap();
    let mut g1 = t.create_group(1).unwrap();
    let mut g2 = t.create_group(2).unwrap();
    let _g3 = t.create_group(3).unwrap();
    g0.write_frame(frame(0, 40)).unwrap();
    g1.write_frame(frame(1, 40)).unwrap();
    let in0 = probe.group(0).unwrap();
    assert_eq!(t.cached_bytes(), 80);
    g2.write_frame(frame(2, 40)).unwrap(); // 120 > 100: group 0 goes
    assert_eq!(live(&probe, 0..4), [1, 2, 3]);
    assert_eq!(t.cached_bytes(), 80);
    assert_eq!(aborted(&in0), Some(StreamCode::Evicted));
    assert_eq!(
        g0.write_frame(frame(3, 1)),
        Err(ModelError::Aborted(StreamCode::Evicted))
    );
    // A budget hit is typed: the session maps it to the wire code.
    assert_eq!(
        ModelError::Aborted(StreamCode::Evicted).stream_code(),
        StreamCode::Evicted
    );
}

#[test]
fn group_budget_evicts_oldest_with_evicted() {
    let limits = Limits {
        max_cached_groups: 2,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let probe = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    let in0 = probe.group(0).unwrap();
    let _g1 = group_with(&t, 1, 1, 1);
    assert_eq!(live(&probe, 0..3), [0, 1]);
    let _g2 = t.create_group(2).unwrap();
    assert_eq!(live(&probe, 0..3), [1, 2]);
    assert_eq!(aborted(&in0), Some(StreamCode::Evicted));
    assert_eq!(t.cached_bytes(), 1);
}

#[test]
fn an_expired_finished_group_still_stops_readers_inside_it() {
    let limits = Limits {
        max_cached_groups: 1,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let probe = t.consume(StartAt::default());
    let mut g0 = t.create_group(0).unwrap();
    g0.write_frame(frame(0, 3)).unwrap();
    g0.write_frame(frame(1, 3)).unwrap();
    g0.finish();
    let mut lagging = probe.group(0).unwrap();
    assert!(frame_result(&mut lagging).is_ready());
    let _g1 = t.create_group(1).unwrap();
    assert_eq!(
        frame_result(&mut lagging),
        Poll::Ready(Err(StreamCode::Evicted))
    );
}

#[test]
fn a_reader_behind_the_cache_skips_to_what_is_left() {
    let limits = Limits {
        max_cached_groups: 2,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let mut slow = t.consume(StartAt::default());
    let mut fast = t.consume(StartAt::default());
    let mut producers = Vec::new();
    assert!(poll(&mut fast).is_pending());
    producers.push(group_with(&t, 0, 0, 1));
    assert_eq!(next(&mut slow), 0);
    assert_eq!(ready(&mut fast), [0]);
    for seq in 1..6 {
        producers.push(group_with(&t, seq, seq, 1));
        assert_eq!(ready(&mut fast), [seq]);
    }
    // Groups 1..=3 left while the slow reader was away: it resumes at 4, never waits for them.
    assert_eq!(ready(&mut slow), [4, 5]);
    assert!(poll(&mut slow).is_pending());
}

// ---------------------------------------------------------------------------------- late join

#[test]
fn a_default_reader_starts_at_the_latest_group() {
    let t = track(Some(ageless()), Limits::default());
    let mut early = t.consume(StartAt::default());
    assert!(poll(&mut early).is_pending());
    let _g: Vec<_> = (0..4).map(|s| group_with(&t, s, s * 100, 1)).collect();
    // The reader that was waiting on an empty track gets every group from the first.
    assert_eq!(ready(&mut early), [0, 1, 2, 3]);
    let mut late = t.consume(StartAt::default());
    assert_eq!(ready(&mut late), [3]);
    let _g4 = group_with(&t, 4, 400, 1);
    assert_eq!(ready(&mut late), [4]);
    assert_eq!(ready(&mut early), [4]);
}

#[test]
fn a_reader_with_max_age_reaches_back_within_its_window() {
    let t = track(Some(ageless()), Limits::default());
    let _g: Vec<_> = (0..4).map(|s| group_with(&t, s, s * 1000, 1)).collect();
    // Newest frame at 3000: a 1500 ms window reaches groups starting at 1500 or later.
    assert_eq!(ready(&mut t.consume(start(1500, None))), [2, 3]);
    assert_eq!(ready(&mut t.consume(start(2000, None))), [1, 2, 3]);
    assert_eq!(ready(&mut t.consume(start(60_000, None))), [0, 1, 2, 3]);
    // A window shorter than the latest group still yields the latest group.
    assert_eq!(ready(&mut t.consume(start(1, None))), [3]);
}

#[test]
fn the_late_join_window_scales_with_the_timescale() {
    let t = track(Some(info(3_600_000, 90_000)), Limits::default());
    let _g: Vec<_> = (0..4).map(|s| group_with(&t, s, s * 90_000, 1)).collect();
    // 1500 ms at 90 kHz = 135 000 ticks back from 270 000.
    assert_eq!(ready(&mut t.consume(start(1500, None))), [2, 3]);
    assert_eq!(ready(&mut t.consume(start(2000, None))), [1, 2, 3]);
}

#[test]
fn a_reader_without_track_info_starts_at_the_latest_group() {
    let t = track(None, Limits::default());
    let _g: Vec<_> = (0..3).map(|s| group_with(&t, s, s, 1)).collect();
    assert_eq!(ready(&mut t.consume(start(60_000, None))), [2]);
}

#[test]
fn a_floor_is_never_crossed() {
    let t = track(Some(ageless()), Limits::default());
    let _g: Vec<_> = (0..4).map(|s| group_with(&t, s, s * 1000, 1)).collect();
    assert_eq!(ready(&mut t.consume(start(60_000, Some(2)))), [2, 3]);
    assert_eq!(ready(&mut t.consume(start(0, Some(3)))), [3]);

    // A floor above everything cached waits for the floor.
    let mut ahead = t.consume(start(0, Some(10)));
    let mut ahead_aged = t.consume(start(60_000, Some(10)));
    assert!(poll(&mut ahead).is_pending());
    assert!(poll(&mut ahead_aged).is_pending());
    let _g8 = group_with(&t, 8, 8000, 1);
    let _g12 = group_with(&t, 12, 12_000, 1);
    let _g10 = group_with(&t, 10, 10_000, 1); // a straggler, but at the floor
    let _g9 = group_with(&t, 9, 9000, 1);
    // The live-edge reader never takes 10, below the first group it was given; the reader
    // reaching back takes it (within its max age, at its floor) but never 9, below the floor.
    assert_eq!(ready(&mut ahead), [12]);
    assert_eq!(ready(&mut ahead_aged), [12, 10]);

    // A reader whose floor sits between cached groups.
    let mut mid = t.consume(start(60_000, Some(9)));
    // It starts at 12, the first cached group (in arrival order) at or above its floor, then
    // takes 10 and 9, which arrived after 12 and are within its reach.
    assert_eq!(ready(&mut mid), [12, 10, 9]);
    // A live-edge reader with the same floor gets 12 only.
    assert_eq!(ready(&mut t.consume(start(0, Some(9)))), [12]);
}

// ------------------------------------------------------------------------------ arrival order

#[test]
fn out_of_order_groups_are_delivered_once_and_stragglers_below_the_first_are_skipped() {
    let t = track(Some(ageless()), Limits::default());
    let mut reader = t.consume(StartAt::default());
    let mut g = Vec::new();
    g.push(group_with(&t, 5, 500, 1));
    assert_eq!(ready(&mut reader), [5]);
    g.push(group_with(&t, 3, 300, 1)); // below the first delivered group: never sent
    assert!(poll(&mut reader).is_pending());
    g.push(group_with(&t, 8, 800, 1));
    g.push(group_with(&t, 6, 600, 1)); // a straggler above the first group is still useful
    g.push(group_with(&t, 7, 700, 1));
    assert_eq!(ready(&mut reader), [8, 6, 7]);
    assert!(poll(&mut reader).is_pending());
    // The straggler below is cached all the same, for fetches.
    assert_eq!(reader.group(3).unwrap().sequence(), 3);
    assert_eq!(t.latest_sequence(), Some(8));

    // A late joiner starts at the highest sequence, not the last to arrive, and what arrived
    // after it is below its first group.
    let mut late = t.consume(StartAt::default());
    assert_eq!(ready(&mut late), [8]);
}

#[test]
fn a_reader_reaching_back_takes_history_that_arrives_after_the_live_edge() {
    // A publisher sends its newest group first: a reader with a max age is first given the
    // live edge, then the older groups within its reach as they land.
    let t = track(Some(ageless()), Limits::default());
    let mut history = t.consume(start(60_000, None));
    let mut live = t.consume(start(0, None));
    let _g: Vec<_> = [4, 3, 2, 1, 0]
        .into_iter()
        .map(|s| group_with(&t, s, s * 1000, 1))
        .collect();
    assert_eq!(ready(&mut history), [4, 3, 2, 1, 0]);
    assert_eq!(ready(&mut live), [4]);

    // Beyond the reach, a straggler is skipped: at 2 s, group 0 (at 0 s) is too old.
    let t = track(Some(ageless()), Limits::default());
    let mut short = t.consume(start(1500, None));
    let _g: Vec<_> = [2, 1, 0]
        .into_iter()
        .map(|s| group_with(&t, s, s * 1000, 1))
        .collect();
    assert_eq!(ready(&mut short), [2, 1]);
}

#[test]
fn duplicate_sequence_is_refused() {
    let t = track(Some(ageless()), Limits::default());
    let _g1 = t.create_group(1).unwrap();
    let err = t.create_group(1).unwrap_err();
    assert_eq!(err, ModelError::DuplicateGroup(1));
    assert_eq!(err.stream_code(), StreamCode::Cancelled);
    let g2 = t.append_group().unwrap();
    assert_eq!(g2.sequence(), 2);
    assert_eq!(
        t.create_group(2).unwrap_err(),
        ModelError::DuplicateGroup(2)
    );
}

#[test]
fn append_group_follows_the_highest_sequence() {
    let t = track(Some(ageless()), Limits::default());
    assert_eq!(t.append_group().unwrap().sequence(), 0);
    let _g = t.create_group(10).unwrap();
    let _h = t.create_group(4).unwrap();
    assert_eq!(t.append_group().unwrap().sequence(), 11);
}

#[test]
fn an_expired_sequence_is_never_delivered_twice() {
    let limits = Limits {
        max_cached_groups: 1,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let mut reader = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    assert_eq!(ready(&mut reader), [0]);
    let _g1 = group_with(&t, 1, 1, 1);
    assert_eq!(ready(&mut reader), [1]);
    assert!(reader.group(0).is_none());
    // Group 0 was evicted; an upstream that sends it again must not reach the reader twice.
    if let Ok(again) = t.create_group(0) {
        drop(again);
    }
    assert_eq!(ready(&mut reader), Vec::<u64>::new());
}

#[test]
fn stragglers_after_the_latest_group_respect_the_group_budget() {
    let limits = Limits {
        max_cached_groups: 2,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let probe = t.consume(StartAt::default());
    let _top = group_with(&t, 100, 100, 1);
    let _g: Vec<_> = (0..50).map(|s| group_with(&t, s, s, 1)).collect();
    let cached = live(&probe, 0..=100);
    assert!(
        cached.len() <= 2,
        "{} groups cached: {cached:?}",
        cached.len()
    );
    assert!(cached.contains(&100));
}

// ------------------------------------------------------------------------------------ the end

#[test]
fn finish_delivers_the_rest_then_ends() {
    let t = track(Some(ageless()), Limits::default());
    let mut reader = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    assert_eq!(next(&mut reader), 0);
    let (flag, w) = Flag::new();
    assert!(reader.poll_group(&mut Context::from_waker(&w)).is_pending());
    let _g1 = group_with(&t, 1, 1, 1);
    assert!(flag.woken(), "a new group wakes a waiting reader");
    let _g2 = group_with(&t, 2, 2, 1);
    assert_eq!(reader.end(), None);
    t.finish();
    assert!(t.is_closed());
    assert!(reader.is_closed());
    assert_eq!(reader.end(), Some(3));
    assert_eq!(ready(&mut reader), [1, 2]);
    assert!(matches!(poll(&mut reader), Poll::Ready(Ok(None))));
    assert!(matches!(poll(&mut reader), Poll::Ready(Ok(None))));
    assert_eq!(t.create_group(3).unwrap_err(), ModelError::Ended);
    assert_eq!(
        reader
            .poll_closed(&mut Context::from_waker(&noop_waker()))
            .map(|r| r.is_ok()),
        Poll::Ready(true)
    );
    // A reader joining a finished track still gets the latest group, then the end.
    let mut late = t.consume(StartAt::default());
    assert_eq!(ready(&mut late), [2]);
    assert!(matches!(poll(&mut late), Poll::Ready(Ok(None))));
}

#[test]
fn finish_wakes_a_waiting_reader_and_end_is_exclusive() {
    let t = track(Some(ageless()), Limits::default());
    let mut reader = t.consume(StartAt::default());
    let (flag, w) = Flag::new();
    assert!(reader.poll_group(&mut Context::from_waker(&w)).is_pending());
    t.finish();
    assert!(flag.woken());
    assert_eq!(reader.end(), Some(0)); // no group ever: the end is 0
    assert!(matches!(poll(&mut reader), Poll::Ready(Ok(None))));

    let t = track(Some(ageless()), Limits::default());
    let _g7 = t.create_group(7).unwrap();
    let _g3 = t.create_group(3).unwrap();
    t.finish();
    t.abort(StreamCode::Internal); // the first close wins
    assert_eq!(t.consume(StartAt::default()).end(), Some(8));
}

#[test]
fn abort_gives_readers_the_code() {
    let t = track(Some(ageless()), Limits::default());
    let mut reader = t.consume(StartAt::default());
    let _g0 = group_with(&t, 0, 0, 1);
    assert_eq!(next(&mut reader), 0);
    let (flag, w) = Flag::new();
    assert!(reader.poll_group(&mut Context::from_waker(&w)).is_pending());
    t.abort(StreamCode::GoingAway);
    assert!(flag.woken());
    assert!(matches!(
        poll(&mut reader),
        Poll::Ready(Err(StreamCode::GoingAway))
    ));
    assert_eq!(reader.end(), None);
    assert_eq!(
        reader.poll_closed(&mut Context::from_waker(&noop_waker())),
        Poll::Ready(Err(StreamCode::GoingAway))
    );
    assert_eq!(t.create_group(1).unwrap_err(), ModelError::Ended);
    t.finish(); // too late: still aborted
    assert_eq!(reader.end(), None);
}

#[test]
fn dropping_the_producer_cancels_the_track() {
    let t = track(None, Limits::default());
    let mut reader = t.consume(StartAt::default());
    assert!(reader.info().now_or_never().is_none());
    drop(t);
    assert!(matches!(
        poll(&mut reader),
        Poll::Ready(Err(StreamCode::Cancelled))
    ));
    assert_eq!(
        reader.info().now_or_never(),
        Some(Err(StreamCode::Cancelled))
    );
}

#[test]
fn track_info_arrives_later_and_wakes_readers() {
    let t = track(None, Limits::default());
    assert_eq!(t.name(), "t");
    let reader = t.consume(StartAt::default());
    assert_eq!(reader.name(), "t");
    let (flag, w) = Flag::new();
    assert!(reader.poll_info(&mut Context::from_waker(&w)).is_pending());
    t.set_info(info(250, 48_000));
    assert!(flag.woken());
    assert_eq!(reader.info().now_or_never(), Some(Ok(info(250, 48_000))));
    assert_eq!(t.info(), Some(info(250, 48_000)));
    // A finished track that never had info reports NotFound.
    let t = track(None, Limits::default());
    t.finish();
    assert_eq!(
        t.consume(StartAt::default()).info().now_or_never(),
        Some(Err(StreamCode::NotFound))
    );
}

// ---------------------------------------------------------------------------------- consumers

#[test]
fn consumers_are_counted_across_clones_resubscribes_and_drops() {
    let t = track(Some(ageless()), Limits::default());
    assert_eq!(t.consumers(), 0);
    assert!(t.unused().now_or_never().is_some());
    let a = t.consume(StartAt::default());
    let b = a.clone();
    let c = b.resubscribe(start(100, Some(1)));
    assert_eq!(t.consumers(), 3);
    let (flag, w) = Flag::new();
    assert!(t.poll_unused(&mut Context::from_waker(&w)).is_pending());
    drop(a);
    drop(c);
    assert_eq!(t.consumers(), 1);
    assert!(!flag.woken());
    assert!(t.poll_unused(&mut Context::from_waker(&w)).is_pending());
    drop(b);
    assert!(flag.woken());
    assert_eq!(t.consumers(), 0);
    assert!(t.poll_unused(&mut Context::from_waker(&w)).is_ready());
}

#[test]
fn a_clone_keeps_the_cursor() {
    let t = track(Some(ageless()), Limits::default());
    let mut a = t.consume(StartAt::default());
    assert!(poll(&mut a).is_pending());
    let _g0 = group_with(&t, 0, 0, 1);
    let _g1 = group_with(&t, 1, 1, 1);
    assert_eq!(next(&mut a), 0);
    let mut b = a.clone();
    assert_eq!(ready(&mut b), [1]);
    assert_eq!(ready(&mut a), [1]);
}

// -------------------------------------------------------------------------------- group limits

#[test]
fn frame_and_group_limits_are_typed_errors() {
    let limits = Limits {
        max_frame_bytes: 10,
        max_group_bytes: 25,
        max_group_frames: 3,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let mut g = t.create_group(0).unwrap();
    let err = g.write_frame(frame(0, 11)).unwrap_err();
    assert_eq!(err, ModelError::FrameTooLarge(11));
    assert_eq!(err.stream_code(), StreamCode::FrameTooLarge);
    g.write_frame(frame(0, 10)).unwrap();
    g.write_frame(frame(1, 10)).unwrap();
    let err = g.write_frame(frame(2, 6)).unwrap_err(); // 26 bytes > 25
    assert_eq!(err, ModelError::GroupTooLarge);
    assert_eq!(err.stream_code(), StreamCode::GroupTooLarge);
    g.write_frame(frame(2, 5)).unwrap(); // exactly 25, third frame
    assert_eq!(g.write_frame(frame(3, 0)), Err(ModelError::GroupTooLarge)); // fourth frame
                                                                            // Refused frames were neither stored nor counted.
    assert_eq!(t.cached_bytes(), 25);
    let mut reader = g.consume();
    let mut got = Vec::new();
    while let Poll::Ready(Ok(Some(f))) = frame_result(&mut reader) {
        got.push(f.payload.len());
    }
    assert_eq!(got, [10, 10, 5]);
}

#[test]
fn frames_are_shared_and_groups_end_cleanly_or_cancelled() {
    let t = track(Some(ageless()), Limits::default());
    let mut g = t.create_group(0).unwrap();
    let payload = Bytes::from_static(b"hello");
    g.write_frame(Frame {
        timestamp: 9,
        payload: payload.clone(),
    })
    .unwrap();
    let mut r1 = g.consume();
    let mut r2 = t.consume(StartAt::default()).group(0).unwrap();
    let f1 = match frame_result(&mut r1) {
        Poll::Ready(Ok(Some(f))) => f,
        other => panic!("{other:?}"),
    };
    let f2 = match frame_result(&mut r2) {
        Poll::Ready(Ok(Some(f))) => f,
        other => panic!("{other:?}"),
    };
    // One copy of the data whatever the number of readers.
    assert_eq!(f1.payload.as_ptr(), payload.as_ptr());
    assert_eq!(f2.payload.as_ptr(), payload.as_ptr());
    assert_eq!(r1.frame_index(), 1);
    assert!(frame_result(&mut r1).is_pending());
    g.finish();
    assert_eq!(frame_result(&mut r1), Poll::Ready(Ok(None)));
    assert_eq!(aborted(&r1), None);

    let g = t.create_group(1).unwrap();
    let mut r = g.consume();
    drop(g); // a producer dropped without finish cancels the group
    assert_eq!(
        frame_result(&mut r),
        Poll::Ready(Err(StreamCode::Cancelled))
    );
    let g = t.create_group(2).unwrap();
    let r = g.consume();
    g.abort(StreamCode::DeliveryTimeout);
    assert_eq!(aborted(&r), Some(StreamCode::DeliveryTimeout));
}

// -------------------------------------------------------------------------------------------
// Random operations against a reference cache.

#[derive(Clone, Debug)]
enum Op {
    /// Create the group `gap` sequences past the highest so far (in-order arrival).
    Create {
        gap: u64,
    },
    /// Create group `seq` (any order; may repeat a cached or an expired sequence).
    CreateAt {
        seq: u64,
    },
    /// Write a frame `advance` ms after the newest timestamp (or before it, when `back`).
    Write {
        group: usize,
        advance: u64,
        back: bool,
        len: usize,
    },
    FinishGroup(usize),
    DropGroup(usize),
    Reader {
        max_age_ms: u64,
        floor: Option<u64>,
        eager: bool,
    },
    Poll(usize),
    DropReader(usize),
    Finish,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    info: Option<TrackInfo>,
    cache_bytes: usize,
    max_groups: usize,
}

fn config() -> impl Strategy<Value = Config> {
    (
        proptest::option::weighted(
            0.8,
            (
                prop_oneof![Just(0u64), 1..40u64],
                prop_oneof![Just(1000u64), Just(90_000u64)],
            ),
        ),
        prop_oneof![Just(usize::MAX), 0..120usize],
        prop_oneof![Just(usize::MAX), 0..6usize],
    )
        .prop_map(|(info, cache_bytes, max_groups)| Config {
            info: info.map(|(age, timescale)| TrackInfo {
                priority: 0,
                max_age_ms: age * 25,
                timescale,
            }),
            cache_bytes,
            max_groups,
        })
}

fn op(out_of_order: bool) -> impl Strategy<Value = Op> {
    let create = if out_of_order {
        prop_oneof![
            (0..3u64).prop_map(|gap| Op::Create { gap }),
            (0..24u64).prop_map(|seq| Op::CreateAt { seq }),
        ]
        .boxed()
    } else {
        (0..3u64).prop_map(|gap| Op::Create { gap }).boxed()
    };
    // Timestamps move in ms (scaled to the timescale); multiples of 25 hit the age boundaries.
    let advance = prop_oneof![0..400u64, (0..16u64).prop_map(|x| x * 25)];
    let back = proptest::bool::weighted(if out_of_order { 0.2 } else { 0.0 });
    let reach = prop_oneof![Just(0u64), 1..1500u64, (1..60u64).prop_map(|x| x * 25)];
    prop_oneof![
        4 => create,
        8 => (any::<usize>(), advance, back, 0..40usize)
            .prop_map(|(group, advance, back, len)| Op::Write { group, advance, back, len }),
        2 => any::<usize>().prop_map(Op::FinishGroup),
        1 => any::<usize>().prop_map(Op::DropGroup),
        2 => (reach, proptest::option::weighted(0.3, 0..20u64), any::<bool>())
            .prop_map(|(max_age_ms, floor, eager)| Op::Reader { max_age_ms, floor, eager }),
        3 => any::<usize>().prop_map(Op::Poll),
        1 => any::<usize>().prop_map(Op::DropReader),
        1 => Just(Op::Finish),
    ]
}

/// One group as the reference cache sees it.
#[derive(Debug)]
struct RefGroup {
    seq: u64,
    start: Option<u64>,
    bytes: usize,
    /// `Some(code)` once the cache let it go.
    expired: Option<StreamCode>,
}

struct RefReader {
    real: TrackConsumer,
    start: StartAt,
    eager: bool,
    delivered: Vec<u64>,
    /// For eager readers (poll after every operation): what they must have delivered.
    expected: Vec<u64>,
    done: bool,
}

struct Sim {
    cfg: Config,
    out_of_order: bool,
    track: TrackProducer,
    probe: TrackConsumer,
    /// Every group ever created, in arrival order.
    groups: Vec<RefGroup>,
    /// Open group producers with their arrival index.
    open: Vec<(usize, GroupProducer)>,
    /// A reader held for every group, to see its expiry code.
    held: Vec<GroupConsumer>,
    latest: Option<(u64, usize)>,
    newest: u64,
    closed: bool,
    readers: Vec<RefReader>,
}

impl Sim {
    fn new(cfg: Config, out_of_order: bool) -> Self {
        let limits = Limits {
            track_cache_bytes: cfg.cache_bytes,
            max_cached_groups: cfg.max_groups,
            ..Limits::default()
        };
        let track = TrackProducer::new("sim", cfg.info, limits);
        let probe = track.consume(StartAt::default());
        Sim {
            cfg,
            out_of_order,
            track,
            probe,
            groups: Vec::new(),
            open: Vec::new(),
            held: Vec::new(),
            latest: None,
            newest: 0,
            closed: false,
            readers: Vec::new(),
        }
    }

    fn live(&self) -> impl Iterator<Item = (usize, &RefGroup)> {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.expired.is_none())
    }

    fn ticks(ms: u64, timescale: u64) -> u64 {
        (ms as u128 * timescale as u128 / 1000) as u64
    }

    /// The cache policy, stated plainly: evict the oldest live group (by arrival) that is not
    /// the latest while over a budget, or while its successor started more than max age before
    /// the newest frame. With in-order arrival the latest group is always the last to arrive.
    fn enforce(&mut self) {
        if self.out_of_order {
            self.observe_expiry();
            return;
        }
        loop {
            let live: Vec<usize> = self.live().map(|(i, _)| i).collect();
            let Some(&front) = live.first() else { return };
            if Some(front) == self.latest.map(|(_, i)| i) {
                return;
            }
            let bytes: usize = live.iter().map(|&i| self.groups[i].bytes).sum();
            let over = bytes > self.cfg.cache_bytes || live.len() > self.cfg.max_groups;
            let successor_start = live.get(1).and_then(|&i| self.groups[i].start);
            let aged = match (self.cfg.info, successor_start) {
                (Some(info), Some(start)) => {
                    self.newest.saturating_sub(start) > Self::ticks(info.max_age_ms, info.timescale)
                }
                _ => false,
            };
            if !(over || aged) {
                return;
            }
            self.groups[front].expired = Some(if aged {
                StreamCode::Old
            } else {
                StreamCode::Evicted
            });
        }
    }

    /// Out-of-order arrival: which stragglers stay is not pinned down here (the straggler test
    /// covers the budget); take expiry from the track, checking it is final and coded.
    fn observe_expiry(&mut self) {
        for (g, held) in self.groups.iter_mut().zip(&self.held) {
            let cached = self.probe.group(g.seq).is_some();
            match g.expired {
                Some(_) => assert!(!cached, "expired group {} came back", g.seq),
                None if !cached => {
                    let code = aborted(held);
                    assert!(
                        matches!(code, Some(StreamCode::Old | StreamCode::Evicted)),
                        "group {} left the cache with {code:?}",
                        g.seq
                    );
                    g.expired = code;
                }
                None => {}
            }
        }
    }

    fn position(&self, start: StartAt) -> Option<usize> {
        let (latest_seq, latest_idx) = self.latest?;
        let floor = start.floor.unwrap_or(0);
        match self.cfg.info {
            Some(info) if start.max_age_ms > 0 => {
                let reach = self
                    .newest
                    .saturating_sub(Self::ticks(start.max_age_ms, info.timescale));
                self.live()
                    .find(|(_, g)| g.seq >= floor && g.start.is_none_or(|ts| ts >= reach))
                    .map(|(i, _)| i)
                    .or(Some(latest_idx))
            }
            _ => (latest_seq >= floor).then_some(latest_idx),
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Create { gap } => {
                let seq = self.latest.map(|(s, _)| s + 1 + gap).unwrap_or(gap);
                self.create(seq);
            }
            Op::CreateAt { seq } => self.create(seq),
            Op::Write {
                group,
                advance,
                back,
                len,
            } => {
                if self.open.is_empty() {
                    return;
                }
                let k = group % self.open.len();
                let idx = self.open[k].0;
                let ticks = advance * self.cfg.info.map_or(1, |i| i.timescale / 1000);
                let ts = if back {
                    self.newest.saturating_sub(ticks)
                } else {
                    self.newest + ticks
                };
                let result = self.open[k].1.write_frame(frame(ts, len));
                match self.groups[idx].expired {
                    Some(code) => assert_eq!(result, Err(ModelError::Aborted(code))),
                    None => {
                        result.unwrap();
                        let g = &mut self.groups[idx];
                        g.start.get_or_insert(ts);
                        g.bytes += len;
                        self.newest = self.newest.max(ts);
                        self.enforce();
                    }
                }
            }
            Op::FinishGroup(k) => {
                if !self.open.is_empty() {
                    let k = k % self.open.len();
                    self.open.remove(k).1.finish();
                }
            }
            Op::DropGroup(k) => {
                if !self.open.is_empty() {
                    let k = k % self.open.len();
                    drop(self.open.remove(k));
                }
            }
            Op::Reader {
                max_age_ms,
                floor,
                eager,
            } => {
                let start = StartAt {
                    max_age_ms,
                    floor,
                    ..StartAt::default()
                };
                let floor = floor.unwrap_or(0);
                // Eager readers must deliver exactly this (in-order arrival only).
                let expected = match self.position(start) {
                    Some(from) => self.groups[from..]
                        .iter()
                        .filter(|g| g.expired.is_none() && g.seq >= floor)
                        .map(|g| g.seq)
                        .collect(),
                    None => Vec::new(),
                };
                self.readers.push(RefReader {
                    real: self.track.consume(start),
                    start,
                    eager,
                    delivered: Vec::new(),
                    expected,
                    done: false,
                });
            }
            Op::Poll(k) => {
                if !self.readers.is_empty() {
                    let k = k % self.readers.len();
                    self.poll_reader(k);
                }
            }
            Op::DropReader(k) => {
                if !self.readers.is_empty() {
                    let k = k % self.readers.len();
                    self.readers.remove(k);
                }
            }
            Op::Finish => {
                self.track.finish();
                self.closed = true;
            }
        }
        for k in 0..self.readers.len() {
            if self.readers[k].eager {
                self.poll_reader(k);
            }
        }
        self.check();
    }

    fn create(&mut self, seq: u64) {
        let result = self.track.create_group(seq);
        if self.closed {
            assert_eq!(result.unwrap_err(), ModelError::Ended);
            return;
        }
        if self.live().any(|(_, g)| g.seq == seq) {
            assert_eq!(result.unwrap_err(), ModelError::DuplicateGroup(seq));
            return;
        }
        // Nothing at or below a sequence that already left the cache comes back.
        let expired_through = self
            .groups
            .iter()
            .filter(|g| g.expired.is_some())
            .map(|g| g.seq)
            .max();
        if expired_through.is_some_and(|through| seq <= through) {
            assert_eq!(result.unwrap_err(), ModelError::Expired(seq));
            return;
        }
        let producer = result.unwrap();
        let idx = self.groups.len();
        self.held.push(producer.consume());
        self.groups.push(RefGroup {
            seq,
            start: None,
            bytes: 0,
            expired: None,
        });
        self.open.push((idx, producer));
        if self.latest.is_none_or(|(s, _)| seq > s) {
            self.latest = Some((seq, idx));
        }
        self.enforce();
        // In-order arrival: an eager reader sees every new group.
        if !self.out_of_order {
            for r in &mut self.readers {
                let first = r.expected.first().copied();
                if r.eager && seq >= r.start.floor.unwrap_or(0) && first.is_none_or(|f| seq >= f) {
                    r.expected.push(seq);
                }
            }
        }
    }

    fn poll_reader(&mut self, k: usize) {
        let r = &mut self.readers[k];
        if r.done {
            return;
        }
        loop {
            match poll(&mut r.real) {
                Poll::Ready(Ok(Some(g))) => {
                    let seq = g.sequence();
                    assert!(
                        !r.delivered.contains(&seq),
                        "group {seq} delivered twice: {:?}",
                        r.delivered
                    );
                    assert!(
                        seq >= r.start.floor.unwrap_or(0),
                        "group {seq} below floor {:?}",
                        r.start
                    );
                    // A reader of the live edge never takes a straggler below its first group;
                    // one reaching back takes those within its reach.
                    if let Some(&first) = r.delivered.first() {
                        assert!(
                            seq >= first || r.start.max_age_ms > 0,
                            "straggler {seq} below first delivered {first}"
                        );
                    }
                    // Only cached groups are handed out.
                    let idx = self.groups.iter().rposition(|x| x.seq == seq).unwrap();
                    assert_eq!(
                        self.groups[idx].expired, None,
                        "delivered expired group {seq}"
                    );
                    r.delivered.push(seq);
                }
                Poll::Ready(Ok(None)) => {
                    assert!(self.closed);
                    r.done = true;
                    return;
                }
                Poll::Ready(Err(code)) => panic!("reader failed with {code:?}"),
                Poll::Pending => {
                    assert!(
                        !self.closed,
                        "a finished track never leaves a reader pending"
                    );
                    return;
                }
            }
        }
    }

    fn check(&self) {
        let seqs: BTreeSet<u64> = self.groups.iter().map(|g| g.seq).collect();
        let want: BTreeSet<u64> = self.live().map(|(_, g)| g.seq).collect();
        let got: BTreeSet<u64> = seqs
            .iter()
            .copied()
            .filter(|s| self.probe.group(*s).is_some())
            .collect();
        assert_eq!(got, want, "live groups");
        let bytes: usize = self.live().map(|(_, g)| g.bytes).sum();
        assert_eq!(self.track.cached_bytes(), bytes, "cached bytes");
        if let Some((seq, idx)) = self.latest {
            assert_eq!(self.groups[idx].expired, None, "latest group expired");
            assert_eq!(self.track.latest_sequence(), Some(seq));
        }
        for (g, held) in self.groups.iter().zip(&self.held) {
            if let Some(code) = g.expired {
                assert_eq!(aborted(held), Some(code), "group {} expiry code", g.seq);
            }
        }
        if self.closed {
            let end = self.latest.map(|(s, _)| s + 1).unwrap_or(0);
            assert_eq!(self.probe.end(), Some(end));
        }
        if !self.out_of_order {
            for r in self.readers.iter().filter(|r| r.eager) {
                assert_eq!(r.delivered, r.expected, "eager reader {:?}", r.start);
            }
        }
    }
}

fn run(cfg: Config, ops: Vec<Op>, out_of_order: bool) {
    let mut sim = Sim::new(cfg, out_of_order);
    for op in ops {
        sim.apply(op);
    }
    // Finish: every reader drains what is cached and ends.
    sim.apply(Op::Finish);
    for k in 0..sim.readers.len() {
        sim.poll_reader(k);
        assert!(sim.readers[k].done);
    }
    let consumers = sim.readers.len() + 1;
    assert_eq!(sim.track.consumers(), consumers);
    sim.readers.clear();
    assert_eq!(sim.track.consumers(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// In-order arrival: the live set, bytes, expiry codes and what each eager reader delivers
    /// all match the reference exactly.
    #[test]
    fn cache_matches_reference_in_order(cfg in config(), ops in proptest::collection::vec(op(false), 1..80)) {
        run(cfg, ops, false);
    }

    /// Any arrival order, repeated live sequences and backwards timestamps: expiry is final and
    /// coded, bytes and the latest group stay consistent, and readers never see a group twice,
    /// below their floor, or below the first group they were given.
    #[test]
    fn cache_matches_reference_any_order(cfg in config(), ops in proptest::collection::vec(op(true), 1..80)) {
        run(cfg, ops, true);
    }
}

#[test]
fn arrived_waits_for_every_owed_sequence_and_counts_what_left_the_cache() {
    let limits = Limits {
        max_cached_groups: 2,
        ..Limits::default()
    };
    let t = track(Some(ageless()), limits);
    let (flag, w) = Flag::new();
    let mut cx = Context::from_waker(&w);
    assert!(t.poll_arrived(&mut cx, 0..0).is_ready(), "nothing owed");
    assert!(t.poll_arrived(&mut cx, 0..3).is_pending());
    for seq in [2, 0] {
        group_with(&t, seq, seq, 1).finish();
    }
    assert!(flag.woken(), "an arrival wakes the waiter");
    assert!(
        t.poll_arrived(&mut cx, 0..3).is_pending(),
        "1 is still owed"
    );
    // Groups 3 and 4 push 0 and 2 out of the two-group cache: what left counts as arrived,
    // and 1 (below what left) can never be accepted again, so nothing below 5 is owed.
    for seq in [3, 4] {
        group_with(&t, seq, seq, 1).finish();
    }
    assert!(t.poll_arrived(&mut cx, 0..5).is_ready());
    // A range far wider than the cache is owed without walking it.
    assert!(t.poll_arrived(&mut cx, 0..u64::MAX).is_pending());
}
