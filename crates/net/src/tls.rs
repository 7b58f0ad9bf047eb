//! TLS material: PEM loading, self-signed certificate generation, SHA-256 fingerprints, and the crypto provider.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// The longest validity browsers accept for `serverCertificateHashes`: 14 days.
pub const MAX_SELF_SIGNED_VALIDITY: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// Hostname used when generating a certificate without any.
pub const DEFAULT_HOSTNAME: &str = "localhost";

/// Why TLS material could not be loaded or built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid PEM in {path}: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("no certificate found in {0}")]
    NoCertificate(PathBuf),
    #[error("no private key found in {0}")]
    NoPrivateKey(PathBuf),
    #[error("certificate generation failed: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("self-signed validity must be between 1 second and 14 days, got {0:?}")]
    Validity(Duration),
    #[error("system clock out of range for certificate generation")]
    Clock,
    #[error("rustls: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("TLS config has no cipher suite usable for QUIC")]
    NoQuicCipherSuite,
    #[error("client certificate roots: {0}")]
    ClientRoots(String),
}

/// A client certificate the listener verified against its client roots (mTLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCertificate {
    /// The first DNS name of the subject alternative names, else the subject's common name.
    pub name: Option<String>,
    /// SHA-256 of the leaf, lowercase hex.
    pub fingerprint: String,
    /// The issuer's distinguished name.
    pub issuer: String,
    /// The end of its validity, as unix seconds.
    pub expires: i64,
}

impl ClientCertificate {
    /// What a verified leaf certificate says; `None` when it does not parse (rustls already
    /// verified it, so that does not happen in practice).
    pub fn from_der(der: &[u8]) -> Option<ClientCertificate> {
        use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        let san = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .and_then(|san| {
                san.value.general_names.iter().find_map(|name| match name {
                    GeneralName::DNSName(dns) => Some(dns.to_string()),
                    _ => None,
                })
            });
        let cn = || {
            cert.subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok())
                .map(str::to_string)
        };
        Some(ClientCertificate {
            name: san.or_else(cn),
            fingerprint: hex::encode(sha256(der)),
            issuer: cert.issuer().to_string(),
            expires: cert.validity().not_after.timestamp(),
        })
    }
}

/// The aws-lc-rs crypto provider every config in this crate is built with, independent
/// of whatever process-wide default (if any) was installed. TLS_AES_128_GCM_SHA256 comes
/// first: every TLS 1.3 peer has it (QUIC's Initial packets use it), and its SHA-256 key
/// schedule and AES-128 packet protection cost less per handshake and per packet than the
/// AES-256/SHA-384 suite aws-lc-rs lists first, on the relay and on the load generator.
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            let mut provider = rustls::crypto::aws_lc_rs::default_provider();
            provider.cipher_suites.sort_by_key(|suite| {
                suite.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
            });
            Arc::new(provider)
        })
        .clone()
}

/// Install aws-lc-rs as the process-wide rustls default if none is installed yet, for
/// libraries that consult the default (returns false when another one was already there).
pub fn install_default_provider() -> bool {
    rustls::crypto::aws_lc_rs::default_provider()
        .install_default()
        .is_ok()
}

/// SHA-256 over a DER certificate.
pub fn sha256(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// A certificate chain, its private key, and the leaf's SHA-256 fingerprint.
#[derive(Debug)]
pub struct TlsCertificate {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    fingerprint: [u8; 32],
    not_after: Option<OffsetDateTime>,
}

impl Clone for TlsCertificate {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            fingerprint: self.fingerprint,
            not_after: self.not_after,
        }
    }
}

