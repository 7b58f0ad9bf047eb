//! Every way authentication and authorization can refuse.

/// Why a token, key, claim set or path was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A pattern in a claim, scope or argument does not parse.
    #[error("invalid pattern: {0}")]
    InvalidPattern(#[from] crate::InvalidPattern),
    /// A path holds `.`/`..` segments, a backslash, or a percent-encoded `/`, `\` or `.`.
    #[error("path {0:?} is not a plain broadcast path")]
    InvalidPath(String),
    /// The dialed path and the token's root do not overlap.
    #[error("path {path:?} does not overlap the token root {root:?}")]
    RootMismatch {
        /// The token's root, normalized.
        root: String,
        /// The dialed path, normalized.
        path: String,
    },
    /// The path overlaps the root, but no grant reaches it.
    #[error("the token grants nothing at {0:?}")]
    NoAccess(String),
    /// The claims grant neither publish nor subscribe.
    #[error("no publish or subscribe allowed; token is useless")]
    UselessToken,
    /// `exp` is at or before now.
    #[error("token expired")]
    Expired,
    /// `nbf` is after now.
    #[error("token not yet valid")]
    NotYetValid,
    /// Not three base64url parts, or a header that is not JSON.
    #[error("malformed token: {0}")]
    MalformedToken(String),
    /// The header says `alg: none`.
    #[error("unsigned tokens (alg: none) are refused")]
    AlgNone,
    /// The header names an algorithm other than the key's.
    #[error("token algorithm {found} does not match the key's {expected}")]
    AlgorithmMismatch {
        /// The key's algorithm.
        expected: crate::Algorithm,
        /// The token header's algorithm.
        found: String,
    },
    /// An algorithm name this crate does not implement.
    #[error("unsupported algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// The signature does not verify with the key.
    #[error("invalid signature")]
    BadSignature,
    /// A claim other than root, put, get, publish, subscribe, exp, iat, nbf, iss, sub, jti.
    #[error("unknown claim {0:?}")]
    UnknownClaim(String),
    /// A known claim with the wrong shape, or a document mixing put/get with publish/subscribe.
    #[error("invalid claims: {0}")]
    InvalidClaims(String),
    /// The claims exceed the scope embedded in the key.
    #[error("the claims exceed the key's scope")]
    ScopeExceeded,
    /// A key file or JWK that does not load.
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// No key in the set has the token header's `kid`.
    #[error("no key with id {0:?}")]
    KeyNotFound(String),
    /// The token has no `kid` and the set holds more than one key.
    #[error("token has no kid and the key set holds {0} keys")]
    MissingKid(usize),
    /// The key may not sign (`key_ops`), or holds only its public half.
    #[error("this key cannot sign")]
    SignUnsupported,
    /// The key may not verify (`key_ops`).
    #[error("this key cannot verify")]
    VerifyUnsupported,
    /// A cryptographic primitive failed.
    #[error("crypto failure: {0}")]
    Crypto(String),
    /// Reading or writing a key file.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// This crate's result.
pub type Result<T, E = AuthError> = std::result::Result<T, E>;
