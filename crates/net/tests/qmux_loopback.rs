//! QMux loopback: Starling client and server over ws:// and tcp://: streams, FIN, raw codes,
//! closes, subprotocol negotiation, and misbehaving clients closed while others keep flowing.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use starling_net::qmux::{
    connect, websocket_acceptor, QmuxAccepted, QmuxBinding, QmuxConnectError, QmuxConnected,
    QmuxTcpListener, WireVersion,
};
use starling_net::{TlsVerify, MOQ_LITE_05, MOQ_LITE_06};
use starling_qmux::frame::decode_all;
use starling_qmux::{Dir, Frame, Side, StreamFrame, StreamId, TransportCode};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use url::Url;

const STEP: Duration = Duration::from_secs(10);

async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .expect("step timed out")
}

/// An axum server whose every request goes to the WebSocket acceptor.
async fn ws_server(alpns: &[&str]) -> (SocketAddr, mpsc::Receiver<QmuxAccepted>) {
    let (acceptor, rx) = websocket_acceptor(alpns);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app =
        acceptor.wrap(axum::Router::new().route("/health", axum::routing::get(|| async { "ok" })));
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    (addr, rx)
}

async fn dial(
    addr: SocketAddr,
    rest: &str,
    alpns: &[&str],
) -> Result<QmuxConnected, QmuxConnectError> {
    let url = Url::parse(&format!("ws://{addr}{rest}")).unwrap();
    connect(&url, alpns, &TlsVerify::System).await
}

