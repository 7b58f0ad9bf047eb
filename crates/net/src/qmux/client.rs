//! Dialing QMux: `ws://` and `wss://` (offering `qmux-01.<alpn>, qmux-00.<alpn>` per ALPN)
//! and `tcp://` (qmux-01, the ALPN negotiated in-band).

use std::sync::Arc;
use std::time::Duration;

use starling_qmux::{Config, Framing, Side, WireVersion};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use url::Url;

use super::carrier::{ByteCarrier, WsCarrier};
use super::server::{QmuxBinding, MAX_WS_MESSAGE, WS_READ_BUFFER};
use super::transport::QmuxTransport;
use crate::client::TlsVerify;

/// Default deadline for a whole [`connect`]: TCP, TLS, the upgrade and, on TCP, the
/// transport-parameter exchange.
pub const DEFAULT_QMUX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a QMux connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum QmuxConnectError {
    #[error("unsupported URL scheme {0:?}: use ws, wss or tcp")]
    UnsupportedScheme(String),
    #[error("URL has no host")]
    MissingHost,
    #[error("no moq ALPN configured")]
    NoAlpn,
    #[error("TCP connect: {0}")]
    Io(#[from] std::io::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("the server answered the upgrade with HTTP {0}")]
    HttpStatus(u16),
    /// The server refused the upgrade for now (HTTP 503), asking to come back after
    /// `retry_after` when it said (its `Retry-After` in seconds).
    #[error("the server is refusing connections for now (HTTP 503, retry after {retry_after:?})")]
    Unavailable { retry_after: Option<Duration> },
    #[error("WebSocket: {0}")]
    WebSocket(String),
    #[error("server negotiated no moq protocol")]
    NoProtocol,
    #[error("QMux handshake: {0}")]
    Handshake(#[from] starling_transport::TransportError),
    #[error("connect timed out")]
    Timeout,
}

impl QmuxConnectError {
    /// When the server's admission refused the upgrade cleanly (503): how long it asked the
    /// client to wait before trying again. `None` for any other failure.
    pub fn refusal(&self) -> Option<std::time::Duration> {
        match self {
            QmuxConnectError::Unavailable { retry_after } => {
                Some(retry_after.unwrap_or(crate::client::REFUSAL_WAIT))
            }
            _ => None,
        }
    }
}

/// An established client session.
#[derive(Debug)]
pub struct QmuxConnected {
    pub transport: QmuxTransport,
    /// The negotiated moq version's ALPN.
    pub protocol: String,
    pub binding: QmuxBinding,
    pub wire: WireVersion,
    /// What to send as the SETUP Path: `tcp://` only (path plus `?query`); `None` on
    /// WebSocket, where the path travels in the upgrade request.
    pub setup_path: Option<String>,
}

/// The `Sec-WebSocket-Protocol` offer: `qmux-01.<alpn>, qmux-00.<alpn>` for each ALPN.
pub fn offered_subprotocols<S: AsRef<str>>(alpns: &[S]) -> Vec<String> {
    super::server::supported_subprotocols(alpns)
}

/// Dial `url` (`ws://`, `wss://` or `tcp://`) offering `alpns` (most preferred first),
/// verifying `wss://` servers per `tls`. Bounded by [`DEFAULT_QMUX_CONNECT_TIMEOUT`].
pub async fn connect<S: AsRef<str>>(
    url: &Url,
    alpns: &[S],
    tls: &TlsVerify,
) -> Result<QmuxConnected, QmuxConnectError> {
    let alpns: Vec<String> = alpns.iter().map(|a| a.as_ref().to_owned()).collect();
    if alpns.is_empty() {
        return Err(QmuxConnectError::NoAlpn);
    }
    tokio::time::timeout(
        DEFAULT_QMUX_CONNECT_TIMEOUT,
        connect_inner(url, &alpns, tls),
    )
    .await
    .map_err(|_| QmuxConnectError::Timeout)?
}

async fn connect_inner(
    url: &Url,
    alpns: &[String],
    tls: &TlsVerify,
) -> Result<QmuxConnected, QmuxConnectError> {
    match url.scheme() {
        "ws" | "wss" => websocket(url, alpns, tls).await,
        "tcp" => tcp(url, alpns).await,
        other => Err(QmuxConnectError::UnsupportedScheme(other.to_owned())),
    }
}

async fn dial(url: &Url) -> Result<TcpStream, QmuxConnectError> {
    let host = url.host_str().ok_or(QmuxConnectError::MissingHost)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(443);
    let stream = TcpStream::connect((host, port)).await?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

async fn websocket(
    url: &Url,
    alpns: &[String],
    tls: &TlsVerify,
) -> Result<QmuxConnected, QmuxConnectError> {
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| QmuxConnectError::WebSocket(e.to_string()))?;
    let offer = offered_subprotocols(alpns).join(", ");
    let value = http::HeaderValue::from_str(&offer)
        .map_err(|e| QmuxConnectError::WebSocket(e.to_string()))?;
    request
        .headers_mut()
        .insert(http::header::SEC_WEBSOCKET_PROTOCOL, value);
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_WS_MESSAGE))
        .max_frame_size(Some(MAX_WS_MESSAGE))
        .read_buffer_size(WS_READ_BUFFER);
    let stream = dial(url).await?;

    let (transport, subprotocol) = if url.scheme() == "wss" {
        let host = url.host_str().ok_or(QmuxConnectError::MissingHost)?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|e| QmuxConnectError::Tls(e.to_string()))?;
        let tls_config = super::tls::client_config(tls).map_err(QmuxConnectError::Tls)?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(tls_config))
            .connect(name, stream)
            .await
            .map_err(|e| QmuxConnectError::Tls(e.to_string()))?;
        let (socket, response) =
            tokio_tungstenite::client_async_with_config(request, stream, Some(config))
                .await
                .map_err(ws_error)?;
        let sub = selected(&response)?;
        let (wire, alpn) = parse(&sub, alpns)?;
        let c = Config::moq_tokio(wire, Framing::Message, Side::Client);
        (super::start(c, WsCarrier::new(socket), Some(alpn)), sub)
    } else {
        let (socket, response) =
            tokio_tungstenite::client_async_with_config(request, stream, Some(config))
                .await
                .map_err(ws_error)?;
        let sub = selected(&response)?;
        let (wire, alpn) = parse(&sub, alpns)?;
        let c = Config::moq_tokio(wire, Framing::Message, Side::Client);
        (super::start(c, WsCarrier::new(socket), Some(alpn)), sub)
    };
    let (wire, protocol) = parse(&subprotocol, alpns)?;
    Ok(QmuxConnected {
        transport,
        protocol,
        binding: QmuxBinding::WebSocket,
        wire,
        setup_path: None,
    })
}

