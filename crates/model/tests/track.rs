//! Track group cache: expiry, budgets, reader cursors, late join and limits (the random-operation
//! test against a reference cache is `track_model.rs`).

mod common;

use common::track::*;
use common::Flag;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::noop_waker;
use futures::FutureExt;
use starling_model::{Frame, Limits, ModelError, StartAt};
use starling_proto::StreamCode;

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
