//! Dialing a relay by URL and starting a client session (shared by publish and subscribe).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use starling_net::{Client, ClientConfig, QuicTransport, TlsVerify};
use starling_proto::{Role, Version};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

#[derive(Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Relay URL: https:// (WebTransport), http:// (dev: pins /certificate.sha256),
    /// moqt:// or moql:// (raw QUIC).
    #[arg(long)]
    pub url: Url,
    /// Versions to offer, most preferred first (moq-lite-06, moq-lite-05).
    #[arg(long = "client-version", value_delimiter = ',')]
    pub versions: Vec<Version>,
    /// Accept any server certificate (development only).
    #[arg(long)]
    pub tls_disable_verify: bool,
    /// Trust the CA certificates in this PEM file.
    #[arg(long)]
    pub tls_root: Option<PathBuf>,
}

/// Waits between reconnect attempts: 1 s doubling to 10 s, reset after a session that lasted.
pub struct Backoff {
    next: std::time::Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: std::time::Duration::from_secs(1),
        }
    }
}

impl Backoff {
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(std::time::Duration::from_secs(10));
    }

    pub fn reset(&mut self) {
        *self = Backoff::default();
    }
}

impl ConnectArgs {
    /// A dialer for these arguments: one QUIC endpoint reused across reconnects.
    pub fn dialer(&self) -> anyhow::Result<Dialer> {
        let versions = if self.versions.is_empty() {
            Version::SUPPORTED.to_vec()
        } else {
            self.versions.clone()
        };
        let alpns: Vec<&str> = versions.iter().map(|v| v.alpn()).collect();
        let tls = if self.tls_disable_verify {
            TlsVerify::Disabled
        } else if let Some(root) = &self.tls_root {
            TlsVerify::Roots(root.clone())
        } else {
            TlsVerify::System
        };
        let client = Client::new(ClientConfig::default().with_alpns(&alpns).with_tls(tls))?;
        Ok(Dialer {
            url: self.url.clone(),
            client,
        })
    }
}

/// Dials the relay and starts client sessions.
pub struct Dialer {
    url: Url,
    client: Client,
}

impl Dialer {
    pub async fn connect(
        &self,
        role: Role,
        mut config: SessionConfig,
    ) -> anyhow::Result<Session<QuicTransport>> {
        let connected = self
            .client
            .connect(&self.url)
            .await
            .with_context(|| format!("connecting to {}", self.url))?;
        let version = Version::from_alpn(&connected.protocol)
            .with_context(|| format!("unsupported protocol {}", connected.protocol))?;
        if config.hop == 0 {
            config.hop = random_hop();
        }
        let setup = ClientSetup {
            path: connected.setup_path.clone(),
            role: Some(role),
            cost: None,
        };
        let session = Session::connect(connected.transport, version, setup, config)
            .await
            .context("moq-lite handshake")?;
        tracing::info!(url = %self.url, %version, "connected");
        Ok(session)
    }

    /// Wait (briefly) until every close has gone out on the wire.
    pub async fn close(&self) {
        self.client.close().await;
    }
}
