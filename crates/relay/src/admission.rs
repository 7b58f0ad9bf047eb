//! Deciding what a new session may do: verify its token (or a public grant), scope it to the dialed path.
//!
//! The credential is the `jwt` query parameter of the request target (the WebTransport CONNECT
//! URL, the WebSocket request URI, or the SETUP Path on raw QUIC and TCP). With no key and no
//! public pattern configured the relay is open: every session may publish and subscribe at
//! its dialed path. Otherwise a token is verified with the key set and scoped to the dialed
//! path by [`Claims::authorize`]; without a token the public patterns apply.

use std::time::SystemTime;

use starling_auth::{AuthError, Claims, KeySet, Pattern, Patterns, Permissions, Segment};
use starling_proto::{Path, Role};

use crate::config::AuthConfig;

/// What one session may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Wire paths are relative to this root.
    pub root: Path,
    pub publish: bool,
    pub subscribe: bool,
    /// The token's `exp`: the session is closed with UNAUTHORIZED at this instant.
    pub expires: Option<SystemTime>,
    /// The scoped permissions when authentication is configured; `None` on an open relay.
    pub permissions: Option<Permissions>,
}

/// The admission policy.
#[derive(Clone, Debug, Default)]
pub struct Admission {
    /// Verifies tokens; `None` refuses every token.
    keys: Option<KeySet>,
    /// Anonymous access, rooted at `/`; `None` when authentication is off entirely.
    public: Option<Claims>,
    /// Whether any auth option was given; when not, the relay is open.
    enabled: bool,
}

/// Why a session was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("the path is not a broadcast path")]
    BadPath,
    #[error("a token was presented but no key is configured")]
    UnexpectedToken,
    #[error("no token and no public access here")]
    MissingToken,
    #[error("token refused: {0}")]
    Token(#[from] AuthError),
    #[error("the grant allows no {0} here")]
    Role(&'static str),
    #[error("the grant covers only part of {0:?}; dial a path the grant covers entirely")]
    Narrow(String),
}

/// A public pattern that does not parse or holds no wildcard.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("public pattern {0:?} has no wildcard; use a token to grant a literal path")]
    LiteralPublic(String),
}

/// Whether `pattern` holds a wildcard (`*`, `**`, or a partial `a*b`) in some segment.
fn has_wildcard(pattern: &Pattern) -> bool {
    pattern
        .segments()
        .iter()
        .any(|segment| !matches!(segment, Segment::Literal(_)))
}

impl Admission {
    /// The policy for `config`; refuses public patterns without a wildcard (as moq-relay).
    pub fn new(config: &AuthConfig) -> Result<Self, AuthConfigError> {
        for pattern in config
            .public_publish
            .iter()
            .chain(config.public_subscribe.iter())
        {
            if !has_wildcard(pattern) {
                return Err(AuthConfigError::LiteralPublic(pattern.to_string()));
            }
        }
        let public = (!config.public_publish.is_empty() || !config.public_subscribe.is_empty())
            .then(|| Claims {
                root: String::new(),
                publish: config.public_publish.clone(),
                subscribe: config.public_subscribe.clone(),
                ..Default::default()
            });
        Ok(Admission {
            keys: config.keys.clone(),
            public,
            enabled: config.is_enabled(),
        })
    }

    /// Whether any authentication is configured.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Decide for a request target (`/path?query`) and the client's declared role at `now`.
    /// `fallback` is another target whose `jwt` is used when `target` carries none
    /// (WebTransport: the CONNECT URL when the SETUP Path overrides the path).
    pub fn admit(
        &self,
        target: Option<&str>,
        fallback: Option<&str>,
        role: Option<Role>,
        now: SystemTime,
    ) -> Result<Grant, Refusal> {
        let target = target.unwrap_or("");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let token = jwt(query).or_else(|| {
            fallback
                .and_then(|f| f.split_once('?'))
                .and_then(|(_, q)| jwt(q))
        });
        let mut grant = match (token, &self.keys) {
            (Some(_), None) => return Err(Refusal::UnexpectedToken),
            (Some(token), Some(keys)) => {
                let claims = keys.verify(&token, now)?;
                let permissions = claims.authorize(path)?;
                self.scoped(permissions, claims.expires)?
            }
            (None, _) if !self.enabled => Grant {
                root: Path::new(path).map_err(|_| Refusal::BadPath)?,
                publish: true,
                subscribe: true,
                expires: None,
                permissions: None,
            },
            (None, _) => {
                let public = self.public.as_ref().ok_or(Refusal::MissingToken)?;
                let permissions = public.authorize(path).map_err(|err| match err {
                    AuthError::RootMismatch { .. } | AuthError::NoAccess(_) => {
                        Refusal::MissingToken
                    }
                    other => Refusal::Token(other),
                })?;
                self.scoped(permissions, None)?
            }
        };
        match role {
            Some(Role::Publisher) if !grant.publish => return Err(Refusal::Role("publish")),
            Some(Role::Subscriber) if !grant.subscribe => return Err(Refusal::Role("subscribe")),
            Some(Role::Publisher) => grant.subscribe = false,
            Some(Role::Subscriber) => grant.publish = false,
            None => {}
        }
        Ok(grant)
    }

