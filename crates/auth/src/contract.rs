//! The auth-server contract of moq-relay 0.17.10 (the moq-auth 0.2.2 crate): what a relay
//! POSTs about a session, and the grant the server answers.
//!
//! One JSON `POST` per session event: `connect` when a session asks to be admitted,
//! `revalidate` when a live grant is re-checked, `end` when the session closes (with why,
//! how long and how many bytes). A 2xx answering `connect`/`revalidate` carries a
//! [`ServerGrant`]; 401 and 403 refuse; anything else is an outage. Nothing is parsed on
//! the server's behalf: it sees the dialed path and the raw query and decides itself.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Patterns;

/// Everything the relay knows about a session, sent with every event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRequest {
    /// 128-bit hex, unique per session; every event for it carries the same id.
    pub id: String,
    #[serde(flatten)]
    pub event: SessionEvent,
    /// The operator's name for the relay asking.
    pub node: String,
    pub transport: TransportKind,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub remote: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub local: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_name: Option<String>,
    /// The negotiated application protocol (names the moq version).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub alpn: Option<String>,
    /// The path exactly as dialed, with its leading `/`.
    pub path: String,
    /// The raw query string without the leading `?`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub query: Option<String>,
    /// A credential carried in SETUP rather than the URL (moq-transport).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token: Option<SetupToken>,
    /// The single direction declared at SETUP; absent means both.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub role: Option<SessionRole>,
}

impl SessionRequest {
    /// A `connect` for a fresh session with a random id.
    pub fn connect(
        node: impl Into<String>,
        transport: TransportKind,
        path: impl Into<String>,
    ) -> Self {
        SessionRequest {
            id: session_id(),
            event: SessionEvent::Connect,
            node: node.into(),
            transport,
            remote: None,
            local: None,
            server_name: None,
            alpn: None,
            path: path.into(),
            query: None,
            token: None,
            role: None,
        }
    }

    /// The same session's facts under another event.
    pub fn with_event(&self, event: SessionEvent) -> Self {
        SessionRequest {
            event,
            ..self.clone()
        }
    }
}

/// A random 128-bit id in lowercase hex.
pub fn session_id() -> String {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Which lifecycle moment a request reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum SessionEvent {
    Connect,
    Revalidate,
    End {
        /// `dropped`, `expired`, `refused`, `invalid`, or the session's own close reason.
        reason: String,
        #[serde(with = "seconds_f64")]
        duration: Duration,
        bytes: ByteTotals,
    },
}

/// Bytes a session moved, from the relay's point of view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteTotals {
    pub sent: u64,
    pub received: u64,
}

/// How the session reached the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Raw QUIC or WebTransport over HTTP/3.
    Quic,
    WebSocket,
    Tcp,
    /// A one-shot HTTP request (`/announced`, `/fetch`).
    Http,
}

/// The direction a client declared at SETUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionRole {
    Publisher,
    Subscriber,
}

/// A SETUP credential, unparsed: its moq-transport token type and bytes (base64url on the
/// wire, unpadded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupToken {
    pub kind: u64,
    #[serde(with = "base64url")]
    pub value: Vec<u8>,
}

/// What the server grants one session.
///
/// Patterns are relative to [`root`](Self::root) when given, else to the dialed path. A
/// grant naming nothing is a refusal; one asking to be revalidated must say when it
/// expires ([`validate`](Self::validate)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerGrant {
    #[serde(skip_serializing_if = "Patterns::is_empty")]
    pub publish: Patterns,
    #[serde(skip_serializing_if = "Patterns::is_empty")]
    pub subscribe: Patterns,
    /// Replaces the dialed path as the session root (an alias).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Read-only subtrees resolved elsewhere; Starling does not mount, so it refuses
    /// grants that carry any.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mounts: std::collections::BTreeMap<String, String>,
    /// When the session must close.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "unix_seconds",
        default
    )]
    pub expires: Option<SystemTime>,
    /// How long until the relay asks again.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "whole_seconds",
        default
    )]
    pub revalidate: Option<Duration>,
    /// A label for stats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The session is another relay of the cluster.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub peer: bool,
}

/// Why a server's grant cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// Nothing is granted: a refusal.
    #[error("the grant admits nothing")]
    Useless,
    #[error("the grant asks to be revalidated but never expires")]
    UnboundedRevalidate,
    #[error("the grant asks to be revalidated every 0 s")]
    ZeroRevalidate,
    #[error("the grant has already expired")]
    Expired,
    #[error("the grant mounts subtrees, which this relay does not support")]
    Mounts,
}

impl ServerGrant {
    /// Refuse a grant that admits nothing, revalidates without a bound or at no interval,
    /// has expired at `now`, or needs a feature this relay lacks.
    pub fn validate(&self, now: SystemTime) -> Result<(), GrantError> {
        if self.publish.is_empty() && self.subscribe.is_empty() {
            return Err(GrantError::Useless);
        }
        if self.revalidate.is_some() && self.expires.is_none() {
            return Err(GrantError::UnboundedRevalidate);
        }
        if self.revalidate.is_some_and(|cadence| cadence.is_zero()) {
            return Err(GrantError::ZeroRevalidate);
        }
        if self.expires.is_some_and(|expires| expires <= now) {
            return Err(GrantError::Expired);
        }
        if !self.mounts.is_empty() {
            return Err(GrantError::Mounts);
        }
        Ok(())
    }
}

