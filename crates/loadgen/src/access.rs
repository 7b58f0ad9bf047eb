//! A run's credentials (the community scenario's): two signing keys in a key directory,
//! the tokens they sign, and removing members by deleting a key.
//!
//! The relay (`--auth-key-dir DIR`) or its auth server (`moq auth serve --key-dir DIR`)
//! verifies each token against `DIR/{kid}.jwk`, read per decision. Members who stay are
//! signed by the `community` key; members to be removed mid-run by the `removable` key, so
//! deleting `removable.jwk` revokes exactly them, and the relay must close their sessions
//! within its auth max age. The directory holds the verifying half only (for HMAC keys, the
//! shared secret).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use starling_auth::{Algorithm, AuthError, Claims, Key, Pattern, Patterns};

/// `url` with `?jwt=` when there is a token, as every client presents it.
pub fn with_token(mut url: url::Url, token: Option<&str>) -> url::Url {
    if let Some(token) = token {
        url.query_pairs_mut().append_pair("jwt", token);
    }
    url
}

/// The kid of the key that signs the publisher, the agents and the members who stay.
pub const COMMUNITY_KID: &str = "community";
/// The kid of the key that signs the members removed mid-run.
pub const REMOVABLE_KID: &str = "removable";

/// Why credentials could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("auth: {0}")]
    Auth(#[from] AuthError),
    #[error("pattern {0:?}: {1}")]
    Pattern(String, String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The signing keys, and the directory the verifier reads.
pub struct Credentials {
    dir: PathBuf,
    root: String,
    community: Key,
    removable: Key,
    lifetime: Duration,
}

impl Credentials {
    /// Fresh keys of `algorithm` for tokens rooted at `root` (the community prefix), their
    /// verifying halves written into `dir` (created if missing).
    pub fn create(dir: &Path, root: &str, algorithm: Algorithm) -> Result<Self, AccessError> {
        let io = |source| AccessError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let community = Key::generate_with_id(algorithm, Some(COMMUNITY_KID.into()))?;
        let removable = Key::generate_with_id(algorithm, Some(REMOVABLE_KID.into()))?;
        for key in [&community, &removable] {
            let kid = key.kid().unwrap_or_default();
            let verifying = if key.to_public().is_ok() {
                key.to_public()?
            } else {
                key.clone()
            };
            verifying.write_file(dir.join(format!("{kid}.jwk")))?;
        }
        Ok(Credentials {
            dir: dir.to_path_buf(),
            root: root.to_string(),
            community,
            removable,
            lifetime: Duration::from_secs(24 * 3600),
        })
    }

    fn sign(
        &self,
        key: &Key,
        publish: &[String],
        subscribe: &[String],
    ) -> Result<String, AccessError> {
        let patterns = |list: &[String]| -> Result<Patterns, AccessError> {
            list.iter()
                .map(|p| {
                    p.parse::<Pattern>()
                        .map_err(|e| AccessError::Pattern(p.clone(), e.to_string()))
                })
                .collect()
        };
        let now = SystemTime::now();
        let claims = Claims {
            root: self.root.clone(),
            publish: patterns(publish)?,
            subscribe: patterns(subscribe)?,
            expires: Some(now + self.lifetime),
            issued: Some(now),
            not_before: None,
        };
        Ok(key.sign(&claims)?)
    }

    /// The publisher's token: publish everything under the community.
    pub fn publisher(&self) -> Result<String, AccessError> {
        self.sign(&self.community, &["**".into()], &[])
    }

    /// An HTTP agent's token: read every open channel.
    pub fn agent(&self) -> Result<String, AccessError> {
        self.sign(&self.community, &[], &["open/**".into()])
    }

    /// A member's token for `subscribe`, signed by the key that can be removed when
    /// `removable`.
    pub fn member(&self, subscribe: &[String], removable: bool) -> Result<String, AccessError> {
        let key = if removable {
            &self.removable
        } else {
            &self.community
        };
        self.sign(key, &[], subscribe)
    }

    /// Delete the removable key from the verifier's directory: its members lose access at
    /// their next check.
    pub fn remove_members(&self) -> Result<(), AccessError> {
        let path = self.dir.join(format!("{REMOVABLE_KID}.jwk"));
        std::fs::remove_file(&path).map_err(|source| AccessError::Io { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_members_deletes_only_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = Credentials::create(dir.path(), "c/1", Algorithm::ES256).unwrap();
        let kept = credentials.member(&["open/**".into()], false).unwrap();
        let removed = credentials
            .member(&["open/**".into(), "member/3".into()], true)
            .unwrap();
        let verify = |token: &str| -> Result<Claims, AuthError> {
            let kid = starling_auth::token::kid(token)?.unwrap();
            Key::from_file(dir.path().join(format!("{kid}.jwk")))
                .and_then(|key| key.verify(token, SystemTime::now()))
        };
        let claims = verify(&removed).unwrap();
        assert_eq!(claims.root, "c/1");
        assert!(claims.subscribe.matches("member/3"));
        assert!(!claims.subscribe.matches("member/4"));
        assert!(claims.subscribe.matches("open/17"));
        assert!(claims.publish.is_empty());
        assert!(verify(&kept).is_ok());

        credentials.remove_members().unwrap();
        assert!(verify(&removed).is_err(), "the removed key still verifies");
        assert!(verify(&kept).is_ok(), "removing members touched the others");
        // The directory holds no private half of an asymmetric key.
        let key = Key::from_file(dir.path().join("community.jwk")).unwrap();
        assert!(!key.is_private());
    }
}
