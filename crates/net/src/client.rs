//! The QUIC client: dials `https://` (WebTransport), `http://` (fingerprint bootstrap), `moqt://` and `moql://` (raw QUIC).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use rustls::client::danger::ServerCertVerifier;
use url::{Host, Url};
use web_transport_quinn::proto::ConnectRequest;

use crate::alpn::{Binding, DEFAULT_ALPNS, H3};
use crate::quic::{bind_client_udp, bind_udp, QuicConfig};
use crate::tls::{parse_fingerprint, provider, TlsError};
use crate::transport::QuicTransport;
use crate::verify::PinnedVerifier;

/// Default deadline for a whole `connect` (fingerprint fetch, QUIC handshake, CONNECT).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Delay between starting connection attempts to successive resolved addresses.
const ATTEMPT_STAGGER: Duration = Duration::from_millis(250);

/// Largest `/certificate.sha256` body we read.
const MAX_FINGERPRINT_BODY: usize = 4096;

/// How the client verifies the server's certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TlsVerify {
    /// The platform's root store (webpki verification of chain and name).
    #[default]
    System,
    /// Accept any certificate and skip the handshake signature check (development and load
    /// generation only: with any certificate accepted, the signature proves nothing).
    Disabled,
    /// Accept only a leaf certificate whose SHA-256 is one of these.
    PinnedSha256(Vec<[u8; 32]>),
    /// Trust the CA certificates in this PEM file instead of the system roots.
    Roots(PathBuf),
}

/// What the client needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The moq ALPNs / WebTransport protocols offered, most preferred first.
    pub alpns: Vec<String>,
    /// Certificate verification. `http://` URLs replace `System` and `Disabled` with a pin
    /// of the fetched fingerprint; explicit pins and roots are kept.
    pub tls: TlsVerify,
    /// QUIC transport knobs.
    pub quic: QuicConfig,
    /// Local UDP address; dual-stack `[::]:0` (or `0.0.0.0:0`) by default.
    pub bind: Option<SocketAddr>,
    /// Deadline for each `connect`.
    pub connect_timeout: Duration,
    /// A certificate to present when the server asks for one (mTLS).
    pub identity: Option<crate::tls::TlsCertificate>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            alpns: DEFAULT_ALPNS.iter().map(|s| s.to_string()).collect(),
            tls: TlsVerify::System,
            quic: QuicConfig::default(),
            bind: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            identity: None,
        }
    }
}

impl ClientConfig {
    /// Offer these moq ALPNs, most preferred first.
    pub fn with_alpns<S: AsRef<str>>(mut self, alpns: &[S]) -> Self {
        self.alpns = alpns.iter().map(|s| s.as_ref().to_owned()).collect();
        self
    }

    /// Verify the server this way.
    pub fn with_tls(mut self, tls: TlsVerify) -> Self {
        self.tls = tls;
        self
    }
}

