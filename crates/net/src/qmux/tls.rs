//! The TLS client configuration for `wss://`, verifying as the client's `TlsVerify` says.

use crate::client::TlsVerify;
use crate::tls::provider;

/// A TLS 1.2/1.3 client config for HTTP/1.1 (the WebSocket upgrade) with that verifier.
pub(crate) fn client_config(tls: &TlsVerify) -> Result<rustls::ClientConfig, String> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(crate::verify::for_tls(tls)?)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
