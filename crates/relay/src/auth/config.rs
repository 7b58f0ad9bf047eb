//! What an operator configures for authentication (`--auth-*`): token keys, public grants,
//! the auth server, and how long decisions are reused.

use std::time::Duration;

use starling_auth::Patterns;
use url::Url;

use super::KeySource;

/// Who may connect: token keys and public (anonymous) grants, or an external auth server.
///
/// With no key, no public pattern and no auth URL the relay is open (anonymous publish and
/// subscribe everywhere). Otherwise a session presents `?jwt=` verified by `keys`, or falls
/// back to the public patterns (rooted at `/`, each holding a wildcard); or, with `url`, the
/// auth server decides everything.
#[derive(Clone, Debug)]
pub struct AuthConfig {
    /// Keys verifying tokens (`--auth-key`, `--auth-key-dir`); `None` refuses every token.
    pub keys: Option<KeySource>,
    /// Paths anyone may publish (`--auth-public`, `--auth-public-publish`).
    pub public_publish: Patterns,
    /// Paths anyone may subscribe to (`--auth-public`, `--auth-public-subscribe`).
    pub public_subscribe: Patterns,
    /// The external auth server (`--auth-url`), asked per session event.
    pub url: Option<Url>,
    /// How long a decision is reused for sessions presenting the same credential, and the
    /// longest a live session runs on a decision before it is re-checked.
    pub max_age: Duration,
    /// How many credentials' decisions are kept.
    pub cache_capacity: usize,
    /// This relay's name in auth-server requests.
    pub node: String,
    /// Where token lifetimes are read against (a simulation's own clock).
    pub clock: starling_session::Clock,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            keys: None,
            public_publish: Patterns::new(),
            public_subscribe: Patterns::new(),
            url: None,
            max_age: super::DEFAULT_MAX_AGE,
            cache_capacity: super::DEFAULT_CACHE_CAPACITY,
            node: "starling".to_string(),
            clock: starling_session::Clock::system(),
        }
    }
}

impl AuthConfig {
    /// Whether any authentication option is set (otherwise the relay is open).
    pub fn is_enabled(&self) -> bool {
        self.keys.is_some()
            || self.url.is_some()
            || !self.public_publish.is_empty()
            || !self.public_subscribe.is_empty()
    }

    /// Check the options without starting anything (see [`crate::Authority::new`]).
    pub fn validate(&self) -> Result<(), super::AuthConfigError> {
        super::validate(self)
    }
}
