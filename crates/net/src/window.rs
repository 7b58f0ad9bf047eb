//! Receive windows: one setting per connection, applied to every binding the same way.
//!
//! The connection window is what a peer may have in flight to us unread on one connection;
//! the stream window what it may have on one stream. Raw QUIC and WebTransport take them as
//! quinn's receive windows, QMux (WebSocket, TCP) as its MAX_DATA and MAX_STREAM_DATA; the
//! session layer takes the connection window as its receive budget for incomplete units.

use starling_qmux::Config;

use crate::quic::QuicConfig;

/// A connection's receive windows, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveWindows {
    /// The most one connection's window grows to.
    pub connection: u64,
    /// At most `connection` takes effect.
    pub stream: u64,
    /// What a connection's window starts at, when something grows it later (the relay's
    /// receive pool); `None`: it starts, and stays, at `connection`.
    pub initial: Option<u64>,
}

impl Default for ReceiveWindows {
    /// quinn's settings as moq-tokio sets them: 64 MiB per connection, 8 MiB per stream.
    fn default() -> Self {
        ReceiveWindows {
            connection: 64 << 20,
            stream: 8 << 20,
            initial: None,
        }
    }
}

impl ReceiveWindows {
    /// The per-stream window in effect.
    pub fn stream(&self) -> u64 {
        self.stream.min(self.connection)
    }

    /// The connection window granted at the handshake.
    pub fn starting(&self) -> u64 {
        self.initial
            .map_or(self.connection, |i| i.min(self.connection))
    }

    pub fn apply_quic(&self, quic: &mut QuicConfig) {
        quic.receive_window = self.starting();
        quic.stream_receive_window = self.stream();
    }

    pub fn apply_qmux(&self, config: &mut Config) {
        config.max_data = self.starting();
        config.max_stream_data_bidi_local = self.stream();
        config.max_stream_data_bidi_remote = self.stream();
        config.max_stream_data_uni = self.stream();
    }
}
