//! The hostile suite at fleet scale (issue 25): each attack of `hostile.rs` made by many
//! connections at once, over raw QUIC from ten source addresses of 127.0.0.0/8 (and, for
//! the stuck headers, from ten network namespaces) and over WebSocket, against one
//! `starling relay` process. What holds them is the relay's relay-wide
//! bounds (the receive budget, the cache budget, the state ledger, admission), not only
//! its per-connection ones: each case asserts the relay's RSS for the relay as a whole and
//! that the witness (an honest publisher and subscriber) loses nothing.
//! `FLEET_CONNECTIONS` sets the fleet's size (40 here; `scripts/hostile-fleet.sh` runs 400).

mod attack;
#[path = "../../relay/tests/common/mod.rs"]
mod common;
#[path = "../../session/tests/hand/mod.rs"]
mod hand;
mod lab;
#[path = "../../relay/tests/witness/mod.rs"]
mod witness;

use std::time::Duration;

use bytes::Bytes;
use starling_proto::{Role, StreamCode, Version};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};

use attack::*;
use common::within;
use starling_relay::STATE_ENTRY_BYTES;
use starling_session::STREAM_CREDIT_COST;
use witness::{announce_request, assert_alive, witness};

/// Issue 25: a fleet of 40 connections, each filling its window with streams stuck inside
/// incomplete headers (640 streams of 60 KiB each, 1.5 GiB offered in all; streams the relay
/// stops are reset and replaced, so the flood goes on). No connection's own budget (33 MiB)
/// is what holds them: the relay-wide receive budget (`--receive-budget 32MiB` here) evicts
/// the oldest header-less units relay-wide, its peak stays within the budget, the relay's
/// RSS grows by at most the budget plus 256 MiB, the hostile sessions still answer, and the
/// witness keeps flowing. Over raw QUIC from ten source addresses of 127.0.0.0/8.
/// `scripts/hostile-fleet.sh` runs the long mode: 400 connections on default flags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_stuck_inside_headers_is_held_to_the_relay_wide_receive_budget() {
    let _turn = one_fleet_at_a_time().await;
    let relay = fleet_relay();
    let url = relay.url.clone();
    fleet_stuck_inside_headers(&relay, |i| {
        let source = fleet_source(i);
        let url = url.clone();
        async move { hostile_from(&url, source).await }
    })
    .await;
}

/// The same fleet over WebSocket (QMux, whose MAX_DATA the budget grants as quinn's window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_fleet_stuck_inside_headers_is_held_to_the_relay_wide_receive_budget() {
    let _turn = one_fleet_at_a_time().await;
    let relay = fleet_relay();
    let http = relay.http;
    fleet_stuck_inside_headers(&relay, |_| hostile_websocket(http)).await;
}

/// The same fleet from ten hosts: network namespaces joined to the relay's by veth pairs,
/// so the relay sees ten addresses that are not loopback and applies its admission to them
/// as to any remote client (its per-address bounds, the setup limit and the lag bound, at
/// their defaults). Skipped, saying why, where namespaces cannot be built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_from_ten_hosts_stuck_inside_headers_is_held_to_the_relay_wide_receive_budget() {
    if let Some(why) = lab::cannot_build_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    let _turn = one_fleet_at_a_time().await;
    let mut lab = lab::Lab::new(HOSTS).unwrap();
    let links: Vec<lab::Link> = (0..HOSTS).map(|h| lab.link(None, h).unwrap()).collect();
    let relay = fleet_relay_on([0, 0, 0, 0].into());
    let port = relay.http.port();
    let links = &links;
    fleet_stuck_inside_headers(&relay, |i| async move {
        let link = &links[i % HOSTS];
        let relay = std::net::SocketAddr::new(link.a_ip.into(), port);
        // The host's only way out is its veth link: the relay sees its address.
        set_up(dial_inside(&link.b_ns, relay).await, Role::Subscriber).await
    })
    .await;
}

/// Hosts (network namespaces) the namespace fleet comes from.
const HOSTS: usize = 10;

/// A raw-QUIC connection to `relay` from a socket inside namespace `ns`, retried while the
/// relay refuses it; no moq SETUP sent.
async fn dial_inside(ns: &str, relay: std::net::SocketAddr) -> starling_net::QuicTransport {
    let client = lab::inside(ns, || hostile_client("0.0.0.0:0".parse().unwrap())).unwrap();
    let url = url::Url::parse(&format!("moqt://{relay}/")).unwrap();
    dial_with(&client, &url).await
}

