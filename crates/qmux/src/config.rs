//! Connection settings: wire version, framing, the limits we advertise, timers and send buffering.

use std::time::Duration;

use crate::params::{TransportParams, DEFAULT_MAX_RECORD_SIZE};
use crate::record::Framing;
use crate::version::{Side, WireVersion};

/// Everything a [`crate::Connection`] needs to start.
#[derive(Debug, Clone)]
pub struct Config {
    pub version: WireVersion,
    pub framing: Framing,
    pub side: Side,
    /// Connection receive window (initial_max_data), kept this far ahead of consumption.
    pub max_data: u64,
    /// Receive window of bidi streams we open.
    pub max_stream_data_bidi_local: u64,
    /// Receive window of bidi streams the peer opens.
    pub max_stream_data_bidi_remote: u64,
    /// Receive window of uni streams the peer opens.
    pub max_stream_data_uni: u64,
    /// Concurrent bidi streams the peer may have open.
    pub max_streams_bidi: u64,
    /// Concurrent uni streams the peer may have open.
    pub max_streams_uni: u64,
    /// Idle timeout we advertise (01+); `None` disables ours.
    pub max_idle_timeout: Option<Duration>,
    /// Largest record we accept (at least 16382 on 01+).
    pub max_record_size: u64,
    /// Largest DATAGRAM frame we accept (01+); 0 disables datagrams.
    pub max_datagram_frame_size: u64,
    /// Non-empty: negotiate the application protocol in-band (TCP/unix), this list in
    /// preference order; the server's preference wins. Empty: negotiated out of band.
    pub application_protocols: Vec<String>,
    /// How often to send a QX_PING to measure the round trip (01+), the first at once;
    /// `None` disables. Every 5 s: at every second, the pings of a few thousand idle
    /// WebSocket members were a fifth of a relay's steady CPU (docs/benchmarks.md, issue 14).
    pub rtt_interval: Option<Duration>,
    /// Bytes accepted from the application but not yet transmitted, over all streams.
    pub send_buffer: u64,
    /// Pack several frames into one record when they fit (01+). Off, every record carries
    /// exactly one frame, as qmux 0.5.3 sends.
    pub coalesce: bool,
    /// Received datagrams held unread before the oldest is dropped.
    pub datagram_queue: usize,
}

impl Config {
    /// qmux 0.5.3's defaults, which the relay's WebSocket endpoint uses: 1 MiB / 256 KiB
    /// windows, 100 / 100 streams, 30 s idle, 16382-byte records and datagram frames.
    pub fn new(version: WireVersion, framing: Framing, side: Side) -> Self {
        Self {
            version,
            framing,
            side,
            max_data: 1_048_576,
            max_stream_data_bidi_local: 262_144,
            max_stream_data_bidi_remote: 262_144,
            max_stream_data_uni: 262_144,
            max_streams_bidi: 100,
            max_streams_uni: 100,
            max_idle_timeout: Some(Duration::from_secs(30)),
            max_record_size: DEFAULT_MAX_RECORD_SIZE,
            max_datagram_frame_size: DEFAULT_MAX_RECORD_SIZE,
            application_protocols: Vec::new(),
            rtt_interval: Some(Duration::from_secs(5)),
            send_buffer: 2 * 1_048_576,
            coalesce: true,
            datagram_queue: 64,
        }
    }

    /// moq-tokio's settings (the client and the TCP listener): as [`Config::new`] with
    /// 10 000 / 10 000 streams.
    pub fn moq_tokio(version: WireVersion, framing: Framing, side: Side) -> Self {
        Self {
            max_streams_bidi: 10_000,
            max_streams_uni: 10_000,
            ..Self::new(version, framing, side)
        }
    }

    /// Negotiate the application protocol in-band from these, most preferred first.
    pub fn with_application_protocols<S: AsRef<str>>(mut self, protocols: &[S]) -> Self {
        self.application_protocols = protocols.iter().map(|p| p.as_ref().to_owned()).collect();
        self
    }

    /// The transport parameters this configuration advertises, as qmux 0.5.3 derives them:
    /// datagrams only on 01+ and clamped to the record size, `reset_stream_at` only on 02.
    pub fn transport_params(&self) -> TransportParams {
        let records = self.version.uses_records();
        TransportParams {
            max_idle_timeout: self
                .max_idle_timeout
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            initial_max_data: self.max_data,
            initial_max_stream_data_bidi_local: self.max_stream_data_bidi_local,
            initial_max_stream_data_bidi_remote: self.max_stream_data_bidi_remote,
            initial_max_stream_data_uni: self.max_stream_data_uni,
            initial_max_streams_bidi: self.max_streams_bidi,
            initial_max_streams_uni: self.max_streams_uni,
            max_datagram_frame_size: if records {
                self.max_datagram_frame_size.min(self.max_record_size)
            } else {
                0
            },
            max_record_size: self.max_record_size,
            reset_stream_at: self.version == WireVersion::Qmux02,
            application_protocols: self.application_protocols.clone(),
        }
    }
}
