//! Server certificate verifiers for pinned SHA-256 fingerprints and for disabled verification.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

/// Accepts a server whose leaf certificate hashes (SHA-256 over DER) to one of the pins.
/// The handshake signature is still verified against that certificate's key, so the peer
/// must hold the private key.
#[derive(Debug)]
pub(crate) struct PinnedVerifier {
    provider: Arc<CryptoProvider>,
    pins: Vec<[u8; 32]>,
}

impl PinnedVerifier {
    pub(crate) fn new(provider: Arc<CryptoProvider>, pins: Vec<[u8; 32]>) -> Self {
        Self { provider, pins }
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let hash = crate::tls::sha256(end_entity);
        if self.pins.contains(&hash) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Accepts any certificate (development and load generation only). The handshake's
/// signature is not checked either: with any certificate accepted it proves nothing (a
/// man in the middle signs with a key of its own), and checking it was the largest part of
/// a load generator's handshake.
#[derive(Debug)]
pub(crate) struct NoVerifier {
    provider: Arc<CryptoProvider>,
}

impl NoVerifier {
    pub(crate) fn new(provider: Arc<CryptoProvider>) -> Self {
        Self { provider }
    }
}

impl ServerCertVerifier for NoVerifier {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The verifier a [`TlsVerify`](crate::TlsVerify) choice asks for: none, pins, the system
/// roots or a roots file; `Err` says why it cannot be built.
pub(crate) fn for_tls(
    tls: &crate::TlsVerify,
) -> Result<std::sync::Arc<dyn rustls::client::danger::ServerCertVerifier>, String> {
    use std::sync::Arc;

    use crate::tls::provider;
    use crate::TlsVerify;

    let roots = match tls {
        TlsVerify::Disabled => return Ok(Arc::new(NoVerifier::new(provider()))),
        TlsVerify::PinnedSha256(pins) => {
            return Ok(Arc::new(PinnedVerifier::new(provider(), pins.clone())))
        }
        TlsVerify::System => {
            let native = rustls_native_certs::load_native_certs();
            for err in &native.errors {
                tracing::warn!(%err, "failed to load a system root certificate");
            }
            let mut roots = rustls::RootCertStore::empty();
            let (added, ignored) = roots.add_parsable_certificates(native.certs);
            if ignored > 0 {
                tracing::debug!(added, ignored, "ignored unparsable system roots");
            }
            roots
        }
        TlsVerify::Roots(path) => load_roots(path)?,
    };
    rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map(|v| v as Arc<dyn rustls::client::danger::ServerCertVerifier>)
        .map_err(|e| e.to_string())
}

/// The CA certificates in a PEM file, as a root store (server roots for a dialer, client
/// roots for a listener taking client certificates).
pub fn load_roots(path: &std::path::Path) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if roots.is_empty() {
        return Err(format!("{}: no certificate", path.display()));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::TlsCertificate;

    #[test]
    fn pins_match_only_the_leaf_hash() {
        let cert = TlsCertificate::self_signed(&["localhost"]).unwrap();
        let other = TlsCertificate::self_signed(&["localhost"]).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let verifier = PinnedVerifier::new(crate::tls::provider(), vec![cert.fingerprint()]);
        assert!(verifier
            .verify_server_cert(&cert.chain()[0], &[], &name, &[], UnixTime::now())
            .is_ok());
        assert!(verifier
            .verify_server_cert(&other.chain()[0], &[], &name, &[], UnixTime::now())
            .is_err());
    }
}
