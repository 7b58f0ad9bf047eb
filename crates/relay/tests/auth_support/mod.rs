//! Helpers for the auth tests: minting tokens, dialing with a chosen SETUP Path, and reading close codes.

#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use starling_auth::{Algorithm, Claims, Key, KeySet, Material, Pattern, Patterns};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, TrackInfo};
use starling_net::QuicTransport;
use starling_proto::{Path, Role, SessionCode, Version};
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
    assert_closed_with(url, target, role, SessionCode::Unauthorized, what).await
}

/// Expect the relay to refuse (at SETUP or by closing right after) with `code`.
pub async fn assert_closed_with(
    url: &Url,
    target: &str,
    role: Option<Role>,
    code: SessionCode,
    what: &str,
) {
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
    assert_eq!(peer_code(&err), Some(code.to_code()), "{what}: {err:?}");
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

/// A publisher at `publish_target` announces `alice` with a `chat` track; a subscriber at
/// `subscribe_target` hears it and reads a group through the relay. Returns both sessions.
pub async fn carry_one_group(
    url: &Url,
    publish_target: &str,
    subscribe_target: &str,
) -> (Session<QuicTransport>, Session<QuicTransport>) {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let track = broadcast.create_track("chat", TrackInfo::default());
    let _route = origin
        .publish(
            Path::new("alice").unwrap(),
            broadcast.consume(),
            Route::local(),
        )
        .unwrap();
    let mut config = SessionConfig::new(starling_session::random_hop());
    config.publish = Some(origin.clone());
    let publisher = connect(url, publish_target, Some(Role::Publisher), config)
        .await
        .expect("publisher admitted");

    let heard = Origin::new();
    let mut config = SessionConfig::new(starling_session::random_hop());
    config.consume = Some(heard.clone());
    let subscriber = connect(url, subscribe_target, Some(Role::Subscriber), config)
        .await
        .expect("subscriber admitted");
    let interest = heard.interest(Path::empty()).unwrap();
    let mut changed = Vec::new();
    let consumer = loop {
        if let Some(b) = heard.consume(&Path::new("alice").unwrap(), None) {
            break b;
        }
        within(interest.changed(&mut changed)).await;
    };
    let mut reader = consumer
        .subscribe_track("chat", Default::default())
        .expect("subscribe");
    // Write until the relay's upstream subscription carries a group through.
    let writer = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        for sequence in 0.. {
            tick.tick().await;
            let mut group = track.create_group(sequence).unwrap();
            group
                .write_frame(Frame {
                    timestamp: sequence,
                    payload: bytes::Bytes::from_static(b"hello"),
                })
                .unwrap();
            group.finish();
        }
    });
    let mut group = within(reader.next_group()).await.unwrap().unwrap();
    let frame = within(group.next_frame()).await.unwrap().unwrap();
    assert_eq!(&frame.payload[..], b"hello");
    writer.abort();
    (publisher, subscriber)
}

/// The HTTP status of `GET path` on the relay's TCP port.
pub async fn http_status(port: u16, path: &str) -> u16 {
    http_get(port, path).await.0
}

/// The HTTP status and body of `GET path` on the relay's TCP port.
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = within(tokio::net::TcpStream::connect(("127.0.0.1", port)))
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    within(stream.read_to_end(&mut response)).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The code a session closed with, waiting for it to close.
pub async fn closed_code<T: starling_transport::Transport>(session: &Session<T>) -> Option<u32> {
    peer_code(&within(session.closed()).await)
}

/// Every session in `held` closes with UNAUTHORIZED, at most a second past `max_age` after
/// the grant was `revoked`.
pub async fn assert_closed_within(
    held: &[&Session<QuicTransport>],
    revoked: std::time::Instant,
    max_age: Duration,
) {
    for session in held {
        assert_eq!(
            closed_code(session).await,
            Some(SessionCode::Unauthorized.to_code())
        );
    }
    assert!(
        revoked.elapsed() <= max_age + Duration::from_secs(1),
        "closed {:?} after the revocation",
        revoked.elapsed()
    );
}
