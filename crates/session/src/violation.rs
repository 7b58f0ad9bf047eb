//! The protocol rules a peer can break that decoding alone does not catch, and the one place
//! each is mapped to the code that closes the session (the registry of `starling_proto`
//! numbers each code for its wire).

use starling_proto::SessionCode;

/// A rule the peer broke. Each ends its session with [`Violation::session_code`]; the text is
/// the close reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    // The handshake.
    /// lite-01/02 are negotiated in band, not accepted by ALPN (a caller's mistake).
    #[error("lite-01/02 are chosen in band")]
    InBandVersion,
    #[error("SETUP too large")]
    SetupTooLarge,
    #[error("first server stream is not SETUP")]
    ServerStreamNotSetup,
    #[error("the first stream is not SETUP")]
    FirstStreamNotSetup,
    #[error("second SETUP")]
    SecondSetup,
    #[error("second SETUP stream")]
    SecondSetupStream,
    #[error("SETUP stream reset")]
    SetupStreamReset,
    #[error("SETUP stream: not GOAWAY")]
    SetupStreamNotGoaway,
    #[error("token alias before SETUP")]
    TokenAliasBeforeSetup,
    #[error("malformed AUTHORIZATION_TOKEN")]
    MalformedToken,
    #[error("second GOAWAY")]
    SecondGoaway,
    #[error("control stream ended")]
    ControlStreamEnded,
    #[error("the SETUP stream did not start with SETUP")]
    SetupStreamWithoutSetup,
    #[error("the control stream did not start with SERVER_SETUP")]
    ControlStreamWithoutServerSetup,
    #[error("the control stream opened without CLIENT_SETUP")]
    ControlStreamWithoutClientSetup,
    #[error("unexpected message on the control stream")]
    UnexpectedMessageOnControlStream,
    #[error("SUBSCRIBE_NAMESPACE on the control stream")]
    SubscribeNamespaceOnControlStream,
    #[error("a request stream opened with a reply")]
    RequestStreamOpenedWithReply,

    // Paths and names.
    #[error("path too long")]
    PathTooLong,
    #[error("announced path too long")]
    AnnouncedPathTooLong,
    #[error("namespace too long")]
    NamespaceTooLong,
    #[error("track name too long")]
    TrackNameTooLong,

    // Announcements.
    #[error("duplicate announce")]
    DuplicateAnnounce,
    #[error("unknown announce id")]
    UnknownAnnounceId,
    #[error("retired announce id")]
    RetiredAnnounceId,
    #[error("advertisement without HOP_PATH")]
    AdvertisementWithoutHopPath,
    #[error("cluster parameters undeclared")]
    ClusterParametersUndeclared,
    #[error("unexpected message on PUBLISH_NAMESPACE")]
    UnexpectedMessageOnPublishNamespace,
    #[error("unexpected message on SUBSCRIBE_NAMESPACE")]
    UnexpectedMessageOnSubscribeNamespace,
    #[error("unexpected SUBSCRIBE_NAMESPACE reply")]
    UnexpectedSubscribeNamespaceReply,

    // Requests and subscriptions.
    #[error("request id of the wrong parity")]
    RequestIdParity,
    #[error("request id in use")]
    RequestIdInUse,
    #[error("request id past MAX_REQUEST_ID")]
    RequestIdPastMax,
    #[error("MAX_REQUEST_ID lowered")]
    MaxRequestIdLowered,
    #[error("subscribe FIN without END")]
    SubscribeFinWithoutEnd,
    #[error("unexpected SUBSCRIBE reply")]
    UnexpectedSubscribeReply,
    #[error("unexpected message on SUBSCRIBE")]
    UnexpectedMessageOnSubscribe,
    #[error("unexpected message on a subscription")]
    UnexpectedMessageOnSubscription,
    #[error("track alias in use")]
    TrackAliasInUse,

    // Data.
    #[error("object id overflows")]
    ObjectIdOverflows,
    #[error("unexpected bytes")]
    UnexpectedBytes,
}

impl Violation {
    /// The code the session closes with: PROTOCOL_VIOLATION, except the IETF drafts' request
    /// id rules and their key-value formatting, which have codes of their own.
    pub fn session_code(self) -> SessionCode {
        match self {
            Violation::RequestIdParity | Violation::RequestIdInUse => SessionCode::InvalidRequestId,
            Violation::RequestIdPastMax => SessionCode::TooManyRequests,
            Violation::MalformedToken => SessionCode::KeyValueFormatting,
            _ => SessionCode::ProtocolViolation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_id_and_token_rules_close_with_their_own_codes_the_rest_with_protocol_violation() {
        assert_eq!(
            Violation::RequestIdParity.session_code(),
            SessionCode::InvalidRequestId
        );
        assert_eq!(
            Violation::RequestIdInUse.session_code(),
            SessionCode::InvalidRequestId
        );
        assert_eq!(
            Violation::RequestIdPastMax.session_code(),
            SessionCode::TooManyRequests
        );
        assert_eq!(
            Violation::MalformedToken.session_code(),
            SessionCode::KeyValueFormatting
        );
        for violation in [
            Violation::SecondGoaway,
            Violation::UnknownAnnounceId,
            Violation::SubscribeFinWithoutEnd,
            Violation::MaxRequestIdLowered,
        ] {
            assert_eq!(violation.session_code(), SessionCode::ProtocolViolation);
        }
        // The close reason is the rule's text.
        assert_eq!(
            crate::Error::ProtocolViolation(Violation::SecondGoaway).to_string(),
            "protocol violation: second GOAWAY"
        );
    }
}
