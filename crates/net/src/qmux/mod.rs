//! QMux: moq-lite over WebSocket (`ws://`, `wss://`) and plain TCP (`tcp://`), the fallback
//! for networks without UDP (docs/wire.md §1.4, §1.5, §8).
//!
//! The protocol is the sans-IO `starling_qmux::Connection`; this module only drives it: one
//! task per connection owns the carrier (WebSocket or TCP socket) and moves records between
//! it and the state machine, while [`QmuxTransport`] and its streams implement
//! `starling_transport::Transport` for the session. Stream and session codes travel raw.
//!
//! * Server: [`websocket_acceptor`] gives an axum handler for WebSocket upgrades on any path
//!   (negotiating `Sec-WebSocket-Protocol` as moq-relay does) and a channel of
//!   [`QmuxAccepted`] sessions; [`QmuxTcpListener`] accepts qmux-01 over TCP with the ALPN
//!   negotiated in-band.
//! * Client: [`connect`] dials `ws://`, `wss://` or `tcp://`.

mod carrier;
mod client;
mod driver;
mod server;
mod shared;
mod tcp;
mod tls;
mod transport;

pub use client::{connect, QmuxConnectError, QmuxConnected, DEFAULT_QMUX_CONNECT_TIMEOUT};
pub use server::{
    admit_upgrade, is_websocket_upgrade, refused_upgrade, select_subprotocol,
    supported_subprotocols, websocket_acceptor, EarlyTicket, QmuxAccepted, QmuxBinding,
    WebSocketAcceptor,
};
pub use starling_qmux::WireVersion;
pub use tcp::QmuxTcpListener;
pub use transport::{QmuxRecvStream, QmuxSendStream, QmuxTransport};

use starling_qmux::{Config, Connection};

/// Start the driver task for a connection over `carrier` and return its transport.
/// `protocol`: the ALPN negotiated out of band (the WebSocket subprotocol), if any.
fn start<C: carrier::Carrier>(
    config: Config,
    carrier: C,
    protocol: Option<String>,
) -> QmuxTransport {
    let version = config.version;
    let conn = Connection::new(config, tokio::time::Instant::now().into_std());
    let shared = shared::Shared::new(conn, protocol);
    driver::Driver::spawn(shared.clone(), carrier);
    QmuxTransport::new(shared, version)
}
