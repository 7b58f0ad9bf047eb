//! The links this relay dials: one task per configured peer, each holding at most one session
//! and redialing with jittered backoff when it ends.
//!
//! A link is a peer session (moq-relay's dialer side): SETUP with this relay's hop as Hop, the
//! link's price as Cost and no Role; it publishes the whole origin (hidden paths included) and
//! takes every announcement the peer makes into the same origin, priced at the link's cost.
//! Dialed links are registered with the relay's sessions, so metrics count them, `/nodes`
//! lists them and shutdown drains them with GOAWAY. A GOAWAY from the peer leaves the session
//! serving until the peer closes it; the link then redials (moq-relay's `Restart::Wait`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use starling_model::{Limits, Origin};
use starling_net::{AnyTransport, DialConfig, Dialer, QuicConfig};
use starling_proto::{Path, Protocol, SessionCode};
use starling_session::{ClientSetup, Session, SessionConfig, SessionLimits};
use tokio::task::JoinHandle;

use super::api::ApiReader;
use super::{ClusterConfig, ClusterConfigError, PeerEntry, Redial, RedialPolicy};
use crate::metrics::RelayMetrics;
use crate::registry::{SessionInfo, SessionRegistry, SessionTransport};

/// What a link needs of the relay.
pub(crate) struct Mesh {
    pub origin: Origin,
    pub hop: u64,
    pub versions: Vec<Protocol>,
    pub session_limits: SessionLimits,
    pub model_limits: Limits,
    pub max_hops: usize,
    pub metrics: RelayMetrics,
    pub sessions: SessionRegistry,
    /// Receive windows of the links we dial (as of the listeners).
    pub receive_windows: starling_net::ReceiveWindows,
    /// Where wall time is read.
    pub clock: starling_session::Clock,
}

/// A link's connection to its peer, before the session's handshake.
pub struct Connected<T> {
    pub transport: T,
    /// The negotiated moq ALPN (`""` or `moql`: the legacy in-band negotiation).
    pub protocol: String,
    /// What to send as SETUP's Path parameter (bindings without a request URL).
    pub setup_path: Option<String>,
    pub binding: SessionTransport,
    pub remote: SocketAddr,
}

/// How links reach their peers: over the network ([`Dialer`]), or, in a simulation, through
/// an in-memory switchboard.
pub trait Connector: Send + Sync + 'static {
    type Transport: starling_transport::Transport;

    /// Connect to the peer at `url`; the error says why not.
    fn connect(
        &self,
        url: &url::Url,
    ) -> impl std::future::Future<Output = Result<Connected<Self::Transport>, String>> + Send;
}

impl Connector for Dialer {
    type Transport = AnyTransport;

    async fn connect(&self, url: &url::Url) -> Result<Connected<AnyTransport>, String> {
        let dialed = self.dial(url).await.map_err(|err| err.to_string())?;
        let (binding, remote) = match &dialed.transport {
            AnyTransport::Quic(quic) => (quic.binding().into(), quic.remote_address()),
            AnyTransport::Qmux(_) if url.scheme() == "tcp" => (SessionTransport::Tcp, UNKNOWN),
            AnyTransport::Qmux(_) => (SessionTransport::WebSocket, UNKNOWN),
        };
        Ok(Connected {
            transport: dialed.transport,
            protocol: dialed.protocol,
            setup_path: dialed.setup_path,
            binding,
            remote,
        })
    }
}

/// Why one attempt on a link ended.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("dial: {0}")]
    Dial(String),
    #[error("the peer negotiated an unknown protocol {0:?}")]
    Protocol(String),
    #[error("moq-lite handshake: {0}")]
    Handshake(#[from] starling_session::Error),
    #[error("the peer is this relay (its SETUP carries our hop)")]
    Itself,
}

/// Whether `config` names any peer to dial (fixed, from the connect API or from DNS).
pub(crate) fn dials_any(config: &ClusterConfig) -> bool {
    !config.dials().is_empty() || config.connect_api.is_some() || !config.connect_dns.is_empty()
}

