//! The transport a session runs over: QUIC-like bidirectional and unidirectional streams.
//!
//! A binding (raw QUIC, WebTransport, QMux, or the in-memory pair used by tests and benches)
//! implements these traits. Codes passed to `reset`, `stop` and `close` are moq-lite codes from
//! `starling_proto::error`; each binding maps them onto its own wire (the WebTransport code
//! mapping on QUIC and HTTP/3, raw varints on QMux).

pub mod mem;

use std::future::Future;

use bytes::Bytes;

/// Why a transport operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The peer closed the session with an application code.
    #[error("session closed by peer with code {code}: {reason}")]
    ClosedByPeer { code: u32, reason: String },
    /// We closed the session ourselves.
    #[error("session closed locally")]
    ClosedLocally,
    /// The peer reset the stream we were reading (moq-lite stream code).
    #[error("stream reset by peer with code {0}")]
    Reset(u32),
    /// The peer asked us to stop sending on this stream (moq-lite stream code).
    #[error("stream stopped by peer with code {0}")]
    Stopped(u32),
    /// The connection failed below the application (timeout, TLS, I/O, framing).
    #[error("transport failure: {0}")]
    Failed(String),
}

/// Asked with how many more concurrent streams a peer's credit would grow by; true lets it
/// grow (see [`Transport::set_stream_gate`]).
pub type StreamGate = Box<dyn Fn(u64) -> bool + Send + Sync>;

/// One session's streams.
pub trait Transport: Clone + Send + Sync + 'static {
    type Send: SendStream;
    type Recv: RecvStream;

    fn open_bi(
        &self,
    ) -> impl Future<Output = Result<(Self::Send, Self::Recv), TransportError>> + Send;
    fn open_uni(&self) -> impl Future<Output = Result<Self::Send, TransportError>> + Send;
    fn accept_bi(
        &self,
    ) -> impl Future<Output = Result<(Self::Send, Self::Recv), TransportError>> + Send;
    fn accept_uni(&self) -> impl Future<Output = Result<Self::Recv, TransportError>> + Send;

    /// Largest datagram the transport can send now; 0 when datagrams are unavailable.
    fn max_datagram_size(&self) -> usize {
        0
    }
    /// Send one unreliable datagram; dropped silently when it cannot be sent.
    fn send_datagram(&self, _payload: Bytes) -> Result<(), TransportError> {
        Ok(())
    }
    /// Wait for the next datagram. Bindings without datagrams never resolve.
    fn recv_datagram(&self) -> impl Future<Output = Result<Bytes, TransportError>> + Send {
        std::future::pending()
    }

    /// Smoothed round-trip time in milliseconds, when the binding measures one.
    fn rtt_ms(&self) -> Option<u64> {
        None
    }

    /// Whether the binding measures round trips, even before its first sample: a session
    /// advertises PROBE reports in its SETUP on this (a QMux connection has no sample until
    /// its first QX_PING comes back, after SETUP is sent).
    fn measures_rtt(&self) -> bool {
        self.rtt_ms().is_some()
    }

    /// Change how many bytes the peer may have in flight to us unread on this connection
    /// (the connection-level receive window). Growing takes effect at once; shrinking as
    /// the application reads, since credit already given cannot be taken back. Bindings
    /// without connection-level flow control ignore it.
    fn set_receive_window(&self, _bytes: u64) {}

    /// Ask `gate` before the peer's concurrent-stream credit grows by `more` streams (what
    /// every stream the peer holds open costs is accounted relay-wide there); growth it
    /// refuses does not happen. Bindings whose stream credit does not grow ignore it.
    fn set_stream_gate(&self, _gate: StreamGate) {}

    /// Close the whole session with a moq-lite session code.
    fn close(&self, code: u32, reason: &str);
    /// Resolves once the session is closed, by either side.
    fn closed(&self) -> impl Future<Output = TransportError> + Send;
}

/// The sending half of a stream.
pub trait SendStream: Send + 'static {
    /// Queue a chunk; resolves once the transport accepted it (flow control applies).
    fn write(&mut self, chunk: Bytes) -> impl Future<Output = Result<(), TransportError>> + Send;
    /// Queue several chunks in order, as one write where the transport can (a frame header
    /// and its payload, say): one lock and one wake instead of one per chunk.
    /// The chunks are taken (left empty) as they are written.
    fn write_chunks(
        &mut self,
        chunks: &mut [Bytes],
    ) -> impl Future<Output = Result<(), TransportError>> + Send {
        async move {
            for chunk in chunks {
                self.write(std::mem::take(chunk)).await?;
            }
            Ok(())
        }
    }
    /// Higher sends first, among this session's streams.
    fn set_priority(&mut self, order: i32);
    /// Finish the stream cleanly (FIN).
    fn finish(&mut self) -> Result<(), TransportError>;
    /// Abandon the stream with a moq-lite stream code.
    fn reset(&mut self, code: u32);
    /// Resolves when the peer sent STOP_SENDING (its code) or the stream is otherwise done.
    fn stopped(&mut self) -> impl Future<Output = Result<Option<u32>, TransportError>> + Send;
}

/// The receiving half of a stream.
pub trait RecvStream: Send + 'static {
    /// The next chunk of at most `max` bytes; `None` at a clean end of stream (FIN).
    fn read(
        &mut self,
        max: usize,
    ) -> impl Future<Output = Result<Option<Bytes>, TransportError>> + Send;
    /// Ask the peer to stop sending, with a moq-lite stream code.
    fn stop(&mut self, code: u32);
}