fn ws_error(err: tokio_tungstenite::tungstenite::Error) -> QmuxConnectError {
    match err {
        tokio_tungstenite::tungstenite::Error::Http(response)
            if response.status() == http::StatusCode::SERVICE_UNAVAILABLE =>
        {
            QmuxConnectError::Unavailable {
                retry_after: response
                    .headers()
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs),
            }
        }
        tokio_tungstenite::tungstenite::Error::Http(response) => {
            QmuxConnectError::HttpStatus(response.status().as_u16())
        }
        other => QmuxConnectError::WebSocket(other.to_string()),
    }
}

fn selected(response: &http::Response<Option<Vec<u8>>>) -> Result<String, QmuxConnectError> {
    response
        .headers()
        .get(http::header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
        .ok_or(QmuxConnectError::NoProtocol)
}

/// The wire version and ALPN of the server's pick, which must be one we offered.
fn parse(subprotocol: &str, alpns: &[String]) -> Result<(WireVersion, String), QmuxConnectError> {
    match WireVersion::parse_subprotocol(subprotocol) {
        Some((wire, alpn)) if wire != WireVersion::Qmux02 && alpns.iter().any(|a| a == alpn) => {
            Ok((wire, alpn.to_owned()))
        }
        _ => Err(QmuxConnectError::NoProtocol),
    }
}

async fn tcp(url: &Url, alpns: &[String]) -> Result<QmuxConnected, QmuxConnectError> {
    let stream = dial(url).await?;
    let config = Config::moq_tokio(WireVersion::Qmux01, Framing::ByteStream, Side::Client)
        .with_application_protocols(alpns);
    let transport = super::start(config, ByteCarrier::new(stream), None);
    transport.established().await?;
    let Some(protocol) = transport.protocol() else {
        starling_transport::Transport::close(&transport, 0x15, "no common version");
        return Err(QmuxConnectError::NoProtocol);
    };
    Ok(QmuxConnected {
        transport,
        protocol,
        binding: QmuxBinding::Tcp,
        wire: WireVersion::Qmux01,
        setup_path: crate::client::setup_path(url),
    })
}
