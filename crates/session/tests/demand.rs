//! What a relay asks of its upstream: the SUBSCRIBE it sends carries the demand of the reader
//! that asked for the track, never the empty demand of the TRACK request before it.
//!
//! moq-dev's subscribers send TRACK, wait for TRACK_INFO, then SUBSCRIBE. A relay that opened
//! its upstream subscription on the TRACK asked for the live edge only (max age 0), and the
//! reader's real max age followed in a SUBSCRIBE_UPDATE; a publisher that wrote a burst of
//! groups before that update arrived served only the newest of them (moq-net skips the rest as
//! stale), and the reader waited for the others forever.

mod common;

use common::*;
use starling_model::{StartAt, TrackInfo};
use starling_proto::Version;

/// The reader's max age, longer than the publisher's window (5 s, `TrackInfo::default`).
const READER_MAX_AGE_MS: u64 = 60_000;

fn reaching_back() -> StartAt {
    StartAt {
        max_age_ms: READER_MAX_AGE_MS,
        ..Default::default()
    }
}

/// Subscribe through the relay with a long max age; return what the publisher's track was
/// first asked for, and the publisher (still connected).
async fn first_upstream_demand(version: Version) -> (starling_model::Demand, Publisher) {
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["data"]).await;
    let sub = subscriber(&relay, version).await;
    let _reader = sub.track_from("room/alice", "data", reaching_back()).await;
    let demand = tokio::time::timeout(TIMEOUT, publisher.tracks[0].demand_changed(None))
        .await
        .expect("the relay subscribes upstream in time");
    (demand, publisher)
}

async fn upstream_subscribe_carries_the_readers_max_age(version: Version) {
    let (demand, _publisher) = first_upstream_demand(version).await;
    // The reader's max age, clamped to the publisher's window: never the TRACK request's 0.
    assert_eq!(
        demand.max_age_ms,
        TrackInfo::default().max_age_ms,
        "{version}: the relay's first SUBSCRIBE upstream asked for {demand:?}"
    );
}

#[tokio::test]
async fn lite06_upstream_subscribe_carries_the_readers_max_age() {
    upstream_subscribe_carries_the_readers_max_age(Version::Lite06).await;
}

#[tokio::test]
async fn lite05_upstream_subscribe_carries_the_readers_max_age() {
    upstream_subscribe_carries_the_readers_max_age(Version::Lite05).await;
}

/// Groups the publisher holds before anyone subscribes reach a reader whose max age covers
/// them, through the relay, every one of them.
#[tokio::test]
async fn a_reader_reaching_back_gets_every_cached_group_through_the_relay() {
    let version = Version::Lite06;
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["data"]).await;
    for g in 0..=6u64 {
        let mut group = publisher.tracks[0].create_group(g).unwrap();
        group.write_frame(frame(g * 100, &format!("g{g}"))).unwrap();
        group.finish();
    }
    let sub = subscriber(&relay, version).await;
    let mut track = sub.track_from("room/alice", "data", reaching_back()).await;
    let mut received = Vec::new();
    while received.len() < 7 {
        let (sequence, frames) = read_group(&mut track).await;
        assert_eq!(frames, vec![format!("g{sequence}")]);
        received.push(sequence);
    }
    received.sort_unstable();
    assert_eq!(received, (0..=6).collect::<Vec<_>>());
}
