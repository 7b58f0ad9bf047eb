//! Deciding in process: a token verified against the configured keys, or the public
//! (anonymous) patterns, scoped to the dialed path by [`Claims::authorize`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use starling_auth::contract::SessionRequest;
use starling_auth::{AuthError, Claims, KeySet, Patterns, Permissions};

use crate::auth::decision::{Decide, Deciding, Decision, Moment, Refusal, SessionFacts};
use crate::auth::keys::{KeyReader, KeySource};

/// Keys and public rules.
#[derive(Debug)]
pub(crate) struct LocalPolicy {
    /// Where token lifetimes are read against.
    clock: starling_session::Clock,
    /// Verifies tokens; `None` refuses every token.
    keys: Option<KeyReader>,
    /// Anonymous access, rooted at `/`; `None` refuses sessions without a token.
    public: Option<Claims>,
    verified: Verified,
}

/// Tokens whose signature verified, with the keys that verified them and the last grant
/// they were decided to. A token is decided again when a session presents it after its
/// cached decision aged out, and for live sessions when a sweep finds a key file changed;
/// while its key file is unchanged (the reader hands out the same parsed keys) neither the
/// signature nor the grant needs a second look, and they were nearly all of a decision: an
/// ES256 verification is tens of microseconds, and reading the header's kid and scoping the
/// claims to the dialed path was most of the rest. What is left is a `stat` of the key file
/// and the times (`exp`, `nbf`), checked every time; a removed or replaced key file is a new
/// key set, so its tokens verify again (or fail). Bounded: past its capacity the table
/// starts over.
#[derive(Debug)]
struct Verified {
    entries: Mutex<HashMap<Arc<str>, Remembered>>,
    capacity: usize,
    /// Signatures actually verified.
    verifications: std::sync::atomic::AtomicU64,
}

/// What one token verified to.
#[derive(Debug)]
struct Remembered {
    kid: Option<String>,
    keys: Arc<KeySet>,
    claims: Claims,
    /// The last dialed path it was decided at, and what it granted there.
    granted: Option<(String, Permissions)>,
}

impl Verified {
    /// The decision `token` made at `path` last time, while its key file is unchanged and
    /// its times hold; `None` when it must be decided afresh.
    fn recheck(
        &self,
        token: &str,
        path: &str,
        keys: &KeyReader,
        now: SystemTime,
    ) -> Option<Result<Decision, Refusal>> {
        // Copied out under the lock; the key file's `stat` happens outside it.
        let (kid, set, decided) = {
            let entries = self.entries.lock().expect("verified tokens lock");
            let seen = entries.get(token)?;
            let (at, permissions) = seen.granted.as_ref()?;
            if at != path {
                return None;
            }
            let decided = seen.claims.validate_times(now).map(|()| Decision {
                permissions: permissions.clone(),
                expires: seen.claims.expires,
                revalidate: None,
                peer: false,
            });
            (seen.kid.clone(), seen.keys.clone(), decided)
        };
        let current = keys.keys_for(kid.as_deref()).ok()?;
        if !Arc::ptr_eq(&current, &set) {
            return None;
        }
        Some(decided.map_err(Refusal::from))
    }

    /// `token`'s claims, verified against `keys` unless they already were.
    fn claims(
        &self,
        token: &str,
        kid: Option<String>,
        keys: &Arc<KeySet>,
        now: SystemTime,
    ) -> Result<Claims, AuthError> {
        let seen = self
            .entries
            .lock()
            .expect("verified tokens lock")
            .get(token)
            .filter(|seen| Arc::ptr_eq(&seen.keys, keys))
            .map(|seen| seen.claims.clone());
        if let Some(claims) = seen {
            claims.validate_times(now)?;
            return Ok(claims);
        }
        self.verifications
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let claims = keys.verify(token, now)?;
        let mut entries = self.entries.lock().expect("verified tokens lock");
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(
            token.into(),
            Remembered {
                kid,
                keys: keys.clone(),
                claims: claims.clone(),
                granted: None,
            },
        );
        Ok(claims)
    }

    /// Remember what `token` granted at `path`.
    fn granted(&self, token: &str, path: &str, permissions: &Permissions) {
        if let Some(seen) = self
            .entries
            .lock()
            .expect("verified tokens lock")
            .get_mut(token)
        {
            seen.granted = Some((path.to_string(), permissions.clone()));
        }
    }
}

