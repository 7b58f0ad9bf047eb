//! The hostile suite at fleet scale (issue 25): each attack of `hostile.rs` made by many
//! connections at once, over raw QUIC from ten source addresses of 127.0.0.0/8 (and, for
//! the stuck headers, from ten network namespaces) and over WebSocket, against one
//! `starling relay` process. What holds them is the relay's relay-wide
//! bounds (the receive budget, the cache budget, the state ledger, admission), not only
//! its per-connection ones: each case asserts the relay's RSS for the relay as a whole and
//! that the witness (an honest publisher and subscriber) loses nothing.
//! `FLEET_CONNECTIONS` sets the fleet's size (40 here; `scripts/hostile-fleet.sh` runs 400).
//! The fleets held to the cache budget and the state ledger are `hostile_fleet_state.rs`.

mod attack;
#[path = "../../relay/tests/common/mod.rs"]
mod common;
mod fleet;
#[path = "../../session/tests/hand/mod.rs"]
mod hand;
mod lab;
#[path = "../../relay/tests/witness/mod.rs"]
mod witness;

use std::time::Duration;

use bytes::Bytes;
use starling_proto::Role;
use starling_transport::{SendStream, Transport, TransportError};

use attack::*;
use common::within;
use fleet::{assert_fleet_rss, fleet_connections, Hosts};
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
    let _turn = one_fleet_at_a_time().await;
    let Some(hosts) = Hosts::build() else { return };
    let relay = fleet_relay_on([0, 0, 0, 0].into());
    let port = relay.http.port();
    let hosts = &hosts;
    fleet_stuck_inside_headers(&relay, |i| hosts.dial(i, port, Role::Subscriber)).await;
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
    let initial = starling_net::QuicConfig::default().initial_uni_streams as usize;
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
