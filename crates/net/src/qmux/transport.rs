//! `QmuxTransport` and its streams: the application's handles on a QMux connection, as a
//! `starling_transport::Transport`. Codes travel raw (docs/wire.md §7.3, QMux row).

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use starling_qmux::{Dir, StreamError, StreamId, WireVersion};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};

use super::shared::{dir_index, stream_error, Shared};

/// The moq-lite stream code (CANCELLED) sent when a handle is dropped before its end.
const DROP_CODE: u64 = 1;

/// Closes the connection (code 0) when the last transport handle goes, as quinn does.
struct Handle {
    shared: Arc<Shared>,
    version: WireVersion,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        inner.conn.close(0, "");
        inner.process();
    }
}

/// One QMux session (WebSocket or TCP), cheap to clone.
#[derive(Clone)]
pub struct QmuxTransport {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for QmuxTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QmuxTransport")
            .field("version", &self.handle.version)
            .finish_non_exhaustive()
    }
}

impl QmuxTransport {
    pub(crate) fn new(shared: Arc<Shared>, version: WireVersion) -> Self {
        Self {
            handle: Arc::new(Handle { shared, version }),
        }
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// The QMux wire version in use.
    pub fn wire_version(&self) -> WireVersion {
        self.handle.version
    }

    /// The negotiated moq ALPN: from the WebSocket subprotocol, or agreed in-band through
    /// `application_protocols` on TCP (known once [`QmuxTransport::established`] resolved).
    pub fn protocol(&self) -> Option<String> {
        let inner = self.shared().lock();
        inner
            .protocol
            .clone()
            .or_else(|| inner.conn.protocol().map(str::to_owned))
    }

    /// Resolves once the peer's transport parameters arrived.
    pub async fn established(&self) -> Result<(), TransportError> {
        poll_fn(|cx| {
            let mut inner = self.shared().lock();
            if inner.conn.is_established() {
                return Poll::Ready(Ok(()));
            }
            if let Some(err) = inner.close_error() {
                return Poll::Ready(Err(err));
            }
            inner.connected.register(cx);
            Poll::Pending
        })
        .await
    }

    async fn open(&self, dir: Dir) -> Result<StreamId, TransportError> {
        poll_fn(|cx| {
            let mut inner = self.shared().lock();
            let closed_locally = inner.closed_locally;
            match inner.conn.open(dir) {
                Ok(id) => {
                    inner.process();
                    Poll::Ready(Ok(id))
                }
                Err(StreamError::Blocked) => {
                    inner.open[dir_index(dir)].register(cx);
                    inner.process();
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(stream_error(e, closed_locally))),
            }
        })
        .await
    }

    async fn accept(&self, dir: Dir) -> Result<StreamId, TransportError> {
        poll_fn(|cx| {
            let mut inner = self.shared().lock();
            if let Some(id) = inner.conn.accept(dir) {
                return Poll::Ready(Ok(id));
            }
            if let Some(err) = inner.close_error() {
                return Poll::Ready(Err(err));
            }
            inner.accept[dir_index(dir)].register(cx);
            Poll::Pending
        })
        .await
    }

    fn send_stream(&self, id: StreamId) -> QmuxSendStream {
        QmuxSendStream {
            shared: self.shared().clone(),
            id,
            done: false,
        }
    }

    fn recv_stream(&self, id: StreamId) -> QmuxRecvStream {
        QmuxRecvStream {
            shared: self.shared().clone(),
            id,
            done: false,
        }
    }
}

impl Transport for QmuxTransport {
    type Send = QmuxSendStream;
    type Recv = QmuxRecvStream;

    async fn open_bi(&self) -> Result<(QmuxSendStream, QmuxRecvStream), TransportError> {
        let id = self.open(Dir::Bi).await?;
        Ok((self.send_stream(id), self.recv_stream(id)))
    }

    async fn open_uni(&self) -> Result<QmuxSendStream, TransportError> {
        let id = self.open(Dir::Uni).await?;
        Ok(self.send_stream(id))
    }

    async fn accept_bi(&self) -> Result<(QmuxSendStream, QmuxRecvStream), TransportError> {
        let id = self.accept(Dir::Bi).await?;
        Ok((self.send_stream(id), self.recv_stream(id)))
    }

    async fn accept_uni(&self) -> Result<QmuxRecvStream, TransportError> {
        let id = self.accept(Dir::Uni).await?;
        Ok(self.recv_stream(id))
    }

    fn max_datagram_size(&self) -> usize {
        self.shared().lock().conn.max_datagram_size()
    }

    fn send_datagram(&self, payload: Bytes) -> Result<(), TransportError> {
        let mut inner = self.shared().lock();
        let closed_locally = inner.closed_locally;
        let result = match inner.conn.send_datagram(payload) {
            Ok(()) | Err(StreamError::DatagramUnsupported) => Ok(()),
            Err(e) => Err(stream_error(e, closed_locally)),
        };
        inner.process();
        result
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        poll_fn(|cx| {
            let mut inner = self.shared().lock();
            if let Some(d) = inner.conn.recv_datagram() {
                return Poll::Ready(Ok(d));
            }
            if let Some(err) = inner.close_error() {
                return Poll::Ready(Err(err));
            }
            inner.datagrams.register(cx);
            Poll::Pending
        })
        .await
    }

    fn rtt_ms(&self) -> Option<u64> {
        let rtt = self.shared().lock().conn.rtt()?;
        Some(u64::try_from(rtt.as_millis()).unwrap_or(u64::MAX))
    }

    fn measures_rtt(&self) -> bool {
        self.shared().lock().conn.measures_rtt()
    }

