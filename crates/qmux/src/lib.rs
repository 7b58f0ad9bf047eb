//! QMux without I/O: QUIC-style streams over WebSocket messages or a TCP byte stream.
//!
//! Implements qmux 0.5.3's wire (docs/wire.md §8): frames ([`Frame`]), transport parameters
//! ([`TransportParams`]), records ([`record`]), the wire versions qmux-00/01/02
//! ([`WireVersion`]), and a [`Connection`] state machine driven like quinn-proto: feed it
//! records ([`Connection::handle_record`], [`Connection::handle_bytes`]) and time
//! ([`Connection::handle_timeout`]), drain [`Connection::poll_transmit`],
//! [`Connection::poll_event`] and [`Connection::poll_timeout`]. It never blocks, spawns or
//! reads a clock: the caller owns the socket and `now`.
//!
//! Deliberate omissions: the legacy `webtransport` wire format (no flow control; only reaches
//! pre-lite-03 moq versions), sending RESET_STREAM_AT (we accept it on qmux-02 and treat it as
//! a plain reset, so bytes below its reliable size that were still unread are dropped).

mod config;
mod connection;
pub mod error;
mod flow;
pub mod frame;
mod ops;
pub mod params;
pub mod record;
mod recv;
mod sched;
mod streams;
mod transmit;
pub mod varint;
mod version;

pub use config::Config;
pub use connection::{Connection, Event};
pub use error::{CloseReason, DecodeError, ParamsError, PeerError, StreamError, TransportCode};
pub use frame::{Frame, StreamFrame};
pub use params::{TransportParams, DEFAULT_MAX_RECORD_SIZE};
pub use record::{Framing, RecordReader};
pub use transmit::MAX_STREAM_PAYLOAD;
pub use version::{Dir, Side, StreamId, WireVersion};
