//! Loopback tests of the QUIC server and client: streams, codes, closes, ALPN and WebTransport negotiation, the http:// bootstrap.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use starling_net::{
    certificate_router, serve_http, Accepted, Binding, Client, ClientConfig, ClientError,
    Connected, QuicTransport, Server, ServerConfig, TlsCertificate, TlsVerify, MOQ_LITE_05,
    MOQ_LITE_06,
};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use url::Url;

/// Upper bound for any single step, so a broken test fails instead of hanging.
const STEP: Duration = Duration::from_secs(10);

async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .expect("step timed out")
}

fn certificate() -> TlsCertificate {
    TlsCertificate::self_signed(&["localhost", "127.0.0.1"]).expect("generate certificate")
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn server_with(alpns: &[&str], certificate: TlsCertificate) -> Server {
    Server::bind(
        ServerConfig::new(certificate)
            .with_bind(loopback())
            .with_alpns(alpns),
    )
    .expect("bind server")
}

fn server() -> Server {
    server_with(&[MOQ_LITE_06, MOQ_LITE_05], certificate())
}

fn pinned_client(server: &Server, alpns: &[&str]) -> Client {
    Client::new(
        ClientConfig::default()
            .with_alpns(alpns)
            .with_tls(TlsVerify::PinnedSha256(vec![server
                .certificate()
                .fingerprint()])),
    )
    .expect("client")
}

fn url(scheme: &str, server: &Server, rest: &str) -> Url {
    let port = server.local_addr().unwrap().port();
    Url::parse(&format!("{scheme}://127.0.0.1:{port}{rest}")).unwrap()
}

/// Connect and accept the matching server side.
async fn pair(server: &Server, client: &Client, url: &Url) -> (Connected, Accepted) {
    let (connected, accepted) =
        within(async { tokio::join!(client.connect(url), server.accept()) }).await;
    (
        connected.expect("client connect"),
        accepted.expect("server accept"),
    )
}

/// Read until `len` bytes arrived.
async fn read_exact(recv: &mut impl RecvStream, len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < len {
        let chunk = within(recv.read(len - out.len()))
            .await
            .expect("read")
            .expect("unexpected FIN");
        out.extend_from_slice(&chunk);
    }
    out
}

async fn expect_fin(recv: &mut impl RecvStream) {
    assert_eq!(within(recv.read(1024)).await.expect("read"), None);
}

/// Read until the stream fails, returning the error.
async fn read_error(recv: &mut impl RecvStream) -> TransportError {
    loop {
        match within(recv.read(1024)).await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("FIN where an error was expected"),
            Err(err) => return err,
        }
    }
}

