//! The relay-wide cache budget: many tracks, each within its own bounds, cannot together hold
//! more than the budget; a track holding more than its share gives up its own groups before
//! a quiet track's stalest ones leave; what a track held leaves with it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use starling_model::{
    BroadcastProducer, CacheBudget, Frame, Limits, StartAt, TrackInfo, TrackProducer,
};
use starling_proto::StreamCode;

const KIB: usize = 1024;

fn info() -> TrackInfo {
    TrackInfo {
        max_age_ms: u64::MAX / 1000,
        ..TrackInfo::default()
    }
}

fn write(track: &TrackProducer, sequence: u64, bytes: usize) {
    let mut group = track.create_group(sequence).unwrap();
    group
        .write_frame(Frame {
            timestamp: sequence,
            payload: Bytes::from(vec![0u8; bytes]),
        })
        .unwrap();
    group.finish();
}

#[test]
fn many_tracks_together_stay_within_the_budget() {
    let budget = Arc::new(CacheBudget::new(256 * KIB));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    // 64 tracks x 16 groups x 4 KiB = 4 MiB offered, each track far within its own 64 MiB.
    let tracks: Vec<_> = (0..64)
        .map(|i| broadcast.create_track(&format!("t{i}"), info()))
        .collect();
    for sequence in 0..16 {
        for track in &tracks {
            write(track, sequence, 4 * KIB);
            assert!(budget.used() <= budget.limit(), "{} held", budget.used());
        }
    }
    let cached: usize = tracks.iter().map(|t| t.stats().cached_bytes).sum();
    assert!(cached <= 256 * KIB, "{cached} bytes cached");
    assert!(
        cached > 128 * KIB,
        "the budget is used, not emptied: {cached}"
    );
    assert!(budget.pressed.load(Ordering::Relaxed) > 900);
    assert_eq!(
        budget.evicted.load(Ordering::Relaxed),
        0,
        "no track hit its own bound"
    );
}

#[test]
fn a_track_over_its_share_gives_up_its_own_groups_before_a_quiet_tracks() {
    // Room for about three 10 KiB groups; two tracks, so a share is 16 KiB.
    let budget = Arc::new(CacheBudget::new(32 * KIB));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    let quiet = broadcast.create_track("quiet", info());
    let busy = broadcast.create_track("busy", info());
    write(&quiet, 0, 10 * KIB);
    let mut reader = quiet.consume(StartAt::default());
    write(&busy, 0, 10 * KIB);
    write(&busy, 1, 10 * KIB);
    // The next group does not fit. The quiet track's group is the stalest, but the busy
    // track holds more than its share: its own oldest goes.
    write(&busy, 2, 10 * KIB);
    assert_eq!(
        quiet.stats().cached_groups,
        1,
        "the quiet track keeps its group"
    );
    assert_eq!(busy.stats().cached_groups, 2);
    assert_eq!(busy.stats().expired_through, Some(0));
    assert_eq!(budget.pressed.load(Ordering::Relaxed), 1);
    for sequence in 3..20 {
        write(&busy, sequence, 10 * KIB);
        assert!(budget.used() <= budget.limit());
    }
    assert_eq!(quiet.stats().cached_groups, 1);
    assert_eq!(ready_group(&mut reader), Some(0), "still delivered");
}

#[test]
fn a_track_over_its_share_sheds_even_when_another_track_goes_over() {
    // Three tracks, a share of about 13 KiB: the busy one holds 20 KiB, the stalest (old)
    // and the one whose charge goes over (fresh) hold little.
    let budget = Arc::new(CacheBudget::new(40 * KIB));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    let old = broadcast.create_track("old", info());
    let busy = broadcast.create_track("busy", info());
    let fresh = broadcast.create_track("fresh", info());
    write(&old, 0, 8 * KIB);
    write(&busy, 0, 10 * KIB);
    write(&busy, 1, 10 * KIB);
    write(&fresh, 0, 8 * KIB);
    write(&fresh, 1, 4 * KIB);
    assert_eq!(old.stats().cached_groups, 1);
    assert_eq!(fresh.stats().cached_groups, 2);
    assert_eq!(
        busy.stats().cached_groups,
        1,
        "the busy track shed its oldest"
    );
    assert_eq!(busy.stats().expired_through, Some(0));
}

#[test]
fn a_reader_inside_a_pressed_group_stops_with_evicted() {
    let budget = Arc::new(CacheBudget::new(16 * KIB));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    let track = broadcast.create_track("t", info());
    write(&track, 0, 10 * KIB);
    let mut reader = track.consume(StartAt::default());
    let mut group = poll_now(|cx| reader.poll_group(cx)).unwrap().unwrap();
    write(&track, 1, 10 * KIB);
    assert_eq!(
        poll_now(|cx| group.poll_frame(cx)).map(|f| f.map(|_| ())),
        Err(StreamCode::Evicted)
    );
}

