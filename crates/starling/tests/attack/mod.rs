//! The hostile suites' harness: a real `starling relay` process on loopback (its RSS read
//! from /proc, its metrics scraped), raw sessions that misbehave by hand over QUIC (from any
//! address of 127.0.0.0/8) and WebSocket, and the floods the single-connection cases
//! (`hostile.rs`) and the fleet cases (`hostile_fleet.rs`) share.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_net::QuicTransport;
use starling_proto::{
    encode_message, encode_typed, AnnounceOk, Announcement, Hops, Path, RouteCost,
};
use starling_proto::{Role, Setup, StreamCode, Version};
use starling_session::random_hop;
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use url::Url;

use crate::common::{admitted, dial, within};
use crate::hand;
use crate::witness::{send_uni, setup_bytes};

pub const BIN: &str = env!("CARGO_BIN_EXE_starling");
pub const MIB: u64 = 1 << 20;
/// The connection window the relay runs with (the partial-header flood offers more).
pub const WINDOW_MIB: u64 = 33;
/// Most the relay's RSS may grow over its settled size during a case.
pub const RSS_GROWTH_BOUND: u64 = 200 * MIB;

/// Sessions one address may hold in the per-address cases.
pub const SESSIONS_PER_ADDRESS: usize = 64;
/// The relay's flags for the per-address cases: its admission applied to loopback as to
/// remote clients, [`SESSIONS_PER_ADDRESS`] sessions per address, and handshakes per address
/// loose enough that the session bound is what refuses.
pub const PER_ADDRESS_BOUNDS: &[&str] = &[
    "--limit-loopback",
    "--max-sessions-per-ip",
    "64",
    "--max-handshakes-per-ip",
    "1000",
];

/// A `starling relay` child process on loopback, killed when dropped.
pub struct RelayProcess {
    child: Child,
    pub url: Url,
    pub http: SocketAddr,
    pub internal: SocketAddr,
}

impl RelayProcess {
    /// Start a relay on a free port. The port is picked free and then handed to the relay,
    /// so a test running alongside may take its TCP half first: a bind failure retries on
    /// another port, anything else fails with the relay's own words.
    pub fn start(extra: &[&str]) -> Self {
        Self::start_on([127, 0, 0, 1].into(), extra)
    }

    /// As [`start`](Self::start), bound to `ip` (`0.0.0.0`: reachable from other network
    /// namespaces too); `url` and `http` stay on loopback.
    pub fn start_on(ip: std::net::IpAddr, extra: &[&str]) -> Self {
        starling_net::tls::install_default_provider();
        let mut said = Vec::new();
        for _ in 0..5 {
            match Self::try_start(ip, extra) {
                Ok(relay) => return relay,
                Err(lines) if lines.iter().any(|l| l.contains("in use")) => said = lines,
                Err(lines) => panic!("relay exited before listening:\n{}", lines.join("\n")),
            }
        }
        panic!("no free port after 5 tries:\n{}", said.join("\n"))
    }