impl TlsCertificate {
    /// Build from a DER chain (leaf first) and its key.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Self, TlsError> {
        let leaf = chain
            .first()
            .ok_or_else(|| TlsError::NoCertificate(PathBuf::from("<memory>")))?;
        let fingerprint = sha256(leaf);
        Ok(Self {
            chain,
            key,
            fingerprint,
            not_after: None,
        })
    }

    /// Load a PEM certificate chain (leaf first) and a PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn load_pem(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Result<Self, TlsError> {
        let (cert, key) = (cert.as_ref(), key.as_ref());
        let cert_pem = read(cert)?;
        let key_pem = read(key)?;

        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Pem {
                path: cert.to_owned(),
                message: e.to_string(),
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate(cert.to_owned()));
        }

        let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoPrivateKey(key.to_owned()),
            e => TlsError::Pem {
                path: key.to_owned(),
                message: e.to_string(),
            },
        })?;

        Self::new(chain, key_der)
    }

    /// Generate a self-signed ECDSA P-256 certificate for `hostnames` (DNS names or IP
    /// literals; `localhost` when empty), valid for 14 days from now.
    pub fn self_signed<S: AsRef<str>>(hostnames: &[S]) -> Result<Self, TlsError> {
        Self::self_signed_for(hostnames, MAX_SELF_SIGNED_VALIDITY)
    }

    /// Like [`Self::self_signed`] with a chosen validity, at most 14 days.
    pub fn self_signed_for<S: AsRef<str>>(
        hostnames: &[S],
        validity: Duration,
    ) -> Result<Self, TlsError> {
        if validity.is_zero() || validity > MAX_SELF_SIGNED_VALIDITY {
            return Err(TlsError::Validity(validity));
        }
        let mut names: Vec<String> = hostnames.iter().map(|h| h.as_ref().to_owned()).collect();
        if names.is_empty() {
            names.push(DEFAULT_HOSTNAME.to_owned());
        }

        let key_pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let mut params = rcgen::CertificateParams::new(names.clone())?;
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CommonName, names[0].clone());
        params.distinguished_name = dn;

        // Whole seconds, so the encoded validity is exactly `validity`, never a bit more.
        let now = OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .map_err(|_| TlsError::Clock)?;
        let validity = time::Duration::try_from(validity).map_err(|_| TlsError::Clock)?;
        params.not_before = now;
        params.not_after = now.checked_add(validity).ok_or(TlsError::Clock)?;

        let cert = params.self_signed(&key_pair)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
        let mut this = Self::new(vec![cert.der().clone()], key)?;
        this.not_after = Some(params.not_after);
        Ok(this)
    }

    /// The chain, leaf first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The private key.
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }

    /// SHA-256 of the leaf certificate's DER.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// SHA-256 of the leaf certificate, lowercase hex (what `/certificate.sha256` serves).
    pub fn fingerprint_hex(&self) -> String {
        hex::encode(self.fingerprint)
    }

    /// Expiry of a certificate generated here; `None` for loaded ones.
    pub fn not_after(&self) -> Option<OffsetDateTime> {
        self.not_after
    }

    /// A rustls server config (TLS 1.3 only, aws-lc-rs) offering `alpns` in this order. With
    /// `client_roots`, clients may present a certificate, which must chain to one of them
    /// (mTLS); clients without one are still served.
    pub(crate) fn server_config<S: AsRef<str>>(
        &self,
        alpns: &[S],
        client_roots: Option<&Arc<rustls::RootCertStore>>,
    ) -> Result<rustls::ServerConfig, TlsError> {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let builder = match client_roots {
            Some(roots) => {
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    roots.clone(),
                    provider(),
                )
                .allow_unauthenticated()
                .build()
                .map_err(|err| TlsError::ClientRoots(err.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(self.chain.clone(), self.key.clone_key())?;
        // The relay picks the suite by its own order ([`provider`]), not the client's.
        config.ignore_client_order = true;
        config.alpn_protocols = alpns
            .iter()
            .map(|a| a.as_ref().as_bytes().to_vec())
            .collect();
        Ok(config)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Parse a hex SHA-256 fingerprint (case-insensitive; `:` separators and surrounding
/// whitespace tolerated).
pub fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let cleaned: String = text
        .trim()
        .chars()
        .filter(|c| *c != ':' && !c.is_whitespace())
        .collect();
    let bytes = hex::decode(cleaned).ok()?;
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificate_fingerprint() {
        let cert = TlsCertificate::self_signed(&["localhost", "127.0.0.1"]).unwrap();
        assert_eq!(cert.fingerprint(), sha256(&cert.chain()[0]));
        assert_eq!(cert.fingerprint_hex().len(), 64);
        assert_eq!(
            cert.fingerprint_hex(),
            cert.fingerprint_hex().to_lowercase()
        );
        assert_eq!(
            parse_fingerprint(&format!("{}\n", cert.fingerprint_hex())),
            Some(cert.fingerprint())
        );
    }

    #[test]
    fn validity_is_capped() {
        let too_long = MAX_SELF_SIGNED_VALIDITY + Duration::from_secs(1);
        assert!(matches!(
            TlsCertificate::self_signed_for(&["a"], too_long),
            Err(TlsError::Validity(_))
        ));
    }

    #[test]
    fn pem_round_trip() {
        let dir = std::env::temp_dir().join(format!("starling-net-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key_pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["example.test".to_string()])
            .unwrap()
            .self_signed(&key_pair)
            .unwrap();
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key_pair.serialize_pem()).unwrap();

        let loaded = TlsCertificate::load_pem(&cert_path, &key_path).unwrap();
        assert_eq!(loaded.fingerprint(), sha256(cert.der()));
        assert!(matches!(
            TlsCertificate::load_pem(&key_path, &key_path),
            Err(TlsError::NoCertificate(_))
        ));
        assert!(matches!(
            TlsCertificate::load_pem(&cert_path, &cert_path),
            Err(TlsError::NoPrivateKey(_))
        ));
        std::fs::remove_dir_all(&dir).ok();
    }
}
