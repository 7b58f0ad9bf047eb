//! Several keys, chosen per token by the header's `kid`: one file, a JWKS, or a directory.

use std::path::Path;
use std::time::SystemTime;

use crate::{AuthError, Claims, Key};

/// Keys selected by `kid`. A token without a `kid` is accepted only when the set holds one key.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<Key>,
}

impl KeySet {
    /// A set of these keys.
    pub fn new(keys: Vec<Key>) -> Self {
        Self { keys }
    }

    /// Load a key file (base64url or JSON JWK), a JWKS JSON file (`{"keys":[…]}`), or a
    /// directory of `{kid}.jwk` files (a key without its own `kid` takes the file stem).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AuthError> {
        let path = path.as_ref();
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)?
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .map(|entry| entry.path())
                .filter(|p| p.extension().is_some_and(|ext| ext == "jwk"))
                .collect();
            entries.sort();
            let mut keys = Vec::new();
            for file in entries {
                let key = Key::from_file(&file)?;
                let key = match (key.kid(), file.file_stem().and_then(|s| s.to_str())) {
                    (None, Some(stem)) => {
                        let mut jwk = key.jwk().clone();
                        crate::key::validate_kid(stem)?;
                        jwk.kid = Some(stem.to_string());
                        Key::from_jwk(jwk)?
                    }
                    _ => key,
                };
                keys.push(key);
            }
            return Ok(Self { keys });
        }
        Self::parse(&std::fs::read_to_string(path)?)
    }

    /// Parse one key (either encoding) or a JWKS document.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let trimmed = text.trim();
        if trimmed.starts_with('{') {
            let value: serde_json::Value =
                serde_json::from_str(trimmed).map_err(|e| AuthError::InvalidKey(e.to_string()))?;
            if let Some(keys) = value.get("keys").and_then(|keys| keys.as_array()) {
                let keys = keys
                    .iter()
                    .map(|jwk| {
                        serde_json::from_value(jwk.clone())
                            .map_err(|e| AuthError::InvalidKey(e.to_string()))
                            .and_then(Key::from_jwk)
                    })
                    .collect::<Result<_, _>>()?;
                return Ok(Self { keys });
            }
        }
        Ok(Self {
            keys: vec![Key::parse(trimmed)?],
        })
    }

    /// The keys.
    pub fn keys(&self) -> &[Key] {
        &self.keys
    }

    /// The key with this id.
    pub fn find(&self, kid: &str) -> Option<&Key> {
        self.keys.iter().find(|key| key.kid() == Some(kid))
    }

    /// Verify with the key the token's `kid` names (or the only key when it names none).
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<Claims, AuthError> {
        let key = match crate::token::kid(token)? {
            Some(kid) => self.find(&kid).ok_or(AuthError::KeyNotFound(kid))?,
            None if self.keys.len() == 1 => &self.keys[0],
            None => return Err(AuthError::MissingKid(self.keys.len())),
        };
        key.verify(token, now)
    }
}
