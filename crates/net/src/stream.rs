//! Send and receive streams of a `QuicTransport`, with moq-lite codes mapped per binding.

use std::sync::Arc;

use bytes::Bytes;
use starling_transport::{RecvStream, SendStream, TransportError};

use crate::codes::{decode_stream_code, encode_stream_code};
use crate::credit::Direction;
use crate::quic_shared::Shared;

/// The moq-lite stream code (CANCELLED, docs/wire.md §7.1) sent when a stream handle is dropped
/// before it was finished, reset, stopped or read to the end.
const DROP_CODE: u32 = 1;

enum SendInner {
    Raw(quinn::SendStream),
    Wt(web_transport_quinn::SendStream),
}

/// The sending half of a QUIC or WebTransport stream.
///
/// Dropping it without [`SendStream::finish`] or [`SendStream::reset`] resets it with
/// CANCELLED (1) rather than quinn's implicit FIN, so a truncated stream never looks complete.
pub struct QuicSendStream {
    inner: SendInner,
    shared: Arc<Shared>,
    done: bool,
}

impl QuicSendStream {
    pub(crate) fn raw(stream: quinn::SendStream, shared: Arc<Shared>) -> Self {
        Self {
            inner: SendInner::Raw(stream),
            shared,
            done: false,
        }
    }

    pub(crate) fn wt(stream: web_transport_quinn::SendStream, shared: Arc<Shared>) -> Self {
        Self {
            inner: SendInner::Wt(stream),
            shared,
            done: false,
        }
    }

    fn raw_write_error(&self, err: quinn::WriteError) -> TransportError {
        match err {
            quinn::WriteError::Stopped(code) => match decode_stream_code(code) {
                Some(code) => TransportError::Stopped(code),
                None => TransportError::Failed(format!("invalid STOP_SENDING code {code}")),
            },
            quinn::WriteError::ConnectionLost(e) => self.shared.connection_error(&e),
            other => TransportError::Failed(other.to_string()),
        }
    }

    fn wt_write_error(&self, err: web_transport_quinn::WriteError) -> TransportError {
        use web_transport_quinn::WriteError as E;
        match err {
            E::Stopped(code) => TransportError::Stopped(code),
            E::SessionError(e) => self.shared.session_error(&e),
            other => TransportError::Failed(other.to_string()),
        }
    }
}

impl SendStream for QuicSendStream {
    async fn write(&mut self, chunk: Bytes) -> Result<(), TransportError> {
        // A list of one, as quinn's one-chunk write is too, but through the smaller futures
        // (this one 336 -> 272 bytes): every future that awaits a write (each group in
        // flight, each request stream) holds it.
        self.write_chunks(&mut [chunk]).await
    }

    async fn write_chunks(&mut self, chunks: &mut [Bytes]) -> Result<(), TransportError> {
        // quinn counts a chunk as written once it has taken bytes from it, so a trailing
        // empty chunk would never be: leave those out.
        let end = chunks
            .iter()
            .rposition(|c| !c.is_empty())
            .map_or(0, |i| i + 1);
        let chunks = &mut chunks[..end];
        if chunks.is_empty() {
            return Ok(());
        }
        match &mut self.inner {
            SendInner::Raw(s) => {
                let res = s.write_all_chunks(chunks).await;
                res.map_err(|e| self.raw_write_error(e))
            }
            SendInner::Wt(s) => {
                let res = s.write_all_chunks(chunks).await;
                res.map_err(|e| self.wt_write_error(e))
            }
        }
    }

    fn set_priority(&mut self, order: i32) {
        // Fails only on a stream that is already closed, where priority is moot.
        match &mut self.inner {
            SendInner::Raw(s) => s.set_priority(order).ok(),
            SendInner::Wt(s) => s.set_priority(order).ok(),
        };
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        let res = match &mut self.inner {
            SendInner::Raw(s) => s.finish().map_err(|_| ()),
            SendInner::Wt(s) => s.finish().map_err(|_| ()),
        };
        self.done = true;
        res.map_err(|()| TransportError::Failed("stream already finished or reset".into()))
    }

    fn reset(&mut self, code: u32) {
        self.done = true;
        // Fails only when the stream is already finished or reset; nothing left to abandon.
        match &mut self.inner {
            SendInner::Raw(s) => s.reset(encode_stream_code(code)).ok(),
            SendInner::Wt(s) => s.reset(code).ok(),
        };
    }