mod seconds_f64 {
    use super::*;

    pub fn serialize<S: Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(duration.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

mod unix_seconds {
    use super::*;

    pub fn serialize<S: Serializer>(time: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
        let time = time.expect("skipped when absent");
        let secs = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_secs() as i64,
            Err(before) => -(before.duration().as_secs() as i64),
        };
        s.serialize_i64(secs)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
        let secs = i64::deserialize(d)?;
        let time = if secs >= 0 {
            UNIX_EPOCH.checked_add(Duration::from_secs(secs as u64))
        } else {
            UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
        };
        // A time past the clock's range never comes: read as no expiry at all would widen
        // the grant, so clamp to the furthest representable instant instead.
        Ok(Some(time.unwrap_or_else(|| {
            UNIX_EPOCH + Duration::from_secs(i64::MAX as u64 / 2)
        })))
    }
}

mod whole_seconds {
    use super::*;

    pub fn serialize<S: Serializer>(duration: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(duration.expect("skipped when absent").as_secs())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Some(Duration::from_secs(u64::deserialize(d)?)))
    }
}

mod base64url {
    use super::*;

    pub fn serialize<S: Serializer>(value: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&URL_SAFE_NO_PAD.encode(value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        URL_SAFE_NO_PAD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector moq-auth 0.2.2 pins for both its Rust and JS implementations.
    #[test]
    fn end_event_matches_the_cross_language_vector() {
        let mut request =
            SessionRequest::connect("relay-1", TransportKind::WebSocket, "/demo/room");
        request.id = "00ff".into();
        request.remote = Some("203.0.113.9:4433".parse().unwrap());
        request.query = Some("jwt=abc".into());
        request.event = SessionEvent::End {
            reason: "expired".into(),
            duration: Duration::from_millis(1500),
            bytes: ByteTotals {
                sent: 10,
                received: 20,
            },
        };
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(
            json,
            r#"{"id":"00ff","event":"end","reason":"expired","duration":1.5,"bytes":{"sent":10,"received":20},"node":"relay-1","transport":"websocket","remote":"203.0.113.9:4433","path":"/demo/room","query":"jwt=abc"}"#
        );
        assert_eq!(
            serde_json::from_str::<SessionRequest>(&json).unwrap(),
            request
        );
    }

    #[test]
    fn setup_tokens_travel_as_unpadded_base64url() {
        let mut request = SessionRequest::connect("relay-1", TransportKind::Quic, "/demo/room");
        request.id = "00ff".into();
        request.token = Some(SetupToken {
            kind: 1,
            value: vec![0x00, 0xfb, 0xff],
        });
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"id":"00ff","event":"connect","node":"relay-1","transport":"quic","path":"/demo/room","token":{"kind":1,"value":"APv_"}}"#
        );
    }

    #[test]
    fn grants_read_the_cross_language_vector() {
        let json = r#"{"publish":["alice/**"],"subscribe":["**"],"root":"pid/room","expires":4102444800,"revalidate":60,"tier":"websocket","peer":true}"#;
        let grant: ServerGrant = serde_json::from_str(json).unwrap();
        assert_eq!(grant.root.as_deref(), Some("pid/room"));
        assert_eq!(grant.revalidate, Some(Duration::from_secs(60)));
        assert_eq!(
            grant.expires,
            Some(UNIX_EPOCH + Duration::from_secs(4_102_444_800))
        );
        assert!(grant.peer);
        assert_eq!(serde_json::to_string(&grant).unwrap(), json);
        // Fields a newer server adds are ignored, absent ones default.
        let grant: ServerGrant =
            serde_json::from_str(r#"{"subscribe":["**"],"future":1}"#).unwrap();
        assert!(grant.publish.is_empty() && grant.expires.is_none());
    }

    #[test]
    fn validation_refuses_useless_unbounded_and_expired_grants() {
        let now = SystemTime::now();
        let mut grant: ServerGrant = serde_json::from_str(r#"{"publish":["**"]}"#).unwrap();
        assert_eq!(grant.validate(now), Ok(()));
        assert_eq!(
            ServerGrant::default().validate(now),
            Err(GrantError::Useless)
        );
        grant.revalidate = Some(Duration::from_secs(1));
        assert_eq!(grant.validate(now), Err(GrantError::UnboundedRevalidate));
        grant.expires = Some(now);
        assert_eq!(grant.validate(now), Err(GrantError::Expired));
        grant.expires = Some(now + Duration::from_secs(60));
        assert_eq!(grant.validate(now), Ok(()));
        grant.revalidate = Some(Duration::ZERO);
        assert_eq!(grant.validate(now), Err(GrantError::ZeroRevalidate));
        grant.revalidate = None;
        grant.mounts.insert(".svc".into(), ".svc/pid".into());
        assert_eq!(grant.validate(now), Err(GrantError::Mounts));
    }

    #[test]
    fn ids_are_128_bit_hex() {
        let (a, b) = (session_id(), session_id());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
