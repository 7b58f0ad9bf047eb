//! A connection the relay serves, as any binding hands it over once its transport handshake
//! completed (raw QUIC, WebTransport, WebSocket, TCP, or a simulation's in-memory one): the
//! transport, what it negotiated, and where it came from.

use std::net::SocketAddr;

use starling_net::qmux::{QmuxAccepted, QmuxTransport};
use starling_net::{Accepted, QuicTransport};
use starling_transport::Transport;

use crate::registry::SessionTransport;

/// A connection whose transport handshake completed, on any binding.
pub struct Incoming<T: Transport> {
    pub transport: T,
    /// The negotiated moq ALPN.
    pub protocol: Option<String>,
    /// The request target from the URL (WebTransport, WebSocket); `None` on raw QUIC and TCP.
    pub path: Option<String>,
    pub remote: SocketAddr,
    /// The relay's address the connection arrived on (the listener's; `None` for WebSocket,
    /// whose HTTP listener does not say).
    pub local: Option<SocketAddr>,
    pub kind: SessionTransport,
    pub server_name: Option<String>,
    /// A client certificate verified against `--listen-tls-root` (QUIC bindings only).
    pub client_certificate: Option<starling_net::ClientCertificate>,
    /// The admission slot, held until the session ends.
    pub ticket: Option<starling_net::Ticket>,
}

impl<T: Transport> Incoming<T> {
    /// A connection as raw QUIC delivers it: the ALPN names the protocol, the SETUP the path.
    pub fn quic(transport: T, protocol: &str, remote: SocketAddr) -> Self {
        Incoming {
            transport,
            protocol: Some(protocol.to_string()),
            path: None,
            remote,
            local: None,
            kind: SessionTransport::Quic,
            server_name: None,
            client_certificate: None,
            ticket: None,
        }
    }
}

impl From<Accepted> for Incoming<QuicTransport> {
    fn from(accepted: Accepted) -> Self {
        Incoming {
            transport: accepted.transport,
            protocol: accepted.protocol,
            path: accepted.path,
            remote: accepted.remote,
            local: None,
            kind: accepted.binding.into(),
            server_name: accepted.server_name,
            client_certificate: accepted.client_certificate,
            ticket: accepted.ticket,
        }
    }
}

impl From<QmuxAccepted> for Incoming<QmuxTransport> {
    fn from(accepted: QmuxAccepted) -> Self {
        Incoming {
            transport: accepted.transport,
            protocol: accepted.protocol,
            path: accepted.path,
            remote: accepted
                .remote
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            local: None,
            kind: accepted.binding.into(),
            server_name: accepted.server_name,
            client_certificate: None,
            ticket: accepted.ticket,
        }
    }
}
