//! Deciding in process: a token verified against the configured keys, or the public
//! (anonymous) patterns, scoped to the dialed path by [`Claims::authorize`].

use std::time::SystemTime;

use starling_auth::contract::SessionRequest;
use starling_auth::{AuthError, Claims, Patterns, Permissions};

use crate::auth::decision::{Decide, Deciding, Decision, Moment, Refusal, SessionFacts};
use crate::auth::keys::{KeyReader, KeySource};

/// Keys and public rules.
#[derive(Debug)]
pub(crate) struct LocalPolicy {
    /// Verifies tokens; `None` refuses every token.
    keys: Option<KeyReader>,
    /// Anonymous access, rooted at `/`; `None` refuses sessions without a token.
    public: Option<Claims>,
}

impl LocalPolicy {
    pub fn new(keys: Option<KeySource>, publish: &Patterns, subscribe: &Patterns) -> Self {
        let public = (!publish.is_empty() || !subscribe.is_empty()).then(|| Claims {
            root: String::new(),
            publish: publish.clone(),
            subscribe: subscribe.clone(),
            ..Default::default()
        });
        LocalPolicy {
            keys: keys.map(KeyReader::new),
            public,
        }
    }

    /// Decide for `facts` at `now`.
    pub fn decide_now(&self, facts: &SessionFacts, now: SystemTime) -> Result<Decision, Refusal> {
        let path = facts.path.as_str();
        let (permissions, expires) = match (facts.jwt(), &self.keys) {
            (Some(_), None) => return Err(Refusal::UnexpectedToken),
            (Some(token), Some(keys)) => {
                let kid = starling_auth::token::kid(&token)?;
                let claims = keys.keys_for(kid.as_deref())?.verify(&token, now)?;
                (claims.authorize(path)?, claims.expires)
            }
            (None, _) => {
                let public = self.public.as_ref().ok_or(Refusal::MissingToken)?;
                let permissions = public.authorize(path).map_err(|err| match err {
                    AuthError::RootMismatch { .. } | AuthError::NoAccess(_) => {
                        Refusal::MissingToken
                    }
                    other => Refusal::Token(other),
                })?;
                (permissions, None)
            }
        };
        nonempty(permissions).map(|permissions| Decision {
            permissions,
            expires,
            revalidate: None,
            peer: false,
        })
    }
}

/// A grant that names nothing at the dialed path is a refusal.
fn nonempty(permissions: Permissions) -> Result<Permissions, Refusal> {
    if permissions.is_empty() {
        Err(Refusal::Narrow(permissions.root))
    } else {
        Ok(permissions)
    }
}

impl Decide for LocalPolicy {
    fn decide(&self, facts: &SessionFacts, _: &SessionRequest, _: Moment) -> Deciding {
        let decided = self.decide_now(facts, SystemTime::now());
        Box::pin(std::future::ready(decided))
    }

    fn name(&self) -> &'static str {
        "local"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_auth::contract::TransportKind;

    fn patterns(list: &[&str]) -> Patterns {
        list.iter().map(|p| p.parse().unwrap()).collect()
    }

    fn facts(target: &str) -> SessionFacts {
        SessionFacts::new(TransportKind::Quic, target)
    }

    #[test]
    fn public_patterns_scope_anonymous_sessions() {
        let policy = LocalPolicy::new(None, &Patterns::new(), &patterns(&["demo/**"]));
        let now = SystemTime::now();
        let root = policy.decide_now(&facts("/"), now).unwrap();
        assert!(root.permissions.can_subscribe("demo/cam"));
        assert!(!root.permissions.can_subscribe("other/cam"));
        assert!(root.permissions.publish.is_empty());
        let demo = policy.decide_now(&facts("/demo"), now).unwrap();
        assert_eq!(demo.permissions.root, "demo");
        assert!(matches!(
            policy.decide_now(&facts("/other"), now),
            Err(Refusal::MissingToken)
        ));
        assert!(matches!(
            policy.decide_now(&facts("/demo?jwt=abc"), now),
            Err(Refusal::UnexpectedToken)
        ));
    }
}