/// Start the cluster's links over the network: one task per peer to dial, kept in step with
/// the configured peers and the connect API's list. The returned task owns every link;
/// aborting it closes them all.
pub(crate) fn start(
    config: &ClusterConfig,
    mesh: Arc<Mesh>,
) -> Result<Option<JoinHandle<()>>, crate::RelayError> {
    if !dials_any(config) {
        tracing::info!("no cluster peers configured; running standalone");
        return Ok(None);
    }
    let alpns = Protocol::alpns(&mesh.versions);
    let mut quic = QuicConfig {
        idle_timeout: config.peer_idle_timeout,
        keep_alive: Some(config.peer_keep_alive),
        ..QuicConfig::default()
    };
    mesh.receive_windows.apply_quic(&mut quic);
    let identity = match &config.connect_identity {
        Some((cert, key)) => Some(
            starling_net::TlsCertificate::load_pem(cert, key)
                .map_err(|err| ClusterConfigError::Identity(err.to_string()))?,
        ),
        None => None,
    };
    let dialer = Dialer::new(DialConfig {
        quic,
        identity,
        ..DialConfig::new(&alpns, config.connect_tls.clone())
    })?;
    start_with(config, mesh, dialer).map(Some)
}

/// Start the cluster's links through `connector` (see [`start`]).
pub(crate) fn start_with<C: Connector>(
    config: &ClusterConfig,
    mesh: Arc<Mesh>,
    connector: C,
) -> Result<JoinHandle<()>, crate::RelayError> {
    let api = match &config.connect_api {
        Some(source) => Some(
            ApiReader::new(source.clone(), config.node.clone())
                .map_err(|err| ClusterConfigError::Api(err.to_string()))?,
        ),
        None => None,
    };
    let links = Links {
        mesh,
        connector: Arc::new(connector),
        policy: config.redial,
        config: config.clone(),
        fixed: config.dials(),
        running: BTreeMap::new(),
    };
    Ok(tokio::spawn(links.run(api)))
}

/// A link task, aborted when dropped.
struct LinkTask {
    peer: PeerEntry,
    task: JoinHandle<()>,
}

impl Drop for LinkTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The links this relay runs, by peer key.
struct Links<C> {
    mesh: Arc<Mesh>,
    connector: Arc<C>,
    policy: RedialPolicy,
    config: ClusterConfig,
    /// The configured peers (`--cluster-connect`): never released.
    fixed: Vec<PeerEntry>,
    running: BTreeMap<String, LinkTask>,
}

impl<C: Connector> Links<C> {
    /// Keep the links in step with every source: the fixed peers, the connect API's list and
    /// the DNS names' answers, each read on its own schedule.
    async fn run(mut self, mut api: Option<ApiReader>) {
        let dns = self.config.connect_dns.clone();
        let mut api_peers: Vec<PeerEntry> = Vec::new();
        let mut dns_peers: Vec<Vec<PeerEntry>> = vec![Vec::new(); dns.len()];
        let now = tokio::time::Instant::now();
        let (mut next_api, mut next_dns) = (now, now);
        self.apply(&[]);
        loop {
            let now = tokio::time::Instant::now();
            let mut changed = false;
            if let Some(reader) = api.as_mut().filter(|_| next_api <= now) {
                match reader.read().await {
                    Ok(Some(list)) => {
                        api_peers = self.config.filter(list);
                        tracing::info!(peers = api_peers.len(), "cluster peer list read");
                        changed = true;
                    }
                    Ok(None) => {}
                    Err(err) => {
                        tracing::warn!(%err, "cluster peer list refused; keeping the current peers")
                    }
                }
                next_api = now + reader.interval();
            }
            if !dns.is_empty() && next_dns <= now {
                for (name, peers) in dns.iter().zip(dns_peers.iter_mut()) {
                    match name.resolve().await {
                        Ok(addresses) => {
                            let found = self.config.filter(name.peers(addresses));
                            changed |= found != *peers;
                            *peers = found;
                        }
                        Err(err) => {
                            tracing::warn!(%err, "cluster DNS name did not resolve; keeping its peers")
                        }
                    }
                }
                next_dns = now + super::dns::RESOLVE_EVERY;
            }
            if changed {
                let listed: Vec<PeerEntry> = api_peers
                    .iter()
                    .chain(dns_peers.iter().flatten())
                    .cloned()
                    .collect();
                self.apply(&listed);
            }
            // The next source due; none (fixed peers only): nothing more to read.
            let wake = [
                api.is_some().then_some(next_api),
                (!dns.is_empty()).then_some(next_dns),
            ]
            .into_iter()
            .flatten()
            .min();
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending::<()>().await,
            }
        }
    }

    /// Run exactly the fixed peers and `listed`: start new ones, stop those no longer wanted,
    /// and restart one whose settings (price, credential) changed.
    fn apply(&mut self, listed: &[PeerEntry]) {
        let mut wanted: BTreeMap<String, PeerEntry> = BTreeMap::new();
        for peer in listed.iter().chain(&self.fixed) {
            wanted.insert(peer.key.clone(), peer.clone());
        }
        self.running.retain(|key, link| match wanted.get(key) {
            Some(peer) if peer == &link.peer => true,
            _ => {
                tracing::info!(peer = %key, "cluster peer released");
                false
            }
        });
        for (key, peer) in wanted {
            if self.running.contains_key(&key) {
                continue;
            }
            tracing::info!(peer = %key, cost = ?peer.cost, "cluster peer");
            let task = tokio::spawn(link(
                self.mesh.clone(),
                self.connector.clone(),
                peer.clone(),
                self.policy,
            ));
            self.running.insert(key, LinkTask { peer, task });
        }
    }
}

