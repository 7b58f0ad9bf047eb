//! `QuicTransport`: one raw-QUIC or WebTransport session as a `starling_transport::Transport`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use starling_transport::{Transport, TransportError};
use web_transport_quinn::{Session, SessionError};

use crate::alpn::Binding;
use crate::credit::{Direction, StreamCredit, StreamLimits};
use crate::quic::QuicConfig;
use crate::quic_shared::Shared;
use crate::stream::{QuicRecvStream, QuicSendStream};

/// A session over QUIC, cheap to clone (all clones are the same session).
///
/// WebTransport sessions use web-transport-quinn's HTTP/3 streams, which carry the
/// WebTransport code mapping. Raw QUIC sessions use the QUIC connection's streams
/// directly and apply the same mapping themselves (docs/wire.md §7.3), because
/// web-transport-quinn 0.13.5 sends stream codes unmapped on `Session::raw`. Session
/// close codes are raw on raw QUIC and carried by the CLOSE_WEBTRANSPORT_SESSION capsule
/// (plus the mapped QUIC close) on WebTransport.
#[derive(Clone)]
pub struct QuicTransport {
    shared: Arc<Shared>,
}

/// How long refused stream-credit growth waits before it is tried again.
const CREDIT_RETRY: Duration = Duration::from_secs(1);

/// Count a stream the peer opened against its credit. When the gate refused the growth it
/// needed, try again every [`CREDIT_RETRY`] until it grows, is no longer needed, or the
/// connection is gone: a peer holding every stream its credit allows opens no more, so
/// nothing else would ask again.
fn count_opened(shared: &Arc<Shared>, direction: Direction) {
    if !shared.credit.opened(direction, &shared.session) {
        return;
    }
    let shared = Arc::downgrade(shared);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CREDIT_RETRY).await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            if shared.session.close_reason().is_some()
                || shared.credit.retry(direction, &shared.session)
            {
                return;
            }
        }
    });
}

impl std::fmt::Debug for QuicTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicTransport")
            .field("binding", &self.shared.binding)
            .field("id", &self.shared.session.stable_id())
            .field("remote", &self.shared.session.remote_address())
            .finish()
    }
}

impl QuicTransport {
    /// Wrap an established session. `binding` must match how it was made:
    /// [`Binding::RawQuic`] for `Session::raw`, [`Binding::WebTransport`] otherwise.
    pub fn new(session: Session, binding: Binding) -> Self {
        Self::with_limits(session, binding, QuicConfig::default().stream_limits())
    }

    /// As [`new`](Self::new), growing the peer's stream credit from its initial credit (what
    /// the connection's transport config granted) up to its maximums.
    pub fn with_limits(session: Session, binding: Binding, limits: StreamLimits) -> Self {
        Self {
            shared: Arc::new(Shared {
                session,
                binding,
                credit: StreamCredit::new(limits),
                closed_locally: AtomicBool::new(false),
            }),
        }
    }

    /// How this session is carried.
    pub fn binding(&self) -> Binding {
        self.shared.binding
    }

    /// The underlying web-transport-quinn session (escape hatch; its stream methods do not
    /// apply the raw-QUIC code mapping).
    pub fn session(&self) -> &Session {
        &self.shared.session
    }

    /// The negotiated application protocol: the ALPN on raw QUIC, `wt-protocol` on WebTransport.
    pub fn protocol(&self) -> Option<String> {
        self.shared.session.protocol().map(str::to_owned)
    }

    /// The peer's UDP address.
    pub fn remote_address(&self) -> SocketAddr {
        self.shared.session.remote_address()
    }

    /// A number unique to this connection within the process.
    pub fn stable_id(&self) -> usize {
        self.shared.session.stable_id()
    }

    fn conn(&self) -> &quinn::Connection {
        &self.shared.session
    }

    fn raw(&self) -> bool {
        self.shared.binding == Binding::RawQuic
    }
}

impl Transport for QuicTransport {
    type Send = QuicSendStream;
    type Recv = QuicRecvStream;

