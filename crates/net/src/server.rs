//! The QUIC server: one UDP endpoint accepting raw-QUIC moq sessions and WebTransport sessions concurrently.

use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;
use web_transport_quinn::proto::ConnectResponse;

use crate::admission::{Admission, Ticket};
use crate::alpn::{select_protocol, Binding, DEFAULT_ALPNS, H3};
use crate::credit::StreamLimits;
use crate::quic::{bind_udp, QuicConfig};
use crate::tls::{ClientCertificate, TlsCertificate, TlsError};
use crate::transport::QuicTransport;

/// The default listen address: UDP port 4443 on every interface, dual-stack.
pub const DEFAULT_BIND: SocketAddr =
    SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 4443, 0, 0));

/// How long a connection may take from its first packet to an established session.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Established sessions waiting for [`Server::accept`].
const ACCEPT_BACKLOG: usize = 64;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("failed to bind UDP {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to create the QUIC endpoint: {0}")]
    Endpoint(#[source] std::io::Error),
    #[error("no tokio runtime: start the server from within one")]
    NoRuntime,
    #[error("no moq ALPN configured")]
    NoAlpn,
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// What the server needs to listen.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// UDP address to bind; `[::]:4443` (dual-stack) by default.
    pub bind: SocketAddr,
    /// The certificate chain and key to present.
    pub certificate: TlsCertificate,
    /// The moq ALPNs / WebTransport protocols served, most preferred first. `h3` is
    /// appended to the TLS ALPN list after them.
    pub alpns: Vec<String>,
    /// QUIC transport knobs.
    pub quic: QuicConfig,
    /// Deadline for the QUIC handshake plus, on WebTransport, the HTTP/3 CONNECT.
    pub handshake_timeout: Duration,
    /// CA certificates a client certificate must chain to (mTLS); clients may still connect
    /// without one. `None`: no client certificates are asked for.
    pub client_roots: Option<Arc<rustls::RootCertStore>>,
    /// The admission gate: a connection it refuses is answered CONNECTION_REFUSED before
    /// any handshake work. `None` admits everything.
    pub admission: Option<Arc<Admission>>,
}

