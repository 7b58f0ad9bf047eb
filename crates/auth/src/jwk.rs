//! The JWK document a key is stored as (moq-auth's shape), with base64url byte fields.

use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Algorithm, Scope};

/// What a key is permitted to do (`key_ops`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum KeyOperation {
    /// Sign tokens.
    Sign,
    /// Verify tokens.
    Verify,
    /// Decrypt (never used here).
    Decrypt,
    /// Encrypt (never used here).
    Encrypt,
}

/// A curve named by `crv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Curve {
    /// NIST P-256 (ES256).
    #[serde(rename = "P-256")]
    P256,
    /// NIST P-384 (ES384).
    #[serde(rename = "P-384")]
    P384,
    /// Ed25519 (EdDSA).
    Ed25519,
}

/// The key material, tagged by `kty` (RFC 7518 §6, RFC 8037 §2).
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "kty")]
pub enum Material {
    /// Elliptic-curve key.
    EC {
        /// `crv`.
        crv: Curve,
        /// X coordinate.
        #[serde(with = "b64")]
        x: Vec<u8>,
        /// Y coordinate.
        #[serde(with = "b64")]
        y: Vec<u8>,
        /// Private scalar.
        #[serde(default, skip_serializing_if = "Option::is_none", with = "b64_opt")]
        d: Option<Vec<u8>>,
    },
    /// RSA key.
    RSA {
        /// Public half.
        #[serde(flatten)]
        public: RsaPublic,
        /// Private half.
        #[serde(flatten, skip_serializing_if = "Option::is_none")]
        private: Option<RsaPrivate>,
    },
    /// Shared secret.
    #[serde(rename = "oct")]
    Oct {
        /// The secret (at least 32 bytes).
        #[serde(with = "b64")]
        k: Vec<u8>,
    },
    /// Octet key pair (Ed25519).
    OKP {
        /// `crv`.
        crv: Curve,
        /// Public key.
        #[serde(with = "b64")]
        x: Vec<u8>,
        /// Seed.
        #[serde(default, skip_serializing_if = "Option::is_none", with = "b64_opt")]
        d: Option<Vec<u8>>,
    },
}

/// RSA public parameters.
#[derive(Clone, Serialize, Deserialize)]
pub struct RsaPublic {
    /// Modulus.
    #[serde(with = "b64")]
    pub n: Vec<u8>,
    /// Public exponent.
    #[serde(with = "b64")]
    pub e: Vec<u8>,
}

/// RSA private parameters (two primes).
#[derive(Clone, Serialize, Deserialize)]
pub struct RsaPrivate {
    /// Private exponent.
    #[serde(with = "b64")]
    pub d: Vec<u8>,
    /// First prime.
    #[serde(with = "b64")]
    pub p: Vec<u8>,
    /// Second prime.
    #[serde(with = "b64")]
    pub q: Vec<u8>,
    /// d mod (p-1).
    #[serde(with = "b64")]
    pub dp: Vec<u8>,
    /// d mod (q-1).
    #[serde(with = "b64")]
    pub dq: Vec<u8>,
    /// q^-1 mod p.
    #[serde(with = "b64")]
    pub qi: Vec<u8>,
}

/// A JWK as moq-auth writes it: `alg`, `key_ops`, the `kty` material, `kid`, `scope`.
#[derive(Clone, Serialize, Deserialize)]
pub struct Jwk {
    /// `alg`.
    pub alg: Algorithm,
    /// `key_ops`; sign and verify when absent.
    #[serde(default = "sign_verify")]
    pub key_ops: Vec<KeyOperation>,
    /// The material.
    #[serde(flatten)]
    pub material: Material,
    /// `kid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// `scope`: a ceiling on what the key's tokens may grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
}

fn sign_verify() -> Vec<KeyOperation> {
    vec![KeyOperation::Sign, KeyOperation::Verify]
}

fn decode(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(s).or_else(|_| URL_SAFE.decode(s))
}

mod b64 {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&URL_SAFE_NO_PAD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        decode(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

mod b64_opt {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => s.serialize_str(&URL_SAFE_NO_PAD.encode(bytes)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| decode(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}
