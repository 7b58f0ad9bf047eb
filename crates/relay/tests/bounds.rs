//! Relay-wide bounds (issue 10 item 2): what every session together may make the relay hold.

mod auth_support;
mod common;
mod http_support;

use bytes::Bytes;
use common::{bind_relay, session, within};
use http_support::{get, sample, Publisher};
use starling_model::{Frame, Origin, StartAt, TrackInfo};
use starling_proto::{Path, Role, Version};
use starling_relay::{CacheLimit, RelayConfig};
use starling_session::{random_hop, SessionConfig};

const BUDGET: u64 = 1 << 20;
const TRACKS: usize = 16;
const GROUPS: u64 = 4;
const GROUP_BYTES: usize = 128 << 10;

/// 16 tracks x 4 groups x 128 KiB (8 MiB) through a relay with a 1 MiB cache budget: each
/// track is far within its own 64 MiB, the relay holds at most the budget, and a subscriber
/// still gets every track's latest group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_tracks_together_stay_within_the_cache_budget() {
    let (relay, url) = bind_relay(RelayConfig {
        internal_listen: Some("127.0.0.1:0".parse().unwrap()),
        cache_budget: CacheLimit::Bytes(BUDGET),
        ..RelayConfig::default()
    })
    .await;
    let internal = relay.internal_addr().expect("internal listener");
    let origin = relay.origin().clone();
    tokio::spawn(relay.run());

    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let index = publisher.broadcast("room/big");
    let info = TrackInfo {
        max_age_ms: u64::MAX / 1000,
        ..TrackInfo::default()
    };
    let tracks: Vec<_> = (0..TRACKS)
        .map(|i| publisher.track(index, &format!("t{i}"), info))
        .collect();
    let sub_origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(sub_origin.clone());
    let _subscriber = session(&url, Version::Lite06, Role::Subscriber, config).await;
    http_support::routed(&origin, &["room/big"]).await;
    let interest = sub_origin.interest(Path::empty()).unwrap();
    let mut changed = Vec::new();
    let broadcast = loop {
        if let Some(b) = sub_origin.consume(&Path::new("room/big").unwrap(), None) {
            break b;
        }
        within(interest.changed(&mut changed)).await;
    };
    let mut readers: Vec<_> = (0..TRACKS)
        .map(|i| {
            broadcast
                .subscribe_track(&format!("t{i}"), StartAt::default())
                .unwrap()
        })
        .collect();
    // Track by track: its groups go out, and its latest group reaches the subscriber whole
    // before the next track starts (so pressure acts on what the relay already delivered).
    let payload = Bytes::from(vec![7u8; GROUP_BYTES]);
    for (track, reader) in tracks.iter().zip(&mut readers) {
        for sequence in 0..GROUPS {
            let mut group = track.create_group(sequence).unwrap();
            group
                .write_frame(Frame {
                    timestamp: sequence,
                    payload: payload.clone(),
                })
                .unwrap();
            group.finish();
        }
        loop {
            let mut group = within(reader.next_group()).await.unwrap().unwrap();
            if group.sequence() == GROUPS - 1 {
                let frame = within(group.next_frame()).await.unwrap().unwrap();
                assert_eq!(frame.payload.len(), GROUP_BYTES, "the latest group, whole");
                break;
            }
        }
    }
    let text = get(internal, "/metrics").await.text();
    let charged = sample(&text, "starling_cache_charged_bytes").unwrap();
    assert!(charged <= BUDGET as f64, "{charged} bytes charged:\n{text}");
    assert_eq!(
        sample(&text, "starling_cache_budget_bytes"),
        Some(BUDGET as f64)
    );
    let pressed = sample(&text, "starling_cache_evictions_total{reason=\"pressure\"}").unwrap();
    // 8 MiB offered into 1 MiB: most groups left for the relay-wide budget.
    assert!(pressed >= 48.0, "{pressed} groups pressed out:\n{text}");
    drop(publisher);
}