impl ServerConfig {
    /// Defaults: `[::]:4443`, ALPNs `moq-lite-06, moq-lite-05`, moq-tokio's QUIC settings, 10 s handshakes.
    pub fn new(certificate: TlsCertificate) -> Self {
        Self {
            bind: DEFAULT_BIND,
            certificate,
            alpns: DEFAULT_ALPNS.iter().map(|s| s.to_string()).collect(),
            quic: QuicConfig::default(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            client_roots: None,
            admission: None,
        }
    }

    /// Listen on `bind` instead.
    pub fn with_bind(mut self, bind: SocketAddr) -> Self {
        self.bind = bind;
        self
    }

    /// Serve these moq ALPNs, most preferred first.
    pub fn with_alpns<S: AsRef<str>>(mut self, alpns: &[S]) -> Self {
        self.alpns = alpns.iter().map(|s| s.as_ref().to_owned()).collect();
        self
    }
}

/// An established session handed to the application.
#[derive(Debug)]
pub struct Accepted {
    /// The session.
    pub transport: QuicTransport,
    /// The moq version's ALPN: negotiated by TLS on raw QUIC, picked from the client's
    /// `wt-available-protocols` on WebTransport. `None` when a WebTransport client offered
    /// nothing we serve (the session was still answered 200; the caller should close it).
    pub protocol: Option<String>,
    /// Raw QUIC or WebTransport.
    pub binding: Binding,
    /// WebTransport: the CONNECT path plus `?query` when there is one. Raw QUIC: `None`
    /// (the path rides the SETUP message).
    pub path: Option<String>,
    /// The peer's address (IPv4-mapped IPv6 addresses are unmapped).
    pub remote: SocketAddr,
    /// The host the client asked for: the CONNECT authority's host on WebTransport, the
    /// TLS SNI on raw QUIC, when present.
    pub server_name: Option<String>,
    /// The client certificate, verified against the configured client roots, if one was
    /// presented.
    pub client_certificate: Option<ClientCertificate>,
    /// The admission slot this connection holds, from its first packet; keep it for the
    /// session's life.
    pub ticket: Option<Ticket>,
}

/// The QUIC listener. Handshakes run in their own tasks, bounded by the handshake timeout.
pub struct Server {
    endpoint: quinn::Endpoint,
    accepted: Mutex<mpsc::Receiver<Accepted>>,
    driver: JoinHandle<()>,
    certificate: TlsCertificate,
    alpns: Vec<String>,
}

impl Server {
    /// Bind the endpoint and start accepting. Must be called within a tokio runtime.
    pub fn bind(config: ServerConfig) -> Result<Self, ServerError> {
        if config.alpns.iter().all(|a| a == H3) {
            return Err(ServerError::NoAlpn);
        }
        let moq_alpns: Vec<String> = config.alpns.iter().filter(|a| *a != H3).cloned().collect();
        let mut tls_alpns = moq_alpns.clone();
        tls_alpns.push(H3.to_owned());

        let crypto = config
            .certificate
            .server_config(&tls_alpns, config.client_roots.as_ref())?;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
            .map_err(|_| TlsError::NoQuicCipherSuite)?;
        let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server_config.transport_config(config.quic.transport_config());

        let runtime = quinn::default_runtime().ok_or(ServerError::NoRuntime)?;
        let socket = bind_udp(config.bind).map_err(|source| ServerError::Bind {
            addr: config.bind,
            source,
        })?;
        let endpoint = quinn::Endpoint::new(
            crate::cid::endpoint_config(),
            Some(server_config),
            socket,
            runtime,
        )
        .map_err(ServerError::Endpoint)?;

        let (tx, rx) = mpsc::channel(ACCEPT_BACKLOG);
        let driver = tokio::spawn(drive(
            endpoint.clone(),
            Arc::new(moq_alpns.clone()),
            config.handshake_timeout,
            config.quic.stream_limits(),
            config.admission.clone(),
            tx,
        ));

        Ok(Self {
            endpoint,
            accepted: Mutex::new(rx),
            driver,
            certificate: config.certificate,
            alpns: moq_alpns,
        })
    }

    /// The next established session; `None` once the server is closed.
    pub async fn accept(&self) -> Option<Accepted> {
        self.accepted.lock().await.recv().await
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// The certificate presented to clients.
    pub fn certificate(&self) -> &TlsCertificate {
        &self.certificate
    }

    /// The moq ALPNs served, most preferred first (without `h3`).
    pub fn alpns(&self) -> &[String] {
        &self.alpns
    }

    /// The underlying quinn endpoint.
    pub fn endpoint(&self) -> &quinn::Endpoint {
        &self.endpoint
    }

    /// Stop accepting, close every connection with code 0 and wait (up to 3 s) for the
    /// closes to reach the peers.
    pub async fn close(&self) {
        self.endpoint.set_server_config(None);
        self.endpoint
            .close(quinn::VarInt::from_u32(0), b"server shutdown");
        let _ = tokio::time::timeout(Duration::from_secs(3), self.endpoint.wait_idle()).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Sessions already handed out stay up; only accepting stops.
        self.driver.abort();
        self.endpoint.set_server_config(None);
    }
}

/// Accept connections and run each handshake in its own task.
async fn drive(
    endpoint: quinn::Endpoint,
    alpns: Arc<Vec<String>>,
    timeout: Duration,
    limits: StreamLimits,
    admission: Option<Arc<Admission>>,
    tx: mpsc::Sender<Accepted>,
) {
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = tx.closed() => return,
        };
        let Some(incoming) = incoming else { return };
        let now = Instant::now();
        // Strained, an address not yet validated gets a stateless Retry first: one packet,
        // no handshake state, and a spoofed source never comes back.
        let incoming = match &admission {
            Some(gate)
                if !incoming.remote_address_validated()
                    && incoming.may_retry()
                    && gate.wants_retry(now) =>
            {
                match incoming.retry() {
                    Ok(()) => {
                        gate.count_retry();
                        continue;
                    }
                    Err(err) => err.into_incoming(),
                }
            }
            _ => incoming,
        };
        let ticket = match &admission {
            Some(gate) => match gate.admit(canonical(incoming.remote_address()).ip(), now) {
                Ok(ticket) => Some(ticket),
                Err(refusal) => {
                    tracing::debug!(remote = %incoming.remote_address(), reason = refusal.as_str(), "connection refused");
                    incoming.refuse();
                    continue;
                }
            },
            None => None,
        };
        let alpns = alpns.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let remote = incoming.remote_address();
            match tokio::time::timeout(timeout, handshake(incoming, &alpns, limits)).await {
                Ok(Ok(mut accepted)) => {
                    accepted.ticket = ticket;
                    tracing::debug!(
                        %remote,
                        binding = %accepted.binding,
                        protocol = ?accepted.protocol,
                        "accepted session"
                    );
                    // The server is gone when this fails; dropping the session closes it.
                    let _ = tx.send(accepted).await;
                }
                Ok(Err(err)) => tracing::debug!(%remote, %err, "handshake failed"),
                Err(_) => tracing::debug!(%remote, "handshake timed out"),
            }
        });
    }
}

