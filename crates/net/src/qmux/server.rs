//! Accepting QMux over WebSocket: an axum handler for upgrades on any path, with moq-relay's
//! `Sec-WebSocket-Protocol` negotiation (docs/wire.md §1.4), handing sessions over a channel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::admission::{Admission, Refusal, Ticket};
use crate::window::ReceiveWindows;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use starling_qmux::{Config, Framing, Side, WireVersion};
use tokio::sync::mpsc;

use super::carrier::WsCarrier;
use super::transport::QmuxTransport;

/// Sessions waiting for the application before upgrades wait too.
const ACCEPT_BACKLOG: usize = 64;
/// Largest WebSocket message we let the WebSocket layer assemble. Larger than any record
/// (16 382 by default; `@moq/qmux` 0.3.3 never sends a frame over 16 384), so an oversized
/// record reaches QMux and is refused with CONNECTION_CLOSE; past it the WebSocket layer
/// drops the connection itself. Kept small because the WebSocket layer assembles a message
/// below QMux's credit and the receive budget: a connection holding a partial message
/// costs the relay about this much (at 1 MiB it was 1.3-1.5 MiB a connection).
pub(crate) const MAX_WS_MESSAGE: usize = 64 << 10;

/// The most a WebSocket read asks of the socket at once. tungstenite zeroes this much of its
/// input buffer before every read attempt, including those that find nothing to read, so
/// its 128 KiB default made zeroing memory 75 % of a relay's CPU with a few hundred
/// WebSocket sessions of small messages. A larger frame still reserves its whole length.
pub(crate) const WS_READ_BUFFER: usize = 8 * 1024;

/// The wire versions the relay pairs with a moq ALPN, in its preference order.
const SERVER_VERSIONS: [WireVersion; 2] = [WireVersion::Qmux01, WireVersion::Qmux00];

/// The QMux versions an ALPN pairs with: IETF drafts 18 and later only with qmux-01, as
/// moq-relay pairs them; everything else with both.
fn versions_for(alpn: &str) -> &'static [WireVersion] {
    let draft = alpn
        .strip_prefix("moqt-")
        .and_then(|n| n.parse::<u32>().ok());
    if draft.is_some_and(|n| n >= 18) {
        &SERVER_VERSIONS[..1]
    } else {
        &SERVER_VERSIONS
    }
}

/// How a QMux session reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QmuxBinding {
    /// WebSocket (`ws://`, `wss://`); the ALPN came from the subprotocol.
    WebSocket,
    /// Plain TCP (`tcp://`); the ALPN came from the `application_protocols` parameter.
    Tcp,
}

impl QmuxBinding {
    /// A short lowercase name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            QmuxBinding::WebSocket => "websocket",
            QmuxBinding::Tcp => "tcp",
        }
    }
}

impl std::fmt::Display for QmuxBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An established QMux session handed to the application (the QMux twin of `Accepted`).
#[derive(Debug)]
pub struct QmuxAccepted {
    pub transport: QmuxTransport,
    /// The moq version's ALPN. Always set on WebSocket (we refuse upgrades without one); on
    /// TCP `None` when the client offered nothing we serve (the caller should close it).
    pub protocol: Option<String>,
    pub binding: QmuxBinding,
    /// The QMux wire version.
    pub wire: WireVersion,
    /// WebSocket: the request path plus `?query` when there is one. TCP: `None` (the path
    /// rides the SETUP message).
    pub path: Option<String>,
    /// The peer's address, when the HTTP server recorded it (axum's `ConnectInfo`) or on TCP.
    pub remote: Option<SocketAddr>,
    /// The `Host` the client addressed, without the port (WebSocket only).
    pub server_name: Option<String>,
    /// The admission slot this connection holds; keep it for the session's life.
    pub ticket: Option<Ticket>,
}

/// Every subprotocol we accept, in our preference order: for each ALPN, `qmux-01.<alpn>`
/// then `qmux-00.<alpn>` (moq-relay's list without its bare legacy entries).
pub fn supported_subprotocols<S: AsRef<str>>(alpns: &[S]) -> Vec<String> {
    alpns
        .iter()
        .flat_map(|a| {
            versions_for(a.as_ref())
                .iter()
                .map(|v| v.subprotocol(a.as_ref()))
        })
        .collect()
}

