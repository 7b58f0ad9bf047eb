//! Fresh keys for every algorithm, with a random 16-hex-digit key id by default.

use aws_lc_rs::encoding::{AsBigEndian, AsDer};
use aws_lc_rs::signature::KeyPair;

use crate::jwk::{Curve, Jwk, KeyOperation, Material, RsaPrivate, RsaPublic};
use crate::{der, Algorithm, AuthError, Key};

fn crypto(e: impl std::fmt::Display) -> AuthError {
    AuthError::Crypto(e.to_string())
}

fn random(len: usize) -> Result<Vec<u8>, AuthError> {
    let mut bytes = vec![0u8; len];
    aws_lc_rs::rand::fill(&mut bytes).map_err(crypto)?;
    Ok(bytes)
}

/// A random key id: 8 random bytes as lowercase hex, as moq-cli assigns.
pub fn random_kid() -> Result<String, AuthError> {
    Ok(random(8)?.iter().map(|b| format!("{b:02x}")).collect())
}

fn ec(curve: Curve) -> Result<Material, AuthError> {
    let alg = match curve {
        Curve::P256 => &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        _ => &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED_SIGNING,
    };
    let pair = aws_lc_rs::signature::EcdsaKeyPair::generate(alg).map_err(crypto)?;
    let d = pair.private_key().as_be_bytes().map_err(crypto)?;
    let point = pair.public_key().as_ref();
    let (x, y) = point[1..].split_at((point.len() - 1) / 2);
    Ok(Material::EC {
        crv: curve,
        x: x.to_vec(),
        y: y.to_vec(),
        d: Some(d.as_ref().to_vec()),
    })
}

fn ed25519() -> Result<Material, AuthError> {
    let pair = aws_lc_rs::signature::Ed25519KeyPair::generate().map_err(crypto)?;
    let seed = pair.seed().map_err(crypto)?;
    let seed = seed.as_be_bytes().map_err(crypto)?;
    Ok(Material::OKP {
        crv: Curve::Ed25519,
        x: pair.public_key().as_ref().to_vec(),
        d: Some(seed.as_ref().to_vec()),
    })
}

fn rsa() -> Result<Material, AuthError> {
    let pair =
        aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).map_err(crypto)?;
    let pkcs8: aws_lc_rs::encoding::Pkcs8V1Der = pair.as_der().map_err(crypto)?;
    let [n, e, d, p, q, dp, dq, qi] = der::rsa_components_from_pkcs8(pkcs8.as_ref())?;
    Ok(Material::RSA {
        public: RsaPublic { n, e },
        private: Some(RsaPrivate {
            d,
            p,
            q,
            dp,
            dq,
            qi,
        }),
    })
}

impl Key {
    /// A fresh key with a random key id.
    pub fn generate(alg: Algorithm) -> Result<Self, AuthError> {
        Self::generate_with_id(alg, None)
    }

    /// A fresh key with the given key id, or a random one.
    pub fn generate_with_id(alg: Algorithm, kid: Option<String>) -> Result<Self, AuthError> {
        let material = match alg {
            Algorithm::HS256 => Material::Oct { k: random(32)? },
            Algorithm::HS384 => Material::Oct { k: random(48)? },
            Algorithm::HS512 => Material::Oct { k: random(64)? },
            Algorithm::ES256 => ec(Curve::P256)?,
            Algorithm::ES384 => ec(Curve::P384)?,
            Algorithm::EdDSA => ed25519()?,
            _ => rsa()?,
        };
        let kid = match kid {
            Some(kid) => kid,
            None => random_kid()?,
        };
        Self::from_jwk(Jwk {
            alg,
            key_ops: vec![KeyOperation::Sign, KeyOperation::Verify],
            material,
            kid: Some(kid),
            scope: None,
        })
    }
}
