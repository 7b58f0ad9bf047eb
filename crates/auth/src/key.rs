//! A validated signing/verifying key: load, save, sign and verify tokens.

use std::path::Path;
use std::str::FromStr;
use std::time::SystemTime;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{DecodingKey, EncodingKey, Header, Validation};

use crate::jwk::{Curve, Jwk, KeyOperation, Material};
use crate::{der, Algorithm, AuthError, Claims};

/// The shortest HMAC secret accepted, as moq-auth and `@moq/auth` require.
pub const MIN_SECRET_BYTES: usize = 32;

/// A key ready to sign and/or verify: a [`Jwk`] whose parameters were checked on import.
#[derive(Clone)]
pub struct Key {
    jwk: Jwk,
    encoding: Option<EncodingKey>,
    decoding: DecodingKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("alg", &self.jwk.alg)
            .field("kid", &self.jwk.kid)
            .field("key_ops", &self.jwk.key_ops)
            .finish_non_exhaustive()
    }
}

fn invalid(what: impl std::fmt::Display) -> AuthError {
    AuthError::InvalidKey(what.to_string())
}

fn crypto(what: impl std::fmt::Display) -> AuthError {
    AuthError::Crypto(what.to_string())
}

/// Check a key id as moq-auth does: 1..=128 of `[A-Za-z0-9_-]`, so `{kid}.jwk` is a safe file name.
pub fn validate_kid(kid: &str) -> Result<(), AuthError> {
    if kid.is_empty()
        || kid.len() > 128
        || !kid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(invalid(format!(
            "key id {kid:?} must be 1-128 of [A-Za-z0-9_-]"
        )));
    }
    Ok(())
}

impl Key {
    /// Validate a JWK and derive its crypto material.
    pub fn from_jwk(jwk: Jwk) -> Result<Self, AuthError> {
        if let Some(kid) = &jwk.kid {
            validate_kid(kid)?;
        }
        let alg = jwk.alg;
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let (decoding, encoding) = match &jwk.material {
            Material::Oct { k } => {
                if !alg.is_symmetric() {
                    return Err(invalid(format!("an oct key cannot be {alg}")));
                }
                if k.len() < MIN_SECRET_BYTES {
                    return Err(invalid(format!(
                        "the secret must be at least {MIN_SECRET_BYTES} bytes"
                    )));
                }
                (
                    DecodingKey::from_secret(k),
                    Some(EncodingKey::from_secret(k)),
                )
            }
            Material::EC { crv, x, y, d } => {
                let (expected, len, signing) = match crv {
                    Curve::P256 => (
                        Algorithm::ES256,
                        32,
                        &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    ),
                    Curve::P384 => (
                        Algorithm::ES384,
                        48,
                        &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED_SIGNING,
                    ),
                    Curve::Ed25519 => return Err(invalid("an EC key cannot use Ed25519")),
                };
                if alg != expected {
                    return Err(invalid(format!(
                        "a {crv:?} key must be {expected}, not {alg}"
                    )));
                }
                if x.len() != len || y.len() != len {
                    return Err(invalid(format!("{crv:?} coordinates must be {len} bytes")));
                }
                let decoding =
                    DecodingKey::from_ec_components(&b64(x), &b64(y)).map_err(invalid)?;
                let encoding = match d {
                    Some(d) => {
                        let mut point = vec![4u8];
                        point.extend_from_slice(x);
                        point.extend_from_slice(y);
                        let pair =
                            aws_lc_rs::signature::EcdsaKeyPair::from_private_key_and_public_key(
                                signing, d, &point,
                            )
                            .map_err(invalid)?;
                        let pkcs8 = pair.to_pkcs8v1().map_err(crypto)?;
                        Some(EncodingKey::from_ec_der(pkcs8.as_ref()))
                    }
                    None => None,
                };
                (decoding, encoding)
            }
            Material::OKP { crv, x, d } => {
                if *crv != Curve::Ed25519 || alg != Algorithm::EdDSA {
                    return Err(invalid("an OKP key must be Ed25519 with EdDSA"));
                }
                let decoding = DecodingKey::from_ed_components(&b64(x)).map_err(invalid)?;
                let encoding = match d {
                    Some(d) => {
                        let pair =
                            aws_lc_rs::signature::Ed25519KeyPair::from_seed_and_public_key(d, x)
                                .map_err(invalid)?;
                        let pkcs8 = pair.to_pkcs8().map_err(crypto)?;
                        Some(EncodingKey::from_ed_der(pkcs8.as_ref()))
                    }
                    None => None,
                };
                (decoding, encoding)
            }
            Material::RSA { public, private } => {
                if !alg.is_rsa() {
                    return Err(invalid(format!("an RSA key cannot be {alg}")));
                }
                let decoding = DecodingKey::from_rsa_raw_components(&public.n, &public.e);
                let encoding = private.as_ref().map(|p| {
                    let pkcs1 = der::rsa_pkcs1([
                        &public.n, &public.e, &p.d, &p.p, &p.q, &p.dp, &p.dq, &p.qi,
                    ]);
                    EncodingKey::from_rsa_der(&pkcs1)
                });
                (decoding, encoding)
            }
        };
        Ok(Self {
            jwk,
            encoding,
            decoding,
        })
    }

