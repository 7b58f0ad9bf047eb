//! Loss counting: gaps, duplicates, reordering, the memory window, and completion.

use starling_loadgen::loss::{Arrival, LossCounts, SeqTracker, WINDOW};

#[test]
fn in_order_delivery_loses_nothing() {
    let mut t = SeqTracker::expecting_from(0);
    for seq in 0..100 {
        assert_eq!(t.record(seq), Arrival::New { skipped: 0 });
    }
    let counts = t.counts(Some(99));
    assert_eq!(
        counts,
        LossCounts {
            expected: 100,
            received: 100,
            ..Default::default()
        }
    );
    assert!(t.is_complete_through(99));
}

#[test]
fn gaps_are_lost() {
    let mut t = SeqTracker::expecting_from(0);
    for seq in [0, 1, 4, 5, 9] {
        t.record(seq);
    }
    assert_eq!(t.record(12), Arrival::New { skipped: 2 });
    let counts = t.counts(Some(12));
    assert_eq!(counts.expected, 13);
    assert_eq!(counts.received, 6);
    assert_eq!(counts.lost, 7); // 2, 3, 6, 7, 8, 10, 11
    assert!(!t.is_complete_through(12));
    // The tail the publisher sent but never arrived is lost too.
    assert_eq!(t.counts(Some(20)).lost, 15);
}

#[test]
fn a_missing_start_counts_when_subscribed_before_the_run() {
    let mut t = SeqTracker::expecting_from(0);
    assert_eq!(t.record(3), Arrival::New { skipped: 3 });
    assert_eq!(t.counts(Some(3)).lost, 3);
    // A late joiner expects from what it first saw.
    let mut late = SeqTracker::new();
    late.record(3);
    late.record(4);
    assert_eq!(late.counts(Some(4)).lost, 0);
    assert_eq!(late.counts(None).expected, 2);
}

#[test]
fn duplicates_are_counted_once() {
    let mut t = SeqTracker::expecting_from(0);
    t.record(0);
    t.record(1);
    assert_eq!(t.record(1), Arrival::Duplicate);
    assert_eq!(t.record(0), Arrival::Duplicate);
    t.record(2);
    let counts = t.counts(Some(2));
    assert_eq!(counts.received, 3);
    assert_eq!(counts.duplicates, 2);
    assert_eq!(counts.lost, 0);
}

#[test]
fn reordering_is_not_loss() {
    let mut t = SeqTracker::expecting_from(0);
    for seq in [0, 2, 1, 5, 3, 4] {
        t.record(seq);
    }
    let counts = t.counts(Some(5));
    assert_eq!(counts.received, 6);
    assert_eq!(counts.out_of_order, 3); // 1, 3 and 4 each came after a higher sequence
    assert_eq!(counts.lost, 0);
    assert_eq!(counts.duplicates, 0);
    assert!(t.is_complete_through(5));
}

#[test]
fn late_then_duplicate() {
    let mut t = SeqTracker::expecting_from(0);
    t.record(0);
    t.record(3);
    assert_eq!(t.record(2), Arrival::Late);
    assert_eq!(t.record(2), Arrival::Duplicate);
    assert_eq!(t.counts(Some(3)).lost, 1);
}

#[test]
fn the_window_slides_and_old_arrivals_are_stale() {
    let mut t = SeqTracker::expecting_from(0);
    t.record(0);
    t.record(WINDOW + 10);
    // 1 is more than WINDOW behind: cannot tell late from duplicate.
    assert_eq!(t.record(1), Arrival::Stale);
    // Slots reused by newer sequences do not read as seen.
    assert_eq!(t.record(WINDOW + 9), Arrival::Late);
    assert_eq!(t.record(WINDOW + 9), Arrival::Duplicate);
    // Sliding one step at a time clears the slots passed.
    let mut t = SeqTracker::expecting_from(0);
    for seq in 0..3 * WINDOW {
        assert_eq!(t.record(seq), Arrival::New { skipped: 0 }, "seq {seq}");
    }
    assert_eq!(t.record(3 * WINDOW - 1), Arrival::Duplicate);
    assert!(t.is_complete_through(3 * WINDOW - 1));
}

#[test]
fn nothing_received_is_all_lost() {
    let t = SeqTracker::expecting_from(0);
    assert_eq!(t.counts(Some(9)).lost, 10);
    assert_eq!(t.counts(None).expected, 0);
    assert!(!t.is_complete_through(0));
}

#[test]
fn counts_add_up() {
    let mut total = LossCounts::default();
    let a = LossCounts {
        expected: 10,
        received: 8,
        lost: 2,
        duplicates: 1,
        out_of_order: 0,
        stale: 0,
    };
    total.add(&a);
    total.add(&a);
    assert_eq!(total.expected, 20);
    assert_eq!(total.lost, 4);
    assert_eq!(total.duplicates, 2);
}
