//! What a QUIC session's transport and its streams share: the session, its binding, the
//! peer's stream credit, and the translation of the session's errors into transport errors.

use std::sync::atomic::{AtomicBool, Ordering};

use starling_transport::TransportError;
use web_transport_quinn::{Session, SessionError};

use crate::alpn::Binding;
use crate::codes::{connection_error, session_error};
use crate::credit::StreamCredit;

pub(crate) struct Shared {
    pub(crate) session: Session,
    pub(crate) binding: Binding,
    /// The peer's concurrent-stream credit, grown as it is used.
    pub(crate) credit: StreamCredit,
    /// Set by our own `close`, to tell it apart from web-transport-quinn's latching of
    /// "locally closed" when it tears the connection down after the peer ended the session.
    pub(crate) closed_locally: AtomicBool,
}

impl Shared {
    /// Translate a connection-level failure, preferring the session's latched close reason
    /// (our own close, a capsule, or the raw peer close) over the bare quinn error.
    pub(crate) fn connection_error(&self, err: &quinn::ConnectionError) -> TransportError {
        let err = match self.session.close_reason() {
            Some(reason) => session_error(self.binding, &reason),
            None => connection_error(self.binding, err),
        };
        self.attribute(err)
    }

    pub(crate) fn session_error(&self, err: &SessionError) -> TransportError {
        self.attribute(session_error(self.binding, err))
    }

    /// On WebTransport, web-transport-quinn records "locally closed" whenever its CONNECT
    /// stream reader ends without a CLOSE_WEBTRANSPORT_SESSION capsule, including when the
    /// peer FINs that stream or the connection dies under it. Unless we closed the session
    /// ourselves, report what the QUIC connection says instead (a CONNECT FIN without a
    /// capsule means the peer closed with code 0).
    fn attribute(&self, err: TransportError) -> TransportError {
        if err != TransportError::ClosedLocally
            || self.binding == Binding::RawQuic
            || self.closed_locally.load(Ordering::Acquire)
        {
            return err;
        }
        let conn: &quinn::Connection = &self.session;
        match conn
            .close_reason()
            .map(|e| connection_error(self.binding, &e))
        {
            None | Some(TransportError::ClosedLocally) => TransportError::ClosedByPeer {
                code: 0,
                reason: String::new(),
            },
            Some(other) => other,
        }
    }
}
