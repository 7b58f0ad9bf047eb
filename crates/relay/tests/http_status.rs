//! The live status page over real sockets: `/status.json` reflects a publish and a subscribe
//! (broadcast, track subscribers, sessions by transport and version), `/events` streams
//! snapshots, `/` serves the page, and the WebSocket hook sees upgrades on any path first.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use starling_model::{Origin, StartAt, TrackInfo};
use starling_proto::{Path, Role, Version};
use starling_relay::{HttpConfig, RelayConfig};
use starling_session::{random_hop, SessionConfig};

mod common;
mod http_support;

use common::{bind_relay, session, within};
use http_support::{get, get_with, routed, write_group, EventStream, Publisher};

fn config(interval: Duration) -> RelayConfig {
    RelayConfig {
        http_api: HttpConfig {
            status_interval: interval,
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn start(config: RelayConfig) -> (url::Url, SocketAddr, Origin) {
    let (relay, url) = bind_relay(config).await;
    let addr = relay.local_addr().unwrap();
    let origin = relay.origin().clone();
    tokio::spawn(relay.run());
    (url, addr, origin)
}

fn find<'a>(list: &'a serde_json::Value, key: &str, value: &str) -> Option<&'a serde_json::Value> {
    list.as_array()?.iter().find(|item| item[key] == value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_json_reflects_a_live_publish_and_subscribe() {
    let (url, addr, origin) = start(config(Duration::from_millis(100))).await;

    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    let b = publisher.broadcast("live/cam");
    let track = publisher.track(b, "video", TrackInfo::default());
    routed(&origin, &["live/cam"]).await;

    let sub_origin = Origin::new();
    let mut sub_config = SessionConfig::new(random_hop());
    sub_config.consume = Some(sub_origin.clone());
    let _subscriber = session(&url, Version::Lite05, Role::Subscriber, sub_config).await;
    routed(&sub_origin, &["live/cam"]).await;
    let mut reader = sub_origin
        .consume(&Path::new("live/cam").unwrap(), None)
        .unwrap()
        .subscribe_track("video", StartAt::default())
        .unwrap();
    // Publish until the subscriber has a group through the relay.
    let mut sequence = 0;
    let received = loop {
        write_group(&track, sequence, sequence, &["frame-0123456789"]);
        sequence += 1;
        if let Ok(group) =
            tokio::time::timeout(Duration::from_millis(50), reader.next_group()).await
        {
            break group.unwrap().unwrap();
        }
        assert!(sequence < 200, "no group reached the subscriber");
    };
    assert!(received.sequence() < sequence);

    // Sessions register as they start; the snapshot is computed per request.
    let status = within(async {
        loop {
            let response = get(addr, "/status.json").await;
            assert_eq!(response.status, 200);
            assert_eq!(response.header("content-type"), Some("application/json"));
            let status = response.json();
            if status["sessions"]["total"] == 2 {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    let broadcast = find(&status["broadcasts"]["list"], "path", "live/cam").expect("broadcast");
    assert_eq!(status["broadcasts"]["total"], 1);
    assert_eq!(
        broadcast["hops"], 1,
        "published by a directly connected client"
    );
    assert_eq!(broadcast["dynamic"], true);
    let video = find(&broadcast["tracks"], "name", "video").expect("track");
    assert_eq!(video["subscribers"], 1, "one downstream subscription");
    assert!(video["groups"].as_u64().unwrap() >= 1);
    assert!(video["bytes"].as_u64().unwrap() >= 16);
    assert_eq!(video["priority"], 127);

    let sessions = &status["sessions"];
    assert_eq!(sessions["by_transport"]["quic"], 2);
    assert_eq!(sessions["by_transport"]["webtransport"], 0);
    assert_eq!(sessions["by_transport"]["websocket"], 0);
    assert_eq!(sessions["by_version"]["moq-lite-06"], 1);
    assert_eq!(sessions["by_version"]["moq-lite-05"], 1);
    let list = sessions["list"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let publisher_session = list.iter().find(|s| s["version"] == "moq-lite-06").unwrap();
    assert_eq!(publisher_session["transport"], "quic");
    assert_eq!(publisher_session["publish"], true);
    assert_eq!(publisher_session["subscribe"], false);
    assert!(publisher_session["bytes_in"].as_u64().unwrap() >= 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_one_snapshot_per_interval() {
    let (url, addr, origin) = start(config(Duration::from_millis(100))).await;
    let mut publisher = Publisher::connect(&url, Version::Lite06).await;
    publisher.broadcast("studio");
    routed(&origin, &["studio"]).await;

    let mut events = EventStream::open(addr, "/events").await;
    let (name, first) = events.next().await;
    assert_eq!(events.status(), Some(200));
    assert_eq!(events.header("content-type"), Some("text/event-stream"));
    assert_eq!(name, "status");
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert!(find(&first["broadcasts"]["list"], "path", "studio").is_some());

    let (_, second) = events.next().await;
    let second: serde_json::Value = serde_json::from_str(&second).unwrap();
    assert!(second["uptime_ms"].as_u64() >= first["uptime_ms"].as_u64());
    assert_eq!(second["sessions"]["total"], 1);
    let (_, third) = events.next().await;
    let third: serde_json::Value = serde_json::from_str(&third).unwrap();
    assert!(third["uptime_ms"].as_u64() > first["uptime_ms"].as_u64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_the_pinned_endpoints_are_served() {
    let (_url, addr, _origin) = start(RelayConfig::default()).await;
    let page = get(addr, "/").await;
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(page
        .text()
        .contains("new EventSource(\"events\" + location.search)"));

    let health = get(addr, "/health").await;
    assert_eq!((health.status, health.text()), (200, "ok\n".to_string()));
    let pin = get(addr, "/certificate.sha256").await;
    assert_eq!(pin.status, 200);
    assert_eq!(pin.text().len(), 64);
    assert_eq!(get(addr, "/no/such/route").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrades_reach_the_hook_before_any_route() {
    let (relay, _url) = bind_relay(RelayConfig::default()).await;
    let addr = relay.local_addr().unwrap();
    let hook = Router::new().fallback(|request: axum::extract::Request| async move {
        format!("upgrade {}", request.uri().path())
    });
    tokio::spawn(relay.with_http_upgrade(hook).run());

    let upgrade = [("Upgrade", "websocket"), ("Connection", "Upgrade")];
    for path in ["/", "/announced", "/fetch/a/b", "/room/alice", "/health"] {
        let response = get_with(addr, path, &upgrade).await;
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(response.text(), format!("upgrade {path}"));
    }
    // Without the header the routes answer as usual.
    assert_eq!(get(addr, "/health").await.text(), "ok\n");
    assert!(get(addr, "/")
        .await
        .text()
        .contains("<title>Starling relay</title>"));
}

/// Issue 10 item 10 (in part): `/events` streams are bounded; one past the bound is answered
/// 503 with Retry-After, and a slot comes back when a stream closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_past_the_bound_are_refused_with_retry_after() {
    let (_url, addr, _origin) = start(RelayConfig {
        http_api: HttpConfig {
            status_interval: Duration::from_millis(100),
            max_event_clients: 1,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let mut first = EventStream::open(addr, "/events").await;
    let (name, _) = first.next().await;
    assert_eq!(name, "status");
    let refused = get(addr, "/events").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("retry-after"), Some("5"));
    drop(first);
    // The slot returns once the relay sees the stream gone.
    within(async {
        while events_status(addr).await != 200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// The status line's code of a fresh `GET /events` (the stream is then dropped).
async fn events_status(addr: SocketAddr) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        if stream.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}
