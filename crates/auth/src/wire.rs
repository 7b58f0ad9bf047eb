//! The JSON form of claims and key scopes: legacy `put`/`get` prefixes or `publish`/`subscribe` patterns.
//!
//! A prefix `p` is exactly the pattern `p/**` (`""` is `**`). Grants that are all
//! subtrees are written the legacy way so moq-token readers agree; anything else is
//! written as patterns. Both are read; one document never mixes them.

use serde::{Deserialize, Deserializer, Serialize};

use crate::{Pattern, Patterns};

/// The wire form of [`Claims`](crate::Claims), with every unknown field refused.
#[derive(Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct WireClaims {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub root: String,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub put: Option<Prefixes>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub get: Option<Prefixes>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub publish: Option<Patterns>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<Patterns>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    #[serde(skip_serializing)]
    pub iss: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    pub sub: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    pub jti: Option<serde::de::IgnoredAny>,
}

/// The claim names a token may carry; any other is refused.
pub(crate) const KNOWN_CLAIMS: [&str; 11] = [
    "root",
    "put",
    "get",
    "publish",
    "subscribe",
    "exp",
    "iat",
    "nbf",
    "iss",
    "sub",
    "jti",
];

/// The wire form of a key's [`Scope`](crate::Scope).
#[derive(Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct WireScope {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub root: String,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub put: Option<Vec<String>>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub get: Option<Vec<String>>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub publish: Option<Patterns>,
    #[serde(deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<Patterns>,
}

/// Legacy claims may write one prefix as a bare string.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum Prefixes {
    One(String),
    Many(Vec<String>),
}

impl Prefixes {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(prefix) => vec![prefix],
            Self::Many(prefixes) => prefixes,
        }
    }
}

/// A present field; an explicit `null` is refused rather than read as absent.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The grant fields in whichever encoding they arrived.
pub(crate) struct Grants {
    pub put: Option<Vec<String>>,
    pub get: Option<Vec<String>>,
    pub publish: Option<Patterns>,
    pub subscribe: Option<Patterns>,
}

impl Grants {
    /// Legacy prefixes when every grant is a subtree, otherwise patterns.
    pub fn encode(publish: &Patterns, subscribe: &Patterns) -> Self {
        let prefixes =
            |p: &Patterns| -> Option<Vec<String>> { p.iter().map(Pattern::as_prefix).collect() };
        match (prefixes(publish), prefixes(subscribe)) {
            (Some(put), Some(get)) => Self {
                put: (!put.is_empty()).then_some(put),
                get: (!get.is_empty()).then_some(get),
                publish: None,
                subscribe: None,
            },
            _ => Self {
                put: None,
                get: None,
                publish: (!publish.is_empty()).then(|| publish.clone()),
                subscribe: (!subscribe.is_empty()).then(|| subscribe.clone()),
            },
        }
    }

    /// (publish, subscribe), refusing a mix of encodings and wildcards in legacy prefixes.
    pub fn decode(self) -> Result<(Patterns, Patterns), String> {
        if self.put.is_none() && self.get.is_none() {
            return Ok((
                self.publish.unwrap_or_default(),
                self.subscribe.unwrap_or_default(),
            ));
        }
        if self.publish.is_some() || self.subscribe.is_some() {
            return Err("mixes the legacy put/get fields with publish/subscribe".to_string());
        }
        let subtrees = |prefixes: Option<Vec<String>>| -> Result<Patterns, String> {
            prefixes
                .unwrap_or_default()
                .iter()
                .map(|prefix| {
                    Pattern::subtree(prefix).map_err(|e| format!("legacy prefix {prefix:?}: {e}"))
                })
                .collect()
        };
        Ok((subtrees(self.put)?, subtrees(self.get)?))
    }
}