/// The subprotocol to answer with: the first of ours (server preference) that the client
/// offered, with its wire version and ALPN.
///
/// After every `qmux-VV.<alpn>` pair, like moq-relay, a bare wire version (`qmux-02`,
/// `qmux-01`, `qmux-00`) the client offered, with no ALPN (`None`): the moq version is then
/// negotiated in band by SETUP (lite-01/02, `moql`), which the application decides on. That
/// is what `@moq/net` 0.1.x (inside `@moq/publish` 0.2.17) offers when it is not told a
/// protocol.
///
/// Unlike moq-relay, we refuse a client that offered nothing usable even when it offered no
/// subprotocol at all, or only the bare `webtransport`: such a connection would use the
/// pre-QMux `webtransport` framing, which Starling does not speak. The caller answers HTTP 400.
pub fn select_subprotocol<S: AsRef<str>>(
    offered: &[String],
    alpns: &[S],
) -> Option<(String, WireVersion, Option<String>)> {
    let was_offered = |candidate: &str| offered.iter().any(|o| o.trim() == candidate);
    let paired = alpns.iter().find_map(|alpn| {
        versions_for(alpn.as_ref()).iter().find_map(|v| {
            let candidate = v.subprotocol(alpn.as_ref());
            was_offered(&candidate).then(|| (candidate, *v, Some(alpn.as_ref().to_owned())))
        })
    });
    paired.or_else(|| {
        WireVersion::ALL
            .iter()
            .find(|v| was_offered(v.as_str()))
            .map(|v| (v.as_str().to_owned(), *v, None))
    })
}

/// Whether `request` asks for a WebSocket upgrade (`Upgrade: websocket`), so a router can
/// divert it to the acceptor before its normal routes, on any path.
pub fn is_websocket_upgrade<B>(request: &http::Request<B>) -> bool {
    let has_token = |name: http::header::HeaderName, token: &str| {
        request.headers().get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    has_token(http::header::UPGRADE, "websocket")
}

/// An upgrade admitted ahead of the other checks in front of the acceptor, carried to it in
/// the request's extensions so it takes no second slot.
#[derive(Clone)]
pub struct EarlyTicket(Arc<parking_lot::Mutex<Option<Ticket>>>);

impl EarlyTicket {
    fn take(&self) -> Option<Ticket> {
        self.0.lock().take()
    }
}

/// Admit an HTTP upgrade before anything else is done for it (a token verified, an auth
/// server asked); refused, answer it with [`refused_upgrade`]. The slot travels with the
/// request to [`WebSocketAcceptor::handle`]; a request that never gets there frees it when
/// dropped.
pub fn admit_upgrade(admission: &Arc<Admission>, request: &mut Request) -> Result<(), Refusal> {
    let remote = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    if let Some(ticket) = admit(Some(admission), remote)? {
        request
            .extensions_mut()
            .insert(EarlyTicket(Arc::new(parking_lot::Mutex::new(Some(ticket)))));
    }
    Ok(())
}

/// The answer to an upgrade admission refused: 503 with Retry-After.
pub fn refused_upgrade(refusal: Refusal) -> Response {
    tracing::debug!(reason = refusal.as_str(), "WebSocket upgrade refused");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(http::header::RETRY_AFTER, "1")],
        "too many sessions",
    )
        .into_response()
}

/// A slot for an upgrade from `remote`; no gate or no address (not a TCP peer) admits
/// without one.
fn admit(
    admission: Option<&Arc<Admission>>,
    remote: Option<SocketAddr>,
) -> Result<Option<Ticket>, Refusal> {
    let (Some(gate), Some(remote)) = (admission, remote) else {
        return Ok(None);
    };
    gate.admit(remote.ip().to_canonical(), Instant::now())
        .map(Some)
}

/// The axum-side WebSocket acceptor: cheap to clone, usable as a handler on any route.
#[derive(Clone)]
pub struct WebSocketAcceptor {
    alpns: Arc<Vec<String>>,
    tx: mpsc::Sender<QmuxAccepted>,
    admission: Option<Arc<Admission>>,
    /// Our receive windows; `None` keeps qmux 0.5.3's.
    windows: Option<ReceiveWindows>,
}

