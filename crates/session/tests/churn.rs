//! No retention per group (issue 25 item 5): groups pushed through short-lived tracks on a
//! relay, with publishers and subscribers coming and going, leave nothing behind. moq-relay
//! 0.17.10 keeps about 9 KiB per ingested group (moq-dev/moq#2745); here the process's RSS
//! after the churn is back within 10 % of what it was once the churn had warmed up, and the
//! relay's origin holds no route.
//!
//! The suite pushes 100 000 groups through 10 000 tracks. The full size (1 000 000 groups
//! through 100 000 tracks) runs in release:
//!
//! ```sh
//! CHURN_TRACKS=100000 cargo test --release -p starling-session --test churn -- --nocapture
//! ```

mod common;

use common::*;
use starling_model::TrackConsumer;
use starling_proto::Version;

/// Groups each track carries before it goes.
const GROUPS_PER_TRACK: u64 = 10;
/// Tracks per broadcast: each broadcast is one publisher session.
const TRACKS_PER_BROADCAST: usize = 10;
/// The subscriber session is replaced after this many broadcasts.
const SUBSCRIBER_LIFETIME: usize = 10;

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

fn tracks() -> usize {
    std::env::var("CHURN_TRACKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

/// One track's life: each group written, then read by the subscriber, before the next.
async fn carry(producer: starling_model::TrackProducer, mut consumer: TrackConsumer) -> u64 {
    for sequence in 0..GROUPS_PER_TRACK {
        let mut group = producer.append_group().unwrap();
        group.write_frame(frame(sequence, "abcdefgh")).unwrap();
        group.finish();
        let (read, frames) = read_group(&mut consumer).await;
        assert_eq!((read, frames.len()), (sequence, 1));
    }
    GROUPS_PER_TRACK
}

/// One broadcast's life: a publisher session comes, its tracks carry their groups, and it
/// goes with every track.
async fn broadcast(relay: &Relay, subscriber: &Subscriber, index: usize) -> u64 {
    let name = format!("churn/{index}");
    let names: Vec<String> = (0..TRACKS_PER_BROADCAST).map(|t| format!("t{t}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let publisher = publisher(relay, Version::Lite06, &name, &refs).await;
    let mut consumers = Vec::with_capacity(names.len());
    for track in &names {
        consumers.push(subscriber.track(&name, track).await);
    }
    let Publisher {
        tracks,
        route,
        session,
        ..
    } = publisher;
    let carried = futures::future::join_all(
        tracks
            .into_iter()
            .zip(consumers)
            .map(|(producer, consumer)| carry(producer, consumer)),
    )
    .await;
    drop(route);
    session.close(starling_proto::SessionCode::NoError, "done");
    carried.iter().sum()
}

/// Run broadcasts `from..to`, replacing the subscriber session every
/// [`SUBSCRIBER_LIFETIME`] broadcasts; the groups carried.
async fn churn(relay: &Relay, from: usize, to: usize) -> u64 {
    let mut carried = 0;
    let mut subscriber_session = None;
    for index in from..to {
        if (index - from).is_multiple_of(SUBSCRIBER_LIFETIME) {
            if let Some(old) = subscriber_session.take() {
                let old: Subscriber = old;
                old.session
                    .close(starling_proto::SessionCode::NoError, "done");
            }
            subscriber_session = Some(subscriber(relay, Version::Lite06).await);
        }
        carried += broadcast(relay, subscriber_session.as_ref().unwrap(), index).await;
    }
    if let Some(last) = subscriber_session {
        last.session
            .close(starling_proto::SessionCode::NoError, "done");
    }
    carried
}

/// The relay's origin empties once every publisher has gone.
async fn settle(relay: &Relay) {
    tokio::time::timeout(TIMEOUT * 3, async {
        while !relay.origin.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("every route withdrawn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_through_short_lived_tracks_leave_nothing_behind() {
    let tracks = tracks();
    let broadcasts = tracks / TRACKS_PER_BROADCAST;
    let warm_up = (broadcasts / 10).max(1);
    let relay = Relay::new();

    // Warm up: the allocator's pools, the runtime's workers and the tables reach their
    // working size, then the baseline is taken with nothing live.
    let mut carried = churn(&relay, 0, warm_up).await;
    settle(&relay).await;
    let baseline = rss();

    carried += churn(&relay, warm_up, broadcasts).await;
    settle(&relay).await;
    let after = rss();
    let expected = (broadcasts * TRACKS_PER_BROADCAST) as u64 * GROUPS_PER_TRACK;
    assert_eq!(carried, expected);
    eprintln!(
        "churn: {carried} groups through {tracks} tracks; RSS {} KiB after warm-up, {} KiB \
         after ({:+.1} %)",
        baseline / 1024,
        after / 1024,
        (after as f64 / baseline as f64 - 1.0) * 100.0
    );
    assert!(
        after as f64 <= baseline as f64 * 1.10,
        "RSS grew from {} KiB to {} KiB over {carried} groups",
        baseline / 1024,
        after / 1024
    );
}
