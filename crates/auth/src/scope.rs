//! A key's optional scope: the ceiling on what tokens it signs or verifies may grant.

use crate::wire::{Grants, WireScope};
use crate::{AuthError, Claims, Patterns};

/// The `scope` member of a JWK (moq-auth): patterns relative to `root`, per role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The root the patterns are relative to.
    pub root: String,
    /// Patterns the key may grant to publishers.
    pub publish: Patterns,
    /// Patterns the key may grant to subscribers.
    pub subscribe: Patterns,
}

impl Scope {
    /// Whether every pattern the claims grant is contained by one this scope allows, per role,
    /// with both sides placed beneath their own roots first.
    pub fn allows(&self, claims: &Claims) -> bool {
        let covers = |granted: &Patterns, requested: &Patterns| match (
            granted.rooted(&self.root),
            requested.rooted(&claims.root),
        ) {
            (Ok(granted), Ok(requested)) => granted.covers(&requested),
            _ => false,
        };
        covers(&self.publish, &claims.publish) && covers(&self.subscribe, &claims.subscribe)
    }
}

impl serde::Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let grants = Grants::encode(&self.publish, &self.subscribe);
        WireScope {
            root: self.root.clone(),
            put: grants.put,
            get: grants.get,
            publish: grants.publish,
            subscribe: grants.subscribe,
        }
        .serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireScope::deserialize(deserializer)?;
        let (publish, subscribe) = Grants {
            put: wire.put,
            get: wire.get,
            publish: wire.publish,
            subscribe: wire.subscribe,
        }
        .decode()
        .map_err(serde::de::Error::custom)?;
        if publish.is_empty() && subscribe.is_empty() {
            return Err(serde::de::Error::custom(AuthError::UselessToken));
        }
        Ok(Self {
            root: wire.root,
            publish,
            subscribe,
        })
    }
}
