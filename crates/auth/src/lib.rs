//! `starling-auth`: moq-auth compatible JWT claims, path patterns, keys and verification.
//!
//! A token's [`Claims`] grant `publish`/`subscribe` [`Patterns`] beneath a `root`
//! (legacy `put`/`get` prefixes are read as subtrees). [`Key`] and [`KeySet`] sign and
//! verify tokens in moq-cli's key file format (base64url of the JWK JSON; plain JSON is
//! read too). [`Claims::authorize`] scopes verified claims to the dialed path, giving the
//! session's [`Permissions`].

mod algorithm;
mod claims;
pub mod contract;
mod der;
mod error;
mod generate;
mod jwk;
mod key;
mod key_set;
pub mod path;
mod pattern;
mod patterns;
mod permissions;
mod scope;
pub mod token;
mod wire;

pub use algorithm::Algorithm;
pub use claims::Claims;
pub use error::{AuthError, Result};
pub use generate::random_kid;
pub use jwk::{Curve, Jwk, KeyOperation, Material, RsaPrivate, RsaPublic};
pub use key::{validate_kid, Key, MIN_SECRET_BYTES};
pub use key_set::KeySet;
pub use pattern::{InvalidPattern, Pattern, Segment};
pub use patterns::Patterns;
pub use permissions::Permissions;
pub use scope::Scope;
