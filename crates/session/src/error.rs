//! Session errors, and which wire code each one closes a session or resets a stream with.

use starling_model::ModelError;
use starling_proto::{DecodeError, EncodeError, SessionCode, StreamCode};
use starling_transport::TransportError;

use crate::violation::Violation;

/// Why a session or one of its streams failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The transport failed or the peer closed, reset or stopped.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The peer sent bytes that do not decode.
    #[error("decode: {0}")]
    Decode(#[from] DecodeError),
    /// We could not encode a message (our bug or a value out of range).
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
    /// The peer broke a protocol rule that decoding alone does not catch.
    #[error("protocol violation: {0}")]
    ProtocolViolation(Violation),
    /// A per-session bound was hit (streams, subscriptions, announces, buffered bytes).
    #[error("bound exceeded: {0}")]
    Bound(&'static str),
    /// The peer's handshake did not arrive in time.
    #[error("timed out: {0}")]
    Timeout(&'static str),
    /// A request was refused or failed with a stream code.
    #[error("stream error {0:?}")]
    Stream(StreamCode),
    /// The model refused an operation.
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// The session is over.
    #[error("session closed")]
    Closed,
    /// No version both sides speak (the legacy in-band negotiation).
    #[error("no common version")]
    Version,
}

impl Error {
    /// The code to close the session with when this error ends it.
    pub fn session_code(&self) -> SessionCode {
        match self {
            Error::Decode(e) => e.session_code(),
            Error::ProtocolViolation(violation) => violation.session_code(),
            Error::Timeout(_) => SessionCode::ControlTimeout,
            Error::Closed => SessionCode::NoError,
            Error::Version => SessionCode::VersionNegotiationFailed,
            _ => SessionCode::Internal,
        }
    }

    /// The code to reset or stop a stream with when this error ends only that stream.
    pub fn stream_code(&self) -> StreamCode {
        match self {
            Error::Decode(e) => e.stream_code(),
            Error::Stream(code) => *code,
            Error::Model(e) => e.stream_code(),
            Error::Bound(_) => StreamCode::Evicted,
            Error::Transport(TransportError::Reset(code))
            | Error::Transport(TransportError::Stopped(code)) => StreamCode::from_code(*code),
            Error::ProtocolViolation(_) => StreamCode::MalformedTrack,
            Error::Timeout(_) => StreamCode::ControlTimeout,
            _ => StreamCode::Cancelled,
        }
    }
}
