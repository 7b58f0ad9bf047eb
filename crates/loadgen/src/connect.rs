//! Dialing a relay by URL, one explicit binding per URL (no racing): `https://`
//! (WebTransport), `http://` (WebTransport after pinning `/certificate.sha256`), `moqt://` or
//! `moql://` (raw QUIC), `ws://` or `wss://` (QMux over WebSocket), `tcp://` (plaintext QMux).
//!
//! QUIC connections are spread round-robin over a few client endpoints (UDP sockets), so a
//! thousand connections do not all queue behind one endpoint driver. Certificate checks are
//! `starling subscribe`'s: the system roots, `--tls-root FILE`, or `--tls-disable-verify`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Args;
use starling_net::qmux::QmuxConnectError;
use starling_net::{AnyTransport, Client, ClientConfig, ClientError, TlsVerify};
use starling_proto::{Role, Version};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

/// How to reach and verify relays.
#[derive(Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Versions to offer, most preferred first (moq-lite-06, moq-lite-05).
    #[arg(long = "client-version", value_delimiter = ',')]
    pub versions: Vec<Version>,
    /// Accept any server certificate (development only).
    #[arg(long)]
    pub tls_disable_verify: bool,
    /// Trust the CA certificates in this PEM file.
    #[arg(long)]
    pub tls_root: Option<PathBuf>,
    /// QUIC client endpoints (UDP sockets) connections are spread over.
    #[arg(long, default_value_t = 8)]
    pub endpoints: usize,
}

impl Default for ConnectArgs {
    fn default() -> Self {
        ConnectArgs {
            versions: Vec::new(),
            tls_disable_verify: false,
            tls_root: None,
            endpoints: 8,
        }
    }
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("QUIC: {0}")]
    Quic(#[from] ClientError),
    #[error("QMux: {0}")]
    Qmux(#[from] QmuxConnectError),
    #[error("the relay negotiated an unsupported protocol {0:?}")]
    Protocol(String),
    #[error("moq-lite handshake: {0}")]
    Handshake(#[from] starling_session::Error),
}

impl ConnectError {
    /// A stable name for counting errors by kind.
    pub fn kind(&self) -> String {
        match self {
            ConnectError::Quic(ClientError::Timeout)
            | ConnectError::Qmux(QmuxConnectError::Timeout) => "connect_timeout".into(),
            ConnectError::Quic(_) => "connect_quic".into(),
            ConnectError::Qmux(QmuxConnectError::HttpStatus(status)) => {
                format!("connect_ws_http_{status}")
            }
            ConnectError::Qmux(_) => "connect_qmux".into(),
            ConnectError::Protocol(_) => "connect_protocol".into(),
            ConnectError::Handshake(_) => "handshake".into(),
        }
    }
}

/// Dials sessions; shared by every task of a run.
pub struct Dialer {
    clients: Vec<Client>,
    next: AtomicUsize,
    alpns: Vec<String>,
    tls: TlsVerify,
}

impl Dialer {
    /// Bind the QUIC endpoints. Must be called within a tokio runtime.
    pub fn new(args: &ConnectArgs) -> Result<Self, ConnectError> {
        let versions = if args.versions.is_empty() {
            Version::SUPPORTED.to_vec()
        } else {
            args.versions.clone()
        };
        let alpns: Vec<String> = versions.iter().map(|v| v.alpn().to_string()).collect();
        let tls = if args.tls_disable_verify {
            TlsVerify::Disabled
        } else if let Some(root) = &args.tls_root {
            TlsVerify::Roots(root.clone())
        } else {
            TlsVerify::System
        };
        let clients = (0..args.endpoints.max(1))
            .map(|_| {
                Client::new(
                    ClientConfig::default()
                        .with_alpns(&alpns)
                        .with_tls(tls.clone()),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Dialer {
            clients,
            next: AtomicUsize::new(0),
            alpns,
            tls,
        })
    }

    /// Dial `url` and run the moq-lite handshake as `role`.
    pub async fn connect(
        &self,
        url: &Url,
        role: Role,
        mut config: SessionConfig,
    ) -> Result<Session<AnyTransport>, ConnectError> {
        let (transport, protocol, setup_path) = match url.scheme() {
            "ws" | "wss" | "tcp" => {
                let connected = starling_net::qmux::connect(url, &self.alpns, &self.tls).await?;
                (
                    AnyTransport::Qmux(connected.transport),
                    connected.protocol,
                    connected.setup_path,
                )
            }
            _ => {
                let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
                let connected = self.clients[i].connect(url).await?;
                (
                    AnyTransport::Quic(connected.transport),
                    connected.protocol,
                    connected.setup_path,
                )
            }
        };
        let version =
            Version::from_alpn(&protocol).ok_or_else(|| ConnectError::Protocol(protocol))?;
        if config.hop == 0 {
            config.hop = random_hop();
        }
        let setup = ClientSetup {
            path: setup_path,
            role: Some(role),
            cost: None,
        };
        Ok(Session::connect(transport, version, setup, config).await?)
    }

    /// Close every QUIC endpoint, waiting briefly for the closes to go out.
    pub async fn close(&self) {
        futures::future::join_all(self.clients.iter().map(Client::close)).await;
    }
}

/// `url` with another scheme (`ws`, `http`), keeping host, port, path and query.
pub fn with_scheme(url: &Url, scheme: &str) -> Option<Url> {
    let host = url.host_str()?;
    let port = url.port_or_known_default().unwrap_or(443);
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    Url::parse(&format!("{scheme}://{host}:{port}{}{query}", url.path())).ok()
}