/// Hold a session to `peer` for as long as the task runs.
async fn link<C: Connector>(
    mesh: Arc<Mesh>,
    connector: Arc<C>,
    peer: PeerEntry,
    policy: RedialPolicy,
) {
    let mut redial = Redial::new(policy);
    loop {
        let started = tokio::time::Instant::now();
        match attempt(&mesh, &*connector, &peer).await {
            Ok(reason) => {
                tracing::info!(peer = %peer.key, %reason, "peer link closed; redialing")
            }
            Err(LinkError::Itself) => {
                // A DNS answer or a list that names this relay: never dial it again.
                tracing::info!(peer = %peer.key, "peer is this relay; not dialing it");
                std::future::pending::<()>().await;
            }
            Err(err) => tracing::info!(peer = %peer.key, %err, "peer link failed"),
        }
        let draw = starling_model::entropy::below(1 << 53) as f64 / (1u64 << 53) as f64;
        tokio::time::sleep(redial.after(started.elapsed(), draw)).await;
        mesh.metrics.redialed();
    }
}

/// One session on the link, from dial to close; returns why it closed.
async fn attempt<C: Connector>(
    mesh: &Mesh,
    connector: &C,
    peer: &PeerEntry,
) -> Result<starling_session::Error, LinkError> {
    let dialed = connector
        .connect(&peer.url)
        .await
        .map_err(LinkError::Dial)?;
    let (transport, remote) = (dialed.binding, dialed.remote);
    let mut config = SessionConfig::new(mesh.hop);
    config.publish = Some(mesh.origin.clone());
    config.consume = Some(mesh.origin.clone());
    config.cluster_peer = true;
    config.pull_window = true;
    config.link_cost = peer.cost;
    config.max_hops = mesh.max_hops;
    config.limits = mesh.session_limits.clone();
    config.model_limits = mesh.model_limits;
    config.cache_budget = Some(mesh.metrics.cache_budget());
    config.clock = mesh.clock;
    let setup = ClientSetup {
        path: dialed.setup_path,
        role: None,
        cost: peer.cost,
    };
    let protocol = dialed.protocol.clone();
    let session = Session::connect_negotiated(
        dialed.transport,
        &dialed.protocol,
        &Protocol::lite(&mesh.versions),
        setup,
        config,
    )
    .await
    .map_err(|err| match err {
        starling_session::Error::Version => LinkError::Protocol(protocol),
        err => err.into(),
    })?;
    let version = session.protocol();
    let session = ClosedOnDrop(session);
    if session.0.peer().hop == mesh.hop {
        return Err(LinkError::Itself);
    }
    tracing::info!(peer = %peer.key, %version, transport = transport.as_str(), "peer link up");
    let info = SessionInfo {
        id: mesh.sessions.next_id(),
        remote,
        transport,
        version,
        root: Path::empty(),
        publish: true,
        subscribe: true,
        server_name: peer.url.host_str().map(str::to_string),
        started: Instant::now(),
        started_at: mesh.clock.wall(),
        peer: Some(peer.key.clone()),
        local: None,
        alpn: Some(version.alpn().to_string()),
        path: peer.url.path().to_string(),
        role: None,
        tls: None,
    };
    let _registered = mesh.sessions.register(info, Arc::new(session.0.clone()));
    Ok(session.0.closed().await)
}

/// Where a link over QMux reached (the WebSocket and TCP clients do not say).
const UNKNOWN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

/// A link's session, closed when the link task ends (aborted at shutdown or when the peer is
/// no longer configured), so no session outlives its link.
struct ClosedOnDrop<T: starling_transport::Transport>(Session<T>);

impl<T: starling_transport::Transport> Drop for ClosedOnDrop<T> {
    fn drop(&mut self) {
        self.0.close(SessionCode::NoError, "peer link closed");
    }
}
