//! Helpers for the auth tests: minting tokens, dialing with a chosen SETUP Path, and reading close codes.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use starling_auth::{Algorithm, Claims, Key, KeySet, Material, Pattern, Patterns};
use starling_net::QuicTransport;
use starling_proto::{Role, SessionCode, Version};
use starling_relay::{AuthConfig, Relay, RelayConfig};
use starling_session::{ClientSetup, Error, Session, SessionConfig};
use starling_transport::TransportError;
use url::Url;

pub use crate::common::dial;
use crate::common::{bind_relay, within, STEP};

/// A fresh HS256 key.
pub fn key() -> Key {
    Key::generate(Algorithm::HS256).unwrap()
}

pub fn patterns(list: &[&str]) -> Patterns {
    list.iter().map(|p| p.parse::<Pattern>().unwrap()).collect()
}

/// Claims at `root` granting `publish` and `subscribe`, valid for an hour.
pub fn claims(root: &str, publish: &[&str], subscribe: &[&str]) -> Claims {
    Claims {
        root: root.into(),
        publish: patterns(publish),
        subscribe: patterns(subscribe),
        expires: Some(SystemTime::now() + Duration::from_secs(3600)),
        ..Default::default()
    }
}

/// Seconds since the epoch, `offset` from now.
pub fn epoch(offset: i64) -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + offset
}

/// A token over an arbitrary JSON payload, HS256-signed with `key`'s secret.
pub fn sign_raw(key: &Key, payload: serde_json::Value) -> String {
    let Material::Oct { k } = &key.jwk().material else {
        panic!("HS256 key expected")
    };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = key.kid().map(str::to_owned);
    jsonwebtoken::encode(
        &header,
        &payload,
        &jsonwebtoken::EncodingKey::from_secret(k),
    )
    .unwrap()
}

/// An unsigned (`alg: none`) token naming `key`'s kid.
pub fn unsigned(key: &Key, payload: serde_json::Value) -> String {
    let header = serde_json::json!({"alg": "none", "typ": "JWT", "kid": key.kid()});
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string())
    )
}

/// A running relay verifying with `keys` and these public patterns; its raw QUIC URL.
pub async fn auth_relay(keys: Option<Vec<Key>>, publish: &[&str], subscribe: &[&str]) -> Url {
    let auth = AuthConfig {
        keys: keys.map(|keys| KeySet::new(keys).into()),
        public_publish: patterns(publish),
        public_subscribe: patterns(subscribe),
        ..AuthConfig::default()
    };
    let (relay, url): (Relay, Url) = bind_relay(RelayConfig {
        auth,
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());
    url
}

/// A session over raw QUIC sending `target` verbatim as the SETUP Path.
pub async fn connect(
    url: &Url,
    target: &str,
    role: Option<Role>,
    config: SessionConfig,
) -> Result<Session<QuicTransport>, Error> {
    let version = Version::Lite06;
    let transport = dial(url, version).await;
    let setup = ClientSetup {
        path: Some(target.to_string()),
        role,
        ..Default::default()
    };
    within(Session::connect(transport, version, setup, config)).await
}

/// `target?jwt=token`.
pub fn with_token(target: &str, token: &str) -> String {
    format!("{target}?jwt={token}")
}

/// The code the peer closed with, if it closed.
pub fn peer_code(err: &Error) -> Option<u32> {
    match err {
        Error::Transport(TransportError::ClosedByPeer { code, .. }) => Some(*code),
        _ => None,
    }
}

/// Expect the relay to refuse: the handshake fails or the session is closed with UNAUTHORIZED.
pub async fn assert_refused(url: &Url, target: &str, role: Option<Role>, what: &str) {
    let err = match connect(
        url,
        target,
        role,
        SessionConfig::new(starling_session::random_hop()),
    )
    .await
    {
        Err(err) => err,
        Ok(session) => tokio::time::timeout(STEP, session.closed())
            .await
            .unwrap_or_else(|_| panic!("{what}: admitted, expected a refusal")),
    };
    assert_eq!(
        peer_code(&err),
        Some(SessionCode::Unauthorized.to_code()),
        "{what}: {err:?}"
    );
}

/// Expect the relay to admit: the session stays open for a moment.
pub async fn assert_admitted(url: &Url, target: &str, role: Option<Role>, what: &str) {
    let session = connect(
        url,
        target,
        role,
        SessionConfig::new(starling_session::random_hop()),
    )
    .await
    .unwrap_or_else(|err| panic!("{what}: {err:?}"));
    let closed = tokio::time::timeout(Duration::from_millis(300), session.closed()).await;
    assert!(closed.is_err(), "{what}: closed with {closed:?}");
}
