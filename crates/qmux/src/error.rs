//! Error types: wire transport codes, decode failures, why a connection ended, and stream operation errors.

use crate::version::StreamId;

/// Transport error codes carried by CONNECTION_CLOSE (0x1c), from RFC 9000 §20.1.
///
/// qmux 0.5.3 itself sends 1002 for every violation it detects; we send the QUIC code that
/// names the fault. A receiver treats any CONNECTION_CLOSE as an abnormal close either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransportCode(pub u64);

impl TransportCode {
    pub const NO_ERROR: Self = Self(0x0);
    pub const INTERNAL_ERROR: Self = Self(0x1);
    pub const FLOW_CONTROL_ERROR: Self = Self(0x3);
    pub const STREAM_LIMIT_ERROR: Self = Self(0x4);
    pub const STREAM_STATE_ERROR: Self = Self(0x5);
    pub const FINAL_SIZE_ERROR: Self = Self(0x6);
    pub const FRAME_ENCODING_ERROR: Self = Self(0x7);
    pub const TRANSPORT_PARAMETER_ERROR: Self = Self(0x8);
    pub const PROTOCOL_VIOLATION: Self = Self(0xa);

    /// The RFC 9000 name, or `None` for codes outside the ones above.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "STREAM_LIMIT_ERROR",
            0x5 => "STREAM_STATE_ERROR",
            0x6 => "FINAL_SIZE_ERROR",
            0x7 => "FRAME_ENCODING_ERROR",
            0x8 => "TRANSPORT_PARAMETER_ERROR",
            0xa => "PROTOCOL_VIOLATION",
            _ => return None,
        })
    }
}

impl std::fmt::Display for TransportCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}"),
            None => write!(f, "{:#x}", self.0),
        }
    }
}

/// A transport parameter list that cannot be accepted (docs/wire.md §8.4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error("transport parameters truncated")]
    Truncated,
    #[error("duplicate transport parameter {0:#x}")]
    Duplicate(u64),
    #[error("transport parameter {0:#x} is forbidden in QMux")]
    Forbidden(u64),
    #[error("malformed value for transport parameter {0:#x}")]
    Malformed(u64),
    #[error("max_record_size {0} is below the 16382 minimum")]
    RecordSizeTooSmall(u64),
    #[error("application_protocols received where the protocol was negotiated out of band")]
    UnexpectedProtocols,
}

/// A frame that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended inside a frame.
    #[error("frame truncated")]
    Truncated,
    /// A frame type QMux does not define (fatal, docs/wire.md §8.3).
    #[error("unknown frame type {0:#x}")]
    UnknownType(u64),
    /// A field holds a value its frame forbids.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// The QX_TRANSPORT_PARAMETERS payload is unacceptable.
    #[error(transparent)]
    Params(#[from] ParamsError),
}

impl From<crate::varint::Truncated> for DecodeError {
    fn from(_: crate::varint::Truncated) -> Self {
        DecodeError::Truncated
    }
}

/// A fault we found in the peer's input, and the transport code it closes the connection with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {reason}")]
pub struct PeerError {
    pub code: TransportCode,
    pub reason: String,
}

impl PeerError {
    pub(crate) fn new(code: TransportCode, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
}

impl From<DecodeError> for PeerError {
    fn from(err: DecodeError) -> Self {
        let code = match &err {
            DecodeError::Params(_) => TransportCode::TRANSPORT_PARAMETER_ERROR,
            _ => TransportCode::FRAME_ENCODING_ERROR,
        };
        PeerError::new(code, err.to_string())
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloseReason {
    /// We closed it with APPLICATION_CLOSE.
    #[error("closed locally with code {code}")]
    LocalApplication { code: u64, reason: String },
    /// The peer sent APPLICATION_CLOSE.
    #[error("closed by peer with code {code}: {reason}")]
    PeerApplication { code: u64, reason: String },
    /// We closed it with CONNECTION_CLOSE because of the peer's input.
    #[error("closed locally on a peer fault: {0}")]
    LocalTransport(PeerError),
    /// The peer sent CONNECTION_CLOSE.
    #[error("peer closed with transport error {code}: {reason}")]
    PeerTransport { code: TransportCode, reason: String },
    /// Nothing arrived within the negotiated idle timeout.
    #[error("idle timeout")]
    IdleTimeout,
    /// The carrier (WebSocket, TCP) failed or ended without a close frame.
    #[error("connection lost: {0}")]
    Lost(String),
}

/// Why a stream operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// Nothing can be done right now; retry after the matching [`crate::Event`].
    #[error("blocked")]
    Blocked,
    /// The peer reset the stream with this code.
    #[error("stream reset by peer with code {0}")]
    Reset(u64),
    /// The peer asked us to stop sending, with this code.
    #[error("stream stopped by peer with code {0}")]
    Stopped(u64),
    /// The stream is not open in the direction asked for (never opened, finished, reset, or
    /// stopped by us).
    #[error("stream {0} is closed or unknown")]
    Closed(StreamId),
    /// A datagram larger than the peer accepts, or datagrams are not available.
    #[error("datagram too large or unsupported")]
    DatagramUnsupported,
    /// The connection is closed.
    #[error(transparent)]
    ConnectionClosed(#[from] CloseReason),
}
