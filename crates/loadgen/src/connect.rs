//! Dialing a relay by URL, one explicit binding per URL (no racing): `https://`
//! (WebTransport), `http://` (WebTransport after pinning `/certificate.sha256`), `moqt://` or
//! `moql://` (raw QUIC), `ws://` or `wss://` (QMux over WebSocket), `tcp://` (plaintext QMux).
//!
//! QUIC connections are spread round-robin over a few client endpoints (UDP sockets), so a
//! thousand connections do not all queue behind one endpoint driver. Certificate checks are
//! `starling subscribe`'s: the system roots, `--tls-root FILE`, or `--tls-disable-verify`.

use std::path::PathBuf;

use clap::Args;
use starling_net::qmux::QmuxConnectError;
use starling_net::{AnyTransport, ClientError, DialConfig, DialError, TlsVerify};
use starling_proto::{Protocol, Role};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

/// How to reach and verify relays.
#[derive(Args, Clone, Debug)]
pub struct ConnectArgs {
    /// Versions to offer, most preferred first (default: every moq-lite version, then the IETF
    /// drafts 22 to 14, as moq-net offers them; moq-lite-07-wip only when named).
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
    #[error("client endpoint: {0}")]
    Endpoint(#[from] ClientError),
    #[error("{0}")]
    Dial(#[from] DialError),
    #[error("the relay negotiated an unsupported protocol {0:?}")]
    Protocol(String),
    #[error("moq-lite handshake: {0}")]
    Handshake(#[from] starling_session::Error),
}

impl ConnectError {
    /// When the relay's admission refused the connection cleanly: the wait it asked for
    /// (see [`DialError::refusal`]).
    pub fn refusal(&self) -> Option<std::time::Duration> {
        match self {
            ConnectError::Dial(err) => err.refusal(),
            _ => None,
        }
    }

    /// A stable name for counting errors by kind.
    pub fn kind(&self) -> String {
        match self {
            ConnectError::Dial(err) if err.is_timeout() => "connect_timeout".into(),
            ConnectError::Dial(DialError::Qmux(QmuxConnectError::HttpStatus(status))) => {
                format!("connect_ws_http_{status}")
            }
            ConnectError::Dial(DialError::Qmux(_)) => "connect_qmux".into(),
            ConnectError::Dial(_) | ConnectError::Endpoint(_) => "connect_quic".into(),
            ConnectError::Protocol(_) => "connect_protocol".into(),
            ConnectError::Handshake(_) => "handshake".into(),
        }
    }
}

/// Dials sessions; shared by every task of a run. One explicit binding per URL: no racing.
pub struct Dialer {
    dialer: starling_net::Dialer,
    /// What is offered, most preferred first (the legacy negotiation offers its share).
    versions: Vec<Protocol>,
}

impl Dialer {
    /// Bind the QUIC endpoints. Must be called within a tokio runtime.
    pub fn new(args: &ConnectArgs) -> Result<Self, ConnectError> {
        let versions = if args.versions.is_empty() {
            Protocol::SUPPORTED.to_vec()
        } else {
            args.versions.clone()
        };
        let alpns = Protocol::alpns(&versions);
        let tls = if args.tls_disable_verify {
            TlsVerify::Disabled
        } else if let Some(root) = &args.tls_root {
            TlsVerify::Roots(root.clone())
        } else {
            TlsVerify::System
        };
        let config = DialConfig {
            endpoints: args.endpoints,
            race: false,
            ..DialConfig::new(&alpns, tls)
        };
        Ok(Dialer {
            dialer: starling_net::Dialer::new(config)?,
            versions,
        })
    }

    /// Dial `url` and run the moq-lite handshake as `role`.
    pub async fn connect(
        &self,
        url: &Url,
        role: Role,
        mut config: SessionConfig,
    ) -> Result<Session<AnyTransport>, ConnectError> {
        let dialed = self.dialer.dial(url).await?;
        if config.hop == 0 {
            config.hop = random_hop();
        }
        let setup = ClientSetup {
            path: dialed.setup_path,
            role: Some(role),
            cost: None,
        };
        Session::connect_negotiated(
            dialed.transport,
            &dialed.protocol,
            &Protocol::lite(&self.versions),
            setup,
            config,
        )
        .await
        .map_err(|err| match err {
            starling_session::Error::Version => ConnectError::Protocol(dialed.protocol.clone()),
            err => err.into(),
        })
    }

    /// Close every QUIC endpoint, waiting briefly for the closes to go out.
    pub async fn close(&self) {
        self.dialer.close().await;
    }
}

/// `url` with another scheme (`ws`, `http`), keeping host, port, path and query.
pub fn with_scheme(url: &Url, scheme: &str) -> Option<Url> {
    let host = url.host_str()?;
    let port = url.port_or_known_default().unwrap_or(443);
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    Url::parse(&format!("{scheme}://{host}:{port}{}{query}", url.path())).ok()
}