impl LocalPolicy {
    /// `capacity`: how many verified tokens are remembered (the decision cache's size).
    pub fn new(
        keys: Option<KeySource>,
        publish: &Patterns,
        subscribe: &Patterns,
        capacity: usize,
    ) -> Self {
        let public = (!publish.is_empty() || !subscribe.is_empty()).then(|| Claims {
            root: String::new(),
            publish: publish.clone(),
            subscribe: subscribe.clone(),
            ..Default::default()
        });
        LocalPolicy {
            clock: starling_session::Clock::system(),
            keys: keys.map(KeyReader::new),
            public,
            verified: Verified {
                entries: Mutex::new(HashMap::new()),
                capacity: capacity.max(1),
                verifications: Default::default(),
            },
        }
    }

    /// Read token lifetimes against `clock`.
    pub fn with_clock(mut self, clock: starling_session::Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Decide for `facts` at `now`.
    pub fn decide_now(&self, facts: &SessionFacts, now: SystemTime) -> Result<Decision, Refusal> {
        let path = facts.path.as_str();
        let (permissions, expires) = match (facts.jwt(), &self.keys) {
            (Some(_), None) => return Err(Refusal::UnexpectedToken),
            (Some(token), Some(keys)) => {
                if let Some(decided) = self.verified.recheck(&token, path, keys, now) {
                    return decided;
                }
                let kid = starling_auth::token::kid(&token)?;
                let set = keys.keys_for(kid.as_deref())?;
                let claims = self.verified.claims(&token, kid, &set, now)?;
                let permissions = nonempty(claims.authorize(path)?)?;
                self.verified.granted(&token, path, &permissions);
                (permissions, claims.expires)
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
        let decided = self.decide_now(facts, self.clock.wall());
        Box::pin(std::future::ready(decided))
    }

    fn name(&self) -> &'static str {
        "local"
    }

    /// A local decision changes only when a key file it rests on does (public rules and
    /// fixed keys never change; a token's times end its session through the grant's expiry).
    fn sweep(&self) -> Option<bool> {
        Some(self.keys.as_ref().is_some_and(KeyReader::sweep))
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
    fn a_re_check_verifies_a_signature_again_only_when_its_key_changed() {
        use starling_auth::{Algorithm, Key};
        use std::sync::atomic::Ordering;
        use std::time::Duration;

        let dir = tempfile::tempdir().unwrap();
        // Written aside and renamed over: a new file, whatever the clock's resolution.
        let write = || {
            let key = Key::generate_with_id(Algorithm::ES256, Some("k".into())).unwrap();
            key.write_file(dir.path().join("k.new")).unwrap();
            std::fs::rename(dir.path().join("k.new"), dir.path().join("k.jwk")).unwrap();
            key
        };
        let key = write();
        let now = SystemTime::now();
        let claims = Claims {
            root: "room".into(),
            subscribe: patterns(&["**"]),
            expires: Some(now + Duration::from_secs(60)),
            ..Default::default()
        };
        let token = key.sign(&claims).unwrap();
        let policy = LocalPolicy::new(
            Some(KeySource::Dir(dir.path().into())),
            &Patterns::new(),
            &Patterns::new(),
            16,
        );
        let session = facts(&format!("/room?jwt={token}"));
        let verified = || policy.verified.verifications.load(Ordering::Relaxed);
        for _ in 0..3 {
            assert!(policy.decide_now(&session, now).is_ok());
        }
        assert_eq!(verified(), 1, "re-checks verified the signature again");
        // The same token dialed elsewhere is scoped there, not given the remembered grant.
        let deeper = facts(&format!("/room/cam?jwt={token}"));
        assert_eq!(
            policy.decide_now(&deeper, now).unwrap().permissions.root,
            "room/cam"
        );
        assert_eq!(
            policy.decide_now(&session, now).unwrap().permissions.root,
            "room"
        );
        assert_eq!(verified(), 1);
        // Past `exp`, the remembered token is refused all the same.
        assert!(matches!(
            policy.decide_now(&session, now + Duration::from_secs(61)),
            Err(Refusal::Token(AuthError::Expired))
        ));
        // A replaced key file is a new key: the token is verified against it, and fails.
        write();
        assert!(policy.decide_now(&session, now).is_err());
        assert_eq!(verified(), 2);
        // A removed one refuses it without a verification.
        std::fs::remove_file(dir.path().join("k.jwk")).unwrap();
        assert!(policy.decide_now(&session, now).is_err());
        assert_eq!(verified(), 2);
    }

    #[test]
    fn public_patterns_scope_anonymous_sessions() {
        let policy = LocalPolicy::new(None, &Patterns::new(), &patterns(&["demo/**"]), 16);
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
