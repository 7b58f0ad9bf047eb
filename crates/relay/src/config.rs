//! What the relay is configured with.

use std::net::SocketAddr;
use std::path::PathBuf;

use starling_model::Limits;
use starling_proto::Version;
use starling_session::SessionLimits;

/// Where the relay's certificate comes from.
#[derive(Clone, Debug)]
pub enum TlsSource {
    /// PEM certificate chain and private key files.
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed certificate for these hostnames (valid ≤ 14 days).
    Generate(Vec<String>),
}

#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// UDP (QUIC + WebTransport) address; TCP (HTTP) binds the same port number.
    pub bind: SocketAddr,
    pub tls: TlsSource,
    /// Versions served, most preferred first.
    pub versions: Vec<Version>,
    pub session_limits: SessionLimits,
    /// Cache and group bounds for every track the relay holds.
    pub model_limits: Limits,
    /// Serve HTTP on the TCP port with the same number.
    pub http: bool,
    /// How long sessions get to leave after GOAWAY when the relay shuts down.
    pub drain_timeout: std::time::Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            bind: "[::]:4443".parse().expect("valid default bind"),
            tls: TlsSource::Generate(vec!["localhost".to_string()]),
            versions: Version::SUPPORTED.to_vec(),
            session_limits: SessionLimits::default(),
            model_limits: Limits::default(),
            http: true,
            drain_timeout: std::time::Duration::from_secs(5),
        }
    }
}
