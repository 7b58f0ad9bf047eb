//! Wire code mapping (docs/wire.md §7.3) and the translation of quinn / web-transport errors into `TransportError`.

use starling_transport::TransportError;
use web_transport_quinn::proto::{error_from_http3, error_to_http3};
use web_transport_quinn::{SessionError, WebTransportError};

use crate::alpn::Binding;

/// HTTP/3's "no error" application code, what an HTTP/3 peer closes with when it has
/// nothing more specific (a browser tab going away, say).
const H3_NO_ERROR: u64 = 0x100;

/// Code 0 is no HTTP/3 error code, but QUIC servers shutting down whole endpoints (ours,
/// moq-tokio's) close every connection with it, WebTransport ones included.
const SHUTDOWN: u64 = 0;

/// The QUIC code for a moq-lite stream code: the WebTransport mapping, used on raw QUIC
/// too (docs/wire.md §7.3; web-transport-quinn 0.13.5 would send it unmapped on raw sessions).
pub(crate) fn encode_stream_code(code: u32) -> quinn::VarInt {
    quinn::VarInt::from_u64(error_to_http3(code)).unwrap_or(quinn::VarInt::MAX)
}

/// The moq-lite stream code in a raw-QUIC RESET_STREAM / STOP_SENDING: the mapped form,
/// or, leniently, a bare u32 as sent by peers that skip the mapping (web-transport-quinn
/// raw sessions, moq-noq's drop of an unread stream). No u32 lies in the mapped range,
/// so the two cannot be confused.
pub(crate) fn decode_stream_code(code: quinn::VarInt) -> Option<u32> {
    let code = code.into_inner();
    error_from_http3(code).or_else(|| u32::try_from(code).ok())
}

/// A quinn connection error with no session context.
pub(crate) fn connection_error(binding: Binding, err: &quinn::ConnectionError) -> TransportError {
    use quinn::ConnectionError as E;
    match err {
        E::LocallyClosed => TransportError::ClosedLocally,
        E::ApplicationClosed(close) => {
            let reason = String::from_utf8_lossy(&close.reason).into_owned();
            let code = close.error_code.into_inner();
            match binding {
                Binding::RawQuic => match u32::try_from(code) {
                    Ok(code) => TransportError::ClosedByPeer { code, reason },
                    Err(_) => TransportError::Failed(format!(
                        "peer closed with out-of-range code {code:#x}: {reason}"
                    )),
                },
                Binding::WebTransport => match error_from_http3(code) {
                    Some(code) => TransportError::ClosedByPeer { code, reason },
                    None if code == H3_NO_ERROR || code == SHUTDOWN => {
                        TransportError::ClosedByPeer { code: 0, reason }
                    }
                    None => TransportError::Failed(format!(
                        "peer closed with HTTP/3 code {code:#x}: {reason}"
                    )),
                },
            }
        }
        other => TransportError::Failed(other.to_string()),
    }
}

/// A web-transport-quinn session error (already resolved against the session's latched
/// close reason) as a `TransportError`.
pub(crate) fn session_error(binding: Binding, err: &SessionError) -> TransportError {
    match err {
        SessionError::WebTransportError(WebTransportError::Closed(code, reason)) => {
            TransportError::ClosedByPeer {
                code: *code,
                reason: reason.clone(),
            }
        }
        SessionError::ConnectionError(e) => connection_error(binding, e),
        SessionError::SendDatagramError(quinn::SendDatagramError::ConnectionLost(e)) => {
            connection_error(binding, e)
        }
        other => TransportError::Failed(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_mapping_examples() {
        // docs/wire.md §7.3 table: 8-byte varints c0 00 52 e4 a4 0f a8 db + ...
        assert_eq!(encode_stream_code(0).into_inner(), 0x52e4_a40f_a8db);
        assert_eq!(encode_stream_code(1).into_inner(), 0x52e4_a40f_a8dc);
        assert_eq!(encode_stream_code(0x12).into_inner(), 0x52e4_a40f_a8ed);
        assert_eq!(encode_stream_code(0x35).into_inner(), 0x52e4_a40f_a911);
        assert_eq!(encode_stream_code(0x38).into_inner(), 0x52e4_a40f_a914);
        for code in [0u32, 1, 0x1d, 0x1e, 0x35, 64 + 502, u32::MAX] {
            assert_eq!(decode_stream_code(encode_stream_code(code)), Some(code));
        }
        assert_eq!(
            decode_stream_code(quinn::VarInt::from_u32(0x35)),
            Some(0x35)
        );
        assert_eq!(decode_stream_code(quinn::VarInt::MAX), None);
    }

    #[test]
    fn close_codes_per_binding() {
        let close = |code: u64| {
            quinn::ConnectionError::ApplicationClosed(quinn::ApplicationClose {
                error_code: quinn::VarInt::from_u64(code).unwrap(),
                reason: bytes::Bytes::from_static(b"bye"),
            })
        };
        assert_eq!(
            connection_error(Binding::RawQuic, &close(3)),
            TransportError::ClosedByPeer {
                code: 3,
                reason: "bye".into()
            }
        );
        assert_eq!(
            connection_error(Binding::WebTransport, &close(error_to_http3(2))),
            TransportError::ClosedByPeer {
                code: 2,
                reason: "bye".into()
            }
        );
        assert!(matches!(
            connection_error(Binding::WebTransport, &close(0x101)),
            TransportError::Failed(_)
        ));
        assert_eq!(
            connection_error(Binding::RawQuic, &quinn::ConnectionError::LocallyClosed),
            TransportError::ClosedLocally
        );
        assert!(matches!(
            connection_error(Binding::RawQuic, &quinn::ConnectionError::TimedOut),
            TransportError::Failed(_)
        ));
    }
}