    fn scoped(
        &self,
        permissions: Permissions,
        expires: Option<SystemTime>,
    ) -> Result<Grant, Refusal> {
        let root = Path::new(permissions.root()).map_err(|_| Refusal::BadPath)?;
        // A direction is granted when any pattern allows it; the session then checks every
        // wire path against the patterns (`Scoped`), so a narrow grant never widens.
        let publish = !permissions.publish.is_empty();
        let subscribe = !permissions.subscribe.is_empty();
        if !publish && !subscribe {
            return Err(Refusal::Narrow(permissions.root.clone()));
        }
        Ok(Grant {
            root,
            publish,
            subscribe,
            expires,
            permissions: Some(permissions),
        })
    }
}

/// The `jwt` query parameter, percent-decoded.
fn jwt(query: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "jwt")
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty())
}

/// Patterns from strings, as given on the command line.
pub fn parse_patterns<'a>(
    patterns: impl IntoIterator<Item = &'a str>,
) -> Result<Patterns, AuthError> {
    let mut out = Patterns::new();
    for text in patterns {
        out.insert(text.parse::<Pattern>()?);
    }
    Ok(out)
}

/// A token's permissions as the session's per-path access check (wire paths are relative to
/// the session root, as the permissions' patterns are).
#[derive(Debug)]
pub struct Scoped(pub Permissions);

impl starling_session::Access for Scoped {
    fn can_publish(&self, path: &Path) -> bool {
        self.0.can_publish(path.as_str())
    }

    fn can_subscribe(&self, path: &Path) -> bool {
        self.0.can_subscribe(path.as_str())
    }

    fn can_subscribe_under(&self, prefix: &Path) -> bool {
        self.0.can_subscribe_under(prefix.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(publish: &[&str], subscribe: &[&str]) -> AuthConfig {
        AuthConfig {
            keys: None,
            public_publish: parse_patterns(publish.iter().copied()).unwrap(),
            public_subscribe: parse_patterns(subscribe.iter().copied()).unwrap(),
        }
    }

    #[test]
    fn open_relay_admits_everything() {
        let admission = Admission::new(&AuthConfig::default()).unwrap();
        let grant = admission
            .admit(Some("/room"), None, None, SystemTime::now())
            .unwrap();
        assert!(grant.publish && grant.subscribe);
        assert_eq!(grant.root.as_str(), "room");
        assert!(matches!(
            admission.admit(Some("/room?jwt=abc"), None, None, SystemTime::now()),
            Err(Refusal::UnexpectedToken)
        ));
    }

    #[test]
    fn literal_public_pattern_is_refused() {
        assert!(Admission::new(&public(&["room"], &[])).is_err());
        assert!(Admission::new(&public(&[], &["room/*"])).is_ok());
    }

    #[test]
    fn public_pattern_scopes_anonymous_sessions() {
        let admission = Admission::new(&public(&[], &["demo/**"])).unwrap();
        let now = SystemTime::now();
        // At `/` the grant covers part of the tree: admitted, with the patterns to check
        // every path against.
        let root = admission.admit(Some("/"), None, None, now).unwrap();
        assert!(root.subscribe && !root.publish);
        let permissions = root.permissions.expect("scoped");
        assert!(permissions.can_subscribe("demo/cam"));
        assert!(!permissions.can_subscribe("other/cam"));
        let grant = admission
            .admit(Some("/demo"), None, Some(Role::Subscriber), now)
            .unwrap();
        assert!(grant.subscribe && !grant.publish);
        assert!(admission.admit(Some("/other"), None, None, now).is_err());
        assert!(admission
            .admit(Some("/demo"), None, Some(Role::Publisher), now)
            .is_err());
    }
}