/// The same exercise over either binding: bidi and uni streams both ways, FIN, reset,
/// STOP_SENDING, datagrams, and a session close with code 3.
async fn exercise(client: QuicTransport, server: QuicTransport) {
    // Bidirectional, client-initiated: bytes both ways and FIN both ways.
    let (mut cs, mut cr) = within(client.open_bi()).await.unwrap();
    cs.set_priority(7);
    cs.write(Bytes::from_static(b"ping")).await.unwrap();
    let (mut ss, mut sr) = within(server.accept_bi()).await.unwrap();
    assert_eq!(read_exact(&mut sr, 4).await, b"ping");
    ss.write(Bytes::from_static(b"pong")).await.unwrap();
    ss.finish().unwrap();
    assert_eq!(read_exact(&mut cr, 4).await, b"pong");
    expect_fin(&mut cr).await;
    cs.finish().unwrap();
    expect_fin(&mut sr).await;

    // Unidirectional both ways.
    let mut su = within(server.open_uni()).await.unwrap();
    su.write(Bytes::from_static(b"from server")).await.unwrap();
    su.finish().unwrap();
    let mut cu = within(client.accept_uni()).await.unwrap();
    assert_eq!(read_exact(&mut cu, 11).await, b"from server");
    expect_fin(&mut cu).await;

    let mut cu = within(client.open_uni()).await.unwrap();
    cu.write(Bytes::from_static(b"from client")).await.unwrap();
    cu.finish().unwrap();
    let mut su = within(server.accept_uni()).await.unwrap();
    assert_eq!(read_exact(&mut su, 11).await, b"from client");
    expect_fin(&mut su).await;

    // RESET_STREAM with moq code 0x35 (EVICTED).
    let mut cu = within(client.open_uni()).await.unwrap();
    cu.write(Bytes::from_static(b"x")).await.unwrap();
    let mut su = within(server.accept_uni()).await.unwrap();
    assert_eq!(read_exact(&mut su, 1).await, b"x");
    cu.reset(0x35);
    assert_eq!(read_error(&mut su).await, TransportError::Reset(0x35));

    // STOP_SENDING with moq code 0x12, seen by `stopped` and by the next write.
    let (mut cs, _cr) = within(client.open_bi()).await.unwrap();
    cs.write(Bytes::from_static(b"y")).await.unwrap();
    let (_ss, mut sr) = within(server.accept_bi()).await.unwrap();
    assert_eq!(read_exact(&mut sr, 1).await, b"y");
    sr.stop(0x12);
    assert_eq!(within(cs.stopped()).await, Ok(Some(0x12)));
    assert_eq!(
        within(cs.write(Bytes::from_static(b"z"))).await,
        Err(TransportError::Stopped(0x12))
    );

    // Dropping an unfinished send stream resets it with CANCELLED (1); dropping an unread
    // receive stream stops it with CANCELLED.
    let mut cu = within(client.open_uni()).await.unwrap();
    cu.write(Bytes::from_static(b"d")).await.unwrap();
    let mut su = within(server.accept_uni()).await.unwrap();
    assert_eq!(read_exact(&mut su, 1).await, b"d");
    drop(cu);
    assert_eq!(read_error(&mut su).await, TransportError::Reset(1));

    let (mut cs, _cr) = within(client.open_bi()).await.unwrap();
    cs.write(Bytes::from_static(b"e")).await.unwrap();
    let (_ss, mut sr) = within(server.accept_bi()).await.unwrap();
    assert_eq!(read_exact(&mut sr, 1).await, b"e");
    drop(sr);
    assert_eq!(within(cs.stopped()).await, Ok(Some(1)));

    // Datagrams (resent until one arrives: loss is allowed, even on loopback).
    assert!(client.max_datagram_size() > 0);
    let received = within(async {
        let mut resend = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                got = server.recv_datagram() => break got,
                _ = resend.tick() => client.send_datagram(Bytes::from_static(b"dgram")).unwrap(),
            }
        }
    })
    .await;
    assert_eq!(received.unwrap(), Bytes::from_static(b"dgram"));
    assert!(client.rtt_ms().is_some());

    // Session close with code 3, seen by the peer as ClosedByPeer and locally as ClosedLocally.
    let pending = server.clone();
    let accept = tokio::spawn(async move { pending.accept_bi().await.err() });
    client.close(3, "bye");
    assert_eq!(
        within(server.closed()).await,
        TransportError::ClosedByPeer {
            code: 3,
            reason: "bye".into()
        }
    );
    assert_eq!(
        within(accept).await.unwrap(),
        Some(TransportError::ClosedByPeer {
            code: 3,
            reason: "bye".into()
        })
    );
    assert_eq!(within(client.closed()).await, TransportError::ClosedLocally);
    assert!(matches!(
        within(client.open_bi()).await,
        Err(TransportError::ClosedLocally)
    ));
}

