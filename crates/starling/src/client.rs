//! Dialing a relay by URL and starting a client session (shared by publish and subscribe).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use starling_net::{AnyTransport, DialConfig, TlsVerify};
use starling_proto::{Protocol, Role};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

#[derive(Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Relay URL: https:// (WebTransport raced against WebSocket), http:// (the same, pinning
    /// /certificate.sha256 for development), moqt:// or moql:// (raw QUIC), ws:// or wss://
    /// (WebSocket only), tcp:// (plaintext QMux).
    #[arg(long)]
    pub url: Url,
    /// Versions to offer, most preferred first (default: every moq-lite version, then the
    /// IETF drafts 22 to 14, as moq-net offers them; moq-lite-07-wip only when named).
    #[arg(
        long = "version",
        visible_aliases = ["client-version", "connect-version"],
        value_delimiter = ','
    )]
    pub versions: Vec<Protocol>,
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
            Protocol::SUPPORTED.to_vec()
        } else {
            self.versions.clone()
        };
        let alpns = Protocol::alpns(&versions);
        let tls = if self.tls_disable_verify {
            TlsVerify::Disabled
        } else if let Some(root) = &self.tls_root {
            TlsVerify::Roots(root.clone())
        } else {
            TlsVerify::System
        };
        Ok(Dialer {
            url: self.url.clone(),
            dialer: starling_net::Dialer::new(DialConfig::new(&alpns, tls))?,
            versions,
        })
    }
}

/// Dials the relay and starts client sessions.
pub struct Dialer {
    url: Url,
    dialer: starling_net::Dialer,
    /// What is offered, most preferred first (the legacy negotiation offers its share).
    versions: Vec<Protocol>,
}

impl Dialer {
    pub async fn connect(
        &self,
        role: Role,
        mut config: SessionConfig,
    ) -> anyhow::Result<Session<AnyTransport>> {
        let dialed = self
            .dialer
            .dial(&self.url)
            .await
            .with_context(|| format!("connecting to {}", self.url))?;
        if config.hop == 0 {
            config.hop = random_hop();
        }
        let setup = ClientSetup {
            path: dialed.setup_path,
            role: Some(role),
            cost: None,
        };
        let binding = dialed.transport.binding_name();
        let session = Session::connect_negotiated(
            dialed.transport,
            &dialed.protocol,
            &Protocol::lite(&self.versions),
            setup,
            config,
        )
        .await
        .with_context(|| format!("MoQ handshake (protocol {:?})", dialed.protocol))?;
        let version = session.protocol();
        tracing::info!(url = %self.url, %version, binding, "connected");
        Ok(session)
    }

    /// Wait (briefly) until every close has gone out on the wire.
    pub async fn close(&self) {
        self.dialer.close().await;
    }
}
