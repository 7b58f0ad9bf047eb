//! Dialing a relay by URL and starting a client session (shared by publish and subscribe).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use std::time::Duration;

use starling_net::{AnyTransport, Client, ClientConfig, TlsVerify};
use starling_proto::{Role, Version};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

#[derive(Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Relay URL: https:// (WebTransport raced against WebSocket), http:// (the same, pinning
    /// /certificate.sha256 for development), moqt:// or moql:// (raw QUIC), ws:// or wss://
    /// (WebSocket only), tcp:// (plaintext QMux).
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
        let client = Client::new(
            ClientConfig::default()
                .with_alpns(&alpns)
                .with_tls(tls.clone()),
        )?;
        Ok(Dialer {
            url: self.url.clone(),
            alpns: alpns.iter().map(|a| a.to_string()).collect(),
            tls,
            client,
        })
    }
}

/// How long QUIC leads before the WebSocket fallback is dialed too (RFC 8305's stagger, as
/// moq-dev's client uses).
const RACE_HEAD_START: Duration = Duration::from_millis(250);

/// Dials the relay and starts client sessions.
pub struct Dialer {
    url: Url,
    alpns: Vec<String>,
    tls: TlsVerify,
    client: Client,
}

/// A connected transport, before the moq-lite handshake.
struct Dialed {
    transport: AnyTransport,
    protocol: String,
    setup_path: Option<String>,
}

impl Dialer {
    pub async fn connect(
        &self,
        role: Role,
        mut config: SessionConfig,
    ) -> anyhow::Result<Session<AnyTransport>> {
        let dialed = self.dial().await?;
        let version = Version::from_alpn(&dialed.protocol)
            .with_context(|| format!("unsupported protocol {}", dialed.protocol))?;
        if config.hop == 0 {
            config.hop = random_hop();
        }
        let setup = ClientSetup {
            path: dialed.setup_path,
            role: Some(role),
            cost: None,
        };
        let binding = dialed.transport.binding_name();
        let session = Session::connect(dialed.transport, version, setup, config)
            .await
            .context("moq-lite handshake")?;
        tracing::info!(url = %self.url, %version, binding, "connected");
        Ok(session)
    }

    /// `https://` and `http://` race WebTransport against the WebSocket fallback, QUIC first;
    /// `ws://`, `wss://` and `tcp://` dial QMux only; `moqt://` and `moql://` raw QUIC only.
    async fn dial(&self) -> anyhow::Result<Dialed> {
        match self.url.scheme() {
            "ws" | "wss" | "tcp" => self.dial_qmux(&self.url).await,
            "https" | "http" => {
                let mut websocket_url = self.url.clone();
                let scheme = if self.url.scheme() == "https" {
                    "wss"
                } else {
                    "ws"
                };
                websocket_url
                    .set_scheme(scheme)
                    .map_err(|_| anyhow::anyhow!("cannot derive a WebSocket URL"))?;
                let quic = self.dial_quic();
                let websocket = async {
                    tokio::time::sleep(RACE_HEAD_START).await;
                    self.dial_qmux(&websocket_url).await
                };
                race(quic, websocket).await
            }
            _ => self.dial_quic().await,
        }
    }

    async fn dial_quic(&self) -> anyhow::Result<Dialed> {
        let connected = self
            .client
            .connect(&self.url)
            .await
            .with_context(|| format!("connecting to {}", self.url))?;
        Ok(Dialed {
            transport: AnyTransport::Quic(connected.transport),
            protocol: connected.protocol,
            setup_path: connected.setup_path,
        })
    }

    async fn dial_qmux(&self, url: &Url) -> anyhow::Result<Dialed> {
        let connected = starling_net::qmux::connect(url, &self.alpns, &self.tls)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        Ok(Dialed {
            transport: AnyTransport::Qmux(connected.transport),
            protocol: connected.protocol,
            setup_path: connected.setup_path,
        })
    }

    /// Wait (briefly) until every close has gone out on the wire.
    pub async fn close(&self) {
        self.client.close().await;
    }
}

/// The first of two dials to succeed; when one fails, the other still gets its chance.
async fn race<A, B>(first: A, second: B) -> anyhow::Result<Dialed>
where
    A: std::future::Future<Output = anyhow::Result<Dialed>>,
    B: std::future::Future<Output = anyhow::Result<Dialed>>,
{
    tokio::pin!(first);
    tokio::pin!(second);
    tokio::select! {
        result = &mut first => match result {
            Ok(dialed) => Ok(dialed),
            Err(err) => second.await.map_err(|fallback| err.context(format!("fallback: {fallback:#}"))),
        },
        result = &mut second => match result {
            Ok(dialed) => Ok(dialed),
            Err(fallback) => first.await.map_err(|err| err.context(format!("fallback: {fallback:#}"))),
        },
    }
}