async fn read_to_end<R: RecvStream>(recv: &mut R) -> Result<Vec<u8>, TransportError> {
    let mut out = Vec::new();
    while let Some(chunk) = within(recv.read(64 * 1024)).await? {
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Bidi echo one way, uni the other, FIN on both; 300 KB so flow control has to move.
async fn exercise<A: Transport, B: Transport>(client: &A, server: &B) {
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let (mut send, mut recv) = within(client.open_bi()).await.unwrap();
    let writer = {
        let big = big.clone();
        tokio::spawn(async move {
            send.write(Bytes::from(big)).await.unwrap();
            send.finish().unwrap();
            send
        })
    };
    let (mut s_send, mut s_recv) = within(server.accept_bi()).await.unwrap();
    assert_eq!(read_to_end(&mut s_recv).await.unwrap(), big);
    s_send.write(Bytes::from_static(b"pong")).await.unwrap();
    s_send.finish().unwrap();
    assert_eq!(read_to_end(&mut recv).await.unwrap(), b"pong");
    let _send = writer.await.unwrap();

    let mut uni = within(server.open_uni()).await.unwrap();
    uni.write(Bytes::from_static(b"from server")).await.unwrap();
    uni.finish().unwrap();
    let mut c_uni = within(client.accept_uni()).await.unwrap();
    assert_eq!(read_to_end(&mut c_uni).await.unwrap(), b"from server");
}

#[tokio::test]
async fn websocket_streams_codes_and_close() {
    let (addr, mut accepted) = ws_server(&[MOQ_LITE_06, MOQ_LITE_05]).await;
    let client = dial(addr, "/room/a?jwt=abc", &[MOQ_LITE_06, MOQ_LITE_05])
        .await
        .unwrap();
    assert_eq!(client.protocol, MOQ_LITE_06);
    assert_eq!(client.wire, WireVersion::Qmux01);
    assert_eq!(client.setup_path, None);
    let server = within(accepted.recv()).await.unwrap();
    assert_eq!(server.protocol.as_deref(), Some(MOQ_LITE_06));
    assert_eq!(server.binding, QmuxBinding::WebSocket);
    assert_eq!(server.path.as_deref(), Some("/room/a?jwt=abc"));
    assert_eq!(server.server_name.as_deref(), Some("127.0.0.1"));
    assert!(server.remote.is_some_and(|r| r.ip().is_loopback()));
    let (c, s) = (client.transport, server.transport);
    exercise(&c, &s).await;

    // Reset and stop codes arrive raw.
    let mut uni = within(c.open_uni()).await.unwrap();
    uni.write(Bytes::from_static(b"partial")).await.unwrap();
    uni.reset(0x35);
    let mut r = within(s.accept_uni()).await.unwrap();
    let err = loop {
        match within(r.read(100)).await {
            Ok(Some(_)) => continue,
            other => break other,
        }
    };
    assert_eq!(err, Err(TransportError::Reset(0x35)));

    let mut to_client = within(s.open_uni()).await.unwrap();
    to_client.write(Bytes::from_static(b"x")).await.unwrap();
    let mut r = within(c.accept_uni()).await.unwrap();
    r.stop(0x12);
    assert_eq!(within(to_client.stopped()).await, Ok(Some(0x12)));

    // Datagrams ride DATAGRAM frames on qmux-01.
    assert!(c.max_datagram_size() > 16_000);
    c.send_datagram(Bytes::from_static(b"dg")).unwrap();
    assert_eq!(
        within(s.recv_datagram()).await.unwrap(),
        Bytes::from_static(b"dg")
    );

    // Session close codes travel raw in APPLICATION_CLOSE.
    c.close(0x15, "bye");
    assert_eq!(
        within(s.closed()).await,
        TransportError::ClosedByPeer {
            code: 0x15,
            reason: "bye".into()
        }
    );
    assert_eq!(within(c.closed()).await, TransportError::ClosedLocally);
}

/// A QMux-01 session measures round trips with QX_PING from the start, so a moq session over
/// it advertises PROBE reports in its SETUP before the first sample is back (moq-dev's player
/// otherwise never asks for them and buffers 100 ms for want of an RTT).
#[tokio::test]
async fn websocket_sessions_measure_round_trips_from_the_start() {
    let (addr, mut accepted) = ws_server(&[MOQ_LITE_06]).await;
    let client = dial(addr, "/", &[MOQ_LITE_06]).await.unwrap();
    let server = within(accepted.recv()).await.unwrap();
    assert_eq!(server.wire, WireVersion::Qmux01);
    assert!(server.transport.measures_rtt());
    assert!(client.transport.measures_rtt());
}

#[tokio::test]
async fn websocket_subprotocol_negotiation() {
    let (addr, mut accepted) = ws_server(&[MOQ_LITE_06, MOQ_LITE_05]).await;
    // Server preference wins over the client's order.
    let c = dial(addr, "/", &[MOQ_LITE_05, MOQ_LITE_06]).await.unwrap();
    assert_eq!(c.protocol, MOQ_LITE_06);
    assert_eq!(
        within(accepted.recv()).await.unwrap().protocol.as_deref(),
        Some(MOQ_LITE_06)
    );
    // A client offering only lite-05 gets it.
    let c = dial(addr, "/", &[MOQ_LITE_05]).await.unwrap();
    assert_eq!(c.protocol, MOQ_LITE_05);
    assert_eq!(
        within(accepted.recv()).await.unwrap().protocol.as_deref(),
        Some(MOQ_LITE_05)
    );
    // Nothing in common: HTTP 400.
    match dial(addr, "/", &["moq-lite-99"]).await {
        Err(QmuxConnectError::HttpStatus(400)) => {}
        other => panic!("expected 400, got {other:?}"),
    }
    // No subprotocol at all: also 400 (Starling does not speak the legacy format).
    let request = format!("ws://{addr}/").into_client_request().unwrap();
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 400),
        other => panic!("expected 400, got {:?}", other.map(|_| ())),
    }
    // Plain HTTP requests still reach the wrapped router.
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    within(stream.read_to_string(&mut text)).await.unwrap();
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("ok"),
        "{text}"
    );
}

#[tokio::test]
async fn tcp_in_band_alpn_and_streams() {
    let listener = QmuxTcpListener::bind(
        "127.0.0.1:0".parse().unwrap(),
        &[MOQ_LITE_06, MOQ_LITE_05],
        None,
        None,
    )
    .await
    .unwrap();
    let url = Url::parse(&format!("tcp://{}/room?jwt=1", listener.local_addr())).unwrap();
    let client = connect(&url, &[MOQ_LITE_05, MOQ_LITE_06], &TlsVerify::System)
        .await
        .unwrap();
    assert_eq!(client.protocol, MOQ_LITE_06, "server preference wins");
    assert_eq!(client.setup_path.as_deref(), Some("/room?jwt=1"));
    assert_eq!(client.binding, QmuxBinding::Tcp);
    let server = within(listener.accept()).await.unwrap();
    assert_eq!(server.protocol.as_deref(), Some(MOQ_LITE_06));
    assert_eq!(server.path, None);
    exercise(&client.transport, &server.transport).await;
    client.transport.close(0, "done");
    assert_eq!(
        within(server.transport.closed()).await,
        TransportError::ClosedByPeer {
            code: 0,
            reason: "done".into()
        }
    );

    // No common ALPN: the client refuses.
    let url = Url::parse(&format!("tcp://{}/", listener.local_addr())).unwrap();
    assert!(matches!(
        connect(&url, &["moq-lite-99"], &TlsVerify::System).await,
        Err(QmuxConnectError::NoProtocol)
    ));
}

