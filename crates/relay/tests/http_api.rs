//! The HTTP API over real sockets: `/announced` listings by prefix and `/fetch` of one group
//! (latest, numbered and cached, expired, unknown, outside the root, and a broadcast that is
//! announced only after the fetch started), with moq-relay 0.17.10's status codes.

use std::net::SocketAddr;
use std::time::Duration;

use starling_model::{BroadcastProducer, Limits, Origin, Route, StartAt, TrackInfo};
use starling_proto::{Path, Role, Version};
use starling_relay::{HttpConfig, RelayConfig};
use starling_session::{random_hop, SessionConfig};

mod common;
mod http_support;

use common::{bind_relay, session, within};
use http_support::{get, interests_reach, routed, write_group, Publisher};

/// A running relay: its raw QUIC URL, its TCP (HTTP) address and its origin.
async fn relay(http: HttpConfig) -> (url::Url, SocketAddr, Origin) {
    let (relay, url) = bind_relay(RelayConfig {
        http_api: http,
        ..Default::default()
    })
    .await;
    let addr = relay.local_addr().unwrap();
    let origin = relay.origin().clone();
    tokio::spawn(relay.run());
    (url, addr, origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announced_lists_live_paths_by_whole_segment_prefix() {
    let (url, addr, origin) = relay(HttpConfig::default()).await;
    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    for path in ["room/alice", "room/bob", "roomy/carol"] {
        publisher.broadcast(path);
    }
    // Clients never announce hidden paths to the relay; in-process publishers can.
    let hidden = BroadcastProducer::new(Limits::default());
    let _hidden_routes: Vec<_> = [".hidden/x", "room/.secret"]
        .into_iter()
        .map(|p| {
            let path = Path::new(p).unwrap();
            origin
                .publish(path, hidden.consume(), Route::local())
                .unwrap()
        })
        .collect();
    routed(
        &origin,
        &[
            "room/alice",
            "room/bob",
            "roomy/carol",
            ".hidden/x",
            "room/.secret",
        ],
    )
    .await;

    let all = get(addr, "/announced").await;
    assert_eq!(all.status, 200);
    assert_eq!(
        all.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(all.header("access-control-allow-origin"), Some("*"));
    // Sorted, newline-separated, no trailing newline; dot-segments below the prefix hidden.
    assert_eq!(all.text(), "room/alice\nroom/bob\nroomy/carol");

    // Relative to the prefix, whole segments only: `room` never covers `roomy`.
    assert_eq!(get(addr, "/announced/room").await.text(), "alice\nbob");
    assert_eq!(get(addr, "/announced/roomy").await.text(), "carol");
    // Naming the hidden segment lists what is under it.
    assert_eq!(get(addr, "/announced/.hidden").await.text(), "x");
    let none = get(addr, "/announced/nobody").await;
    assert_eq!((none.status, none.text()), (200, String::new()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_serves_the_latest_and_a_cached_numbered_group() {
    let (url, addr, origin) = relay(HttpConfig::default()).await;
    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let b = publisher.broadcast("room/alice");
    let track = publisher.track(b, "chat", TrackInfo::default());
    write_group(&track, 0, 0, &["zero"]);
    routed(&origin, &["room/alice"]).await;

    // A subscriber makes the relay pull the track; each group is published once the previous
    // one went through, so the relay's cache holds all three, in order.
    let sub_origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(sub_origin.clone());
    let _subscriber = session(&url, Version::Lite06, Role::Subscriber, config).await;
    routed(&sub_origin, &["room/alice"]).await;
    let broadcast = sub_origin
        .consume(&Path::new("room/alice").unwrap(), None)
        .unwrap();
    let mut reader = broadcast
        .subscribe_track("chat", StartAt::default())
        .unwrap();
    let first = within(reader.next_group()).await.unwrap().unwrap();
    assert_eq!(first.sequence(), 0);
    write_group(&track, 1, 1, &["one-a", "one-b"]);
    assert_eq!(
        within(reader.next_group())
            .await
            .unwrap()
            .unwrap()
            .sequence(),
        1
    );
    write_group(&track, 2, 2, &["two-a", "two-b", "two-c"]);
    assert_eq!(
        within(reader.next_group())
            .await
            .unwrap()
            .unwrap()
            .sequence(),
        2
    );

    let latest = get(addr, "/fetch/room/alice/chat?group=latest").await;
    assert_eq!(latest.status, 200);
    // Frame payloads concatenated, unframed, with no content type (as moq-relay).
    assert_eq!(latest.text(), "two-atwo-btwo-c");
    assert_eq!(latest.header("content-type"), None);
    // `group` defaults to latest.
    assert_eq!(
        get(addr, "/fetch/room/alice/chat").await.text(),
        "two-atwo-btwo-c"
    );

    let one = get(addr, "/fetch/room/alice/chat?group=1").await;
    assert_eq!((one.status, one.text()), (200, "one-aone-b".to_string()));
    let zero = get(addr, "/fetch/room/alice/chat?group=0&jwt=ignored").await;
    assert_eq!((zero.status, zero.text()), (200, "zero".to_string()));

    // A group that does not exist yet is not waited for.
    assert_eq!(
        get(addr, "/fetch/room/alice/chat?group=9").await.status,
        404
    );
    // An unknown track of a live broadcast: the publisher refuses it.
    assert_eq!(get(addr, "/fetch/room/alice/nope").await.status, 404);
    // Malformed requests.
    assert_eq!(get(addr, "/fetch/chat").await.status, 400);
    assert_eq!(
        get(addr, "/fetch/room/alice/chat?group=soon").await.status,
        400
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_pulls_a_track_nobody_subscribed_yet() {
    let (url, addr, origin) = relay(HttpConfig::default()).await;
    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let b = publisher.broadcast("cold");
    let track = publisher.track(b, "t", TrackInfo::default());
    write_group(&track, 0, 0, &["a"]);
    write_group(&track, 1, 1, &["b"]);
    routed(&origin, &["cold"]).await;

    // The relay holds nothing of the track: the fetch pulls it, reaching back into what the
    // publisher still caches.
    let old = get(addr, "/fetch/cold/t?group=0").await;
    assert_eq!((old.status, old.text()), (200, "a".to_string()));
    let latest = get(addr, "/fetch/cold/t?group=latest").await;
    assert_eq!((latest.status, latest.text()), (200, "b".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_of_an_expired_group_is_not_found() {
    let (url, addr, origin) = relay(HttpConfig::default()).await;
    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let b = publisher.broadcast("clock");
    // A 10 ms window: a group leaves the cache once its successor started >10 ms earlier.
    let info = TrackInfo {
        max_age_ms: 10,
        ..TrackInfo::default()
    };
    let track = publisher.track(b, "ticks", info);
    routed(&origin, &["clock"]).await;

    let sub_origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(sub_origin.clone());
    let _subscriber = session(&url, Version::Lite06, Role::Subscriber, config).await;
    routed(&sub_origin, &["clock"]).await;
    let mut reader = sub_origin
        .consume(&Path::new("clock").unwrap(), None)
        .unwrap()
        .subscribe_track("ticks", StartAt::default())
        .unwrap();
    // The relay now pulls the track; publish as the subscription flows, 100 ms apart.
    within(reader_ready(&track)).await;
    for (sequence, timestamp) in [(0, 0), (1, 100), (2, 200)] {
        write_group(&track, sequence, timestamp, &[&format!("tick {sequence}")]);
    }
    loop {
        let group = within(reader.next_group()).await.unwrap().unwrap();
        if group.sequence() == 2 {
            break;
        }
    }

    // Group 0 aged out of the relay's cache when group 2 arrived.
    let expired = get(addr, "/fetch/clock/ticks?group=0").await;
    assert_eq!(expired.status, 404);
    let latest = get(addr, "/fetch/clock/ticks?group=2").await;
    assert_eq!((latest.status, latest.text()), (200, "tick 2".to_string()));
}

/// Resolves once the relay subscribed to `track` at the publisher.
async fn reader_ready(track: &starling_model::TrackProducer) {
    while track.consumers() == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_of_an_unknown_broadcast_times_out_with_504() {
    let (_url, addr, _origin) = relay(HttpConfig {
        fetch_timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let started = std::time::Instant::now();
    let response = get(addr, "/fetch/nobody/home/t?group=latest").await;
    assert_eq!(response.status, 504);
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "waited for a route"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_outside_the_request_root_are_unauthorized() {
    let (url, addr, origin) = relay(HttpConfig {
        root: Path::new("room").unwrap(),
        ..Default::default()
    })
    .await;
    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let b = publisher.broadcast("room/a");
    publisher.broadcast("roomy/b");
    let track = publisher.track(b, "t", TrackInfo::default());
    write_group(&track, 0, 0, &["inside"]);
    routed(&origin, &["room/a", "roomy/b"]).await;

    assert_eq!(get(addr, "/fetch/roomy/b/t").await.status, 401);
    assert_eq!(get(addr, "/announced/roomy").await.status, 401);
    assert_eq!(get(addr, "/announced/room").await.text(), "a");
    // A listing above the root is narrowed to what lies under it.
    assert_eq!(get(addr, "/announced").await.text(), "room/a");
    let inside = get(addr, "/fetch/room/a/t").await;
    assert_eq!((inside.status, inside.text()), (200, "inside".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_waits_for_a_broadcast_announced_after_it_started() {
    let (url, addr, origin) = relay(HttpConfig::default()).await;
    let baseline = origin.interest_count();
    let fetch = tokio::spawn(async move { get(addr, "/fetch/late/cam/video?group=latest").await });
    // The fetch is parked on an interest in its path before anything is published.
    interests_reach(&origin, baseline + 1).await;
    assert!(!fetch.is_finished());

    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let b = publisher.broadcast("late/cam");
    let track = publisher.track(b, "video", TrackInfo::default());
    write_group(&track, 0, 0, &["key", "delta"]);

    let response = within(fetch).await.unwrap();
    assert_eq!(
        (response.status, response.text()),
        (200, "keydelta".to_string())
    );
}