/// An acceptor serving these moq ALPNs (most preferred first, e.g. `["moq-lite-06",
/// "moq-lite-05"]`) and the channel its sessions arrive on.
pub fn websocket_acceptor<S: AsRef<str>>(
    alpns: &[S],
) -> (WebSocketAcceptor, mpsc::Receiver<QmuxAccepted>) {
    let (tx, rx) = mpsc::channel(ACCEPT_BACKLOG);
    let alpns = alpns.iter().map(|a| a.as_ref().to_owned()).collect();
    (
        WebSocketAcceptor {
            alpns: Arc::new(alpns),
            tx,
            admission: None,
            windows: None,
        },
        rx,
    )
}

impl WebSocketAcceptor {
    /// Refuse upgrades the gate refuses: 503 with Retry-After, before any WebSocket work.
    pub fn with_admission(mut self, admission: Arc<Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Advertise these receive windows instead of qmux 0.5.3's defaults.
    pub fn with_windows(mut self, windows: ReceiveWindows) -> Self {
        self.windows = Some(windows);
        self
    }

    /// Answer one request: 101 with the chosen subprotocol and a session on the channel,
    /// 400 when no `qmux-0N.<alpn>` we serve was offered, or axum's rejection when the
    /// request is not a valid upgrade.
    pub async fn handle(&self, request: Request) -> Response {
        let (mut parts, _body) = request.into_parts();
        let remote = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0);
        let path = match parts.uri.query() {
            Some(q) if !q.is_empty() => format!("{}?{q}", parts.uri.path()),
            _ => parts.uri.path().to_owned(),
        };
        let server_name = parts
            .uri
            .host()
            .map(str::to_owned)
            .or_else(|| {
                let host = parts.headers.get(http::header::HOST)?.to_str().ok()?;
                let authority: http::uri::Authority = host.parse().ok()?;
                Some(authority.host().to_owned())
            })
            .map(|h| {
                h.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_ascii_lowercase()
            });
        // A gate in front of this handler (the relay's, ahead of its token check) may have
        // admitted the upgrade already.
        let early = parts
            .extensions
            .remove::<EarlyTicket>()
            .and_then(|early| early.take());
        let ticket = match early {
            Some(ticket) => Some(ticket),
            None => match admit(self.admission.as_ref(), remote) {
                Ok(ticket) => ticket,
                Err(refusal) => return refused_upgrade(refusal),
            },
        };
        let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            Ok(ws) => ws,
            Err(rejection) => return rejection.into_response(),
        };
        let offered: Vec<String> = ws
            .requested_protocols()
            .filter_map(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect();
        let Some((subprotocol, wire, alpn)) = select_subprotocol(&offered, &self.alpns) else {
            tracing::debug!(
                ?offered,
                "refusing WebSocket upgrade: no supported subprotocol"
            );
            return (
                StatusCode::BAD_REQUEST,
                "no supported WebSocket subprotocol",
            )
                .into_response();
        };
        let tx = self.tx.clone();
        let windows = self.windows;
        ws.protocols([subprotocol])
            .max_message_size(MAX_WS_MESSAGE)
            .max_frame_size(MAX_WS_MESSAGE)
            .read_buffer_size(WS_READ_BUFFER)
            .on_upgrade(move |socket| async move {
                let mut config = Config::new(wire, Framing::Message, Side::Server);
                if let Some(windows) = windows {
                    windows.apply_qmux(&mut config);
                }
                let transport = super::start(config, WsCarrier::new(socket), alpn.clone());
                tracing::debug!(?remote, %wire, ?alpn, %path, "accepted WebSocket session");
                let accepted = QmuxAccepted {
                    transport,
                    protocol: alpn,
                    binding: QmuxBinding::WebSocket,
                    wire,
                    path: Some(path),
                    remote,
                    server_name,
                    ticket,
                };
                // The application is gone when this fails; dropping the session closes it.
                let _ = tx.send(accepted).await;
            })
    }

    /// A router sending every request, on any path, to [`WebSocketAcceptor::handle`].
    pub fn router(&self) -> axum::Router {
        let this = self.clone();
        axum::Router::new().fallback(move |request: Request| {
            let this = this.clone();
            async move { this.handle(request).await }
        })
    }