    /// Parse a key: JSON when it starts with `{`, else base64url(JSON) as moq-cli writes.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let text = text.trim();
        let json = if text.starts_with('{') {
            text.to_string()
        } else {
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(text.trim_end_matches('='))
                .map_err(|e| invalid(format!("neither JSON nor base64url: {e}")))?;
            String::from_utf8(bytes).map_err(invalid)?
        };
        let jwk: Jwk = serde_json::from_str(&json).map_err(invalid)?;
        Self::from_jwk(jwk)
    }

    /// Load a key file (either encoding).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, AuthError> {
        Self::parse(&std::fs::read_to_string(path)?)
    }

    /// The JWK as compact JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.jwk).expect("a JWK serializes")
    }

    /// The key file encoding moq-cli writes: base64url (no padding) of the JSON, no newline.
    pub fn to_encoded(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.to_json())
    }

    /// Write [`to_encoded`](Self::to_encoded) to `path`, owner-only when it holds private material.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<(), AuthError> {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(if self.is_private() { 0o600 } else { 0o644 });
        }
        let mut file = options.open(path.as_ref())?;
        #[cfg(unix)]
        if self.is_private() {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        file.write_all(self.to_encoded().as_bytes())?;
        Ok(())
    }

    /// The JWK behind this key.
    pub fn jwk(&self) -> &Jwk {
        &self.jwk
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.jwk.alg
    }

    /// The key id, if any.
    pub fn kid(&self) -> Option<&str> {
        self.jwk.kid.as_deref()
    }

    /// Whether the key holds private (signing) material.
    pub fn is_private(&self) -> bool {
        self.encoding.is_some()
    }

    /// A verify-only copy without private material; refused for HMAC keys.
    pub fn to_public(&self) -> Result<Self, AuthError> {
        let material = match &self.jwk.material {
            Material::Oct { .. } => return Err(invalid("an HMAC key has no public half")),
            Material::EC { crv, x, y, .. } => Material::EC {
                crv: *crv,
                x: x.clone(),
                y: y.clone(),
                d: None,
            },
            Material::OKP { crv, x, .. } => Material::OKP {
                crv: *crv,
                x: x.clone(),
                d: None,
            },
            Material::RSA { public, .. } => Material::RSA {
                public: public.clone(),
                private: None,
            },
        };
        Self::from_jwk(Jwk {
            alg: self.jwk.alg,
            key_ops: vec![KeyOperation::Verify],
            material,
            kid: self.jwk.kid.clone(),
            scope: self.jwk.scope.clone(),
        })
    }

    fn check_scope(&self, claims: &Claims) -> Result<(), AuthError> {
        match &self.jwk.scope {
            Some(scope) if !scope.allows(claims) => Err(AuthError::ScopeExceeded),
            _ => Ok(()),
        }
    }

    /// Sign claims into a compact JWS with `typ: JWT`, this key's `alg` and `kid`.
    pub fn sign(&self, claims: &Claims) -> Result<String, AuthError> {
        let encoding = match &self.encoding {
            Some(encoding) if self.jwk.key_ops.contains(&KeyOperation::Sign) => encoding,
            _ => return Err(AuthError::SignUnsupported),
        };
        claims.validate()?;
        self.check_scope(claims)?;
        let mut header = Header::new(self.jwk.alg.to_jwt());
        header.kid = self.jwk.kid.clone();
        jsonwebtoken::encode(&header, &claims.to_wire(), encoding).map_err(crypto)
    }

    /// Verify a token at `now`: header `alg` equal to the key's (never `none`), a valid
    /// signature, only known claims, `exp > now >= nbf`, some grant, within the key's scope.
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<Claims, AuthError> {
        let token = token.trim();
        if !self.jwk.key_ops.contains(&KeyOperation::Verify) {
            return Err(AuthError::VerifyUnsupported);
        }
        let header = crate::token::header(token)?;
        let alg = header
            .get("alg")
            .and_then(|alg| alg.as_str())
            .ok_or_else(|| AuthError::MalformedToken("the header has no alg".into()))?;
        if alg.eq_ignore_ascii_case("none") {
            return Err(AuthError::AlgNone);
        }
        if alg != self.jwk.alg.as_str() {
            return Err(AuthError::AlgorithmMismatch {
                expected: self.jwk.alg,
                found: alg.to_string(),
            });
        }
        let mut validation = Validation::new(self.jwk.alg.to_jwt());
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &self.decoding, &validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => AuthError::BadSignature,
                _ => AuthError::MalformedToken(e.to_string()),
            })?;
        let claims = Claims::from_json(&data.claims)?;
        claims.validate_times(now)?;
        claims.validate()?;
        self.check_scope(&claims)?;
        Ok(claims)
    }
}

impl FromStr for Key {
    type Err = AuthError;

    fn from_str(text: &str) -> Result<Self, AuthError> {
        Self::parse(text)
    }
}
