//! The JWS algorithms a key can carry, by their JOSE names.

use std::fmt;
use std::str::FromStr;

/// A JWS algorithm (RFC 7518 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Algorithm {
    /// HMAC SHA-256.
    HS256,
    /// HMAC SHA-384.
    HS384,
    /// HMAC SHA-512.
    HS512,
    /// ECDSA P-256 SHA-256.
    ES256,
    /// ECDSA P-384 SHA-384.
    ES384,
    /// RSASSA-PKCS1-v1_5 SHA-256.
    RS256,
    /// RSASSA-PKCS1-v1_5 SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 SHA-512.
    RS512,
    /// RSASSA-PSS SHA-256.
    PS256,
    /// RSASSA-PSS SHA-384.
    PS384,
    /// RSASSA-PSS SHA-512.
    PS512,
    /// Ed25519.
    EdDSA,
}

impl Algorithm {
    /// Every algorithm, in declaration order.
    pub const ALL: [Algorithm; 12] = [
        Self::HS256,
        Self::HS384,
        Self::HS512,
        Self::ES256,
        Self::ES384,
        Self::RS256,
        Self::RS384,
        Self::RS512,
        Self::PS256,
        Self::PS384,
        Self::PS512,
        Self::EdDSA,
    ];

    /// The JOSE name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HS256 => "HS256",
            Self::HS384 => "HS384",
            Self::HS512 => "HS512",
            Self::ES256 => "ES256",
            Self::ES384 => "ES384",
            Self::RS256 => "RS256",
            Self::RS384 => "RS384",
            Self::RS512 => "RS512",
            Self::PS256 => "PS256",
            Self::PS384 => "PS384",
            Self::PS512 => "PS512",
            Self::EdDSA => "EdDSA",
        }
    }

    /// Whether this is an HMAC (shared-secret) algorithm.
    pub fn is_symmetric(self) -> bool {
        matches!(self, Self::HS256 | Self::HS384 | Self::HS512)
    }

    /// Whether this is an RSA algorithm (PKCS#1 v1.5 or PSS).
    pub fn is_rsa(self) -> bool {
        matches!(
            self,
            Self::RS256 | Self::RS384 | Self::RS512 | Self::PS256 | Self::PS384 | Self::PS512
        )
    }

    pub(crate) fn to_jwt(self) -> jsonwebtoken::Algorithm {
        use jsonwebtoken::Algorithm as J;
        match self {
            Self::HS256 => J::HS256,
            Self::HS384 => J::HS384,
            Self::HS512 => J::HS512,
            Self::ES256 => J::ES256,
            Self::ES384 => J::ES384,
            Self::RS256 => J::RS256,
            Self::RS384 => J::RS384,
            Self::RS512 => J::RS512,
            Self::PS256 => J::PS256,
            Self::PS384 => J::PS384,
            Self::PS512 => J::PS512,
            Self::EdDSA => J::EdDSA,
        }
    }
}

impl FromStr for Algorithm {
    type Err = crate::AuthError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|alg| alg.as_str() == s)
            .ok_or_else(|| crate::AuthError::UnsupportedAlgorithm(s.to_string()))
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
