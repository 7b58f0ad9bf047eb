//! The relay process core: listeners, the accept loop, and one task per session.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use starling_model::Origin;
use starling_net::qmux::{websocket_acceptor, QmuxAccepted, QmuxTcpListener};
use starling_net::{Server, ServerConfig, TlsCertificate};
use starling_proto::{Protocol, SessionCode, LEGACY_ALPN};
use starling_session::{
    random_hop, Accepting, ReceivePool, Session, SessionConfig, StateLedger, WindowRange,
};
use starling_transport::Transport;

use crate::auth::{Authority, ByteTotals, Scoped, SessionFacts, TransportKind};
use crate::config::{RelayConfig, TlsSource};
use crate::http::HttpApi;
pub use crate::incoming::Incoming;
use crate::metrics::{internal_router, serve_internal, Rejection, RelayMetrics};
use crate::registry::{SessionInfo, SessionRegistry, SessionTransport};

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("tls: {0}")]
    Tls(#[from] starling_net::TlsError),
    #[error("quic listener: {0}")]
    Server(#[from] starling_net::ServerError),
    #[error("http listener: {0}")]
    Io(#[from] std::io::Error),
    #[error("auth: {0}")]
    Auth(#[from] crate::auth::AuthConfigError),
    #[error("cluster: {0}")]
    Cluster(#[from] crate::cluster::ClusterConfigError),
    #[error("cluster dialer: {0}")]
    Dialer(#[from] starling_net::ClientError),
    #[error("--listen-tls-root: {0}")]
    ClientRoots(String),
    #[error("--receive-window {window} bytes is smaller than the largest unit the relay accepts ({unit}, {largest} bytes)")]
    ReceiveWindow {
        window: u64,
        unit: &'static str,
        largest: u64,
    },
}

/// A bound relay; `run` serves until the process ends.
pub struct Relay {
    server: Server,
    http: Option<tokio::net::TcpListener>,
    fingerprint: String,
    /// WebSocket (QMux) hook: requests carrying `Upgrade: websocket` on any path go here
    /// before the HTTP routes (see [`HttpApi::with_upgrade`]).
    http_upgrade: Option<axum::Router>,
    /// Sessions the WebSocket endpoint accepted.
    websocket: tokio::sync::mpsc::Receiver<QmuxAccepted>,
    /// The session bounds every listener enforces; upgrades are admitted before their
    /// token is checked.
    admission: Arc<starling_net::Admission>,
    /// The optional plaintext QMux-over-TCP listener.
    tcp: Option<QmuxTcpListener>,
    /// Where `/metrics` is served, when enabled.
    internal: Option<SocketAddr>,
    core: RelayCore,
}

/// The relay without its sockets: the origin, auth, the session registry, metrics and the
/// cluster's links. [`Relay`] binds it to the network; a simulation hands it in-memory
/// connections ([`RelayCore::serve`]) and links ([`RelayCore::start_cluster`]).
#[derive(Clone)]
pub struct RelayCore {
    inner: Arc<Inner>,
    admission: Arc<starling_net::Admission>,
}

struct Inner {
    origin: Origin,
    hop: u64,
    config: RelayConfig,
    authority: Authority,
    /// Live sessions with their metadata, so shutdown can drain them and the status page
    /// can list them.
    sessions: SessionRegistry,
    metrics: RelayMetrics,
    /// Set once shutdown began: a session registered after the drain listed the sessions
    /// sends its own GOAWAY (one of the two always sees the other).
    draining: std::sync::atomic::AtomicBool,
    /// Connections between accept and registration; the drain waits for them (within its
    /// deadline) so a session admitted just before shutdown is drained like the others.
    admitting: tokio::sync::watch::Sender<usize>,
}

/// Counts one connection as being admitted until dropped.
struct Admitting<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> Admitting<'a> {
    fn enter(counter: &'a tokio::sync::watch::Sender<usize>) -> Self {
        counter.send_modify(|n| *n += 1);
        Admitting(counter)
    }
}

impl Drop for Admitting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl RelayCore {
    /// Everything but the sockets, from `config`.
    pub fn new(mut config: RelayConfig) -> Result<Self, RelayError> {
        config.cluster.validate()?;
        config.check_receive_window()?;
        // One window for every binding, and the session's budget for incomplete units.
        let max_window = usize::try_from(config.receive_windows.connection).unwrap_or(usize::MAX);
        config.session_limits.recv_budget = max_window;
        config.auth.clock = config.clock;
        let authority = Authority::new(&config.auth)?;
        let origin = Origin::new();
        let sessions = SessionRegistry::new();
        let memory = crate::memory_limit();
        let cache_budget = config.cache_budget.resolve(memory);
        tracing::info!(bytes = cache_budget, "relay-wide cache budget");
        // Every connection's window and incomplete units draw on one relay-wide total.
        let initial = *config
            .receive_windows
            .initial
            .get_or_insert(crate::config::INITIAL_RECEIVE_WINDOW);
        let pool = ReceivePool::new(
            config.receive_budget.resolve(memory),
            WindowRange {
                initial: usize::try_from(initial).unwrap_or(usize::MAX),
                max: max_window,
            },
        );
        tracing::info!(bytes = pool.total(), initial, "relay-wide receive budget");
        config.session_limits.recv_pool = Some(pool.clone());
        // The control state every untrusted session together holds, one entry each.
        let ledger = StateLedger::new(
            config.state_budget.resolve(memory) / crate::config::STATE_ENTRY_BYTES,
        );
        tracing::info!(entries = ledger.limit(), "relay-wide state ledger");
        config.session_limits.state_ledger = Some(ledger.clone());
        let admission = starling_net::Admission::new(config.admission);
        admission.start_lag_probe();
        let room = pool.clone();
        admission.set_room(Box::new(move |now| room.admits(now)));
        let metrics = RelayMetrics::new(cache_budget, admission.clone())
            .with_receive_pool(pool)
            .with_state_ledger(ledger);
        Ok(RelayCore {
            inner: Arc::new(Inner {
                origin,
                hop: config.cluster.id.unwrap_or_else(random_hop),
                config,
                authority,
                sessions,
                metrics,
                draining: std::sync::atomic::AtomicBool::new(false),
                admitting: tokio::sync::watch::Sender::new(0),
            }),
            admission,
        })
    }

    /// This relay's hop id (its cluster id when configured).
    pub fn hop(&self) -> u64 {
        self.inner.hop
    }

    pub fn origin(&self) -> &Origin {
        &self.inner.origin
    }

    /// The live sessions.
    pub fn sessions(&self) -> &SessionRegistry {
        &self.inner.sessions
    }

    pub fn metrics(&self) -> &RelayMetrics {
        &self.inner.metrics
    }

    pub fn config(&self) -> &RelayConfig {
        &self.inner.config
    }

    /// Run one connection's session, from handshake and auth to its end.
    pub fn serve<T: Transport>(&self, incoming: Incoming<T>) -> impl Future<Output = ()> + Send {
        self.inner.clone().serve(incoming)
    }

    /// Start the cluster's links through `connector`; `None` when no peer is configured.
    /// The task owns every link: aborting it closes them all.
    pub fn start_cluster<C: crate::cluster::Connector>(
        &self,
        connector: C,
    ) -> Result<Option<tokio::task::JoinHandle<()>>, RelayError> {
        if !crate::cluster::dials_any(&self.inner.config.cluster) {
            return Ok(None);
        }
        crate::cluster::start_with(&self.inner.config.cluster, self.mesh(), connector).map(Some)
    }

    fn mesh(&self) -> Arc<crate::cluster::Mesh> {
        Arc::new(crate::cluster::Mesh {
            origin: self.inner.origin.clone(),
            hop: self.inner.hop,
            versions: self.inner.config.versions.clone(),
            session_limits: self.inner.config.session_limits.clone(),
            model_limits: self.inner.config.model_limits,
            max_hops: self.inner.config.cluster.max_hops,
            metrics: self.inner.metrics.clone(),
            sessions: self.inner.sessions.clone(),
            receive_windows: self.inner.config.receive_windows,
            clock: self.inner.config.clock,
        })
    }

    /// The HTTP API (`/announced`, `/fetch`, the status page …) for a relay whose certificate
    /// has `fingerprint`, without the WebSocket upgrade.
    pub fn http_api(&self, fingerprint: &str) -> HttpApi {
        let mut api = HttpApi::new(
            self.inner.origin.clone(),
            self.inner.sessions.clone(),
            fingerprint.to_string(),
            self.inner.config.http_api.clone(),
        )
        .with_authority(self.inner.authority.clone())
        .with_admission(self.admission.clone())
        .with_metrics(self.inner.metrics.clone());
        if let Some(pool) = self.inner.config.session_limits.recv_pool.clone() {
            api = api.with_receive_pool(pool);
        }
        api
    }

    /// Drain: every session gets GOAWAY and has the drain timeout to leave; those left are
    /// closed with GOAWAY_TIMEOUT.
    pub async fn drain(&self) {
        self.inner
            .draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + self.inner.config.drain_timeout;
        // Connections still being admitted are drained with the rest.
        let mut admitting = self.inner.admitting.subscribe();
        let _ = tokio::time::timeout_at(deadline, admitting.wait_for(|n| *n == 0)).await;
        let sessions: Vec<_> = self
            .inner
            .sessions
            .list()
            .into_iter()
            .map(|entry| entry.session.clone())
            .collect();
        tracing::info!(sessions = sessions.len(), "draining");
        // Every GOAWAY at once, and all of it inside the deadline: a peer that grants no
        // stream (so its GOAWAY never opens) holds neither the others nor the shutdown.
        let drained = async {
            futures::future::join_all(sessions.iter().map(|session| session.goaway())).await;
            for session in &sessions {
                session.closed().await;
            }
        };
        if tokio::time::timeout_at(deadline, drained).await.is_err() {
            for session in &sessions {
                session.close(SessionCode::GoawayTimeout, "drain timeout");
            }
        }
    }
}

impl Relay {
    pub async fn bind(config: RelayConfig) -> Result<Self, RelayError> {
        let core = RelayCore::new(config)?;
        let (inner, admission) = (core.inner.clone(), core.admission.clone());
        let config = &inner.config;
        let (metrics, sessions, origin, authority) = (
            inner.metrics.clone(),
            inner.sessions.clone(),
            inner.origin.clone(),
            inner.authority.clone(),
        );
        let internal = match config.internal_listen {
            Some(addr) => Some(
                serve_internal(
                    addr,
                    internal_router(
                        metrics.clone(),
                        sessions.clone(),
                        origin.clone(),
                        authority.clone(),
                        config.cluster.node.clone().unwrap_or_default(),
                    ),
                )
                .await?,
            ),
            None => None,
        };
        let certificate = match &config.tls {
            TlsSource::Files { cert, key } => TlsCertificate::load_pem(cert, key)?,
            TlsSource::Generate(hosts) => TlsCertificate::self_signed(hosts)?,
        };
        let fingerprint = certificate.fingerprint_hex();
        let alpns = Protocol::alpns(&config.versions);
        let client_roots = match &config.listen_tls_root {
            // moq-relay refuses the same pairing: anonymous access would make a peer
            // certificate pointless (every client is admitted as one anyway).
            Some(_)
                if !config.auth.public_publish.is_empty()
                    || !config.auth.public_subscribe.is_empty() =>
            {
                return Err(RelayError::ClientRoots(
                    "client certificates cannot be combined with public (anonymous) access".into(),
                ))
            }
            Some(path) => Some(Arc::new(
                starling_net::load_roots(path).map_err(RelayError::ClientRoots)?,
            )),
            None => None,
        };
        let mut server_config = ServerConfig::new(certificate)
            .with_bind(config.bind)
            .with_alpns(&alpns);
        server_config.client_roots = client_roots;
        server_config.admission = Some(admission.clone());
        config.receive_windows.apply_quic(&mut server_config.quic);
        let (server, http) = bind_quic_and_http(server_config, config.http).await?;
        let (websocket, websocket_sessions) = websocket_acceptor(&alpns);
        let websocket = websocket
            .with_admission(admission.clone())
            .with_windows(config.receive_windows);
        let tcp = match config.listen_tcp {
            Some(addr) => {
                if !addr.ip().is_loopback() {
                    tracing::warn!(%addr, "plaintext QMux over TCP on a non-loopback address");
                }
                Some(
                    QmuxTcpListener::bind(
                        addr,
                        &alpns,
                        Some(admission.clone()),
                        Some(config.receive_windows),
                    )
                    .await?,
                )
            }
            None => None,
        };
        Ok(Relay {
            server,
            http,
            fingerprint,
            http_upgrade: Some(websocket.router()),
            websocket: websocket_sessions,
            admission,
            tcp,
            internal,
            core,
        })
    }

    /// The relay's core (origin, sessions, auth, cluster), without its sockets.
    pub fn core(&self) -> &RelayCore {
        &self.core
    }

    /// This relay's hop id (its cluster id when configured).
    pub fn hop(&self) -> u64 {
        self.core.hop()
    }

    /// The internal listener's address (`/metrics`, `/health`), when enabled.
    pub fn internal_addr(&self) -> Option<SocketAddr> {
        self.internal
    }

    pub fn metrics(&self) -> &RelayMetrics {
        self.core.metrics()
    }

    /// The plaintext QMux-over-TCP listener's address, when enabled.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().map(QmuxTcpListener::local_addr)
    }

    /// The UDP address sessions connect to (the TCP port has the same number).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.server.local_addr()
    }

    /// Hex SHA-256 of the certificate, as served at `/certificate.sha256`.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn origin(&self) -> &Origin {
        self.core.origin()
    }

    /// The live sessions.
    pub fn sessions(&self) -> &SessionRegistry {
        self.core.sessions()
    }

    /// Hand every HTTP request carrying `Upgrade: websocket` (on any path, `/` included) to
    /// `service` before the relay's own routes: the WebSocket (QMux) endpoint mounts here.
    pub fn with_http_upgrade(mut self, service: axum::Router) -> Self {
        self.http_upgrade = Some(service);
        self
    }

    /// Serve until the listener closes.
    pub async fn run(self) -> Result<(), RelayError> {
        self.run_until(std::future::pending()).await
    }

    /// Serve until `shutdown` resolves, then drain: every session gets GOAWAY, has the drain
    /// timeout to leave, and is then closed with GOAWAY_TIMEOUT.
    pub async fn run_until(mut self, shutdown: impl Future<Output = ()>) -> Result<(), RelayError> {
        tokio::pin!(shutdown);
        let mut http_task = None;
        if let Some(listener) = self.http.take() {
            let mut api = self.core.http_api(&self.fingerprint);
            // WebSocket (QMux) hook: upgrades are routed before every HTTP route.
            // Admission, then tokens, are checked before the upgrade: 503 or 401.
            if let Some(upgrade) = self.http_upgrade.take() {
                let upgrade = crate::http::gate_upgrade(
                    upgrade,
                    self.core.inner.authority.clone(),
                    Some(self.admission.clone()),
                );
                api = api.with_upgrade(upgrade);
            }
            let router = api.router();
            let http_limits = self.core.inner.config.http_api.server;
            let http_counters = self.core.inner.metrics.http_counters();
            http_task = Some(tokio::spawn(async move {
                starling_net::serve_bounded(listener, router, http_limits, http_counters).await;
            }));
        }
        let tcp_task = self.tcp.take().map(|listener| {
            let core = self.core.clone();
            let local = Some(listener.local_addr());
            tokio::spawn(async move {
                while let Some(accepted) = listener.accept().await {
                    let incoming = Incoming {
                        local,
                        ..Incoming::from(accepted)
                    };
                    tokio::spawn(core.serve(incoming));
                }
            })
        });
        let links = crate::cluster::start(&self.core.inner.config.cluster, self.core.mesh())?;
        let quic_local = self.server.local_addr().ok();
        loop {
            tokio::select! {
                accepted = self.server.accept() => {
                    let Some(accepted) = accepted else { return Ok(()) };
                    let incoming = Incoming {
                        local: quic_local,
                        ..Incoming::from(accepted)
                    };
                    tokio::spawn(self.core.serve(incoming));
                }
                Some(accepted) = self.websocket.recv() => {
                    tokio::spawn(self.core.serve(Incoming::from(accepted)));
                }
                _ = &mut shutdown => break,
            }
        }
        if let Some(task) = tcp_task {
            task.abort();
        }
        // Dialed peer links are registered sessions: they get GOAWAY with the rest, so the
        // peers re-price our routes before we go; then the links stop redialing.
        self.drain().await;
        if let Some(links) = links {
            links.abort();
        }
        // The HTTP port goes with the relay (a relay started again on it can bind it).
        if let Some(task) = http_task {
            task.abort();
            let _ = task.await;
        }
        Ok(())
    }

    async fn drain(&self) {
        self.core.drain().await;
        self.server.close().await;
    }
}

/// How a binding is named in auth-server requests.
fn auth_transport(binding: SessionTransport) -> TransportKind {
    match binding {
        SessionTransport::Quic | SessionTransport::WebTransport => TransportKind::Quic,
        SessionTransport::WebSocket => TransportKind::WebSocket,
        SessionTransport::Tcp => TransportKind::Tcp,
    }
}

/// How many times a relay asked for any port (0) picks again when the free UDP port's TCP twin
/// is taken.
const PORT_PICKS: usize = 64;

/// Bind QUIC on the configured address and, with `http`, the TCP listener on the port with
/// the same number. Asked for any port (0), the UDP port the system picks may have its TCP
/// twin taken by another program: then both are let go and another port is picked.
async fn bind_quic_and_http(
    config: ServerConfig,
    http: bool,
) -> Result<(Server, Option<tokio::net::TcpListener>), RelayError> {
    let picks = if http && config.bind.port() == 0 {
        PORT_PICKS
    } else {
        1
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let server = Server::bind(config.clone())?;
        if !http {
            return Ok((server, None));
        }
        let mut addr = config.bind;
        addr.set_port(server.local_addr()?.port());
        match bind_tcp(addr).await {
            Ok(listener) => return Ok((server, Some(listener))),
            Err(err) if err.kind() == std::io::ErrorKind::AddrInUse && attempt < picks => {
                tracing::debug!(%addr, "the picked port's TCP twin is taken; picking again");
            }
            Err(err) => return Err(err.into()),
        }
    }
}

async fn bind_tcp(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv6() {
        tokio::net::TcpSocket::new_v6()?
    } else {
        tokio::net::TcpSocket::new_v4()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

impl Inner {
    /// Serve one connection: establish its session, then hold it until it ends. The task
    /// lives as long as the session, so what it holds meanwhile is kept small: the
    /// establishing (handshake, auth, start: several KiB of state) is boxed and gone once the
    /// session runs, and only the session, its lease and its registration stay.
    fn serve<T: Transport>(self: Arc<Self>, accepted: Incoming<T>) -> impl Future<Output = ()> {
        // Made before the task's future, which then holds only the box (an `async fn` keeps
        // its arguments in its future for the session's life).
        let establishing = Box::pin(self.clone().establish(accepted));
        async move {
            if let Some(mut live) = establishing.await {
                self.hold::<T>(&mut live).await;
            }
        }
    }

    /// Handshake, admit and start the session of `accepted`, and register it.
    async fn establish<T: Transport>(
        self: Arc<Self>,
        mut accepted: Incoming<T>,
    ) -> Option<Live<T>> {
        // The admission slot is given back when the session ends (it goes with `Live`). Its
        // setup slot goes once the session is established.
        let mut ticket = accepted.ticket.take();
        let admitting = Admitting::enter(&self.admitting);
        let remote = accepted.remote;
        let timeout = self.config.session_limits.handshake_timeout;
        let binding = accepted.kind;
        // The protocol names the version, except `moql` and no protocol at all: then lite-01
        // or lite-02 is chosen in band (docs/wire.md §1.7).
        let handshake = match accepted.protocol.as_deref() {
            Some(protocol) if protocol != LEGACY_ALPN => match Protocol::from_alpn(protocol) {
                Some(Protocol::Lite(version))
                    if self.config.versions.contains(&Protocol::Lite(version)) =>
                {
                    Box::pin(Accepting::new(accepted.transport, version, timeout)).await
                }
                Some(Protocol::Ietf(draft))
                    if self.config.versions.contains(&Protocol::Ietf(draft)) =>
                {
                    Box::pin(Accepting::ietf(accepted.transport, draft, timeout)).await
                }
                _ => {
                    accepted.transport.close(
                        SessionCode::VersionNegotiationFailed.to_code(),
                        "no common version",
                    );
                    self.metrics.rejected(Rejection::Version);
                    return None;
                }
            },
            _ => {
                let lite = Protocol::lite(&self.config.versions);
                Box::pin(Accepting::legacy(accepted.transport, &lite, timeout)).await
            }
        };
        let accepting: Accepting<T> = match handshake {
            Ok(accepting) => accepting,
            Err(err) => {
                tracing::debug!(%remote, %err, "handshake failed");
                self.metrics
                    .rejected(if matches!(err, starling_session::Error::Version) {
                        Rejection::Version
                    } else {
                        Rejection::Handshake
                    });
                return None;
            }
        };
        let version = accepting.protocol();
        // Raw QUIC names its target in the SETUP Path; WebTransport in the CONNECT URL, unless
        // the client also sent a SETUP Path, which wins as it does in moq-tokio (docs/wire.md §1.3).
        // A SETUP Path without a query keeps the URL's credential.
        let target = accepting
            .setup()
            .path
            .clone()
            .filter(|p| !p.is_empty())
            .or_else(|| accepted.path.clone())
            .unwrap_or_default();
        let mut facts = SessionFacts::new(auth_transport(binding), &target);
        if facts.query.is_none() {
            facts.query = accepted.path.as_deref().and_then(SessionFacts::query_of);
        }
        // An IETF SETUP's AUTHORIZATION_TOKEN is the credential when the URL carries none.
        if let Some(token) = accepting.setup().token.as_deref() {
            facts.present_token(token);
        }
        facts.role = accepting.setup().role;
        let accepting_role = accepting.setup().role;
        facts.remote = Some(remote);
        facts.local = accepted.local;
        facts.server_name = accepted.server_name.clone();
        facts.alpn = accepted.protocol.clone();
        let admitted = match Box::pin(self.authority.admit(facts)).await {
            Ok(admitted) => admitted,
            Err(err) => {
                tracing::info!(%remote, %err, "session refused");
                // An outage is not the client's fault: moq-relay closes with the HTTP status
                // it would answer (502) as an application code, so clients may retry.
                let (code, reason) = if err.is_outage() {
                    (SessionCode::App(502), "auth unavailable")
                } else {
                    (SessionCode::Unauthorized, "unauthorized")
                };
                accepting.reject(code, reason);
                self.metrics.rejected(if err.is_outage() {
                    Rejection::AuthUnavailable
                } else {
                    Rejection::Unauthorized
                });
                return None;
            }
        };
        let (grant, lease) = (admitted.grant, admitted.lease);
        let mut config = SessionConfig::new(self.hop);
        config.max_hops = self.config.cluster.max_hops;
        // A peer relay (so its auth grant says) hears hidden paths, and its routes take the
        // peer tie-break.
        // So does a relay presenting a client certificate our client roots verified.
        config.cluster_peer = grant.peer || accepted.client_certificate.is_some();
        config.pull_window = true;
        config.root = grant.root.clone();
        config.access = grant
            .permissions
            .clone()
            .map(|p| Arc::new(Scoped(p)) as Arc<dyn starling_session::Access>);
        config.limits = self.config.session_limits.clone();
        config.model_limits = self.config.model_limits;
        config.cache_budget = Some(self.metrics.cache_budget());
        config.clock = self.config.clock;
        if grant.subscribe {
            config.publish = Some(self.origin.clone());
        }
        if grant.publish {
            config.consume = Some(self.origin.clone());
        }
        let session = match Box::pin(accepting.start(config)).await {
            Ok(session) => session,
            Err(err) => {
                tracing::debug!(%remote, %err, "session start failed");
                return None;
            }
        };
        if let Some(ticket) = &mut ticket {
            ticket.established();
        }
        tracing::info!(%remote, %version, binding = binding.as_str(), root = %grant.root, "session");
        let info = SessionInfo {
            id: self.sessions.next_id(),
            remote,
            transport: binding,
            version,
            root: grant.root.clone(),
            publish: grant.publish,
            subscribe: grant.subscribe,
            server_name: accepted.server_name.clone(),
            started: Instant::now(),
            started_at: self.config.clock.wall(),
            peer: None,
            local: accepted.local,
            alpn: accepted.protocol.clone(),
            path: dialed_path(&target),
            role: accepting_role,
            tls: accepted.client_certificate.clone(),
        };
        self.metrics.accepted(binding, version);
        let _registered = self.sessions.register(info, Arc::new(session.clone()));
        drop(admitting);
        if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
            // Admitted while the relay shuts down, maybe after the drain listed its sessions.
            let _ = session.goaway("").await;
        }
        Some(Live {
            session,
            lease,
            remote,
            _ticket: ticket,
            _registered,
        })
    }

    /// Hold an established session until it ends, then account for it. The admission slot
    /// and the registration in `live` are given back when the caller drops it.
    async fn hold<T: Transport>(&self, live: &mut Live<T>) {
        let Live {
            session,
            lease,
            remote,
            ..
        } = live;
        // The lease ends the session with UNAUTHORIZED when its grant expires, is revoked
        // or narrows. Boxed, and only when something can end it: an idle session's task
        // holds no more than the wait for its end.
        let err = if lease.can_end() {
            Box::pin(async {
                tokio::select! {
                    err = session.closed() => err,
                    end = lease.ended() => {
                        tracing::info!(%remote, %end, "session's grant ended");
                        session.close(SessionCode::Unauthorized, "unauthorized");
                        session.closed().await
                    }
                }
            })
            .await
        } else {
            session.closed().await
        };
        let stats = session.stats();
        lease.close(
            &err.to_string(),
            ByteTotals {
                sent: stats.bytes_sent.load(std::sync::atomic::Ordering::Relaxed),
                received: stats
                    .bytes_received
                    .load(std::sync::atomic::Ordering::Relaxed),
            },
        );
        self.metrics.ended(
            session.stats(),
            err.session_code(),
            session.budget().evicted,
        );
        tracing::info!(%remote, %err, "session closed");
    }
}

/// An established session and what its life holds: its lease (which may end it), its place
/// in the registry and its admission slot, both given back when it is dropped.
struct Live<T: Transport> {
    session: Session<T>,
    lease: crate::auth::Lease,
    remote: SocketAddr,
    _ticket: Option<starling_net::Ticket>,
    _registered: crate::registry::Registered,
}

/// A dialed target's path, query dropped, always starting with `/`.
fn dialed_path(target: &str) -> String {
    let path = target.split('?').next().unwrap_or_default();
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}
