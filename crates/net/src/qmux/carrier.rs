//! What carries QMux records: WebSocket messages (axum on the server, tungstenite on the
//! client) or a plain byte stream (TCP), behind one poll-style trait the driver uses.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Something received from the carrier.
pub(crate) enum Inbound {
    /// A WebSocket binary message (one record), or bytes read from a byte stream.
    Data(Bytes),
    /// Text, Ping or Pong: ignored by QMux, but proof the peer is alive.
    Activity,
    /// A WebSocket Close.
    Close,
}

/// A carrier for records. Errors are strings: they only end up in a close reason.
pub(crate) trait Carrier: Send + Unpin + 'static {
    /// The next inbound item; `None` at the end of the carrier.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Inbound, String>>>;
    /// Ready to take one more record.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>>;
    fn start_send(&mut self, record: Bytes) -> Result<(), String>;
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>>;
    /// Send a close (WebSocket Close) and end the carrier.
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>>;
    /// Whether the carrier has its own keep-alive ping (WebSocket).
    fn has_ping(&self) -> bool {
        false
    }
    /// Queue a keep-alive ping (after `poll_ready`).
    fn start_ping(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// A WebSocket message type, whichever library it comes from.
pub(crate) trait WsMessage: Sized {
    fn inbound(self) -> Inbound;
    fn binary(data: Bytes) -> Self;
    fn ping() -> Self;
}

impl WsMessage for axum::extract::ws::Message {
    fn inbound(self) -> Inbound {
        use axum::extract::ws::Message as M;
        match self {
            M::Binary(data) => Inbound::Data(data),
            M::Close(_) => Inbound::Close,
            M::Text(_) | M::Ping(_) | M::Pong(_) => Inbound::Activity,
        }
    }
    fn binary(data: Bytes) -> Self {
        Self::Binary(data)
    }
    fn ping() -> Self {
        Self::Ping(Bytes::new())
    }
}

impl WsMessage for tokio_tungstenite::tungstenite::Message {
    fn inbound(self) -> Inbound {
        use tokio_tungstenite::tungstenite::Message as M;
        match self {
            M::Binary(data) => Inbound::Data(data),
            M::Close(_) => Inbound::Close,
            M::Text(_) | M::Ping(_) | M::Pong(_) | M::Frame(_) => Inbound::Activity,
        }
    }
    fn binary(data: Bytes) -> Self {
        Self::Binary(data)
    }
    fn ping() -> Self {
        Self::Ping(Bytes::new())
    }
}

/// A WebSocket: one binary message per record.
pub(crate) struct WsCarrier<S> {
    socket: S,
}

impl<S> WsCarrier<S> {
    pub(crate) fn new(socket: S) -> Self {
        Self { socket }
    }
}

impl<S, M, E> Carrier for WsCarrier<S>
where
    S: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Send + Unpin + 'static,
    M: WsMessage,
    E: std::fmt::Display,
{
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Inbound, String>>> {
        Pin::new(&mut self.socket)
            .poll_next(cx)
            .map(|m| m.map(|m| m.map(WsMessage::inbound).map_err(|e| e.to_string())))
    }
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        Pin::new(&mut self.socket)
            .poll_ready(cx)
            .map_err(|e| e.to_string())
    }
    fn start_send(&mut self, record: Bytes) -> Result<(), String> {
        Pin::new(&mut self.socket)
            .start_send(M::binary(record))
            .map_err(|e| e.to_string())
    }
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        Pin::new(&mut self.socket)
            .poll_flush(cx)
            .map_err(|e| e.to_string())
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        Pin::new(&mut self.socket)
            .poll_close(cx)
            .map_err(|e| e.to_string())
    }
    fn has_ping(&self) -> bool {
        true
    }
    fn start_ping(&mut self) -> Result<(), String> {
        Pin::new(&mut self.socket)
            .start_send(M::ping())
            .map_err(|e| e.to_string())
    }
}

/// Bytes buffered for writing before `poll_ready` waits for the socket.
const WRITE_HIGH_WATER: usize = 64 * 1024;
/// Bytes read per `poll_recv`.
const READ_CHUNK: usize = 16 * 1024;

/// A byte stream (TCP): records are size-prefixed by the connection itself.
pub(crate) struct ByteCarrier<T> {
    io: T,
    out: BytesMut,
    read_buf: Box<[u8]>,
}

impl<T> ByteCarrier<T> {
    pub(crate) fn new(io: T) -> Self {
        Self {
            io,
            out: BytesMut::new(),
            read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> ByteCarrier<T> {
    /// Write buffered bytes until fewer than `keep` remain (or the socket pushes back).
    fn poll_drain(&mut self, cx: &mut Context<'_>, keep: usize) -> Poll<Result<(), String>> {
        while self.out.len() > keep {
            match Pin::new(&mut self.io).poll_write(cx, &self.out) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err("socket closed for writing".into())),
                Poll::Ready(Ok(n)) => {
                    let _ = self.out.split_to(n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Carrier for ByteCarrier<T> {
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Inbound, String>>> {
        let mut buf = ReadBuf::new(&mut self.read_buf);
        match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) if buf.filled().is_empty() => Poll::Ready(None),
            Poll::Ready(Ok(())) => Poll::Ready(Some(Ok(Inbound::Data(Bytes::copy_from_slice(
                buf.filled(),
            ))))),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e.to_string()))),
            Poll::Pending => Poll::Pending,
        }
    }
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        if self.out.len() < WRITE_HIGH_WATER {
            return Poll::Ready(Ok(()));
        }
        self.poll_drain(cx, WRITE_HIGH_WATER - 1)
    }
    fn start_send(&mut self, record: Bytes) -> Result<(), String> {
        self.out.extend_from_slice(&record);
        Ok(())
    }
    fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        match self.poll_drain(cx, 0) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.io)
                .poll_flush(cx)
                .map_err(|e| e.to_string()),
            other => other,
        }
    }
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        match self.poll_flush(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.io)
                .poll_shutdown(cx)
                .map_err(|e| e.to_string()),
            other => other,
        }
    }
}