    fn try_start(ip: std::net::IpAddr, extra: &[&str]) -> Result<Self, Vec<String>> {
        let port = free_udp_port();
        let internal = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let window = format!("{WINDOW_MIB}MiB");
        let mut args = vec![
            "relay".to_string(),
            "--bind".into(),
            SocketAddr::new(ip, port).to_string(),
            "--internal-listen".into(),
            internal.to_string(),
            "--receive-window".into(),
            window,
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(BIN)
            .args(&args)
            // HOSTILE_RELAY_LOG (a tracing filter) shows more of the relay's log on stderr.
            .env(
                "RUST_LOG",
                std::env::var("HOSTILE_RELAY_LOG")
                    .unwrap_or_else(|_| "warn,starling::relay=info".into()),
            )
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = Vec::new();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("relay listening") => break,
                Some(Ok(line)) => said.push(line),
                Some(Err(_)) => {}
                None => {
                    let _ = child.wait();
                    return Err(said);
                }
            }
        }
        // Keep draining the log so the relay never blocks on a full pipe.
        let echo = std::env::var_os("HOSTILE_RELAY_LOG").is_some();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if echo {
                    eprintln!("relay: {line}");
                }
            }
        });
        Ok(RelayProcess {
            child,
            url: Url::parse(&format!("moqt://127.0.0.1:{port}/")).unwrap(),
            http: format!("127.0.0.1:{port}").parse().unwrap(),
            internal,
        })
    }

    /// Resident memory now, from /proc.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }

    pub async fn metrics(&self) -> String {
        let response = reqwest::get(format!("http://{}/metrics", self.internal))
            .await
            .unwrap();
        response.text().await.unwrap()
    }

    pub async fn metric(&self, series: &str) -> f64 {
        let text = self.metrics().await;
        text.lines()
            .find_map(|line| {
                let (name, value) = line.rsplit_once(' ')?;
                (name == series).then(|| value.parse().unwrap())
            })
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fleet cases take turns: each loads both cores, and run together (as `cargo test` runs
/// a binary's tests) they would time each other out.
pub async fn one_fleet_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// Oversized lengths and varints on `bad`: a SUBSCRIBE claiming 2^62 - 1 bytes fails to
/// decode (past the control bound) and is reset CANCELLED (0x1), and a stream type no
/// varint-sized code names is reset INTERNAL_ERROR (0x0), as moq-net resets them (docs/wire.md,
/// SUBSCRIBE); the session lives on.
pub async fn malformed_streams_are_reset<T: Transport>(bad: &T) {
    let (mut send, mut recv) = bad.open_bi().await.unwrap();
    send.write(Bytes::from_static(&[
        0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]))
    .await
    .unwrap();
    assert_eq!(
        within(recv.read(64)).await,
        Err(TransportError::Reset(StreamCode::Cancelled.to_code())),
        "an oversized SUBSCRIBE resets its stream CANCELLED"
    );
    let (mut send, mut recv) = bad.open_bi().await.unwrap();
    send.write(Bytes::from_static(&[0xff; 8])).await.unwrap();
    assert_eq!(
        within(recv.read(64)).await,
        Err(TransportError::Reset(StreamCode::Internal.to_code())),
        "an unknown stream type resets its stream INTERNAL_ERROR"
    );
}

pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A raw QUIC session that has sent a subscriber's SETUP (so the relay asks it nothing) and
/// received the relay's.
pub async fn hostile(url: &Url) -> QuicTransport {
    hostile_as(url, Role::Subscriber).await
}

/// A raw QUIC session that has sent SETUP in `role` and received the relay's.
pub async fn hostile_as(url: &Url, role: Role) -> QuicTransport {
    set_up(dial(url, Version::Lite06).await, role).await
}

/// Requests on bidi streams: how many were answered and how many reset EVICTED (the bound's
/// refusal); anything else fails the test.
pub async fn answered_or_evicted<S>(requests: &mut [(S, impl RecvStream)]) -> (usize, usize) {
    let (mut answered, mut evicted) = (0, 0);
    for (_, recv) in requests {
        match within(recv.read(1024)).await {
            Ok(Some(_)) => answered += 1,
            Err(TransportError::Reset(code)) if code == StreamCode::Evicted.to_code() => {
                evicted += 1
            }
            other => panic!("a request is answered or refused EVICTED, got {other:?}"),
        }
    }
    (answered, evicted)
}

/// `count` uni streams each stuck inside a group header: 60 KiB of a promised 63 KiB, never
/// finished. The streams still open are returned (dropping them would end them), with how
/// many were written. With `recycle`,
/// streams the relay stopped are reset and let go as the flood goes on, as an attacker
/// would to get its stream credit back; without it they are kept, and the relay grants no
/// more streams past the credit they hold.
pub async fn stuck_headers<T: Transport>(
    transport: &T,
    count: usize,
    recycle: bool,
) -> (Vec<T::Send>, usize) {
    const WAIT: Duration = Duration::from_millis(250);
    use futures::FutureExt;
    let reset_stopped = |streams: &mut Vec<T::Send>| {
        streams.retain_mut(|stream| {
            let stopped = stream.stopped().now_or_never().is_some();
            if stopped {
                stream.reset(0);
            }
            !stopped
        })
    };
    let mut streams = Vec::with_capacity(count);
    let mut opened = 0;
    let mut waited = Duration::ZERO;
    while opened < count {
        if recycle && opened % 16 == 0 {
            reset_stopped(&mut streams);
        }
        // A peer held to its stream credit waits here (getting credit back, when it
        // recycles, from streams stopped meanwhile); past 5 s without one the flood is over.
        let mut stream = match tokio::time::timeout(WAIT, transport.open_uni()).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(_)) => break,
            Err(_) if waited < Duration::from_secs(5) => {
                waited += WAIT;
                if recycle {
                    reset_stopped(&mut streams);
                }
                continue;
            }
            Err(_) => break,
        };
        waited = Duration::ZERO;
        opened += 1;
        let mut head = BytesMut::new();
        head.put_u8(0x00); // GROUP
        head.put_slice(&[0x80, 0x00, 0xfc, 0x00]); // header length 64512
        head.put_slice(&[0u8; 60 * 1024]);
        // A stream already evicted refuses the write: that is the point.
        let _ = stream.write(head.freeze()).await;
        streams.push(stream);
    }
    (streams, opened)
}

