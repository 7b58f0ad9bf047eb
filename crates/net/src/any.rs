//! One transport type over every binding (raw QUIC, WebTransport, WebSocket, TCP), for code
//! that picks its binding at run time, such as a client racing WebTransport against WebSocket.

use bytes::Bytes;
use starling_transport::{RecvStream, SendStream, Transport, TransportError};

use crate::qmux::{QmuxRecvStream, QmuxSendStream, QmuxTransport};
use crate::stream::{QuicRecvStream, QuicSendStream};
use crate::transport::QuicTransport;

/// A session over QUIC (raw or WebTransport) or QMux (WebSocket or TCP).
#[derive(Clone)]
pub enum AnyTransport {
    Quic(QuicTransport),
    Qmux(QmuxTransport),
}

pub enum AnySend {
    Quic(QuicSendStream),
    Qmux(QmuxSendStream),
}

pub enum AnyRecv {
    Quic(QuicRecvStream),
    Qmux(QmuxRecvStream),
}

impl AnyTransport {
    /// `webtransport`, `quic`, `websocket` or `tcp`: for logs.
    pub fn binding_name(&self) -> &'static str {
        match self {
            AnyTransport::Quic(t) => t.binding().as_str(),
            AnyTransport::Qmux(_) => "qmux",
        }
    }
}

impl Transport for AnyTransport {
    type Send = AnySend;
    type Recv = AnyRecv;

    async fn open_bi(&self) -> Result<(AnySend, AnyRecv), TransportError> {
        match self {
            AnyTransport::Quic(t) => t
                .open_bi()
                .await
                .map(|(s, r)| (AnySend::Quic(s), AnyRecv::Quic(r))),
            AnyTransport::Qmux(t) => t
                .open_bi()
                .await
                .map(|(s, r)| (AnySend::Qmux(s), AnyRecv::Qmux(r))),
        }
    }

    async fn open_uni(&self) -> Result<AnySend, TransportError> {
        match self {
            AnyTransport::Quic(t) => t.open_uni().await.map(AnySend::Quic),
            AnyTransport::Qmux(t) => t.open_uni().await.map(AnySend::Qmux),
        }
    }

    async fn accept_bi(&self) -> Result<(AnySend, AnyRecv), TransportError> {
        match self {
            AnyTransport::Quic(t) => t
                .accept_bi()
                .await
                .map(|(s, r)| (AnySend::Quic(s), AnyRecv::Quic(r))),
            AnyTransport::Qmux(t) => t
                .accept_bi()
                .await
                .map(|(s, r)| (AnySend::Qmux(s), AnyRecv::Qmux(r))),
        }
    }

    async fn accept_uni(&self) -> Result<AnyRecv, TransportError> {
        match self {
            AnyTransport::Quic(t) => t.accept_uni().await.map(AnyRecv::Quic),
            AnyTransport::Qmux(t) => t.accept_uni().await.map(AnyRecv::Qmux),
        }
    }

    fn max_datagram_size(&self) -> usize {
        match self {
            AnyTransport::Quic(t) => t.max_datagram_size(),
            AnyTransport::Qmux(t) => t.max_datagram_size(),
        }
    }

    fn send_datagram(&self, payload: Bytes) -> Result<(), TransportError> {
        match self {
            AnyTransport::Quic(t) => t.send_datagram(payload),
            AnyTransport::Qmux(t) => t.send_datagram(payload),
        }
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        match self {
            AnyTransport::Quic(t) => t.recv_datagram().await,
            AnyTransport::Qmux(t) => t.recv_datagram().await,
        }
    }

    fn rtt_ms(&self) -> Option<u64> {
        match self {
            AnyTransport::Quic(t) => t.rtt_ms(),
            AnyTransport::Qmux(t) => t.rtt_ms(),
        }
    }

    fn measures_rtt(&self) -> bool {
        match self {
            AnyTransport::Quic(t) => t.measures_rtt(),
            AnyTransport::Qmux(t) => t.measures_rtt(),
        }
    }

    fn set_receive_window(&self, bytes: u64) {
        match self {
            AnyTransport::Quic(t) => t.set_receive_window(bytes),
            AnyTransport::Qmux(t) => t.set_receive_window(bytes),
        }
    }

    fn set_stream_gate(&self, gate: starling_transport::StreamGate) {
        match self {
            AnyTransport::Quic(t) => t.set_stream_gate(gate),
            AnyTransport::Qmux(t) => t.set_stream_gate(gate),
        }
    }

    fn close(&self, code: u32, reason: &str) {
        match self {
            AnyTransport::Quic(t) => t.close(code, reason),
            AnyTransport::Qmux(t) => t.close(code, reason),
        }
    }

    async fn closed(&self) -> TransportError {
        match self {
            AnyTransport::Quic(t) => t.closed().await,
            AnyTransport::Qmux(t) => t.closed().await,
        }
    }
}

impl SendStream for AnySend {
    async fn write(&mut self, chunk: Bytes) -> Result<(), TransportError> {
        match self {
            AnySend::Quic(s) => s.write(chunk).await,
            AnySend::Qmux(s) => s.write(chunk).await,
        }
    }

    async fn write_chunks(&mut self, chunks: &mut [Bytes]) -> Result<(), TransportError> {
        match self {
            AnySend::Quic(s) => s.write_chunks(chunks).await,
            AnySend::Qmux(s) => s.write_chunks(chunks).await,
        }
    }

    fn set_priority(&mut self, order: i32) {
        match self {
            AnySend::Quic(s) => s.set_priority(order),
            AnySend::Qmux(s) => s.set_priority(order),
        }
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        match self {
            AnySend::Quic(s) => s.finish(),
            AnySend::Qmux(s) => s.finish(),
        }
    }

    fn reset(&mut self, code: u32) {
        match self {
            AnySend::Quic(s) => s.reset(code),
            AnySend::Qmux(s) => s.reset(code),
        }
    }

    async fn stopped(&mut self) -> Result<Option<u32>, TransportError> {
        match self {
            AnySend::Quic(s) => s.stopped().await,
            AnySend::Qmux(s) => s.stopped().await,
        }
    }
}

impl RecvStream for AnyRecv {
    async fn read(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        match self {
            AnyRecv::Quic(r) => r.read(max).await,
            AnyRecv::Qmux(r) => r.read(max).await,
        }
    }

    fn stop(&mut self, code: u32) {
        match self {
            AnyRecv::Quic(r) => r.stop(code),
            AnyRecv::Qmux(r) => r.stop(code),
        }
    }
}
