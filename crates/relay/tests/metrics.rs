//! `/metrics` on the internal listener, scraped after a publish/subscribe run: the counters
//! match what the test sent.

mod auth_support;
mod common;
mod http_support;

use std::time::Duration;

use common::{bind_relay, within};
use http_support::{get, sample, write_group, Publisher};
use starling_model::{StartAt, TrackInfo};
use starling_proto::{Role, Version};
use starling_relay::{AuthConfig, RelayConfig};
use starling_session::{random_hop, SessionConfig};

const GROUPS: u64 = 4;
const CACHED: usize = 2;
const FRAMES: &[&str] = &["alpha", "beta", "gamma"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_flowed() {
    let (relay, url) = bind_relay(RelayConfig {
        internal_listen: Some("127.0.0.1:0".parse().unwrap()),
        // The relay's cache keeps two groups, so the others are evicted (and counted).
        model_limits: starling_model::Limits {
            max_cached_groups: CACHED,
            ..Default::default()
        },
        ..RelayConfig::default()
    })
    .await;
    let internal = relay.internal_addr().expect("internal listener");
    let origin = relay.origin().clone();
    tokio::spawn(relay.run());

    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let index = publisher.broadcast("room/alice");
    let track = publisher.track(index, "video", TrackInfo::default());

    http_support::routed(&origin, &["room/alice"]).await;
    let (_subscriber, broadcast) = common::subscribed_broadcast(&url, "room/alice").await;
    let mut reader = broadcast
        .subscribe_track("video", StartAt::default())
        .unwrap();
    for sequence in 0..GROUPS {
        write_group(&track, sequence, sequence * 1000, FRAMES);
        let mut group = within(reader.next_group()).await.unwrap().unwrap();
        while within(group.next_frame()).await.unwrap().is_some() {}
    }

    // Counters are summed from the sessions' own atomics at scrape time; the last write's
    // count lands just after its bytes, so scrape until it shows (bounded).
    let frames = (GROUPS as usize * FRAMES.len()) as f64;
    let bytes = (GROUPS as usize * FRAMES.iter().map(|f| f.len()).sum::<usize>()) as f64;
    let text = within(async {
        loop {
            let text = get(internal, "/metrics").await.text();
            if sample(&text, "starling_frames_total{direction=\"out\"}") == Some(frames) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(
        sample(&text, "starling_frames_total{direction=\"in\"}"),
        Some(frames),
        "{text}"
    );
    assert_eq!(
        sample(&text, "starling_groups_total{direction=\"in\"}"),
        Some(GROUPS as f64)
    );
    assert_eq!(
        sample(&text, "starling_groups_total{direction=\"out\"}"),
        Some(GROUPS as f64)
    );
    assert_eq!(
        sample(&text, "starling_bytes_total{direction=\"in\"}"),
        Some(bytes)
    );
    assert_eq!(
        sample(&text, "starling_bytes_total{direction=\"out\"}"),
        Some(bytes)
    );
    assert_eq!(
        sample(
            &text,
            "starling_sessions_accepted_total{transport=\"quic\",version=\"moq-lite-06\"}"
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "starling_sessions{transport=\"quic\",version=\"moq-lite-06\"}"
        ),
        Some(2.0)
    );
    assert_eq!(sample(&text, "starling_broadcasts"), Some(1.0));
    assert_eq!(sample(&text, "starling_subscriptions"), Some(1.0));
    assert_eq!(
        sample(&text, "starling_slow_subscriber_skips_total"),
        Some(0.0)
    );
    assert!(sample(&text, "starling_cache_bytes").unwrap() >= bytes / GROUPS as f64);
    assert_eq!(
        sample(&text, "starling_cache_evictions_total{reason=\"budget\"}"),
        Some((GROUPS - CACHED as u64) as f64),
        "{text}"
    );
    assert_eq!(
        sample(&text, "starling_cache_evictions_total{reason=\"age\"}"),
        Some(0.0)
    );
    assert_eq!(get(internal, "/health").await.text(), "ok\n");
    drop(publisher);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_decisions_are_counted_by_cache_outcome() {
    let (relay, url) = bind_relay(RelayConfig {
        internal_listen: Some("127.0.0.1:0".parse().unwrap()),
        auth: AuthConfig {
            public_subscribe: auth_support::patterns(&["room/**"]),
            max_age: Duration::from_secs(60),
            ..AuthConfig::default()
        },
        ..RelayConfig::default()
    })
    .await;
    let internal = relay.internal_addr().expect("internal listener");
    tokio::spawn(relay.run());

    // Three sessions present one credential: one cold miss, then two hits.
    let mut live = Vec::new();
    for _ in 0..3 {
        live.push(
            auth_support::connect(
                &url,
                "/room",
                Some(Role::Subscriber),
                SessionConfig::new(random_hop()),
            )
            .await
            .expect("admitted"),
        );
    }
    // Another is refused (a cold miss of its own), twice (then a hit on the refusal).
    for _ in 0..2 {
        auth_support::assert_refused(&url, "/other", Some(Role::Subscriber), "outside").await;
    }
    let text = get(internal, "/metrics").await.text();
    let lookups = |result: &str, reason: &str| {
        sample(
            &text,
            &format!(
                "starling_auth_cache_lookups_total{{result=\"{result}\",reason=\"{reason}\"}}"
            ),
        )
    };
    assert_eq!(lookups("miss", "cold"), Some(2.0), "{text}");
    assert_eq!(lookups("hit", "fresh"), Some(3.0), "{text}");
    assert_eq!(lookups("miss", "stale"), Some(0.0), "{text}");
    assert_eq!(sample(&text, "starling_auth_cache_entries"), Some(2.0));
    assert_eq!(
        sample(&text, "starling_auth_cache_evictions_total"),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            "starling_sessions_rejected_total{reason=\"unauthorized\"}"
        ),
        Some(2.0)
    );
}