/// Why a client could not be built or a connection made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("unsupported URL scheme {0:?}: use https, http, moqt or moql")]
    UnsupportedScheme(String),
    #[error("URL has no host")]
    MissingHost,
    #[error("failed to resolve {host}: {source}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no usable address for {0}")]
    NoAddress(String),
    #[error("no moq ALPN configured")]
    NoAlpn,
    #[error("failed to bind UDP socket: {0}")]
    Bind(#[source] std::io::Error),
    #[error("failed to create the QUIC endpoint: {0}")]
    Endpoint(#[source] std::io::Error),
    #[error("no tokio runtime: create the client from within one")]
    NoRuntime,
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("root certificates: {0}")]
    Roots(String),
    #[error("QUIC connect: {0}")]
    Connect(#[from] quinn::ConnectError),
    #[error("QUIC connection: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("WebTransport: {0}")]
    WebTransport(#[from] web_transport_quinn::ClientError),
    #[error("server negotiated no moq protocol")]
    NoProtocol,
    #[error("fingerprint fetch failed: {0}")]
    Fingerprint(String),
    #[error("fingerprint request answered HTTP {0}")]
    FingerprintStatus(u16),
    #[error("connect timed out")]
    Timeout,
}

/// How long a client waits after a clean refusal that names no wait (QUIC carries none):
/// one second, what the relay's WebSocket refusals say.
pub const REFUSAL_WAIT: Duration = Duration::from_secs(1);

impl ClientError {
    /// When the server's admission refused the connection cleanly (QUIC CONNECTION_REFUSED):
    /// how long to wait before trying again. `None` for any other failure.
    pub fn refusal(&self) -> Option<Duration> {
        match self {
            ClientError::Connection(quinn::ConnectionError::ConnectionClosed(close))
                if close.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED =>
            {
                Some(REFUSAL_WAIT)
            }
            _ => None,
        }
    }
}

/// An established client session.
#[derive(Debug)]
pub struct Connected {
    /// The session.
    pub transport: QuicTransport,
    /// The negotiated moq version's ALPN.
    pub protocol: String,
    /// Raw QUIC or WebTransport.
    pub binding: Binding,
    /// What to send as the SETUP Path parameter: raw QUIC only (docs/wire.md §1.2); `None` on
    /// WebTransport, where the path travels in the CONNECT URL.
    pub setup_path: Option<String>,
}

/// A QUIC client endpoint; one can dial many sessions. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    endpoint: quinn::Endpoint,
    config: ClientConfig,
    /// `Err` only for `TlsVerify::System` without usable system roots, reported when a
    /// connection needs them (an `http://` bootstrap does not).
    verifier: Result<Arc<dyn ServerCertVerifier>, String>,
    transport: Arc<quinn::TransportConfig>,
    ipv6: bool,
    /// TLS configurations built so far, one per (verifier, ALPN list), shared by every dial
    /// (a load generator dials thousands; building one per dial measured no slower, but
    /// is work done again for nothing).
    tls_configs: Arc<parking_lot::Mutex<Vec<TlsEntry>>>,
}

/// A QUIC TLS configuration and what it was built for.
struct TlsEntry {
    /// The verifier's address (the entry's config holds the verifier, so no other verifier
    /// can take it while the entry is kept).
    verifier: usize,
    alpns: Vec<String>,
    config: Arc<quinn::crypto::rustls::QuicClientConfig>,
}

/// How many TLS configurations a client keeps (the oldest goes first): one per verifier
/// and ALPN list in use, and an `http://` bootstrap's pin is a new verifier per connect.
const TLS_CONFIGS_KEPT: usize = 8;

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("local", &self.endpoint.local_addr().ok())
            .field("alpns", &self.config.alpns)
            .field("tls", &self.config.tls)
            .finish()
    }
}

impl Client {
    /// Bind a client endpoint. Must be called within a tokio runtime.
    pub fn new(config: ClientConfig) -> Result<Self, ClientError> {
        if config.alpns.iter().all(|a| a == H3) {
            return Err(ClientError::NoAlpn);
        }
        let verifier = match verifier(&config.tls) {
            Ok(verifier) => Ok(verifier),
            Err(ClientError::Roots(err)) if config.tls == TlsVerify::System => Err(err),
            Err(err) => return Err(err),
        };
        let socket = match config.bind {
            Some(addr) => bind_udp(addr),
            None => bind_client_udp(),
        }
        .map_err(ClientError::Bind)?;
        let ipv6 = socket.local_addr().map_err(ClientError::Bind)?.is_ipv6();
        let runtime = quinn::default_runtime().ok_or(ClientError::NoRuntime)?;
        let endpoint = quinn::Endpoint::new(crate::cid::endpoint_config(), None, socket, runtime)
            .map_err(ClientError::Endpoint)?;
        let transport = config.quic.transport_config();
        Ok(Self {
            endpoint,
            config,
            verifier,
            transport,
            ipv6,
            tls_configs: Arc::default(),
        })
    }