/// A raw QUIC session from `source` (an address of 127.0.0.0/8) that has sent a
/// subscriber's SETUP.
pub async fn hostile_from(url: &Url, source: std::net::IpAddr) -> QuicTransport {
    hostile_from_as(url, source, Role::Subscriber).await
}

/// A raw QUIC session from `source` that has sent SETUP in `role`.
pub async fn hostile_from_as(url: &Url, source: std::net::IpAddr, role: Role) -> QuicTransport {
    set_up(dial_from(url, source).await, role).await
}

/// A raw-QUIC connection from `source` (an address of 127.0.0.0/8), retried while the relay
/// refuses it; no moq SETUP sent.
pub async fn dial_from(url: &Url, source: std::net::IpAddr) -> QuicTransport {
    dial_with(&hostile_client(SocketAddr::new(source, 0)), url).await
}

/// The addresses of 127.0.0.0/8 the fleets come from.
pub const FLEET_ADDRESSES: usize = 10;

/// The source address of a fleet's connection `i`: one of [`FLEET_ADDRESSES`] addresses of
/// 127.0.0.0/8 (127.0.0.2 on), in turn.
pub fn fleet_source(i: usize) -> std::net::IpAddr {
    std::net::IpAddr::from([127, 0, 0, 2 + (i % FLEET_ADDRESSES) as u8])
}

/// A raw-QUIC client endpoint on `bind` speaking lite-06, checking no certificate: what
/// every hostile connection dials from.
pub fn hostile_client(bind: SocketAddr) -> starling_net::Client {
    starling_net::Client::new(
        starling_net::ClientConfig {
            bind: Some(bind),
            ..starling_net::ClientConfig::default()
        }
        .with_alpns(&[Version::Lite06.alpn()])
        .with_tls(starling_net::TlsVerify::Disabled),
    )
    .unwrap()
}

/// A connection from `client` to `url`, retried while the relay refuses it; no moq SETUP.
pub async fn dial_with(client: &starling_net::Client, url: &Url) -> QuicTransport {
    admitted(|| client.connect(url), starling_net::ClientError::refusal)
        .await
        .transport
}

/// A WebSocket connection upgraded by hand on the relay's TCP port (from `source` when
/// given, an address of 127.0.0.0/8), its 101 answer read: the frames are the caller's.
pub async fn raw_websocket(
    http: SocketAddr,
    source: Option<std::net::IpAddr>,
) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut ws = tcp_from(http, source).await;
    ws.write_all(
        b"GET / HTTP/1.1\r\nHost: relay\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
          Sec-WebSocket-Protocol: qmux-01.moq-lite-06\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        within(ws.read_exact(&mut byte)).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    ws
}

/// A TCP connection to `addr` (from `source` when given, an address of 127.0.0.0/8).
pub async fn tcp_from(addr: SocketAddr, source: Option<std::net::IpAddr>) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(source) = source {
        socket.bind(SocketAddr::new(source, 0)).unwrap();
    }
    within(socket.connect(addr)).await.unwrap()
}

/// One masked (with a zero key) client WebSocket frame: `opcode` (0x2 binary, 0x0 a
/// continuation), FIN when `fin`, carrying `payload`.
pub fn ws_frame(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![opcode | if fin { 0x80 } else { 0 }];
    match payload.len() {
        n @ 0..=125 => frame.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(payload);
    frame
}

/// Read one (unmasked, server) WebSocket frame: its opcode and payload.
pub async fn read_ws_frame(ws: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 2];
    within(ws.read_exact(&mut head)).await.unwrap();
    let len = match head[1] & 0x7f {
        126 => within(ws.read_u16()).await.unwrap() as usize,
        127 => within(ws.read_u64()).await.unwrap() as usize,
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    within(ws.read_exact(&mut payload)).await.unwrap();
    (head[0] & 0x0f, payload)
}

/// A WebSocket (QMux) session to the relay's TCP port that has sent a subscriber's SETUP.
pub async fn hostile_websocket(http: SocketAddr) -> starling_net::qmux::QmuxTransport {
    hostile_websocket_as(http, Role::Subscriber).await
}

/// A WebSocket (QMux) session that has sent SETUP in `role`.
pub async fn hostile_websocket_as(
    http: SocketAddr,
    role: Role,
) -> starling_net::qmux::QmuxTransport {
    let url = Url::parse(&format!("ws://{http}/")).unwrap();
    let alpns = [Version::Lite06.alpn()];
    let connected = admitted(
        || starling_net::qmux::connect(&url, &alpns, &starling_net::TlsVerify::Disabled),
        starling_net::qmux::QmuxConnectError::refusal,
    )
    .await;
    set_up(connected.transport, role).await
}

/// Send SETUP in `role` on `transport` and read the relay's.
pub async fn set_up<T: Transport>(transport: T, role: Role) -> T {
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(role));
    send_uni(&transport, &setup_bytes(&setup)).await;
    let _relay_setup = within(transport.accept_uni()).await.unwrap();
    transport
}

