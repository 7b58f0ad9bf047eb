//! Certificate verification for `wss://`, following the client's `TlsVerify` choice.
//!
//! Mirrors `client.rs`'s private verifier construction (system roots, a roots file, pins or
//! none), which that module does not expose.

use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::client::TlsVerify;
use crate::tls::provider;
use crate::verify::{NoVerifier, PinnedVerifier};

/// A verifier for `tls`, or why it cannot be built.
pub(crate) fn verifier(tls: &TlsVerify) -> Result<Arc<dyn ServerCertVerifier>, String> {
    let roots = match tls {
        TlsVerify::Disabled => return Ok(Arc::new(NoVerifier::new(provider()))),
        TlsVerify::PinnedSha256(pins) => {
            return Ok(Arc::new(PinnedVerifier::new(provider(), pins.clone())))
        }
        TlsVerify::System => {
            let native = rustls_native_certs::load_native_certs();
            let mut roots = rustls::RootCertStore::empty();
            roots.add_parsable_certificates(native.certs);
            roots
        }
        TlsVerify::Roots(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            roots
        }
    };
    rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map(|v| v as Arc<dyn ServerCertVerifier>)
        .map_err(|e| e.to_string())
}

/// A TLS 1.2/1.3 client config for HTTP/1.1 (the WebSocket upgrade) with that verifier.
pub(crate) fn client_config(tls: &TlsVerify) -> Result<rustls::ClientConfig, String> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier(tls)?)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