    /// The bound UDP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Dial `url`: `https://` (WebTransport), `http://` (fetch `/certificate.sha256` over
    /// plain HTTP, pin it, then WebTransport), `moqt://` or `moql://` (raw QUIC).
    pub async fn connect(&self, url: &Url) -> Result<Connected, ClientError> {
        tokio::time::timeout(self.config.connect_timeout, self.connect_inner(url))
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    /// Close every connection of this endpoint and wait (up to 3 s) for the closes to go out.
    pub async fn close(&self) {
        self.endpoint
            .close(quinn::VarInt::from_u32(0), b"client shutdown");
        let _ = tokio::time::timeout(Duration::from_secs(3), self.endpoint.wait_idle()).await;
    }

    /// Dial a bare QUIC connection to `url`'s host and port (default 443) offering exactly
    /// `alpns`, verified per the configured [`TlsVerify`]; no session layer on top.
    pub async fn dial_quic(
        &self,
        url: &Url,
        alpns: &[&str],
    ) -> Result<quinn::Connection, ClientError> {
        let verifier = self.verifier()?;
        tokio::time::timeout(self.config.connect_timeout, self.dial(url, verifier, alpns))
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    fn verifier(&self) -> Result<Arc<dyn ServerCertVerifier>, ClientError> {
        self.verifier.clone().map_err(ClientError::Roots)
    }

    async fn connect_inner(&self, url: &Url) -> Result<Connected, ClientError> {
        match url.scheme() {
            "https" => self.webtransport(url.clone(), self.verifier()?).await,
            "http" => {
                let verifier: Arc<dyn ServerCertVerifier> = match &self.config.tls {
                    TlsVerify::System | TlsVerify::Disabled => {
                        tracing::warn!(%url, "fetching the certificate fingerprint over plain HTTP");
                        let pin = fetch_fingerprint(url).await?;
                        Arc::new(PinnedVerifier::new(provider(), vec![pin]))
                    }
                    _ => {
                        tracing::warn!("ignoring the http:// fingerprint bootstrap; using the configured verification");
                        self.verifier()?
                    }
                };
                let mut https = url.clone();
                // http -> https is always allowed by the url crate (both are special schemes).
                let _ = https.set_scheme("https");
                self.webtransport(https, verifier).await
            }
            "moqt" | "moql" => self.raw(url).await,
            other => Err(ClientError::UnsupportedScheme(other.to_owned())),
        }
    }

    async fn webtransport(
        &self,
        url: Url,
        verifier: Arc<dyn ServerCertVerifier>,
    ) -> Result<Connected, ClientError> {
        let conn = self.dial(&url, verifier, &[H3]).await?;
        let request = ConnectRequest::new(url).with_protocols(self.config.alpns.iter().cloned());
        let session = web_transport_quinn::Session::connect(conn, request).await?;
        let transport = QuicTransport::with_limits(
            session,
            Binding::WebTransport,
            self.config.quic.stream_limits(),
        );
        // A server that picked none of our protocols still answers: the version is then
        // negotiated in band (lite-01/02 over the legacy SETUP), as moq-net's client does.
        let protocol = transport.protocol().unwrap_or_default();
        Ok(Connected {
            transport,
            protocol,
            binding: Binding::WebTransport,
            setup_path: None,
        })
    }

    async fn raw(&self, url: &Url) -> Result<Connected, ClientError> {
        let alpns: Vec<&str> = self.config.alpns.iter().map(String::as_str).collect();
        let conn = self.dial(url, self.verifier()?, &alpns).await?;
        let transport = QuicTransport::with_limits(
            web_transport_quinn::Session::raw(conn),
            Binding::RawQuic,
            self.config.quic.stream_limits(),
        );
        let protocol = transport.protocol().ok_or(ClientError::NoProtocol)?;
        Ok(Connected {
            transport,
            protocol,
            binding: Binding::RawQuic,
            setup_path: setup_path(url),
        })
    }

    /// The TLS configuration for `verifier` and `alpns`, built once and then shared by every
    /// dial. Sessions are not resumed (as with a configuration per dial): every connection
    /// makes a full handshake, which a load generator's comparisons rely on.
    fn tls_config(
        &self,
        verifier: Arc<dyn ServerCertVerifier>,
        alpns: &[&str],
    ) -> Result<Arc<quinn::crypto::rustls::QuicClientConfig>, ClientError> {
        let key = Arc::as_ptr(&verifier) as *const () as usize;
        let mut kept = self.tls_configs.lock();
        if let Some(entry) = kept.iter().find(|e| {
            e.verifier == key && e.alpns.iter().map(String::as_str).eq(alpns.iter().copied())
        }) {
            return Ok(entry.config.clone());
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(TlsError::from)?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut tls = match &self.config.identity {
            Some(identity) => builder
                .with_client_auth_cert(identity.chain().to_vec(), identity.key().clone_key())
                .map_err(TlsError::from)?,
            None => builder.with_no_client_auth(),
        };
        tls.alpn_protocols = alpns.iter().map(|a| a.as_bytes().to_vec()).collect();
        tls.resumption = rustls::client::Resumption::disabled();
        let config = Arc::new(
            quinn::crypto::rustls::QuicClientConfig::try_from(tls)
                .map_err(|_| TlsError::NoQuicCipherSuite)?,
        );
        if kept.len() == TLS_CONFIGS_KEPT {
            kept.remove(0);
        }
        kept.push(TlsEntry {
            verifier: key,
            alpns: alpns.iter().map(|a| (*a).to_owned()).collect(),
            config: config.clone(),
        });
        Ok(config)
    }

    /// Resolve the URL's host and race QUIC handshakes to its addresses (IPv4 first, the
    /// next one starting 250 ms after the previous), keeping the first that completes.
    async fn dial(
        &self,
        url: &Url,
        verifier: Arc<dyn ServerCertVerifier>,
        alpns: &[&str],
    ) -> Result<quinn::Connection, ClientError> {
        let host = url.host().ok_or(ClientError::MissingHost)?;
        let port = url.port().unwrap_or(443);
        let server_name = host_name(&host);
        let addrs = resolve(&host, port, self.ipv6).await?;

        let tls = self.tls_config(verifier, alpns)?;
        let mut config = quinn::ClientConfig::new(tls);
        config.transport_config(self.transport.clone());

        let mut attempts = FuturesUnordered::new();
        for (i, addr) in addrs.into_iter().enumerate() {
            let endpoint = self.endpoint.clone();
            let config = config.clone();
            let server_name = server_name.clone();
            let delay = ATTEMPT_STAGGER * u32::try_from(i).unwrap_or(u32::MAX);
            attempts.push(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let connecting = endpoint.connect_with(config, addr, &server_name)?;
                Ok::<_, ClientError>(connecting.await?)
            });
        }
        let mut last = None;
        while let Some(result) = attempts.next().await {
            match result {
                Ok(conn) => return Ok(conn),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::NoAddress(server_name)))
    }
}

/// The SETUP Path for a raw-QUIC URL (docs/wire.md §1.2): `path`, plus `?query` when the query is
/// non-empty; `None` when that is empty. The fragment is never included.
pub fn setup_path(url: &Url) -> Option<String> {
    let path = crate::server::path_and_query(url);
    (!path.is_empty()).then_some(path)
}

/// The TLS server name for a URL host (IPv6 without brackets).
fn host_name(host: &Host<&str>) -> String {
    match host {
        Host::Domain(domain) => domain.to_string(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    }
}

/// Addresses for `host`, IPv4 first; IPv6 ones only when our socket can reach them.
async fn resolve(host: &Host<&str>, port: u16, ipv6: bool) -> Result<Vec<SocketAddr>, ClientError> {
    let mut addrs: Vec<SocketAddr> = match host {
        Host::Ipv4(ip) => vec![SocketAddr::new(IpAddr::V4(*ip), port)],
        Host::Ipv6(ip) => vec![SocketAddr::new(IpAddr::V6(*ip), port)],
        Host::Domain(domain) => tokio::net::lookup_host((*domain, port))
            .await
            .map_err(|source| ClientError::Resolve {
                host: domain.to_string(),
                source,
            })?
            .collect(),
    };
    addrs.retain(|a| ipv6 || a.is_ipv4());
    addrs.sort_by_key(|a| a.is_ipv6());
    addrs.dedup();
    if addrs.is_empty() {
        return Err(ClientError::NoAddress(host_name(host)));
    }
    Ok(addrs)
}

fn verifier(tls: &TlsVerify) -> Result<Arc<dyn ServerCertVerifier>, ClientError> {
    crate::verify::for_tls(tls).map_err(ClientError::Roots)
}

/// GET `/certificate.sha256` from the URL's host and port over plain HTTP/1.1.
async fn fetch_fingerprint(url: &Url) -> Result<[u8; 32], ClientError> {
    use http_body_util::BodyExt;

    let host = url.host().ok_or(ClientError::MissingHost)?;
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs = resolve(&host, port, true).await?;

    let mut stream = None;
    let mut last = None;
    for addr in addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = stream.ok_or_else(|| {
        ClientError::Fingerprint(last.map_or_else(|| "no address".into(), |e| e.to_string()))
    })?;

    let fail = |e: &dyn std::fmt::Display| ClientError::Fingerprint(e.to_string());
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail(&e))?;
    let conn = tokio::spawn(conn);

    let authority = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let request = http::Request::get("/certificate.sha256")
        .header(http::header::HOST, authority)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| fail(&e))?;
    let response = sender.send_request(request).await.map_err(|e| fail(&e))?;
    let status = response.status();
    if !status.is_success() {
        conn.abort();
        return Err(ClientError::FingerprintStatus(status.as_u16()));
    }
    let body = http_body_util::Limited::new(response.into_body(), MAX_FINGERPRINT_BODY)
        .collect()
        .await
        .map_err(|e| fail(&e))?
        .to_bytes();
    conn.abort();
    let text = std::str::from_utf8(&body).map_err(|e| fail(&e))?;
    parse_fingerprint(text)
        .ok_or_else(|| ClientError::Fingerprint(format!("not a SHA-256 hex digest: {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(url: &str) -> Option<String> {
        setup_path(&Url::parse(url).unwrap())
    }

    #[test]
    fn setup_path_follows_spec() {
        assert_eq!(
            path("moqt://h/anon?jwt=abc").as_deref(),
            Some("/anon?jwt=abc")
        );
        assert_eq!(path("moqt://h"), None);
        assert_eq!(path("moqt://h/").as_deref(), Some("/"));
        assert_eq!(path("moqt://h/a?").as_deref(), Some("/a"));
        assert_eq!(path("moqt://h/a#frag").as_deref(), Some("/a"));
        assert_eq!(path("moql://h:4443/x/y?q=1#f").as_deref(), Some("/x/y?q=1"));
        assert_eq!(path("moqt://h?jwt=1").as_deref(), Some("?jwt=1"));
    }

    /// Dials with the same verifier and ALPNs share one TLS configuration (built once);
    /// another ALPN list or verifier gets its own, and the list is bounded.
    #[tokio::test]
    async fn dials_share_a_tls_configuration() {
        let client = Client::new(ClientConfig::default().with_tls(TlsVerify::Disabled)).unwrap();
        let verifier = client.verifier().unwrap();
        let first = client
            .tls_config(verifier.clone(), &["moq-lite-03"])
            .unwrap();
        let again = client
            .tls_config(verifier.clone(), &["moq-lite-03"])
            .unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other_alpns = client.tls_config(verifier.clone(), &[H3]).unwrap();
        assert!(!Arc::ptr_eq(&first, &other_alpns));
        let pinned: Arc<dyn ServerCertVerifier> =
            Arc::new(PinnedVerifier::new(provider(), vec![[0; 32]]));
        let other_verifier = client.tls_config(pinned, &["moq-lite-03"]).unwrap();
        assert!(!Arc::ptr_eq(&first, &other_verifier));
        // The oldest goes once more are kept than the bound.
        for i in 0..TLS_CONFIGS_KEPT {
            let alpn = format!("x-{i}");
            client
                .tls_config(verifier.clone(), &[alpn.as_str()])
                .unwrap();
        }
        assert_eq!(client.tls_configs.lock().len(), TLS_CONFIGS_KEPT);
        let rebuilt = client.tls_config(verifier, &["moq-lite-03"]).unwrap();
        assert!(!Arc::ptr_eq(&first, &rebuilt));
    }
}
