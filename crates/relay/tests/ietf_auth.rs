//! IETF sessions and the relay's auth: a SETUP AUTHORIZATION_TOKEN (by value) is the
//! session's credential when the URL carries none, as moq-relay takes it; no credential is
//! refused with UNAUTHORIZED before the relay's SETUP; a token structure naming an alias is a
//! PROTOCOL_VIOLATION and one that does not parse a KEY_VALUE_FORMATTING_ERROR.

mod auth_support;
mod common;
mod ietf_client;
mod witness;

use starling_proto::ietf::{AuthToken, Draft, SetupOptions};
use starling_proto::SessionCode;

use auth_support::{auth_relay, claims, key};
use ietf_client::Client;
use witness::closed_code;

fn options(path: &str, token: Option<Vec<u8>>) -> SetupOptions {
    SetupOptions {
        path: Some(path.as_bytes().to_vec()),
        authorization_token: token,
        ..SetupOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_token_admits_and_its_absence_or_malformation_refuses() {
    let key = key();
    let url = auth_relay(Some(vec![key.clone()]), &[], &[]).await;
    let jwt = key.sign(&claims("room", &["**"], &["**"])).unwrap();
    for draft in [Draft::D14, Draft::D16, Draft::D17, Draft::D22] {
        let token = AuthToken {
            kind: 0,
            value: jwt.clone().into_bytes(),
        }
        .encode(draft)
        .unwrap();
        let mut admitted = Client::connect_with(&url, draft, options("/room", Some(token))).await;
        admitted.server_setup().await;

        let refused = Client::connect_with(&url, draft, options("/room", None)).await;
        assert_eq!(
            closed_code(&refused.transport).await,
            SessionCode::Unauthorized.to_code(),
            "no credential on {}",
            draft.name()
        );

        // USE_ALIAS (2) before any alias could be registered.
        let alias = Client::connect_with(&url, draft, options("/room", Some(vec![2, 0]))).await;
        assert_eq!(
            closed_code(&alias.transport).await,
            SessionCode::ProtocolViolation.to_code(),
            "an alias on {}",
            draft.name()
        );
        // An alias type no draft defines.
        let bad = Client::connect_with(&url, draft, options("/room", Some(vec![9]))).await;
        assert_eq!(
            closed_code(&bad.transport).await,
            SessionCode::KeyValueFormatting.to_code(),
            "a malformed token on {}",
            draft.name()
        );
    }
}