/// A hand-driven WebSocket client speaking raw QMux frames.
struct RawClient {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

impl RawClient {
    async fn connect(addr: SocketAddr) -> Self {
        let mut request = format!("ws://{addr}/").into_client_request().unwrap();
        request.headers_mut().insert(
            "sec-websocket-protocol",
            "qmux-01.moq-lite-06".parse().unwrap(),
        );
        let (ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let mut client = RawClient { ws };
        let params = starling_qmux::Config::moq_tokio(
            WireVersion::Qmux01,
            starling_qmux::Framing::Message,
            Side::Client,
        )
        .transport_params();
        client.send(&[Frame::TransportParameters(params)]).await;
        client
    }

    async fn send(&mut self, frames: &[Frame]) {
        let mut buf = BytesMut::new();
        for f in frames {
            f.encode(&mut buf);
        }
        self.send_raw(buf.freeze()).await;
    }

    async fn send_raw(&mut self, bytes: Bytes) {
        // The server may already have hung up; the close frame is what the test checks.
        let _ = self.ws.send(Message::Binary(bytes)).await;
    }

    /// Read until the server's CONNECTION_CLOSE; its transport code.
    async fn close_code(&mut self) -> TransportCode {
        within(async {
            while let Some(Ok(message)) = self.ws.next().await {
                if let Message::Binary(data) = message {
                    for frame in decode_all(data).unwrap() {
                        if let Frame::ConnectionClose { code, .. } = frame {
                            return TransportCode(code);
                        }
                    }
                }
            }
            panic!("the server hung up without CONNECTION_CLOSE");
        })
        .await
    }
}

fn data(id: StreamId, offset: u64, len: usize) -> Frame {
    Frame::Stream(StreamFrame {
        id,
        offset: Some(offset),
        data: Bytes::from(vec![9u8; len]),
        fin: false,
        explicit_len: true,
    })
}

#[tokio::test]
async fn misbehaving_clients_are_closed_while_others_flow() {
    let (addr, mut accepted) = ws_server(&[MOQ_LITE_06]).await;
    let good = dial(addr, "/good", &[MOQ_LITE_06]).await.unwrap();
    let good_server = within(accepted.recv()).await.unwrap();

    // A malformed frame (STREAM whose length runs past the message).
    let mut bad = RawClient::connect(addr).await;
    let _bad_server = within(accepted.recv()).await.unwrap();
    bad.send_raw(Bytes::from_static(&[0x0e, 0x00, 0x00, 0x10, 0x01]))
        .await;
    assert_eq!(bad.close_code().await, TransportCode::FRAME_ENCODING_ERROR);

    // An unknown frame type.
    let mut bad = RawClient::connect(addr).await;
    let _bad_server = within(accepted.recv()).await.unwrap();
    bad.send_raw(Bytes::from_static(&[0x21])).await;
    assert_eq!(bad.close_code().await, TransportCode::FRAME_ENCODING_ERROR);

    // Beyond the advertised 100 bidi streams.
    let mut bad = RawClient::connect(addr).await;
    let _bad_server = within(accepted.recv()).await.unwrap();
    bad.send(&[data(StreamId::new(100, Dir::Bi, Side::Client), 0, 1)])
        .await;
    assert_eq!(bad.close_code().await, TransportCode::STREAM_LIMIT_ERROR);

    // Beyond a stream's 256 KiB window.
    let mut bad = RawClient::connect(addr).await;
    let _bad_server = within(accepted.recv()).await.unwrap();
    let id = StreamId::new(0, Dir::Uni, Side::Client);
    let mut offset = 0;
    while offset < 262_144 {
        bad.send(&[data(id, offset, 16_000)]).await;
        offset += 16_000;
    }
    assert_eq!(bad.close_code().await, TransportCode::FLOW_CONTROL_ERROR);

    // An oversized record.
    let mut bad = RawClient::connect(addr).await;
    let _bad_server = within(accepted.recv()).await.unwrap();
    bad.send_raw(Bytes::from(vec![0u8; 20_000])).await;
    assert_eq!(bad.close_code().await, TransportCode::PROTOCOL_VIOLATION);

    // The well-behaved session never noticed.
    exercise(&good.transport, &good_server.transport).await;
}
