//! Dialing a relay by URL: the one place where a URL's scheme picks the binding.
//!
//! * `https://` and `http://`: WebTransport, raced against the WebSocket fallback (QUIC
//!   first, the WebSocket dial [`RACE_HEAD_START`] later, as moq-dev's client does) unless
//!   racing is off; `http://` pins the certificate fetched from `/certificate.sha256`.
//! * `ws://`, `wss://`: QMux over WebSocket; `tcp://`: plaintext QMux.
//! * `moqt://`, `moql://`: raw QUIC.
//!
//! QUIC connections are spread round-robin over the dialer's client endpoints (UDP sockets),
//! so many connections do not queue behind one endpoint driver.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use url::Url;

use crate::qmux::QmuxConnectError;
use crate::{AnyTransport, Client, ClientConfig, ClientError, QuicConfig, TlsVerify};

/// How long QUIC leads before the WebSocket fallback is dialed too (RFC 8305's stagger).
pub const RACE_HEAD_START: Duration = Duration::from_millis(250);

/// What a [`Dialer`] offers and how it verifies.
#[derive(Clone, Debug)]
pub struct DialConfig {
    /// moq ALPNs / WebTransport protocols offered, most preferred first.
    pub alpns: Vec<String>,
    pub tls: TlsVerify,
    /// QUIC transport knobs (idle timeout, keep-alives, windows).
    pub quic: QuicConfig,
    /// QUIC client endpoints connections are spread over (at least one).
    pub endpoints: usize,
    /// Race `https://`/`http://` against the WebSocket fallback; off, they dial QUIC only.
    pub race: bool,
    /// A certificate to present when the server asks for one (mTLS; QUIC bindings).
    pub identity: Option<crate::tls::TlsCertificate>,
}

impl DialConfig {
    pub fn new<S: AsRef<str>>(alpns: &[S], tls: TlsVerify) -> Self {
        DialConfig {
            alpns: alpns.iter().map(|a| a.as_ref().to_owned()).collect(),
            tls,
            quic: QuicConfig::default(),
            endpoints: 1,
            race: true,
            identity: None,
        }
    }
}

/// Why a dial failed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("QUIC: {0}")]
    Quic(#[from] ClientError),
    #[error("QMux: {0}")]
    Qmux(#[from] QmuxConnectError),
    #[error("{first}; WebSocket fallback: {fallback}")]
    Raced {
        first: Box<DialError>,
        fallback: Box<DialError>,
    },
}

impl DialError {
    /// Whether the dial timed out (on every binding tried).
    pub fn is_timeout(&self) -> bool {
        match self {
            DialError::Quic(ClientError::Timeout) | DialError::Qmux(QmuxConnectError::Timeout) => {
                true
            }
            DialError::Raced { first, fallback } => first.is_timeout() && fallback.is_timeout(),
            _ => false,
        }
    }

    /// When the server's admission refused the connection cleanly (QUIC CONNECTION_REFUSED,
    /// WebSocket 503): how long it asked the client to wait before trying again (QUIC carries
    /// no such hint; one second, what the relay's WebSocket refusals say). `None` for any
    /// other failure.
    pub fn refusal(&self) -> Option<Duration> {
        match self {
            DialError::Qmux(err) => err.refusal(),
            DialError::Quic(err) => err.refusal(),
            DialError::Raced { first, fallback } => fallback.refusal().or_else(|| first.refusal()),
        }
    }
}

/// A connected transport, before the moq-lite handshake.
pub struct Dialed {
    pub transport: AnyTransport,
    /// The negotiated moq ALPN.
    pub protocol: String,
    /// What to send as SETUP's Path parameter (bindings without a request URL).
    pub setup_path: Option<String>,
}

/// Dials relays; cheap to share.
pub struct Dialer {
    clients: Vec<Client>,
    next: AtomicUsize,
    config: DialConfig,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("endpoints", &self.clients.len())
            .field("alpns", &self.config.alpns)
            .field("race", &self.config.race)
            .finish()
    }
}

impl Dialer {
    /// Bind the QUIC endpoints. Must be called within a tokio runtime.
    pub fn new(config: DialConfig) -> Result<Self, ClientError> {
        let client_config = ClientConfig {
            quic: config.quic.clone(),
            identity: config.identity.clone(),
            ..ClientConfig::default()
                .with_alpns(&config.alpns)
                .with_tls(config.tls.clone())
        };
        let clients = (0..config.endpoints.max(1))
            .map(|_| Client::new(client_config.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Dialer {
            clients,
            next: AtomicUsize::new(0),
            config,
        })
    }

    /// Connect to `url` on the binding its scheme names.
    pub async fn dial(&self, url: &Url) -> Result<Dialed, DialError> {
        match url.scheme() {
            "ws" | "wss" | "tcp" => self.dial_qmux(url).await,
            "https" | "http" if self.config.race => {
                let mut websocket_url = url.clone();
                let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
                // Both schemes are "special" in the URL standard, so the swap cannot fail.
                let _ = websocket_url.set_scheme(scheme);
                let quic = self.dial_quic(url);
                let websocket = async {
                    tokio::time::sleep(RACE_HEAD_START).await;
                    self.dial_qmux(&websocket_url).await
                };
                race(quic, websocket).await
            }
            _ => self.dial_quic(url).await,
        }
    }

    async fn dial_quic(&self, url: &Url) -> Result<Dialed, DialError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        let connected = self.clients[i].connect(url).await?;
        Ok(Dialed {
            transport: AnyTransport::Quic(connected.transport),
            protocol: connected.protocol,
            setup_path: connected.setup_path,
        })
    }

    async fn dial_qmux(&self, url: &Url) -> Result<Dialed, DialError> {
        let connected = crate::qmux::connect(url, &self.config.alpns, &self.config.tls).await?;
        Ok(Dialed {
            transport: AnyTransport::Qmux(connected.transport),
            protocol: connected.protocol,
            setup_path: connected.setup_path,
        })
    }

    /// Close every QUIC endpoint, waiting briefly for the closes to go out.
    pub async fn close(&self) {
        futures::future::join_all(self.clients.iter().map(Client::close)).await;
    }
}

/// The first of two dials to succeed; when one fails, the other still gets its chance.
async fn race<A, B>(first: A, second: B) -> Result<Dialed, DialError>
where
    A: std::future::Future<Output = Result<Dialed, DialError>>,
    B: std::future::Future<Output = Result<Dialed, DialError>>,
{
    tokio::pin!(first);
    tokio::pin!(second);
    let raced = |first: DialError, fallback: DialError| DialError::Raced {
        first: Box::new(first),
        fallback: Box::new(fallback),
    };
    tokio::select! {
        result = &mut first => match result {
            Ok(dialed) => Ok(dialed),
            Err(err) => second.await.map_err(|fallback| raced(err, fallback)),
        },
        result = &mut second => match result {
            Ok(dialed) => Ok(dialed),
            Err(fallback) => first.await.map_err(|err| raced(err, fallback)),
        },
    }
}