    async fn stopped(&mut self) -> Result<Option<u32>, TransportError> {
        match &self.inner {
            SendInner::Raw(s) => match s.stopped().await {
                Ok(Some(code)) => match decode_stream_code(code) {
                    Some(code) => Ok(Some(code)),
                    None => Err(TransportError::Failed(format!(
                        "invalid STOP_SENDING code {code}"
                    ))),
                },
                Ok(None) => Ok(None),
                Err(quinn::StoppedError::ConnectionLost(e)) => {
                    Err(self.shared.connection_error(&e))
                }
                Err(e) => Err(TransportError::Failed(e.to_string())),
            },
            SendInner::Wt(s) => s.stopped().await.map_err(|e| self.shared.session_error(&e)),
        }
    }
}

impl Drop for QuicSendStream {
    fn drop(&mut self) {
        if !self.done {
            SendStream::reset(self, DROP_CODE);
        }
    }
}

enum RecvInner {
    Raw(quinn::RecvStream),
    Wt(web_transport_quinn::RecvStream),
}

/// The receiving half of a QUIC or WebTransport stream.
///
/// Dropping it before the end of the stream sends STOP_SENDING with CANCELLED (1), mapped
/// like every other code, instead of quinn's implicit unmapped 0.
pub struct QuicRecvStream {
    inner: RecvInner,
    shared: Arc<Shared>,
    done: bool,
    /// Counted against the peer's stream credit until dropped (streams the peer opened).
    counted: Option<Direction>,
}

impl QuicRecvStream {
    pub(crate) fn raw(stream: quinn::RecvStream, shared: Arc<Shared>) -> Self {
        Self {
            inner: RecvInner::Raw(stream),
            shared,
            done: false,
            counted: None,
        }
    }

    pub(crate) fn wt(stream: web_transport_quinn::RecvStream, shared: Arc<Shared>) -> Self {
        Self {
            inner: RecvInner::Wt(stream),
            shared,
            done: false,
            counted: None,
        }
    }

    /// Count this stream against the peer's credit in `direction` until it is dropped.
    pub(crate) fn counted(mut self, direction: Direction) -> Self {
        self.counted = Some(direction);
        self
    }

    fn raw_read_error(&self, err: quinn::ReadError) -> TransportError {
        match err {
            quinn::ReadError::Reset(code) => match decode_stream_code(code) {
                Some(code) => TransportError::Reset(code),
                None => TransportError::Failed(format!("invalid RESET_STREAM code {code}")),
            },
            quinn::ReadError::ConnectionLost(e) => self.shared.connection_error(&e),
            other => TransportError::Failed(other.to_string()),
        }
    }

    fn wt_read_error(&self, err: web_transport_quinn::ReadError) -> TransportError {
        use web_transport_quinn::ReadError as E;
        match err {
            E::Reset(code) => TransportError::Reset(code),
            E::SessionError(e) => self.shared.session_error(&e),
            other => TransportError::Failed(other.to_string()),
        }
    }
}

impl RecvStream for QuicRecvStream {
    async fn read(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        if max == 0 {
            return Ok(Some(Bytes::new()));
        }
        let res = match &mut self.inner {
            RecvInner::Raw(s) => {
                let res = s.read_chunk(max, true).await;
                res.map_err(|e| self.raw_read_error(e))
            }
            RecvInner::Wt(s) => {
                let res = s.read_chunk(max, true).await;
                res.map_err(|e| self.wt_read_error(e))
            }
        };
        match res {
            Ok(Some(chunk)) => Ok(Some(chunk.bytes)),
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                // A reset or a dead connection ends the stream; nothing to stop on drop.
                self.done = true;
                Err(e)
            }
        }
    }

    fn stop(&mut self, code: u32) {
        self.done = true;
        // Fails only when the stream is already stopped or fully read.
        match &mut self.inner {
            RecvInner::Raw(s) => s.stop(encode_stream_code(code)).ok(),
            RecvInner::Wt(s) => s.stop(code).ok(),
        };
    }
}

impl Drop for QuicRecvStream {
    fn drop(&mut self) {
        if !self.done {
            RecvStream::stop(self, DROP_CODE);
        }
        if let Some(direction) = self.counted {
            self.shared.credit.closed(direction);
        }
    }
}