    fn set_receive_window(&self, bytes: u64) {
        let mut inner = self.shared().lock();
        inner.conn.set_receive_window(bytes);
        inner.process();
    }

    fn close(&self, code: u32, reason: &str) {
        let mut inner = self.shared().lock();
        if inner.conn.close_reason().is_none() {
            inner.closed_locally = true;
        }
        inner.conn.close(u64::from(code), reason);
        inner.process();
    }

    async fn closed(&self) -> TransportError {
        poll_fn(|cx| {
            let mut inner = self.shared().lock();
            if let Some(err) = inner.close_error() {
                return Poll::Ready(err);
            }
            inner.closed.register(cx);
            Poll::Pending
        })
        .await
    }
}

/// The sending half of a QMux stream. Dropped before `finish`/`reset`, it resets with
/// CANCELLED (1).
pub struct QmuxSendStream {
    shared: Arc<Shared>,
    id: StreamId,
    done: bool,
}

impl SendStream for QmuxSendStream {
    async fn write(&mut self, chunk: Bytes) -> Result<(), TransportError> {
        self.write_chunks(&mut [chunk]).await
    }

    async fn write_chunks(&mut self, chunks: &mut [Bytes]) -> Result<(), TransportError> {
        let id = self.id;
        poll_fn(|cx| {
            let mut inner = self.shared.lock();
            let closed_locally = inner.closed_locally;
            for chunk in chunks.iter_mut() {
                while !chunk.is_empty() {
                    match inner.conn.write(id, chunk.clone()) {
                        Ok(n) => {
                            let _ = chunk.split_to(n);
                        }
                        Err(StreamError::Blocked) => {
                            inner.send.entry(id).or_default().register(cx);
                            inner.process();
                            return Poll::Pending;
                        }
                        Err(e) => {
                            inner.process();
                            return Poll::Ready(Err(stream_error(e, closed_locally)));
                        }
                    }
                }
            }
            inner.process();
            Poll::Ready(Ok(()))
        })
        .await
    }

    fn set_priority(&mut self, order: i32) {
        self.shared.lock().conn.set_priority(self.id, order);
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        tracing::trace!(id = %self.id, "finish");
        self.done = true;
        let mut inner = self.shared.lock();
        let closed_locally = inner.closed_locally;
        let result = match inner.conn.finish(self.id) {
            // The peer already ended the exchange with STOP_SENDING (we answered with
            // RESET_STREAM): there is nothing left to finish, and `stopped` reports the code.
            // Like the in-memory transport, this is not an error. moq-net over qmux 0.5.3 hits
            // it routinely: after answering TRACK it FINs, sees its own stream closed and
            // "cancels" with STOP_SENDING 0 before our FIN goes out.
            Err(StreamError::Stopped(_)) => Ok(()),
            other => other,
        };
        inner.process();
        result.map_err(|e| stream_error(e, closed_locally))
    }

    fn reset(&mut self, code: u32) {
        tracing::trace!(id = %self.id, code, "reset");
        self.done = true;
        let mut inner = self.shared.lock();
        inner.conn.reset(self.id, u64::from(code));
        inner.process();
    }

    async fn stopped(&mut self) -> Result<Option<u32>, TransportError> {
        let id = self.id;
        poll_fn(|cx| {
            let mut inner = self.shared.lock();
            let closed_locally = inner.closed_locally;
            match inner.conn.poll_stopped(id) {
                Ok(code) => {
                    inner.process();
                    Poll::Ready(match code {
                        None => Ok(None),
                        Some(c) => u32::try_from(c).map(Some).map_err(|_| {
                            TransportError::Failed(format!("STOP_SENDING code {c} exceeds u32"))
                        }),
                    })
                }
                Err(StreamError::Blocked) => {
                    inner.send.entry(id).or_default().register(cx);
                    Poll::Pending
                }
                Err(e) => Poll::Ready(Err(stream_error(e, closed_locally))),
            }
        })
        .await
    }
}

impl Drop for QmuxSendStream {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        if !self.done {
            tracing::trace!(id = %self.id, "send stream dropped unfinished");
            inner.conn.reset(self.id, DROP_CODE);
        }
        inner.send.remove(&self.id);
        inner.process();
    }
}

/// The receiving half of a QMux stream. Dropped before its end, it sends STOP_SENDING with
/// CANCELLED (1).
pub struct QmuxRecvStream {
    shared: Arc<Shared>,
    id: StreamId,
    done: bool,
}

impl RecvStream for QmuxRecvStream {
    async fn read(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        let id = self.id;
        let result = poll_fn(|cx| {
            let mut inner = self.shared.lock();
            let closed_locally = inner.closed_locally;
            match inner.conn.read(id, max) {
                Ok(chunk) => {
                    inner.process();
                    Poll::Ready(Ok(chunk))
                }
                Err(StreamError::Blocked) => {
                    inner.recv.entry(id).or_default().register(cx);
                    Poll::Pending
                }
                Err(e) => {
                    inner.process();
                    Poll::Ready(Err(stream_error(e, closed_locally)))
                }
            }
        })
        .await;
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    fn stop(&mut self, code: u32) {
        tracing::trace!(id = %self.id, code, "stop");
        self.done = true;
        let mut inner = self.shared.lock();
        inner.conn.stop(self.id, u64::from(code));
        inner.process();
    }
}

impl Drop for QmuxRecvStream {
    fn drop(&mut self) {
        let mut inner = self.shared.lock();
        if !self.done {
            tracing::trace!(id = %self.id, "recv stream dropped unfinished");
            inner.conn.stop(self.id, DROP_CODE);
        }
        inner.recv.remove(&self.id);
        inner.process();
    }
}
