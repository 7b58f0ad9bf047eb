//! Token claims: the root, the grants beneath it, the validity window, and `authorize`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::wire::{Grants, Prefixes, WireClaims, KNOWN_CLAIMS};
use crate::{path, AuthError, Patterns, Permissions};

/// What a token grants: `publish`/`subscribe` patterns relative to `root`, within a window.
///
/// Legacy `put`/`get` prefixes are read as subtrees (`p` is `p/**`, `""` is `**`).
/// `iss`, `sub` and `jti` are read and ignored; any other claim is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    /// The root the patterns are relative to (`""` by default).
    pub root: String,
    /// Broadcasts the holder may publish.
    pub publish: Patterns,
    /// Broadcasts the holder may subscribe to.
    pub subscribe: Patterns,
    /// `exp`: refused at or after this instant.
    pub expires: Option<SystemTime>,
    /// `iat`: informational.
    pub issued: Option<SystemTime>,
    /// `nbf`: refused before this instant.
    pub not_before: Option<SystemTime>,
}

fn to_time(seconds: i64) -> SystemTime {
    if seconds >= 0 {
        UNIX_EPOCH + Duration::from_secs(seconds as u64)
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(seconds.unsigned_abs()))
            .unwrap_or(UNIX_EPOCH)
    }
}

fn to_seconds(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

impl Claims {
    /// Read claims from a JSON payload, naming the first unknown claim if there is one.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, AuthError> {
        let object = value
            .as_object()
            .ok_or_else(|| AuthError::InvalidClaims("the payload is not a JSON object".into()))?;
        if let Some(unknown) = object.keys().find(|k| !KNOWN_CLAIMS.contains(&k.as_str())) {
            return Err(AuthError::UnknownClaim(unknown.clone()));
        }
        let wire: WireClaims = serde_json::from_value(value.clone())
            .map_err(|e| AuthError::InvalidClaims(e.to_string()))?;
        let (publish, subscribe) = Grants {
            put: wire.put.map(Prefixes::into_vec),
            get: wire.get.map(Prefixes::into_vec),
            publish: wire.publish,
            subscribe: wire.subscribe,
        }
        .decode()
        .map_err(AuthError::InvalidClaims)?;
        Ok(Self {
            root: wire.root,
            publish,
            subscribe,
            expires: wire.exp.map(to_time),
            issued: wire.iat.map(to_time),
            not_before: wire.nbf.map(to_time),
        })
    }

    /// The JSON payload: `put`/`get` when every grant is a subtree, else `publish`/`subscribe`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.to_wire()).expect("claims serialize")
    }

    /// The wire form, in moq-auth's field order (root, put, get, publish, subscribe, exp, iat, nbf).
    pub(crate) fn to_wire(&self) -> WireClaims {
        let grants = Grants::encode(&self.publish, &self.subscribe);
        WireClaims {
            root: self.root.clone(),
            put: grants.put.map(Prefixes::Many),
            get: grants.get.map(Prefixes::Many),
            publish: grants.publish,
            subscribe: grants.subscribe,
            exp: self.expires.map(to_seconds),
            iat: self.issued.map(to_seconds),
            nbf: self.not_before.map(to_seconds),
            ..Default::default()
        }
    }

    /// Refuse claims that grant nothing.
    pub fn validate(&self) -> Result<(), AuthError> {
        if self.publish.is_empty() && self.subscribe.is_empty() {
            return Err(AuthError::UselessToken);
        }
        Ok(())
    }

    /// Refuse claims expired at `now` (`exp <= now`) or not yet valid (`nbf > now`).
    pub fn validate_times(&self, now: SystemTime) -> Result<(), AuthError> {
        if self.expires.is_some_and(|exp| exp <= now) {
            return Err(AuthError::Expired);
        }
        if self.not_before.is_some_and(|nbf| nbf > now) {
            return Err(AuthError::NotYetValid);
        }
        Ok(())
    }

    /// The access granted at the dialed `path`, which becomes the session root.
    ///
    /// `path` and `root` must overlap segment-wise: when the path extends the root the
    /// extra segments narrow each grant; when the path is a parent of the root the rest
    /// of the root is prepended. Otherwise [`AuthError::RootMismatch`]; an overlap that
    /// reaches no grant is [`AuthError::NoAccess`]. Paths with `.`/`..` segments or
    /// encoded separators are [`AuthError::InvalidPath`].
    pub fn authorize(&self, path: &str) -> Result<Permissions, AuthError> {
        for raw in [path, self.root.as_str()] {
            if path::is_suspicious(raw) {
                return Err(AuthError::InvalidPath(raw.to_string()));
            }
        }
        let path = path::normalize(path);
        let root = path::normalize(&self.root);
        let scope = |patterns: &Patterns| -> Result<Patterns, AuthError> {
            if let Some(suffix) = path::strip_prefix(&path, &root) {
                Ok(patterns.rebase(suffix))
            } else if let Some(prefix) = path::strip_prefix(&root, &path) {
                Ok(patterns.rooted(prefix)?)
            } else {
                Err(AuthError::RootMismatch {
                    root: root.clone(),
                    path: path.clone(),
                })
            }
        };
        let permissions = Permissions {
            publish: scope(&self.publish)?,
            subscribe: scope(&self.subscribe)?,
            root: path.clone(),
        };
        if permissions.is_empty() {
            return Err(AuthError::NoAccess(path));
        }
        Ok(permissions)
    }
}

impl serde::Serialize for Claims {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_wire().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Claims {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Self::from_json(&value).map_err(serde::de::Error::custom)
    }
}