/// An honest one-frame group `sequence`, sent on a hostile publisher's connection for the
/// subscription `id`, reaches `reader` whole.
pub async fn honest_group_arrives<T: Transport>(
    bad: &T,
    id: u64,
    reader: &mut starling_model::TrackConsumer,
    sequence: u64,
) {
    hand::send_group(bad, id, sequence, Version::Lite06).await;
    let mut honest = within(async {
        loop {
            let group = reader.next_group().await.unwrap().unwrap();
            if group.sequence() == sequence {
                break group;
            }
        }
    })
    .await;
    let frame = within(honest.next_frame()).await.unwrap().unwrap();
    assert_eq!(&frame.payload[..], format!("g{sequence}").as_bytes());
    assert!(
        within(honest.next_frame()).await.unwrap().is_none(),
        "the honest group ends after its frame"
    );
}

/// Run `work` within `limit`, failing the test instead of hanging.
pub async fn bounded<T>(limit: Duration, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(limit, work)
        .await
        .expect("hostile case took too long")
}

/// The relay's RSS stayed within the bound over `settled`.
pub fn assert_rss_bounded(relay: &RelayProcess, settled: u64, case: &str) {
    assert_rss_within(relay, settled, RSS_GROWTH_BOUND, case);
}

/// The relay's RSS grew by at most `bound` over `settled`.
pub fn assert_rss_within(relay: &RelayProcess, settled: u64, bound: u64, case: &str) {
    let rss = relay.rss();
    assert!(
        rss <= settled + bound,
        "{case}: relay RSS {} MiB, settled at {} MiB (bound +{} MiB)",
        rss / MIB,
        settled / MIB,
        bound / MIB
    );
}

/// Answer the relay's announce request on `bad` (a session set up as a publisher) with up to
/// `count` announcements `{prefix}/{n}`, written in 64 KiB batches. Returns the stream (kept
/// open: ending it would withdraw the announcements) and how many were written before the
/// relay stopped it or closed the session.
pub async fn announce_flood<T: Transport>(bad: &T, prefix: &str, count: u32) -> (T::Send, u32) {
    let (mut send, mut recv) = within(bad.accept_bi()).await.unwrap();
    let _request = within(recv.read(1024)).await.unwrap();
    let mut flood = BytesMut::new();
    encode_message(&AnnounceOk::default(), Version::Lite06, &mut flood).unwrap();
    for n in 0..count {
        let start = Announcement::Start {
            suffix: Path::new(&format!("{prefix}/{n}")).unwrap(),
            hops: Hops::from_vec(Vec::new()).unwrap(),
            cost: RouteCost { warm: 0, cold: 0 },
        };
        encode_typed(&start, Version::Lite06, &mut flood).unwrap();
        if flood.len() > 64 * 1024 && send.write(flood.split().freeze()).await.is_err() {
            return (send, n);
        }
    }
    let written = if send.write(flood.split().freeze()).await.is_ok() {
        count
    } else {
        count.saturating_sub(1)
    };
    (send, written)
}

/// A publisher driven by hand on `bad`: it announces `name`, a reader on a session of its
/// own subscribes to its track `t`, and the relay's subscription is answered. Returns the
/// subscription, the reader's session (kept open) and the reader.
pub async fn hand_publisher<T: Transport + Clone>(
    bad: &T,
    url: &Url,
    name: &str,
) -> (
    hand::Upstream<T>,
    starling_session::Session<QuicTransport>,
    starling_model::TrackConsumer,
) {
    use starling_model::StartAt;
    use starling_proto::SubscribeResponse;
    let mut upstreams = hand::serve(bad.clone(), Version::Lite06, Path::new(name).unwrap(), ());
    let (reader_session, broadcast) = crate::common::subscribed_broadcast(url, name).await;
    let reader = broadcast.subscribe_track("t", StartAt::default()).unwrap();
    let mut upstream = within(upstreams.recv()).await.unwrap();
    upstream
        .respond(SubscribeResponse::Start { group: 0 }, Version::Lite06)
        .await;
    (upstream, reader_session, reader)
}