#[tokio::test]
async fn raw_quic_streams_codes_and_close() {
    let server = server();
    let client = pinned_client(&server, &[MOQ_LITE_06, MOQ_LITE_05]);
    let (connected, accepted) = pair(
        &server,
        &client,
        &url("moqt", &server, "/room?jwt=abc#frag"),
    )
    .await;

    assert_eq!(connected.binding, Binding::RawQuic);
    assert_eq!(connected.protocol, MOQ_LITE_06);
    assert_eq!(connected.setup_path.as_deref(), Some("/room?jwt=abc"));
    assert_eq!(accepted.binding, Binding::RawQuic);
    assert_eq!(accepted.protocol.as_deref(), Some(MOQ_LITE_06));
    assert_eq!(accepted.path, None);
    assert_eq!(
        accepted.remote.ip(),
        "127.0.0.1".parse::<std::net::IpAddr>().unwrap()
    );
    assert_eq!(accepted.server_name.as_deref(), None); // IP literals carry no SNI

    exercise(connected.transport, accepted.transport).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webtransport_streams_codes_and_close() {
    let server = server();
    let client = pinned_client(&server, &[MOQ_LITE_06, MOQ_LITE_05]);
    let (connected, accepted) =
        pair(&server, &client, &url("https", &server, "/some/path?jwt=x")).await;

    assert_eq!(connected.binding, Binding::WebTransport);
    assert_eq!(connected.protocol, MOQ_LITE_06);
    assert_eq!(connected.setup_path, None);
    assert_eq!(accepted.binding, Binding::WebTransport);
    assert_eq!(accepted.protocol.as_deref(), Some(MOQ_LITE_06));
    assert_eq!(accepted.path.as_deref(), Some("/some/path?jwt=x"));
    assert_eq!(accepted.server_name.as_deref(), Some("127.0.0.1"));

    exercise(connected.transport, accepted.transport).await;
}

#[tokio::test]
async fn webtransport_protocol_follows_client_order() {
    let server = server();

    // Only 05 offered: 05.
    let client = pinned_client(&server, &[MOQ_LITE_05]);
    let (connected, accepted) = pair(&server, &client, &url("https", &server, "/")).await;
    assert_eq!(connected.protocol, MOQ_LITE_05);
    assert_eq!(accepted.protocol.as_deref(), Some(MOQ_LITE_05));
    assert_eq!(accepted.path.as_deref(), Some("/"));

    // Client prefers 05 over 06: the client's order wins on WebTransport.
    let client = pinned_client(&server, &[MOQ_LITE_05, MOQ_LITE_06]);
    let (connected, _accepted) = pair(&server, &client, &url("https", &server, "/")).await;
    assert_eq!(connected.protocol, MOQ_LITE_05);

    // Nothing in common: the server still answers 200 without wt-protocol and reports
    // None; the client keeps the session with no protocol, for the version to be chosen in
    // band (the legacy SETUP), as moq-net's client does.
    let client = pinned_client(&server, &["moq-lite-03"]);
    let target = url("https", &server, "/");
    let (connected, accepted) =
        within(async { tokio::join!(client.connect(&target), server.accept()) }).await;
    assert_eq!(connected.unwrap().protocol, "");
    let accepted = accepted.unwrap();
    assert_eq!(accepted.protocol, None);
    assert_eq!(accepted.binding, Binding::WebTransport);
}

#[tokio::test]
async fn raw_quic_alpn_negotiation() {
    let server = server();

    let client = pinned_client(&server, &[MOQ_LITE_05]);
    let (connected, accepted) = pair(&server, &client, &url("moqt", &server, "")).await;
    assert_eq!(connected.protocol, MOQ_LITE_05);
    assert_eq!(accepted.protocol.as_deref(), Some(MOQ_LITE_05));
    assert_eq!(connected.setup_path, None);

    // Raw QUIC: rustls picks in the server's order, so 06 even when the client prefers 05.
    let client = pinned_client(&server, &[MOQ_LITE_05, MOQ_LITE_06]);
    let (connected, accepted) = pair(&server, &client, &url("moql", &server, "/")).await;
    assert_eq!(connected.protocol, MOQ_LITE_06);
    assert_eq!(accepted.protocol.as_deref(), Some(MOQ_LITE_06));
    assert_eq!(connected.setup_path.as_deref(), Some("/"));

    // Host names resolve (localhost may list ::1 first; the server is IPv4 only).
    let port = server.local_addr().unwrap().port();
    let target = Url::parse(&format!("moqt://localhost:{port}/x")).unwrap();
    let (connected, accepted) = pair(&server, &client, &target).await;
    assert_eq!(connected.setup_path.as_deref(), Some("/x"));
    assert_eq!(accepted.server_name.as_deref(), Some("localhost"));

    // No overlap: the TLS handshake fails.
    let client = pinned_client(&server, &["moq-lite-03"]);
    let failed = within(client.connect(&url("moqt", &server, ""))).await;
    assert!(failed.is_err(), "{failed:?}");
}

#[tokio::test]
async fn pinning_rejects_other_certificates() {
    let server = server();
    let other = certificate();
    let client = Client::new(
        ClientConfig::default().with_tls(TlsVerify::PinnedSha256(vec![other.fingerprint()])),
    )
    .unwrap();
    for scheme in ["moqt", "https"] {
        let failed = within(client.connect(&url(scheme, &server, "/"))).await;
        assert!(
            matches!(
                failed,
                Err(ClientError::Connection(_)) | Err(ClientError::WebTransport(_))
            ),
            "{scheme}: {failed:?}"
        );
    }

    // Verification disabled accepts anything.
    let client = Client::new(ClientConfig::default().with_tls(TlsVerify::Disabled)).unwrap();
    let (connected, _accepted) = pair(&server, &client, &url("moqt", &server, "")).await;
    assert_eq!(connected.protocol, MOQ_LITE_06);
}

#[tokio::test]
async fn raw_quic_stream_codes_use_the_webtransport_mapping_on_the_wire() {
    let server = server();
    let client = pinned_client(&server, &[MOQ_LITE_06]);
    let target = url("moqt", &server, "");
    let (conn, accepted) =
        within(async { tokio::join!(client.dial_quic(&target, &[MOQ_LITE_06]), server.accept()) })
            .await;
    let conn = conn.unwrap();
    let transport = accepted.unwrap().transport;

    // Our reset(0x35) arrives as 0x52e4a40fa911 (docs/wire.md §7.3 table).
    let mut send = within(transport.open_uni()).await.unwrap();
    send.write(Bytes::from_static(b"a")).await.unwrap();
    let mut recv = within(conn.accept_uni()).await.unwrap();
    let mut buf = [0u8; 1];
    within(recv.read_exact(&mut buf)).await.unwrap();
    send.reset(0x35);
    let code = loop {
        match within(recv.read(&mut [0u8; 16])).await {
            Ok(_) => continue,
            Err(quinn::ReadError::Reset(code)) => break code.into_inner(),
            Err(other) => panic!("{other:?}"),
        }
    };
    assert_eq!(code, 0x52e4_a40f_a911);

    // Our stop(1) arrives as 0x52e4a40fa8dc.
    let mut peer_send = within(conn.open_uni()).await.unwrap();
    peer_send.write_all(b"b").await.unwrap();
    let mut recv = within(transport.accept_uni()).await.unwrap();
    assert_eq!(read_exact(&mut recv, 1).await, b"b");
    recv.stop(1);
    let stopped = within(peer_send.stopped()).await.unwrap();
    assert_eq!(stopped.map(|c| c.into_inner()), Some(0x52e4_a40f_a8dc));

    // An unmapped code from a peer that skips the mapping is still understood.
    let mut peer_send = within(conn.open_uni()).await.unwrap();
    peer_send.write_all(b"c").await.unwrap();
    let mut recv = within(transport.accept_uni()).await.unwrap();
    assert_eq!(read_exact(&mut recv, 1).await, b"c");
    peer_send.reset(quinn::VarInt::from_u32(0x33)).unwrap();
    assert_eq!(read_error(&mut recv).await, TransportError::Reset(0x33));

    // Session close codes are raw.
    transport.close(2, "unauthorized");
    match within(conn.closed()).await {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code.into_inner(), 2);
            assert_eq!(&close.reason[..], b"unauthorized");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_close_reaches_both_bindings() {
    let server = server();
    let client = pinned_client(&server, &[MOQ_LITE_06]);
    let (raw, _raw_accepted) = pair(&server, &client, &url("moqt", &server, "")).await;
    let (wt, _wt_accepted) = pair(&server, &client, &url("https", &server, "/")).await;

    within(server.close()).await;
    assert!(within(server.accept()).await.is_none());
    let expected = TransportError::ClosedByPeer {
        code: 0,
        reason: "server shutdown".into(),
    };
    assert_eq!(within(raw.transport.closed()).await, expected);
    // WebTransport: web-transport-quinn tears the connection down itself when its CONNECT
    // stream reader fails, and quinn then overwrites the close reason, so only the code
    // is reliable here.
    match within(wt.transport.closed()).await {
        TransportError::ClosedByPeer { code: 0, .. } => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn slow_handshakes_do_not_block_and_time_out() {
    let mut config = ServerConfig::new(certificate()).with_bind(loopback());
    config.handshake_timeout = Duration::from_millis(500);
    let server = Server::bind(config).unwrap();
    let client = pinned_client(&server, &[MOQ_LITE_06]);

    // A client that completes QUIC with ALPN h3 but never sends its CONNECT.
    let stalled = within(client.dial_quic(&url("https", &server, "/"), &["h3"]))
        .await
        .unwrap();

    // Another client gets through meanwhile.
    let (connected, accepted) = pair(&server, &client, &url("moqt", &server, "")).await;
    assert_eq!(connected.protocol, MOQ_LITE_06);
    assert_eq!(accepted.binding, Binding::RawQuic);

    // The stalled one is dropped by the handshake timeout.
    within(stalled.closed()).await;
}

#[tokio::test]
async fn http_bootstrap_pins_the_served_fingerprint() {
    // Find a port free on both UDP (QUIC) and TCP (HTTP).
    let (server, listener) = loop {
        let server = server();
        let port = server.local_addr().unwrap().port();
        if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            break (server, listener);
        }
    };
    let fingerprint = server.certificate().fingerprint_hex();
    let http = tokio::spawn(serve_http(
        listener,
        certificate_router(fingerprint.clone()),
    ));

    let port = server.local_addr().unwrap().port();
    assert_eq!(http_get(port, "/certificate.sha256").await, fingerprint);
    assert_eq!(http_get(port, "/health").await, "ok\n");

    // Default (system) verification could never accept this self-signed certificate;
    // the http:// bootstrap pins it instead.
    let client = Client::new(ClientConfig::default()).unwrap();
    let target = Url::parse(&format!("http://127.0.0.1:{port}/live?jwt=t")).unwrap();
    let (connected, accepted) = pair(&server, &client, &target).await;
    assert_eq!(connected.binding, Binding::WebTransport);
    assert_eq!(connected.protocol, MOQ_LITE_06);
    assert_eq!(accepted.path.as_deref(), Some("/live?jwt=t"));

    // A plain https:// dial with system roots is refused.
    let failed = within(client.connect(&url("https", &server, "/"))).await;
    assert!(failed.is_err());

    http.abort();
}

/// A bare HTTP/1.0 GET, returning the body (status must be 200).
async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = within(tokio::net::TcpStream::connect(("127.0.0.1", port)))
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    within(stream.read_to_string(&mut response)).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    body.to_owned()
}

#[test]
fn self_signed_certificate_is_short_lived_and_fingerprinted() {
    let cert = TlsCertificate::self_signed::<&str>(&[]).unwrap();
    let der = &cert.chain()[0];
    let (_, parsed) = x509_parser::parse_x509_certificate(der).unwrap();

    let validity = parsed.validity();
    let lifetime = validity.not_after.timestamp() - validity.not_before.timestamp();
    assert!(
        lifetime > 0 && lifetime <= 14 * 24 * 3600,
        "lifetime {lifetime}s"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(validity.not_before.timestamp() <= now && now < validity.not_after.timestamp());

    // ECDSA P-256 with SHA-256, SAN localhost by default.
    assert_eq!(
        parsed.signature_algorithm.algorithm.to_id_string(),
        "1.2.840.10045.4.3.2"
    );
    let san = parsed.subject_alternative_name().unwrap().unwrap();
    assert!(format!("{:?}", san.value.general_names).contains("localhost"));

    // The fingerprint is SHA-256 over the DER, lowercase hex.
    use sha2::Digest;
    assert_eq!(
        cert.fingerprint_hex(),
        hex::encode(sha2::Sha256::digest(der))
    );
}

/// A peer may hold far more streams open at once than the credit a connection starts with
/// (32): the credit grows as they are accepted, on both bindings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_credit_grows_with_streams_held_open() {
    const OPEN: usize = 1000;
    let server = server();
    let client = pinned_client(&server, &[MOQ_LITE_06]);
    for scheme in ["moqt", "https"] {
        let (connected, accepted) = pair(&server, &client, &url(scheme, &server, "/")).await;
        let (client, server) = (connected.transport, accepted.transport);
        let opener = tokio::spawn(async move {
            let mut held = Vec::new();
            for i in 0..OPEN {
                let mut uni = client.open_uni().await.expect("uni credit");
                uni.write(Bytes::from(vec![i as u8])).await.unwrap();
                let (mut send, _recv) = client.open_bi().await.expect("bidi credit");
                send.write(Bytes::from(vec![i as u8])).await.unwrap();
                held.push((uni, send, _recv));
            }
            (client, held)
        });
        let mut accepted = Vec::new();
        for _ in 0..OPEN {
            let uni = within(server.accept_uni()).await.unwrap();
            let (send, recv) = within(server.accept_bi()).await.unwrap();
            accepted.push((uni, send, recv));
        }
        let (_client, held) = within(opener).await.unwrap();
        assert_eq!((held.len(), accepted.len()), (OPEN, OPEN), "{scheme}");
    }
}
