//! The hostile-peer suite (issue 10): a real `starling relay` process, an honest publisher and
//! subscriber (the witness, which must see every frame without a gap), and clients that
//! misbehave on purpose over real sockets. For each case the hostile session is closed, its
//! streams stopped or its connection refused with the right code, and the relay's resident
//! memory (read from /proc) stays under the bound the test states.

#[path = "../../relay/tests/common/mod.rs"]
mod common;
#[path = "../../session/tests/hand/mod.rs"]
mod hand;
#[path = "../../relay/tests/witness/mod.rs"]
mod witness;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_net::QuicTransport;
use starling_proto::{encode_message, Path, Role, SessionCode, Setup, StreamCode, Version};
use starling_session::random_hop;
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

use common::{admitted, dial, within};
use witness::{announce_request, assert_alive, closed_code, send_uni, setup_bytes, witness};

const BIN: &str = env!("CARGO_BIN_EXE_starling");
const MIB: u64 = 1 << 20;
/// The connection window the relay runs with (the partial-header flood offers more).
const WINDOW_MIB: u64 = 33;
/// Most the relay's RSS may grow over its settled size during a case.
const RSS_GROWTH_BOUND: u64 = 200 * MIB;

/// A `starling relay` child process on loopback, killed when dropped.
struct RelayProcess {
    child: Child,
    url: Url,
    http: SocketAddr,
    internal: SocketAddr,
}

impl RelayProcess {
    /// Start a relay on a free port. The port is picked free and then handed to the relay,
    /// so a test running alongside may take its TCP half first: a bind failure retries on
    /// another port, anything else fails with the relay's own words.
    fn start(extra: &[&str]) -> Self {
        starling_net::tls::install_default_provider();
        let mut said = Vec::new();
        for _ in 0..5 {
            match Self::try_start(extra) {
                Ok(relay) => return relay,
                Err(lines) if lines.iter().any(|l| l.contains("in use")) => said = lines,
                Err(lines) => panic!("relay exited before listening:\n{}", lines.join("\n")),
            }
        }
        panic!("no free port after 5 tries:\n{}", said.join("\n"))
    }