/// The fleet's size: `FLEET_CONNECTIONS` (default 40; `scripts/hostile-fleet.sh` runs 400).
fn fleet_connections() -> usize {
    std::env::var("FLEET_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40)
}

/// The relay the fleet attacks: `--receive-budget 32MiB`, or with `FLEET_BUDGET=default`
/// the relay's own default (a share of the host's memory), or any other value given there.
fn fleet_relay() -> RelayProcess {
    fleet_relay_on([127, 0, 0, 1].into())
}

/// [`fleet_relay`] bound to `ip`.
fn fleet_relay_on(ip: std::net::IpAddr) -> RelayProcess {
    match std::env::var("FLEET_BUDGET").as_deref() {
        Ok("default") => RelayProcess::start_on(ip, &[]),
        Ok(budget) => RelayProcess::start_on(ip, &["--receive-budget", budget]),
        Err(_) => RelayProcess::start_on(ip, &["--receive-budget", "32MiB"]),
    }
}

async fn fleet_stuck_inside_headers<T, F>(relay: &RelayProcess, dial: impl Fn(usize) -> F)
where
    T: Transport,
    F: std::future::Future<Output = T>,
{
    const STREAMS: usize = 640;
    let connections = fleet_connections();
    let budget = relay.metric("starling_receive_pool_bytes").await as u64;
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    let fleet: Vec<T> = bounded(
        Duration::from_secs(60 + connections as u64 / 4),
        futures::future::join_all((0..connections).map(dial)),
    )
    .await;
    let started = std::time::Instant::now();
    let (streams, written): (Vec<_>, Vec<usize>) = bounded(
        Duration::from_secs(300 + 3 * connections as u64),
        futures::future::join_all(fleet.iter().map(|bad| stuck_headers(bad, STREAMS, true))),
    )
    .await
    .into_iter()
    .unzip();
    eprintln!(
        "fleet flood: {connections} connections, {} streams written in {:?}, receive budget {} MiB, \
         relay RSS {} MiB (settled {} MiB)",
        written.iter().sum::<usize>(),
        started.elapsed(),
        budget / MIB,
        relay.rss() / MIB,
        settled / MIB
    );
    // When the fleet could hold more than the budget, the relay evicted relay-wide and,
    // granting stream credit again as it let go, the whole flood was written. Otherwise
    // each connection was held by its own bounds (its window, its stream credit: QMux grants
    // 100 streams at once), and the flood stopped there.
    let evicted = relay.metric("starling_receive_pool_evictions_total").await;
    if evicted > 0.0 {
        assert_eq!(
            written.iter().sum::<usize>(),
            connections * STREAMS,
            "the relay stopped and let go of what it evicted, so every stream was written"
        );
    }
    if budget <= 64 * MIB {
        assert!(
            evicted > 0.0,
            "a 64 MiB budget or less is always exceeded by the fleet"
        );
    }
    assert!(
        relay.metric("starling_receive_pool_peak_bytes").await <= budget as f64,
        "windows plus incomplete units stayed within the budget"
    );
    let rss = relay.rss();
    assert_fleet_rss(rss, settled, budget, "the budget");
    for bad in fleet.iter().step_by(10) {
        assert_alive(bad, announce_request()).await;
    }
    drop(streams);
    drop(fleet);
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Stream abuse from a fleet: `FLEET_CONNECTIONS` (40) raw-QUIC connections from ten
/// addresses each open up to 10 000 streams of one byte and leave them open, then a
/// SUBSCRIBE claiming 2^62 - 1 bytes and a stream of an unknown type, against
/// `--receive-budget 32MiB`. A stream that never gets past its header is charged what it
/// costs the relay (2 KiB), so the flood fills the receive budget and is evicted
/// relay-wide; the relay stops what it evicts and this peer never resets those streams, so
/// quinn keeps each of them and the peer keeps its credit: the credit past each
/// connection's initial 32 streams is granted out of the receive budget's windows' half at
/// what a held stream costs (1.5 KiB), so the whole fleet opens at most 40 x 32 streams plus
/// 16 MiB's worth (without that, 400 000 streams and 600 MiB). Each malformed stream is
/// reset with the code moq-net uses (CANCELLED 0x1 and INTERNAL_ERROR 0x0), every session
/// still answers, the relay's RSS grows by at most the receive budget plus 256 MiB, and the
/// witness loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_one_byte_and_malformed_streams_is_bounded() {
    let _turn = one_fleet_at_a_time().await;
    const STREAMS: usize = 10_000;
    let relay = fleet_relay();
    let connections = fleet_connections();
    let budget = relay.metric("starling_receive_pool_bytes").await as u64;
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    let url = relay.url.clone();
    let started = std::time::Instant::now();
    let fleet: Vec<_> = bounded(
        Duration::from_secs(300 + 3 * connections as u64),
        futures::future::join_all((0..connections).map(|i| {
            let url = url.clone();
            async move {
                let source = fleet_source(i);
                let bad = hostile_from(&url, source).await;
                let mut streams = Vec::with_capacity(STREAMS);
                for _ in 0..STREAMS {
                    // The relay stops the streams it evicts; this peer never resets them, so
                    // they keep their stream credit and, once they hold all of it, the flood
                    // is held there: no more credit comes within a second.
                    let Ok(opened) =
                        tokio::time::timeout(Duration::from_secs(1), bad.open_uni()).await
                    else {
                        break;
                    };
                    let mut stream = opened.unwrap();
                    // A stream the relay already evicted may be stopped: that is allowed.
                    let _ = stream.write(Bytes::from_static(&[0x00])).await;
                    streams.push(stream);
                }
                (bad, streams)
            }
        })),
    )
    .await;
    let rss = relay.rss();
    eprintln!(
        "stream fleet: {connections} connections, {} one-byte streams in {:?}; receive \
         budget {} MiB, relay RSS {} MiB (settled {} MiB)",
        fleet
            .iter()
            .map(|(_, streams)| streams.len())
            .sum::<usize>(),
        started.elapsed(),
        budget / MIB,
        rss / MIB,
        settled / MIB
    );
    let opened: usize = fleet.iter().map(|(_, streams)| streams.len()).sum();
    let initial = starling_net::QuicConfig::default().initial_streams as usize;
    let credit = connections * initial + (budget as usize / 2) / STREAM_CREDIT_COST;
    assert!(
        opened <= credit,
        "{opened} streams held open: more than the initial credit and what the budget's \
         windows' half grants ({credit})"
    );
    for (bad, _) in &fleet {
        malformed_streams_are_reset(bad).await;
        assert_alive(bad, announce_request()).await;
    }
    assert!(
        relay.metric("starling_receive_pool_evictions_total").await > 0.0,
        "streams that never got past their header are charged, and evicted relay-wide"
    );
    assert!(
        relay.metric("starling_receive_pool_peak_bytes").await <= budget as f64,
        "windows plus incomplete units stayed within the budget"
    );
    assert_fleet_rss(rss, settled, budget, "the receive budget");
    drop(fleet);
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// WebSocket messages that never finish, from a fleet: `FLEET_CONNECTIONS` (40) connections
/// from ten addresses of 127.0.0.0/8 each upgrade by hand and send a binary message in
/// 16 KiB fragments up to 16 KiB short of the 64 KiB message bound, and hold it there; then
/// one more fragment each takes the message past the bound, and the relay cuts every
/// connection. What a partial message costs is the WebSocket layer's, below QMux and its
/// credit: per connection it is the message bound, and the relay's RSS with the whole
/// fleet holding grows by at most that per connection plus 256 MiB (the relay-wide sum is
/// bounded only by admission: docs/reliability.md). The witness loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_fleet_of_messages_that_never_finish_is_cut_at_the_message_bound() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const FRAGMENT: usize = 16 << 10;
    const MESSAGE_BOUND: usize = 64 << 10;
    let _turn = one_fleet_at_a_time().await;
    let relay = fleet_relay();
    let connections = fleet_connections();
    let witness = witness(&relay.url).await;
    let settled = relay.rss();
    let http = relay.http;
    let payload = vec![0x55u8; FRAGMENT];
    let started = std::time::Instant::now();
    let mut fleet: Vec<tokio::net::TcpStream> = bounded(
        Duration::from_secs(120),
        futures::future::join_all((0..connections).map(|i| {
            let payload = &payload;
            async move {
                let source = fleet_source(i);
                let mut ws = raw_websocket(http, Some(source)).await;
                let fragments = MESSAGE_BOUND / FRAGMENT - 1;
                for n in 0..fragments {
                    let opcode = if n == 0 { 0x2 } else { 0x0 };
                    ws.write_all(&ws_frame(opcode, false, payload))
                        .await
                        .unwrap();
                }
                ws
            }
        })),
    )
    .await;
    // Every partial message is with the relay: a ping answered after it says it was read
    // (what else comes first is the relay's QMux opening).
    for ws in &mut fleet {
        ws.write_all(&ws_frame(0x9, true, b"held")).await.unwrap();
        loop {
            match read_ws_frame(ws).await {
                (0xa, pong) => break assert_eq!(pong, b"held"),
                (0x2, _) => continue,
                (opcode, _) => panic!("frame {opcode:#x} before the pong"),
            }
        }
    }
    let rss = relay.rss();
    eprintln!(
        "websocket fleet: {connections} connections holding {} KiB each in {:?}; relay RSS {} \
         MiB (settled {} MiB), {} KiB per connection",
        MESSAGE_BOUND / 1024 - FRAGMENT / 1024,
        started.elapsed(),
        rss / MIB,
        settled / MIB,
        rss.saturating_sub(settled) / 1024 / connections as u64,
    );
    assert_fleet_rss(
        rss,
        settled,
        (connections * MESSAGE_BOUND) as u64,
        "the message bound per connection",
    );
    // Past the bound: each connection is cut at once, long before the SETUP deadline
    // (10 s) these connections would meet otherwise.
    for mut ws in fleet {
        let _ = ws.write_all(&ws_frame(0x0, false, &payload)).await;
        let _ = ws.write_all(&ws_frame(0x0, false, &payload)).await;
        let mut rest = Vec::new();
        let ended = within(ws.read_to_end(&mut rest)).await;
        assert!(
            ended.is_ok()
                || matches!(&ended, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "the relay cut the connection: {ended:?}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "cut at the bound, not at the SETUP deadline"
    );
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Per-address floods from ten addresses at once, on a relay that applies its admission to
/// loopback as to remote clients with `--max-sessions-per-ip 64`: 100 raw-QUIC connections
/// from each of ten addresses of 127.0.0.0/8, the addresses together, each one connection
/// after another. Each address gets
/// exactly 64 and the rest are refused with CONNECTION_REFUSED before any handshake work,
/// every one counted `reason="source_sessions"`; an honest client from an eleventh address
/// still sets up and is answered, the relay's RSS grows by at most 256 MiB, and the witness
/// loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_per_address_floods_is_refused_past_each_address_bound() {
    const ATTEMPTS: usize = 100;
    const ADDRESSES: usize = FLEET_ADDRESSES;
    let _turn = one_fleet_at_a_time().await;
    let relay = RelayProcess::start(PER_ADDRESS_BOUNDS);
    let witness = witness(&relay.url).await;
    let settled = relay.rss();
    let url = relay.url.clone();
    // The addresses at once, each dialling one connection after another: ten handshakes in
    // flight, so the relay's limit on sessions being set up at once does not engage and
    // what refuses is each address's bound.
    let per_address: Vec<(Vec<_>, usize)> = bounded(
        Duration::from_secs(120),
        futures::future::join_all((0..ADDRESSES).map(|a| {
            let url = url.clone();
            async move {
                let client = hostile_client(std::net::SocketAddr::new(fleet_source(a), 0));
                let mut held = Vec::new();
                let mut refused = 0;
                for _ in 0..ATTEMPTS {
                    match within(client.connect(&url)).await {
                        Ok(connected) => held.push(connected),
                        Err(err) => {
                            assert!(err.refusal().is_some(), "only clean refusals: {err}");
                            refused += 1;
                        }
                    }
                }
                (held, refused)
            }
        })),
    )
    .await;
    let held: Vec<usize> = per_address.iter().map(|(held, _)| held.len()).collect();
    let refused: usize = per_address.iter().map(|(_, refused)| refused).sum();
    eprintln!(
        "per-address fleet: {} connections from {ADDRESSES} addresses, held {held:?}, {refused} \
         refused; relay RSS {} MiB (settled {} MiB)",
        ADDRESSES * ATTEMPTS,
        relay.rss() / MIB,
        settled / MIB
    );
    assert_eq!(
        held, [SESSIONS_PER_ADDRESS; ADDRESSES],
        "each address gets its bound"
    );
    assert_eq!(
        relay
            .metric("starling_connections_refused_total{reason=\"source_sessions\"}")
            .await,
        refused as f64
    );
    let honest = hostile_from(&relay.url, [127, 0, 0, 12].into()).await;
    assert_alive(&honest, announce_request()).await;
    assert_fleet_rss(relay.rss(), settled, 0, "no budget");
    drop((per_address, honest));
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Connection abuse from a fleet, on a relay that applies its admission to loopback as to
/// remote clients (`--limit-loopback`, the per-address bounds at their defaults): 5 x
/// `FLEET_CONNECTIONS` (200) raw-QUIC connections from ten addresses that never send SETUP,
/// and 10 x `FLEET_CONNECTIONS` (400) HTTP connections from the same addresses dribbling a
/// request head. While they hold on, an honest client from another address sets up a session
/// and is answered and `/health` answers; then every silent connection is closed with
/// CONTROL_TIMEOUT at the SETUP deadline (10 s), every slow HTTP
/// connection is cut at the head deadline (10 s), the relay's RSS grows by at most 256 MiB,
/// and the witness loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_silent_and_slow_connections_is_cut_at_its_deadlines() {
    let _turn = one_fleet_at_a_time().await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let relay = RelayProcess::start(&["--limit-loopback"]);
    let connections = fleet_connections();
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    let url = relay.url.clone();
    let silent: Vec<_> = bounded(
        Duration::from_secs(120),
        futures::future::join_all((0..5 * connections).map(|i| dial_from(&url, fleet_source(i)))),
    )
    .await;
    let mut slow = Vec::new();
    for i in 0..10 * connections {
        let mut stream = tcp_from(relay.http, Some(fleet_source(i))).await;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: relay\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    let started = std::time::Instant::now();

    // They cost an honest client nothing: it sets up a session and is answered.
    let honest = hostile_from(&relay.url, [127, 0, 0, 12].into()).await;
    assert_alive(&honest, announce_request()).await;
    let health = reqwest::get(format!("http://{}/health", relay.http))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    let codes = bounded(
        Duration::from_secs(30),
        futures::future::join_all(silent.iter().map(|bad| bad.closed())),
    )
    .await;
    for code in &codes {
        assert!(
            matches!(code, TransportError::ClosedByPeer { code, .. }
                if *code == starling_proto::SessionCode::ControlTimeout.to_code()),
            "a silent connection is closed with CONTROL_TIMEOUT, got {code:?}"
        );
    }
    for stream in &mut slow {
        let mut rest = Vec::new();
        within(stream.read_to_end(&mut rest)).await.unwrap();
    }
    let rss = relay.rss();
    eprintln!(
        "connection fleet: {} silent connections and {} slow HTTP heads from ten addresses, all \
         cut within {:?}; relay RSS {} MiB (settled {} MiB)",
        silent.len(),
        slow.len(),
        started.elapsed(),
        rss / MIB,
        settled / MIB
    );
    assert_fleet_rss(rss, settled, 0, "no budget");
    drop((silent, slow, honest));
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Issue 25: a fleet of publishers whose frames never complete. `FLEET_CONNECTIONS` (40)
/// connections, over raw QUIC from ten source addresses of 127.0.0.0/8, each announce a
/// broadcast a reader subscribes to, then open 16 group streams, each a frame declared at
/// 32 MiB of which 1 MiB is sent (640 MiB sent, 20 GiB promised), on `--cache-budget
/// 64MiB`. Pieces are charged to the cache at their frame's declared size, so the hostile
/// tracks, each over its share of the budget, shed their own groups; a stream whose group
/// left is stopped with EVICTED (0x35) or OLD (0x34). The relay's RSS grows by at most the
/// cache and receive budgets plus 256 MiB (in fact by tens of MiB), an honest group on
/// every hostile connection is delivered whole, and the witness loses nothing
/// (`FLEET_CACHE_BUDGET=default` runs it on the relay's defaults).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_frames_that_never_complete_is_held_to_the_cache_budget() {
    let _turn = one_fleet_at_a_time().await;
    let relay = frames_fleet_relay();
    let url = relay.url.clone();
    fleet_frames_never_complete(&relay, |i| {
        let source = fleet_source(i);
        let url = url.clone();
        async move { hostile_from_as(&url, source, Role::Publisher).await }
    })
    .await;
}

/// The same fleet over WebSocket (QMux).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_fleet_of_frames_that_never_complete_is_held_to_the_cache_budget() {
    let _turn = one_fleet_at_a_time().await;
    let relay = frames_fleet_relay();
    let http = relay.http;
    fleet_frames_never_complete(&relay, |_| hostile_websocket_as(http, Role::Publisher)).await;
}

/// The relay the frames fleet attacks: `--cache-budget 64MiB`, which the fleet exceeds,
/// or with `FLEET_CACHE_BUDGET=default` the relay's own default (25 % of this host's
/// memory), or any other value given there.
fn frames_fleet_relay() -> RelayProcess {
    match std::env::var("FLEET_CACHE_BUDGET").as_deref() {
        Ok("default") => RelayProcess::start(&[]),
        Ok(budget) => RelayProcess::start(&["--cache-budget", budget]),
        Err(_) => RelayProcess::start(&["--cache-budget", "64MiB"]),
    }
}

async fn fleet_frames_never_complete<T, F>(relay: &RelayProcess, dial: impl Fn(usize) -> F)
where
    T: Transport + Clone,
    F: std::future::Future<Output = T>,
{
    use starling_proto::FrameHeader;
    const STREAMS: u64 = 16;
    const SENT: usize = 1 << 20;
    const CHUNK: usize = 64 << 10;
    const HONEST: u64 = 1000;
    let connections = fleet_connections();
    let cache_budget = relay.metric("starling_cache_budget_bytes").await as u64;
    let receive_budget = relay.metric("starling_receive_pool_bytes").await as u64;
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    // Each hostile publisher, the reader subscribed to its track, and the subscription the
    // relay sent it.
    let fleet = bounded(
        Duration::from_secs(60 + connections as u64 / 2),
        futures::future::join_all((0..connections).map(|i| {
            let bad = dial(i);
            let url = relay.url.clone();
            async move {
                let bad = bad.await;
                let (upstream, reader_session, reader) =
                    hand_publisher(&bad, &url, &format!("evil/{i}")).await;
                (bad, upstream, reader_session, reader)
            }
        })),
    )
    .await;

    let started = std::time::Instant::now();
    let outcomes: Vec<(usize, usize, usize)> = bounded(
        Duration::from_secs(120 + connections as u64),
        futures::future::join_all(fleet.iter().map(|(bad, upstream, _, _)| async move {
            let mut streams = Vec::new();
            let (mut sent, mut evicted, mut old) = (0usize, 0usize, 0usize);
            for sequence in 0..STREAMS {
                let frame = FrameHeader {
                    timestamp_delta: 0,
                    size: 32 << 20,
                };
                let head = hand::group_head(upstream.id, sequence, frame, Version::Lite06);
                let mut stream = bad.open_uni().await.unwrap();
                let mut result = stream.write(head.freeze()).await;
                let mut left = SENT;
                while result.is_ok() && left > 0 {
                    result = stream.write(Bytes::from(vec![0u8; CHUNK])).await;
                    left -= CHUNK;
                    sent += CHUNK;
                }
                match result {
                    Ok(()) => {}
                    // The relay expired the frame's group and let the stream go: EVICTED
                    // (0x35) when the relay-wide cache budget took it, OLD (0x34) when the
                    // track's own bound had.
                    Err(TransportError::Stopped(code)) if code == StreamCode::Evicted.to_code() => {
                        evicted += 1
                    }
                    Err(TransportError::Stopped(code)) if code == StreamCode::Old.to_code() => {
                        old += 1
                    }
                    Err(err) => panic!("a frame stream ended with {err:?}"),
                }
                streams.push(stream);
            }
            // Kept open to the end of the flood: dropping them would end them.
            drop(streams);
            (sent, evicted, old)
        })),
    )
    .await;
    let sent: usize = outcomes.iter().map(|o| o.0).sum();
    let evicted: usize = outcomes.iter().map(|o| o.1).sum();
    let old: usize = outcomes.iter().map(|o| o.2).sum();
    eprintln!(
        "frames fleet: {connections} connections, {} MiB of frames sent ({} GiB promised) in \
         {:?}, streams stopped: {evicted} EVICTED, {old} OLD; cache budget {} MiB, relay RSS \
         {} MiB (settled {} MiB)",
        sent as u64 / MIB,
        connections as u64 * STREAMS * 32 / 1024,
        started.elapsed(),
        cache_budget / MIB,
        relay.rss() / MIB,
        settled / MIB
    );
    let rss = relay.rss();
    assert_fleet_rss(
        rss,
        settled,
        cache_budget + receive_budget,
        "the cache and receive budgets",
    );
    if cache_budget <= 64 * MIB {
        assert!(
            relay
                .metric("starling_cache_evictions_total{reason=\"pressure\"}")
                .await
                > 0.0,
            "a 64 MiB cache budget or less is always exceeded by the fleet's frames"
        );
    }
    // An honest group on every hostile connection, after its frames that never completed,
    // reaches its reader whole.
    for (bad, upstream, _session, mut reader) in fleet {
        honest_group_arrives(&bad, upstream.id, &mut reader, HONEST).await;
    }
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// A fleet of publishers each announcing 4 000 broadcasts (within the per-session bound of
/// 65 536, 160 000 in all) against `--state-budget 64MiB` (32 768 entries at 2 KiB): the
/// relay-wide state ledger sheds the heaviest sessions (closed with INTERNAL_ERROR, 0x1),
/// lends the lighter ones an eighth more meanwhile and never holds more than that, the
/// relay's RSS grows by at most the state budget plus 256 MiB, and after the flood an honest
/// publisher's new broadcast still reaches a reader. Over raw QUIC from ten addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_announcing_broadcasts_is_held_to_the_state_ledger() {
    let _turn = one_fleet_at_a_time().await;
    const ANNOUNCES: u32 = 4_000;
    let relay = match std::env::var("FLEET_STATE_BUDGET").as_deref() {
        Ok("default") => RelayProcess::start(&[]),
        Ok(budget) => RelayProcess::start(&["--state-budget", budget]),
        Err(_) => RelayProcess::start(&["--state-budget", "64MiB"]),
    };
    let connections = fleet_connections();
    let limit = relay.metric("starling_state_ledger_limit_entries").await as u64;
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    let started = std::time::Instant::now();
    let url = relay.url.clone();
    let fleet: Vec<(u32, u32)> = bounded(
        Duration::from_secs(120 + connections as u64),
        futures::future::join_all((0..connections).map(|i| {
            let url = url.clone();
            async move {
                let source = fleet_source(i);
                let bad = hostile_from_as(&url, source, Role::Publisher).await;
                let (send, written) = announce_flood(&bad, &format!("flood{i}"), ANNOUNCES).await;
                // Held until the relay ends the session or the fleet is done; a session the
                // ledger shed is closed with INTERNAL_ERROR.
                let code = match tokio::time::timeout(Duration::from_secs(5), bad.closed()).await {
                    Ok(TransportError::ClosedByPeer { code, .. }) => code,
                    Ok(other) => panic!("a flooding publisher ended with {other:?}"),
                    Err(_) => u32::MAX,
                };
                drop(send);
                (written, code)
            }
        })),
    )
    .await;
    let shed = relay
        .metric("starling_state_ledger_shed_sessions_total")
        .await;
    let peak = relay.metric("starling_state_ledger_peak_entries").await as u64;
    let rss = relay.rss();
    let closed = fleet.iter().filter(|(_, code)| *code != u32::MAX).count();
    eprintln!(
        "announce fleet: {connections} connections, {} announcements written in {:?}; ledger \
         {limit} entries, peak {peak}, {shed} sessions shed, {closed} closed; relay RSS {} MiB \
         (settled {} MiB, {} B per peak entry)",
        fleet.iter().map(|(n, _)| u64::from(*n)).sum::<u64>(),
        started.elapsed(),
        rss / MIB,
        settled / MIB,
        rss.saturating_sub(settled) / peak.max(1)
    );
    for (_, code) in &fleet {
        assert!(
            *code == u32::MAX || *code == starling_proto::SessionCode::Internal.to_code(),
            "a flooding session is closed with INTERNAL_ERROR or left alone, got {code:#x}"
        );
    }
    if limit < connections as u64 * u64::from(ANNOUNCES) {
        assert!(
            shed > 0.0,
            "the fleet overfilled the ledger: sessions were shed"
        );
    }
    assert!(
        peak <= limit + limit / 8,
        "the ledger held {peak} entries, past its {limit} and the overdraft"
    );
    assert_fleet_rss(
        rss,
        settled,
        limit * STATE_ENTRY_BYTES as u64,
        "the state budget",
    );

    // An honest publisher announcing now is heard, and its group reaches a reader.
    let honest = hostile_from_as(&relay.url, [127, 0, 0, 12].into(), Role::Publisher).await;
    let (upstream, _session, mut reader) = hand_publisher(&honest, &relay.url, "honest").await;
    honest_group_arrives(&honest, upstream.id, &mut reader, 1).await;
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Request floods from a fleet: each of 8 sessions (`FLEET_CONNECTIONS` when set; raw QUIC,
/// ten addresses) opens 1 100 announce interests and 4 200 subscriptions to a slow track (a
/// group every 100 ms; past its bounds of 1 024 and 4 096), beside as many sessions that
/// each subscribe to the witness's track and never read, against `--state-budget 64MiB`
/// (32 768 entries; the fleet asks for 84 800).
/// Each request is answered or reset EVICTED (0x35), or its session was shed by the
/// relay-wide state ledger (closed INTERNAL_ERROR, 0x1); no session is answered past its own
/// bounds; the ledger never holds more than its limit and overdraft; the subscribers that
/// never read are skipped (TOO_FAR_BEHIND), not queued for; the relay's RSS grows by at most
/// the state budget plus 256 MiB, and the witness loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_request_floods_is_held_to_the_state_ledger() {
    let _turn = one_fleet_at_a_time().await;
    const INTERESTS: usize = 1_100;
    const SUBSCRIPTIONS: u64 = 4_200;
    let relay = RelayProcess::start(&["--state-budget", "64MiB"]);
    // Fewer than the other fleets: 5 300 requests each, all answered by a debug build; 16
    // sessions take 11 s here (docs/reliability.md).
    let connections = std::env::var("FLEET_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let limit = relay.metric("starling_state_ledger_limit_entries").await as u64;
    let witness = witness(&relay.url).await;
    // A slow track: a publisher sending a small group every 100 ms (a subscription is
    // answered with its first group).
    let slow = hostile_as(&relay.url, Role::Publisher).await;
    let (upstream, _reader_session, _reader) = hand_publisher(&slow, &relay.url, "slow").await;
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        for sequence in 0.. {
            tick.tick().await;
            hand::send_group(&slow, upstream.id, sequence, Version::Lite06).await;
        }
    });
    let settled = relay.rss();
    // Beside the flood, as many sessions that each subscribe to the witness's track and never
    // read: the relay must skip them, not queue for them. Light (one subscription each),
    // they are never the ones the ledger sheds, so each lives past the 32 groups in flight
    // that mark it behind.
    let mut never_read = Vec::new();
    for i in 0..connections {
        let lazy = hostile_from(&relay.url, fleet_source(i)).await;
        let (mut send, recv) = lazy.open_bi().await.unwrap();
        send.write(witness::subscribe_bytes(0, "good", "seq"))
            .await
            .unwrap();
        never_read.push((lazy, send, recv));
    }

    let started = std::time::Instant::now();
    let url = relay.url.clone();
    let outcomes: Vec<Requests> = bounded(
        Duration::from_secs(240 + 2 * connections as u64),
        futures::future::join_all((0..connections).map(|i| {
            let url = url.clone();
            async move {
                let source = fleet_source(i);
                let bad = hostile_from(&url, source).await;
                let mut requests = Vec::new();
                let asked = |bytes: Bytes| {
                    let bad = &bad;
                    async move {
                        // Refused requests are reset by the relay, but this peer keeps its
                        // half of each open, so they hold their stream credit in quinn; once
                        // they hold all of it no more credit comes, and the flood is held.
                        let opened =
                            tokio::time::timeout(Duration::from_secs(5), bad.open_bi()).await;
                        let (mut send, recv) = opened.ok()?.ok()?;
                        send.write(bytes).await.ok()?;
                        Some((send, recv))
                    }
                };
                let mut interests = Vec::new();
                for _ in 0..INTERESTS {
                    interests.extend(asked(announce_request()).await);
                }
                for id in 0..SUBSCRIPTIONS {
                    requests.extend(asked(witness::subscribe_bytes(id, "slow", "t")).await);
                }
                let interests = tally(&mut interests).await;
                let subscriptions = tally(&mut requests).await;
                Requests {
                    interests,
                    subscriptions,
                    bad,
                }
            }
        })),
    )
    .await;
    let shed = relay
        .metric("starling_state_ledger_shed_sessions_total")
        .await;
    let peak = relay.metric("starling_state_ledger_peak_entries").await as u64;
    let rss = relay.rss();
    eprintln!(
        "request fleet: {connections} connections in {:?}; interests (answered, evicted, \
         closed) {:?}, subscriptions {:?}; ledger {limit} entries, peak {peak}, {shed} sessions \
         shed; relay RSS {} MiB (settled {} MiB)",
        started.elapsed(),
        sum(outcomes.iter().map(|o| o.interests)),
        sum(outcomes.iter().map(|o| o.subscriptions)),
        rss / MIB,
        settled / MIB
    );
    for outcome in &outcomes {
        // No session is answered past its own bounds; one the ledger did not shed had every
        // request answered or refused (a session that is the heaviest when the ledger is
        // full is refused, not another shed for it).
        assert!(outcome.interests.0 <= 1024 && outcome.subscriptions.0 <= 4096);
        if outcome.interests.2 + outcome.subscriptions.2 == 0 {
            assert_eq!(outcome.interests.0 + outcome.interests.1, INTERESTS);
            assert_eq!(
                outcome.subscriptions.0 + outcome.subscriptions.1,
                SUBSCRIPTIONS as usize
            );
        }
    }
    if limit < connections as u64 * (1024 + 4096) {
        assert!(
            shed > 0.0,
            "the fleet overfilled the ledger: sessions were shed"
        );
    }
    assert!(
        peak <= limit + limit / 8,
        "the ledger held {peak} entries, past its {limit} and the overdraft"
    );
    // The subscribers that never read are skipped, not queued for.
    within(async {
        while relay.metric("starling_slow_subscriber_skips_total").await == 0.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_fleet_rss(
        rss,
        settled,
        limit * STATE_ENTRY_BYTES as u64,
        "the state budget",
    );
    // Every session still answers, or was shed: no session ends for any other reason.
    let mut ended = 0;
    for outcome in &outcomes {
        if !answers_or_was_shed(&outcome.bad).await {
            ended += 1;
        }
    }
    let shed = relay
        .metric("starling_state_ledger_shed_sessions_total")
        .await;
    assert!(
        ended as f64 <= shed,
        "{ended} sessions ended, {shed} were shed"
    );
    drop((outcomes, never_read));
    ticker.abort();
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// What one session of the request fleet got: (answered, reset EVICTED, lost with the session)
/// for its interests and its subscriptions.
struct Requests {
    interests: (usize, usize, usize),
    subscriptions: (usize, usize, usize),
    bad: starling_net::QuicTransport,
}

/// Whether `err` is how a session the state ledger shed ends: closed with INTERNAL_ERROR, or,
/// when that close was lost (loopback drops UDP under this load), a stateless reset from the
/// relay that forgot the connection, or silence until the idle timeout. The sessions that
/// end so are checked against the number shed.
fn shed_ending(err: &TransportError) -> bool {
    match err {
        TransportError::ClosedByPeer { code, .. } => {
            *code == starling_proto::SessionCode::Internal.to_code()
        }
        TransportError::Failed(reason) => {
            reason.contains("reset by peer") || reason.contains("timed out")
        }
        _ => false,
    }
}

/// Whether the session answers an announce request (`true`) or was shed (`false`); anything
/// else fails the test.
async fn answers_or_was_shed(bad: &starling_net::QuicTransport) -> bool {
    let asked = async {
        let (mut send, mut recv) = bad.open_bi().await?;
        send.write(announce_request()).await?;
        recv.read(1024).await
    };
    match bounded(Duration::from_secs(60), asked).await {
        Ok(Some(answer)) if !answer.is_empty() => true,
        Err(err) if shed_ending(&err) => false,
        other => panic!("a session answers or was shed, got {other:?}"),
    }
}

/// How requests ended: answered, reset EVICTED (a bound's refusal), or lost with their
/// session when the state ledger shed it; anything else fails the test.
async fn tally<S>(
    requests: &mut [(S, impl starling_transport::RecvStream)],
) -> (usize, usize, usize) {
    let (mut answered, mut evicted, mut closed) = (0, 0, 0);
    for (_, recv) in requests {
        // The fleet's requests wait their turn behind every other session's.
        match bounded(Duration::from_secs(60), recv.read(1024)).await {
            Ok(Some(_)) => answered += 1,
            Err(TransportError::Reset(code)) if code == StreamCode::Evicted.to_code() => {
                evicted += 1
            }
            Err(err) if shed_ending(&err) => closed += 1,
            other => panic!("a request is answered, refused EVICTED or shed, got {other:?}"),
        }
    }
    (answered, evicted, closed)
}

/// The fleets' memory bound: the relay's RSS `rss` grows over `settled` by at most the
/// `budgets` that hold the attack (`what` they are) plus 256 MiB.
fn assert_fleet_rss(rss: u64, settled: u64, budgets: u64, what: &str) {
    assert!(
        rss <= settled + budgets + 256 * MIB,
        "relay RSS {} MiB, settled at {} MiB (bound: {what} plus 256 MiB)",
        rss / MIB,
        settled / MIB
    );
}

fn sum(counts: impl Iterator<Item = (usize, usize, usize)>) -> (usize, usize, usize) {
    counts.fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
}