    /// `router` with WebSocket upgrades on any path (including `/`) diverted to this
    /// acceptor before its own routes; every other request reaches `router` unchanged.
    pub fn wrap(&self, router: axum::Router) -> axum::Router {
        let this = self.clone();
        router.layer(axum::middleware::from_fn(
            move |request: Request, next: axum::middleware::Next| {
                let this = this.clone();
                async move {
                    if is_websocket_upgrade(&request) {
                        this.handle(request).await
                    } else {
                        next.run(request).await
                    }
                }
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// moq-relay's pairing: the drafts from 18 ride qmux-01 only.
    #[test]
    fn newer_drafts_pair_with_qmux_01_only() {
        assert_eq!(
            supported_subprotocols(&["moqt-18", "moqt-17", "moq-00"]),
            offered(&[
                "qmux-01.moqt-18",
                "qmux-01.moqt-17",
                "qmux-00.moqt-17",
                "qmux-01.moq-00",
                "qmux-00.moq-00"
            ])
        );
        assert!(select_subprotocol(&offered(&["qmux-00.moqt-22"]), &["moqt-22"]).is_none());
    }

    #[test]
    fn server_preference_like_moq_relay() {
        let alpns = ["moq-lite-06", "moq-lite-05"];
        assert_eq!(
            supported_subprotocols(&alpns),
            offered(&[
                "qmux-01.moq-lite-06",
                "qmux-00.moq-lite-06",
                "qmux-01.moq-lite-05",
                "qmux-00.moq-lite-05"
            ])
        );
        // moq-tokio's default offer lands on qmux-01.moq-lite-06.
        let client = offered(&[
            "qmux-02.moq-lite-06",
            "qmux-01.moq-lite-06",
            "qmux-00.moq-lite-06",
            "qmux-02.moq-lite-05",
            "qmux-01.moq-lite-05",
            "qmux-00.moq-lite-05",
            "qmux-02",
            "qmux-01",
            "qmux-00",
            "webtransport",
        ]);
        let (sub, wire, alpn) = select_subprotocol(&client, &alpns).unwrap();
        assert_eq!(
            (sub.as_str(), wire, alpn.as_deref()),
            (
                "qmux-01.moq-lite-06",
                WireVersion::Qmux01,
                Some("moq-lite-06")
            )
        );
        // Server preference wins over the client's order.
        let client = offered(&["qmux-00.moq-lite-05", "qmux-00.moq-lite-06"]);
        assert_eq!(
            select_subprotocol(&client, &alpns).unwrap().0,
            "qmux-00.moq-lite-06"
        );
        // Only 05 offered.
        let client = offered(&["qmux-01.moq-lite-05"]);
        assert_eq!(
            select_subprotocol(&client, &alpns).unwrap().2.as_deref(),
            Some("moq-lite-05")
        );
        // qmux-02 pairs, the bare pre-QMux `webtransport` and nothing at all are refused.
        assert!(
            select_subprotocol(&offered(&["qmux-02.moq-lite-06", "webtransport"]), &alpns)
                .is_none()
        );
        assert!(select_subprotocol(&[], &alpns).is_none());
    }

    /// A bare wire version (what @moq/net 0.1.x offers) is taken after every pair, newest
    /// first, with no ALPN: the moq version is then chosen in band.
    #[test]
    fn bare_wire_versions_negotiate_in_band() {
        let alpns = ["moq-lite-06", "moq-lite-05"];
        let client = offered(&["qmux-01", "qmux-00", "webtransport"]);
        assert_eq!(
            select_subprotocol(&client, &alpns),
            Some(("qmux-01".to_owned(), WireVersion::Qmux01, None))
        );
        let client = offered(&["qmux-00", "qmux-02"]);
        assert_eq!(
            select_subprotocol(&client, &alpns).map(|s| s.1),
            Some(WireVersion::Qmux02)
        );
        // A pair still wins over a bare version.
        let client = offered(&["qmux-01", "qmux-00.moq-lite-05"]);
        assert_eq!(
            select_subprotocol(&client, &alpns).unwrap().0,
            "qmux-00.moq-lite-05"
        );
    }

    #[test]
    fn upgrade_detection() {
        let req = |v: &str| {
            http::Request::get("/")
                .header("upgrade", v)
                .body(())
                .unwrap()
        };
        assert!(is_websocket_upgrade(&req("websocket")));
        assert!(is_websocket_upgrade(&req("WebSocket")));
        assert!(!is_websocket_upgrade(&req("h2c")));
        assert!(!is_websocket_upgrade(
            &http::Request::get("/").body(()).unwrap()
        ));
    }
}