    fn try_start(extra: &[&str]) -> Result<Self, Vec<String>> {
        let port = free_udp_port();
        let internal = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let window = format!("{WINDOW_MIB}MiB");
        let mut args = vec![
            "relay".to_string(),
            "--bind".into(),
            format!("127.0.0.1:{port}"),
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
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }

    async fn metrics(&self) -> String {
        let response = reqwest::get(format!("http://{}/metrics", self.internal))
            .await
            .unwrap();
        response.text().await.unwrap()
    }

    async fn metric(&self, series: &str) -> f64 {
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

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A raw QUIC session that has sent a subscriber's SETUP (so the relay asks it nothing) and
/// received the relay's.
async fn hostile(url: &Url) -> QuicTransport {
    hostile_as(url, Role::Subscriber).await
}

/// A raw QUIC session that has sent SETUP in `role` and received the relay's.
async fn hostile_as(url: &Url, role: Role) -> QuicTransport {
    let transport = dial(url, Version::Lite06).await;
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(role));
    send_uni(&transport, &setup_bytes(&setup)).await;
    let _relay_setup = within(transport.accept_uni()).await.unwrap();
    transport
}

/// Requests on bidi streams: how many were answered and how many reset EVICTED (the bound's
/// refusal); anything else fails the test.
async fn answered_or_evicted<S>(requests: &mut [(S, impl RecvStream)]) -> (usize, usize) {
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
async fn stuck_headers<T: Transport>(
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
async fn hostile_from(url: &Url, source: std::net::IpAddr) -> QuicTransport {
    hostile_from_as(url, source, Role::Subscriber).await
}

/// A raw QUIC session from `source` that has sent SETUP in `role`.
async fn hostile_from_as(url: &Url, source: std::net::IpAddr, role: Role) -> QuicTransport {
    let client = starling_net::Client::new(
        starling_net::ClientConfig {
            bind: Some(SocketAddr::new(source, 0)),
            ..starling_net::ClientConfig::default()
        }
        .with_alpns(&[Version::Lite06.alpn()])
        .with_tls(starling_net::TlsVerify::Disabled),
    )
    .unwrap();
    let transport = admitted(|| client.connect(url), starling_net::ClientError::refusal)
        .await
        .transport;
    set_up(transport, role).await
}

/// A WebSocket (QMux) session to the relay's TCP port that has sent a subscriber's SETUP.
async fn hostile_websocket(http: SocketAddr) -> starling_net::qmux::QmuxTransport {
    hostile_websocket_as(http, Role::Subscriber).await
}

/// A WebSocket (QMux) session that has sent SETUP in `role`.
async fn hostile_websocket_as(http: SocketAddr, role: Role) -> starling_net::qmux::QmuxTransport {
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
async fn set_up<T: Transport>(transport: T, role: Role) -> T {
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(role));
    send_uni(&transport, &setup_bytes(&setup)).await;
    let _relay_setup = within(transport.accept_uni()).await.unwrap();
    transport
}

/// An honest one-frame group `sequence`, sent on a hostile publisher's connection for the
/// subscription `id`, reaches `reader` whole.
async fn honest_group_arrives<T: Transport>(
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
async fn bounded<T>(limit: Duration, work: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(limit, work)
        .await
        .expect("hostile case took too long")
}

/// The relay's RSS stayed within the bound over `settled`.
fn assert_rss_bounded(relay: &RelayProcess, settled: u64, case: &str) {
    let rss = relay.rss();
    assert!(
        rss <= settled + RSS_GROWTH_BOUND,
        "{case}: relay RSS {} MiB, settled at {} MiB (bound +{} MiB)",
        rss / MIB,
        settled / MIB,
        RSS_GROWTH_BOUND / MIB
    );
}

/// Streams and bytes: partial units filling the window, ten thousand one-byte streams,
/// oversized lengths and varints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_abuse_is_evicted_or_refused_and_the_witness_keeps_flowing() {
    let relay = RelayProcess::start(&[]);
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    // Partial group headers on 640 streams (a 60 KiB header promised, never finished):
    // 38 MiB offered into a 33 MiB window. The oldest header-less streams are evicted;
    // an honest request on the same connection is still answered.
    let bad = hostile(&relay.url).await;
    let (mut streams, _) = bounded(Duration::from_secs(60), stuck_headers(&bad, 640, false)).await;
    let code = within(streams[0].stopped()).await;
    assert_eq!(
        code,
        Ok(Some(StreamCode::Evicted.to_code())),
        "oldest evicted"
    );
    assert!(
        relay
            .metric("starling_receive_budget_evictions_total")
            .await
            > 0.0
    );
    assert!(relay.metric("starling_receive_budget_peak_bytes").await <= (WINDOW_MIB * MIB) as f64);
    assert_alive(&bad, announce_request()).await;
    assert_rss_bounded(&relay, settled, "partial units");
    drop(streams);
    drop(bad);

    // Ten thousand streams of one byte each, all left open.
    let bad = hostile(&relay.url).await;
    let mut streams = Vec::new();
    bounded(Duration::from_secs(120), async {
        for _ in 0..10_000 {
            let mut stream = bad.open_uni().await.unwrap();
            stream.write(Bytes::from_static(&[0x00])).await.unwrap();
            streams.push(stream);
        }
    })
    .await;
    assert_alive(&bad, announce_request()).await;
    assert_rss_bounded(&relay, settled, "ten thousand streams");
    drop(streams);
    drop(bad);

    // Oversized lengths and varints: a SUBSCRIBE claiming 2^62 - 1 bytes is refused on its
    // stream; so is a stream type no varint-sized code names; the session lives on.
    let bad = hostile(&relay.url).await;
    let (mut send, mut recv) = bad.open_bi().await.unwrap();
    send.write(Bytes::from_static(&[
        0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]))
    .await
    .unwrap();
    // A SUBSCRIBE that fails to decode (past the control bound) is reset CANCELLED (0x1),
    // as moq-net does (docs/wire.md, SUBSCRIBE).
    assert_eq!(
        within(recv.read(64)).await,
        Err(TransportError::Reset(StreamCode::Cancelled.to_code())),
        "an oversized SUBSCRIBE resets its stream"
    );
    let (mut send, mut recv) = bad.open_bi().await.unwrap();
    send.write(Bytes::from_static(&[0xff; 8])).await.unwrap();
    // An unknown stream type: INTERNAL_ERROR (0x0), as moq-net resets it.
    assert_eq!(
        within(recv.read(64)).await,
        Err(TransportError::Reset(StreamCode::Internal.to_code())),
        "an unknown stream type resets its stream"
    );
    assert_alive(&bad, announce_request()).await;
    drop(bad);

    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
    assert_rss_bounded(&relay, settled, "stream abuse");
}

/// Requests: an interest flood past the per-session bound, and a subscriber that never reads
/// what it asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_floods_are_bounded_and_the_witness_keeps_flowing() {
    let relay = RelayProcess::start(&[]);
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    // 1100 announce interests on one session: 1024 are served, the rest reset EVICTED.
    let bad = hostile(&relay.url).await;
    let mut interests = Vec::new();
    for _ in 0..1100 {
        let (mut send, recv) = bad.open_bi().await.unwrap();
        send.write(announce_request()).await.unwrap();
        interests.push((send, recv));
    }
    assert_eq!(answered_or_evicted(&mut interests).await, (1024, 76));
    drop(interests);
    drop(bad);

    // A subscriber that never reads: it asks for the witness's track and never accepts a
    // group stream. The relay skips it (TOO_FAR_BEHIND) instead of queueing for it.
    let bad = hostile(&relay.url).await;
    let (mut send, _recv) = bad.open_bi().await.unwrap();
    send.write(witness::subscribe_bytes(1, "good", "seq"))
        .await
        .unwrap();
    within(async {
        loop {
            if relay.metric("starling_slow_subscriber_skips_total").await > 0.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_rss_bounded(&relay, settled, "a subscriber that never reads");
    drop(bad);

    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// Connections: a SETUP that never comes, a connection flood past the per-address bound,
/// and an HTTP slowloris.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_abuse_is_refused_and_the_witness_keeps_flowing() {
    let relay = RelayProcess::start(&[
        "--limit-loopback",
        "--max-sessions-per-ip",
        "64",
        "--max-handshakes-per-ip",
        "1000",
    ]);
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    // A client that connects and never sends SETUP is closed at the handshake deadline.
    let silent = dial(&relay.url, Version::Lite06).await;
    let silent_closed = tokio::spawn(async move {
        match tokio::time::timeout(Duration::from_secs(20), silent.closed()).await {
            Ok(TransportError::ClosedByPeer { code, .. }) => code,
            other => panic!("a silent client is closed by the relay, got {other:?}"),
        }
    });

    // Slowloris: 200 HTTP connections dribbling a request head; the API still answers.
    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut stream = tokio::net::TcpStream::connect(relay.http).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: relay\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    let health = reqwest::get(format!("http://{}/health", relay.http))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    // A connection flood: 100 more sessions from this address, which may hold 64 (the
    // witness and the silent client hold three).
    let mut held = Vec::new();
    let mut refusals = 0;
    for _ in 0..100 {
        match within(common::quic_client(Version::Lite06).connect(&relay.url)).await {
            Ok(connected) => held.push(connected),
            Err(err) => {
                assert!(err.to_string().contains("refused"), "{err}");
                refusals += 1;
            }
        }
    }
    assert!(refusals >= 39, "{refusals} of 100 refused");
    assert_eq!(
        relay
            .metric("starling_connections_refused_total{reason=\"source_sessions\"}")
            .await,
        refusals as f64
    );
    drop(held);

    assert_eq!(
        within(silent_closed).await.unwrap(),
        SessionCode::ControlTimeout.to_code(),
        "silent client closed with CONTROL_TIMEOUT"
    );
    // By now (past the 10 s head deadline) the slowloris connections are cut.
    for stream in &mut slow {
        let mut rest = Vec::new();
        within(stream.read_to_end(&mut rest)).await.unwrap();
    }
    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
    assert_rss_bounded(&relay, settled, "connection abuse");
}

/// A publisher and a WebSocket client: an announce flood past the per-stream bound, and a
/// WebSocket message sent in one-byte fragments past the message bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publisher_and_websocket_abuse_is_cut_and_the_witness_keeps_flowing() {
    use starling_proto::{encode_typed, AnnounceOk, Announcement, Hops, RouteCost};
    let relay = RelayProcess::start(&[]);
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    // A publisher answers the relay's announce request with 70 000 broadcasts; the bound is
    // 65 536 per stream. Its session is closed and every route it made goes with it.
    let bad = dial(&relay.url, Version::Lite06).await;
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(Role::Publisher));
    send_uni(&bad, &setup_bytes(&setup)).await;
    let (mut send, mut recv) = within(bad.accept_bi()).await.unwrap();
    let _request = within(recv.read(1024)).await.unwrap();
    let mut flood = BytesMut::new();
    encode_message(&AnnounceOk::default(), Version::Lite06, &mut flood).unwrap();
    let announced = bounded(Duration::from_secs(60), async {
        for n in 0..70_000u32 {
            let start = Announcement::Start {
                suffix: Path::new(&format!("flood/{n}")).unwrap(),
                hops: Hops::from_vec(Vec::new()).unwrap(),
                cost: RouteCost { warm: 0, cold: 0 },
            };
            encode_typed(&start, Version::Lite06, &mut flood).unwrap();
            if flood.len() > 64 * 1024 && send.write(flood.split().freeze()).await.is_err() {
                return n;
            }
        }
        let _ = send.write(flood.split().freeze()).await;
        70_000
    })
    .await;
    assert!(
        announced >= 65_536,
        "the relay took {announced} before stopping the stream"
    );
    let code = closed_code(&bad).await;
    assert_ne!(code, SessionCode::NoError.to_code(), "closed for the flood");
    within(async {
        // The witness's broadcast is all that is left.
        while relay.metric("starling_broadcasts").await != 1.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_rss_bounded(&relay, settled, "announce flood");

    // One-byte WebSocket fragments: a message never finished, past the 1 MiB message bound.
    let mut ws = tokio::net::TcpStream::connect(relay.http).await.unwrap();
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
    // A binary frame without FIN, then continuations: each a masked one-byte frame.
    let fragment = |opcode: u8| [opcode, 0x81, 0, 0, 0, 0, 0x55];
    let mut frames = Vec::with_capacity(7 * 4096);
    let mut sent = 0usize;
    let cut = bounded(Duration::from_secs(120), async {
        let mut first = true;
        while sent <= (1 << 20) + 4096 {
            frames.clear();
            for _ in 0..4096 {
                frames.extend_from_slice(&fragment(if first { 0x02 } else { 0x00 }));
                first = false;
            }
            if ws.write_all(&frames).await.is_err() {
                return true;
            }
            sent += 4096;
        }
        // Past the bound: the relay closes the connection (a close frame, then EOF).
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), ws.read_to_end(&mut rest))
            .await
            .is_ok()
    })
    .await;
    assert!(
        cut,
        "the relay cuts a message past 1 MiB ({sent} fragments sent)"
    );
    assert_rss_bounded(&relay, settled, "one-byte WebSocket fragments");

    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

/// A publisher driven by hand and a subscriber flooding it with subscriptions: groups whose
/// sequences jump (2^40, then 0, 1, 2 …), frames declared at the 32 MiB bound with only a
/// piece of each sent, and more subscriptions on one session than it may hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publisher_and_subscription_abuse_is_bounded_and_the_witness_keeps_flowing() {
    use starling_model::StartAt;
    use starling_proto::{FrameHeader, SubscribeResponse};
    const JUMP: u64 = 1 << 40;
    let relay = RelayProcess::start(&[]);
    let witness = witness(&relay.url).await;
    let settled = relay.rss();

    let bad = hostile_as(&relay.url, Role::Publisher).await;
    let mut upstreams = hand::serve(bad.clone(), Version::Lite06, Path::new("evil").unwrap(), ());
    let (_reader_session, broadcast) = common::subscribed_broadcast(&relay.url, "evil").await;
    let mut reader = broadcast.subscribe_track("t", StartAt::default()).unwrap();
    let mut upstream = within(upstreams.recv()).await.unwrap();
    upstream
        .respond(SubscribeResponse::Start { group: JUMP }, Version::Lite06)
        .await;

    // Sequence jumps: group 2^40, then 0, 1, 2 … The relay's group index holds only what is
    // cached, so it neither grows with the gap nor slows down per group; the track is still
    // served afterwards.
    hand::send_group(&bad, upstream.id, JUMP, Version::Lite06).await;
    let first = within(reader.next_group()).await.unwrap().unwrap();
    assert_eq!(first.sequence(), JUMP);
    bounded(Duration::from_secs(120), async {
        for sequence in 0..3000 {
            hand::send_group(&bad, upstream.id, sequence, Version::Lite06).await;
        }
    })
    .await;
    hand::send_group(&bad, upstream.id, JUMP + 1, Version::Lite06).await;
    let next = within(reader.next_group()).await.unwrap().unwrap();
    assert_eq!(next.sequence(), JUMP + 1, "the track is still served");
    assert_rss_bounded(&relay, settled, "sequence jumps");

    // Frames declared at the 32 MiB bound on 200 streams, 64 KiB of each sent (6.4 GiB
    // promised). Each goes to its group in pieces and is charged to the cache at its declared
    // size, so the track's cache bound expires all but the latest; the relay holds the pieces
    // that came, not what was promised.
    let mut streams = Vec::new();
    bounded(Duration::from_secs(60), async {
        for i in 0..200 {
            let frame = FrameHeader {
                timestamp_delta: 0,
                size: 32 << 20,
            };
            let mut head = hand::group_head(upstream.id, JUMP + 2 + i, frame, Version::Lite06);
            head.put_slice(&[0u8; 64 * 1024]);
            let mut stream = bad.open_uni().await.unwrap();
            // A stream whose group already left the cache may be stopped: that is the point.
            let _ = stream.write(head.freeze()).await;
            streams.push(stream);
        }
    })
    .await;
    let track_bound = (64 + 32) * MIB;
    within(async {
        while relay.metric("starling_cache_bytes").await > track_bound as f64 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // An honest group on the same connection, among the frames that never complete, goes
    // through whole: the subscriber reads all of it.
    honest_group_arrives(&bad, upstream.id, &mut reader, JUMP + 1000).await;
    // More of the oldest frame: its group left the cache, so the piece is refused and the
    // stream stopped, not held uncharged.
    let _ = streams[0].write(Bytes::from(vec![0u8; 64 * 1024])).await;
    let stopped = within(streams[0].stopped()).await;
    assert_eq!(
        stopped,
        Ok(Some(StreamCode::Old.to_code())),
        "a piece for a group the cache expired stops its stream with OLD (0x34)"
    );
    assert_rss_bounded(&relay, settled, "frames promised and never sent");
    drop(streams);

    // A subscription flood: 4200 subscriptions on one session, which may hold 4096; the rest
    // are reset EVICTED.
    let flood = hostile(&relay.url).await;
    let mut subscriptions = Vec::new();
    bounded(Duration::from_secs(120), async {
        for id in 0..4200 {
            let (mut send, recv) = flood.open_bi().await.unwrap();
            send.write(witness::subscribe_bytes(id, "evil", "t"))
                .await
                .unwrap();
            subscriptions.push((send, recv));
        }
    })
    .await;
    assert_eq!(answered_or_evicted(&mut subscriptions).await, (4096, 104));
    assert_rss_bounded(&relay, settled, "subscription flood");
    drop(subscriptions);
    drop(flood);
    drop(bad);

    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}

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
    let relay = fleet_relay();
    let url = relay.url.clone();
    fleet_stuck_inside_headers(&relay, |i| {
        let source = std::net::IpAddr::from([127, 0, 0, 2 + (i % 10) as u8]);
        let url = url.clone();
        async move { hostile_from(&url, source).await }
    })
    .await;
}

/// The same fleet over WebSocket (QMux, whose MAX_DATA the budget grants as quinn's window).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_fleet_stuck_inside_headers_is_held_to_the_relay_wide_receive_budget() {
    let relay = fleet_relay();
    let http = relay.http;
    fleet_stuck_inside_headers(&relay, |_| hostile_websocket(http)).await;
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
    match std::env::var("FLEET_BUDGET").as_deref() {
        Ok("default") => RelayProcess::start(&[]),
        Ok(budget) => RelayProcess::start(&["--receive-budget", budget]),
        Err(_) => RelayProcess::start(&["--receive-budget", "32MiB"]),
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
    assert!(
        rss <= settled + budget + 256 * MIB,
        "relay RSS {} MiB, settled at {} MiB (bound: the budget plus 256 MiB)",
        rss / MIB,
        settled / MIB
    );
    for bad in fleet.iter().step_by(10) {
        assert_alive(bad, announce_request()).await;
    }
    drop(streams);
    drop(fleet);
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
    let relay = frames_fleet_relay();
    let url = relay.url.clone();
    fleet_frames_never_complete(&relay, |i| {
        let source = std::net::IpAddr::from([127, 0, 0, 2 + (i % 10) as u8]);
        let url = url.clone();
        async move { hostile_from_as(&url, source, Role::Publisher).await }
    })
    .await;
}

/// The same fleet over WebSocket (QMux).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_fleet_of_frames_that_never_complete_is_held_to_the_cache_budget() {
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
    use starling_model::StartAt;
    use starling_proto::{FrameHeader, SubscribeResponse};
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
                let name = format!("evil/{i}");
                let mut upstreams =
                    hand::serve(bad.clone(), Version::Lite06, Path::new(&name).unwrap(), ());
                let (reader_session, broadcast) = common::subscribed_broadcast(&url, &name).await;
                let reader = broadcast.subscribe_track("t", StartAt::default()).unwrap();
                let mut upstream = within(upstreams.recv()).await.unwrap();
                upstream
                    .respond(SubscribeResponse::Start { group: 0 }, Version::Lite06)
                    .await;
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
    assert!(
        rss <= settled + cache_budget + receive_budget + 256 * MIB,
        "relay RSS {} MiB, settled at {} MiB (bound: the cache and receive budgets plus 256 MiB)",
        rss / MIB,
        settled / MIB
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