#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    #[error("QUIC: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("no ALPN negotiated")]
    MissingAlpn,
    #[error("unsupported ALPN {0:?}")]
    UnsupportedAlpn(String),
    #[error("WebTransport: {0}")]
    WebTransport(#[from] web_transport_quinn::ServerError),
}

async fn handshake(
    incoming: quinn::Incoming,
    alpns: &[String],
    limits: StreamLimits,
) -> Result<Accepted, HandshakeError> {
    let remote = canonical(incoming.remote_address());
    let mut connecting = incoming.accept()?;
    let data = connecting.handshake_data().await?;
    let data = data
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .map_err(|_| HandshakeError::MissingAlpn)?;
    let alpn = data
        .protocol
        .and_then(|p| String::from_utf8(p).ok())
        .ok_or(HandshakeError::MissingAlpn)?;
    let sni = data.server_name;
    let conn = connecting.await?;
    let client_certificate = conn
        .peer_identity()
        .and_then(|identity| {
            identity
                .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .and_then(|chain| {
            chain
                .first()
                .and_then(|leaf| ClientCertificate::from_der(leaf))
        });

    if alpn == H3 {
        let request = web_transport_quinn::Request::accept(conn).await?;
        let url = request.url.clone();
        let protocol = select_protocol(&request.protocols, alpns);
        let mut response = ConnectResponse::OK;
        if let Some(protocol) = &protocol {
            response = response.with_protocol(protocol.clone());
        }
        let session = request.respond(response).await?;
        Ok(Accepted {
            transport: QuicTransport::with_limits(session, Binding::WebTransport, limits),
            protocol,
            binding: Binding::WebTransport,
            path: Some(path_and_query(&url)),
            remote,
            server_name: url.host_str().map(str::to_owned),
            client_certificate,
            ticket: None,
        })
    } else if alpns.contains(&alpn) {
        let session = web_transport_quinn::Session::raw(conn);
        Ok(Accepted {
            transport: QuicTransport::with_limits(session, Binding::RawQuic, limits),
            protocol: Some(alpn),
            binding: Binding::RawQuic,
            path: None,
            remote,
            server_name: sni,
            client_certificate,
            ticket: None,
        })
    } else {
        // rustls only negotiates what we offered, so this is a configuration mismatch.
        conn.close(quinn::VarInt::from_u32(0), b"unsupported ALPN");
        Err(HandshakeError::UnsupportedAlpn(alpn))
    }
}

/// `path` plus `?query` when the query is non-empty.
pub(crate) fn path_and_query(url: &url::Url) -> String {
    match url.query() {
        Some(query) if !query.is_empty() => format!("{}?{}", url.path(), query),
        _ => url.path().to_owned(),
    }
}

fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}