    async fn open_bi(&self) -> Result<(QuicSendStream, QuicRecvStream), TransportError> {
        let shared = &self.shared;
        if self.raw() {
            let (send, recv) = self
                .conn()
                .open_bi()
                .await
                .map_err(|e| shared.connection_error(&e))?;
            Ok((
                QuicSendStream::raw(send, shared.clone()),
                QuicRecvStream::raw(recv, shared.clone()),
            ))
        } else {
            let (send, recv) = shared
                .session
                .open_bi()
                .await
                .map_err(|e| shared.session_error(&e))?;
            count_opened(shared, Direction::Bidi);
            Ok((
                QuicSendStream::wt(send, shared.clone()),
                QuicRecvStream::wt(recv, shared.clone()).counted(Direction::Bidi),
            ))
        }
    }

    async fn open_uni(&self) -> Result<QuicSendStream, TransportError> {
        let shared = &self.shared;
        if self.raw() {
            let send = self
                .conn()
                .open_uni()
                .await
                .map_err(|e| shared.connection_error(&e))?;
            Ok(QuicSendStream::raw(send, shared.clone()))
        } else {
            let send = shared
                .session
                .open_uni()
                .await
                .map_err(|e| shared.session_error(&e))?;
            Ok(QuicSendStream::wt(send, shared.clone()))
        }
    }

    async fn accept_bi(&self) -> Result<(QuicSendStream, QuicRecvStream), TransportError> {
        let shared = &self.shared;
        if self.raw() {
            let (send, recv) = self
                .conn()
                .accept_bi()
                .await
                .map_err(|e| shared.connection_error(&e))?;
            count_opened(shared, Direction::Bidi);
            Ok((
                QuicSendStream::raw(send, shared.clone()),
                QuicRecvStream::raw(recv, shared.clone()).counted(Direction::Bidi),
            ))
        } else {
            let (send, recv) = shared
                .session
                .accept_bi()
                .await
                .map_err(|e| shared.session_error(&e))?;
            count_opened(shared, Direction::Bidi);
            Ok((
                QuicSendStream::wt(send, shared.clone()),
                QuicRecvStream::wt(recv, shared.clone()).counted(Direction::Bidi),
            ))
        }
    }

    async fn accept_uni(&self) -> Result<QuicRecvStream, TransportError> {
        let shared = &self.shared;
        if self.raw() {
            let recv = self
                .conn()
                .accept_uni()
                .await
                .map_err(|e| shared.connection_error(&e))?;
            count_opened(shared, Direction::Uni);
            Ok(QuicRecvStream::raw(recv, shared.clone()).counted(Direction::Uni))
        } else {
            let recv = shared
                .session
                .accept_uni()
                .await
                .map_err(|e| shared.session_error(&e))?;
            count_opened(shared, Direction::Uni);
            Ok(QuicRecvStream::wt(recv, shared.clone()).counted(Direction::Uni))
        }
    }

    fn max_datagram_size(&self) -> usize {
        self.shared.session.max_datagram_size()
    }

    fn send_datagram(&self, payload: Bytes) -> Result<(), TransportError> {
        match self.shared.session.send_datagram(payload) {
            Ok(()) => Ok(()),
            Err(SessionError::SendDatagramError(
                quinn::SendDatagramError::TooLarge
                | quinn::SendDatagramError::UnsupportedByPeer
                | quinn::SendDatagramError::Disabled,
            )) => Ok(()),
            Err(e) => Err(self.shared.session_error(&e)),
        }
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.shared
            .session
            .read_datagram()
            .await
            .map_err(|e| self.shared.session_error(&e))
    }

    fn rtt_ms(&self) -> Option<u64> {
        Some(u64::try_from(self.shared.session.rtt().as_millis()).unwrap_or(u64::MAX))
    }

    fn set_receive_window(&self, bytes: u64) {
        self.conn()
            .set_receive_window(quinn::VarInt::from_u64(bytes).unwrap_or(quinn::VarInt::MAX));
    }

    fn set_stream_gate(&self, gate: starling_transport::StreamGate) {
        self.shared.credit.set_gate(gate);
    }

    fn close(&self, code: u32, reason: &str) {
        self.shared.closed_locally.store(true, Ordering::Release);
        self.shared.session.close(code, reason.as_bytes());
    }

    async fn closed(&self) -> TransportError {
        let err = self.shared.session.closed().await;
        self.shared.session_error(&err)
    }
}
