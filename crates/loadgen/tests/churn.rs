//! `starling-load churn` against an in-process relay: every broadcast it starts carries every
//! group of every track to the subscriber, with publishers and subscribers coming and going.

mod common;

use common::{connect_args, start_relay};
use starling_loadgen::churn::{self, ChurnArgs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_carries_every_group_of_every_short_lived_track() {
    let url = start_relay().await;
    let args = ChurnArgs {
        tracks: 3,
        groups: 4,
        concurrency: 2,
        subscriber_lifetime: 2,
        duration_secs: 1.5,
        connect: connect_args(),
        ..ChurnArgs::new(url)
    };
    let options = starling_loadgen::RunOptions {
        relay_pids: Vec::new(),
        progress: false,
    };
    let summary = churn::run(&args, &options, std::future::pending())
        .await
        .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let report = summary.churn.clone().unwrap();
    let note = format!("{report:?}, {} groups", summary.frames.groups);
    let broadcasts = report.broadcasts;
    assert!(broadcasts >= 4, "{note}");
    assert_eq!(report.tracks, broadcasts * 3);
    // Broadcasts stopped mid-way by the run's end carried some groups and are not counted.
    assert!(summary.frames.groups >= broadcasts * 3 * 4, "{note}");
    assert!(summary.frames.groups < (broadcasts + 2) * 3 * 4, "{note}");
    // Each publisher and every subscriber (one per two broadcasts per worker) dialed.
    assert!(summary.connections.connected >= broadcasts + broadcasts / 2);
}