#[test]
fn what_a_track_held_leaves_with_it() {
    let budget = Arc::new(CacheBudget::new(usize::MAX));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    let track = broadcast.create_track("t", info());
    for sequence in 0..10 {
        write(&track, sequence, KIB);
    }
    assert!(budget.used() >= 10 * KIB);
    assert_eq!(budget.tracks(), 1);
    drop(track);
    drop(broadcast);
    assert_eq!(budget.used(), 0);
    assert_eq!(budget.tracks(), 0, "the index holds no dead track");
}

/// Poll once with a no-op waker.
fn poll_now<T>(f: impl FnOnce(&mut std::task::Context<'_>) -> std::task::Poll<T>) -> T {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f(&mut cx) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => panic!("not ready"),
    }
}

/// The reader's next group if one is ready now.
fn ready_group(reader: &mut starling_model::TrackConsumer) -> Option<u64> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match reader.poll_group(&mut cx) {
        std::task::Poll::Ready(Ok(Some(group))) => Some(group.sequence()),
        _ => None,
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write { track: usize, bytes: usize },
    Drop(usize),
}

proptest! {
    /// Random writes and drops over several tracks: the total never passes the budget once a
    /// write returns, and everything comes back when the tracks go.
    #[test]
    fn the_budget_holds_under_random_load(ops in proptest::collection::vec(
        prop_oneof![
            (0usize..6, 1usize..6000).prop_map(|(track, bytes)| Op::Write { track, bytes }),
            (0usize..6).prop_map(Op::Drop),
        ],
        1..200,
    )) {
        let budget = Arc::new(CacheBudget::new(20 * KIB));
        let broadcast = BroadcastProducer::new(Limits { max_cached_groups: 4, ..Limits::default() })
            .with_cache_budget(budget.clone());
        let mut tracks: Vec<Option<(TrackProducer, u64)>> = (0..6).map(|_| None).collect();
        let mut created = 0;
        for op in ops {
            match op {
                Op::Write { track, bytes } => {
                    let slot = tracks[track].get_or_insert_with(|| {
                        created += 1;
                        (broadcast.create_track(&format!("t{created}"), info()), 0)
                    });
                    write(&slot.0, slot.1, bytes);
                    slot.1 += 1;
                }
                Op::Drop(track) => tracks[track] = None,
            }
            prop_assert!(budget.used() <= budget.limit());
        }
        drop(tracks);
        drop(broadcast);
        prop_assert_eq!(budget.used(), 0);
        prop_assert_eq!(budget.tracks(), 0);
    }
}

#[test]
fn a_reader_waiting_on_a_frame_still_arriving_stops_with_evicted_when_its_group_is_pressed() {
    let budget = Arc::new(CacheBudget::new(200 * KIB));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    let track = broadcast.create_track("t", info());
    let mut reader = track.consume(StartAt::default());
    let mut group = track.create_group(0).unwrap();
    group.begin_frame(0, 128 * KIB).unwrap();
    group.write_chunk(&[0u8; 1024]).unwrap();
    let mut inside = poll_now(|cx| reader.poll_group(cx)).unwrap().unwrap();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(
        inside.poll_frame(&mut cx).is_pending(),
        "the frame is still arriving"
    );
    // The next group's frame, charged at its declared size, takes the total over: the
    // stalest group (the one still arriving) goes.
    let mut next = track.create_group(1).unwrap();
    next.begin_frame(1, 128 * KIB).unwrap();
    assert_eq!(
        poll_now(|cx| inside.poll_frame(cx)).map(|f| f.map(|_| ())),
        Err(StreamCode::Evicted)
    );
    assert!(
        group.write_chunk(&[0u8; 1024]).is_err(),
        "its pieces are refused"
    );
    assert_eq!(
        poll_now(|cx| reader.poll_group(cx))
            .unwrap()
            .unwrap()
            .sequence(),
        1,
        "the reader moves on to the next group"
    );
}

#[test]
fn a_track_over_its_share_keeps_its_latest_group_even_when_it_arrived_first() {
    let budget = Arc::new(CacheBudget::new(250 * KIB));
    let broadcast = BroadcastProducer::new(Limits::default()).with_cache_budget(budget.clone());
    let quiet = broadcast.create_track("quiet", info());
    let busy = broadcast.create_track("busy", info());
    write(&quiet, 0, 10 * KIB);
    // Group 3 arrives before group 2; together they take the total over.
    write(&busy, 3, 128 * KIB);
    write(&busy, 2, 128 * KIB);
    assert_eq!(busy.stats().cached_groups, 1);
    let mut reader = busy.consume(StartAt::default());
    assert_eq!(ready_group(&mut reader), Some(3), "the latest group stays");
    assert_eq!(quiet.stats().cached_groups, 1);
}
