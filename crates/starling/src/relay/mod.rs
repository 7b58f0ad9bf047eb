//! `starling relay`: flags and an optional TOML file into a `RelayConfig`, then serve.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use starling_net::TlsVerify;
use starling_proto::Protocol;
mod file;

use file::*;
use starling_relay::cluster::{parse_peers, ConnectApi, DnsPeers, PeerSpec};
use starling_relay::{
    parse_patterns, AuthConfig, ClusterConfig, KeySource, MemoryShare, Relay, RelayConfig,
    RelayError, TlsSource,
};

#[derive(Args, Debug, Default)]
pub struct RelayArgs {
    /// TOML configuration file; flags override its values.
    #[arg(long)]
    config: Option<PathBuf>,
    /// UDP address for QUIC and WebTransport; HTTP binds the same TCP port. Default [::]:4443.
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// PEM certificate chain (with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key (with --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Generate a self-signed certificate for these hostnames (default: localhost).
    #[arg(long, value_delimiter = ',')]
    tls_generate: Vec<String>,
    /// Ask clients for a certificate chaining to these CAs (PEM): a session presenting one is
    /// a cluster peer (mTLS). Clients without one still connect. Not with public access.
    #[arg(long)]
    listen_tls_root: Option<PathBuf>,
    /// Versions served, most preferred first (moq-relay's names: moq-lite-06 … moq-lite-01,
    /// moq-transport-22 … moq-transport-14, and moq-lite-07-wip, which only this opts into).
    #[arg(long = "listen-version", value_delimiter = ',')]
    versions: Vec<Protocol>,
    /// Cache budget per track in bytes (the latest group always stays).
    #[arg(long)]
    cache_track_bytes: Option<usize>,
    /// What all tracks' caches may hold together: bytes (`512MiB`) or a share of the memory
    /// limit (cgroup, else the machine's) such as `25%` (the default). Stalest groups go first.
    #[arg(long)]
    cache_budget: Option<MemoryShare>,
    /// What every connection together may make the relay hold before units are complete
    /// (their receive windows plus incomplete headers and frames): bytes or a share of the
    /// memory limit, `25%` by default. Windows start small and grow as they are used out of
    /// half of it; past it, the lowest-ranked incomplete units relay-wide are evicted and new
    /// connections refused.
    #[arg(long)]
    receive_budget: Option<MemoryShare>,
    /// What the control state of every untrusted session together may cost: announced
    /// broadcasts (2 KiB each), announce interests (6 KiB) and served subscriptions
    /// (10 KiB); bytes or a share of the memory limit, `12.5%` by default. When it is full
    /// the session holding the most is closed, and a session that holds the most itself is
    /// refused more.
    #[arg(long)]
    state_budget: Option<MemoryShare>,
    /// Sessions (with handshakes in progress) the relay holds at once; past it, QUIC is
    /// refused with CONNECTION_REFUSED and WebSocket with 503 (default 16384).
    #[arg(long)]
    max_sessions: Option<usize>,
    /// Sessions one IPv4 address or IPv6 /64 may hold (default 256).
    #[arg(long)]
    max_sessions_per_ip: Option<usize>,
    /// Connections one IPv4 address or IPv6 /64 may open per second (default 64).
    #[arg(long)]
    max_handshakes_per_ip: Option<u32>,
    /// Apply the per-address bounds and load-based admission (the setup limit, the lag
    /// bound) to loopback clients too (exempt by default: local publishers, sidecars, load
    /// generators).
    #[arg(long)]
    limit_loopback: bool,
    /// The runtime lag bound in milliseconds (default 100): past a quarter of it the number
    /// of connections allowed to set up at once shrinks, past it only 16 set up at once and
    /// new connections are refused (QUIC CONNECTION_REFUSED, HTTP 503 with Retry-After), so
    /// a burst past what the host can serve is refused at the door instead of slowing every
    /// admitted session. 0 turns lag-based admission off.
    #[arg(long)]
    max_lag_ms: Option<u64>,
    /// HTTP connections open at once; one more is answered 503 (default 4096).
    #[arg(long)]
    max_http_connections: Option<usize>,
    /// `/fetch` requests served at once; one more is answered 503 (default 4096, one per
    /// HTTP connection the relay holds by default).
    #[arg(long)]
    max_fetches: Option<usize>,
    /// `/events` status streams open at once; one more is answered 503 (default 256).
    #[arg(long)]
    max_event_clients: Option<usize>,
    /// Longest track name a client may ask for, in bytes (default 1024): MALFORMED_TRACK
    /// on the wire, 400 over HTTP.
    #[arg(long)]
    max_track_name: Option<usize>,
    /// What a peer may have in flight unread on one connection, and hold there in incomplete
    /// messages and small frames (default 64MiB; at least the largest control message, 64KiB,
    /// plus its header).
    /// Applies to QUIC, WebTransport and QMux alike.
    #[arg(long, value_parser = size_arg)]
    receive_window: Option<u64>,
    /// What a peer may have in flight unread on one stream (default 8MiB, at most the
    /// connection window).
    #[arg(long, value_parser = size_arg)]
    stream_receive_window: Option<u64>,
    /// Seconds sessions get to leave after GOAWAY on shutdown.
    #[arg(long)]
    drain_timeout_secs: Option<u64>,
    /// Also accept plaintext QMux over TCP (`tcp://`) here, for trusted local workers.
    #[arg(long)]
    listen_tcp: Option<SocketAddr>,
    /// Serve `/metrics` (Prometheus) and `/health` here; default 127.0.0.1:9090, `off` to disable.
    #[arg(long)]
    internal_listen: Option<String>,
    /// Verify `?jwt=` tokens with this key file (base64url or JSON JWK, or a JWKS).
    #[arg(long)]
    auth_key: Option<PathBuf>,
    /// Verify `?jwt=` tokens with the `{kid}.jwk` files in this directory.
    #[arg(long)]
    auth_key_dir: Option<PathBuf>,
    /// Anonymous publish and subscribe under this pattern, rooted at `/` (must hold a wildcard).
    #[arg(long)]
    auth_public: Vec<String>,
    /// Anonymous publish under this pattern (must hold a wildcard).
    #[arg(long)]
    auth_public_publish: Vec<String>,
    /// Anonymous subscribe under this pattern (must hold a wildcard).
    #[arg(long)]
    auth_public_subscribe: Vec<String>,
    /// Ask this auth server about every session (moq-relay's contract, e.g. `moq auth serve`).
    #[arg(long)]
    auth_url: Option<url::Url>,
    /// How long an access decision is reused, and the longest a live session runs before
    /// its grant is re-checked (e.g. `1s`, `500ms`). Default 1s.
    #[arg(long)]
    auth_max_age: Option<String>,
    /// This relay's name in auth-server requests. Default `starling`.
    #[arg(long)]
    auth_node: Option<String>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// moq-relay's cluster flags, under the same names.
#[derive(Args, Debug, Default)]
struct ClusterArgs {
    /// This relay's hop id in the cluster (1..2^62, below 2^53 for browser peers); random
    /// on every start when unset.
    #[arg(long)]
    cluster_id: Option<u64>,
    /// Longest hop chain accepted from a peer (1..=32). Default 32.
    #[arg(long)]
    cluster_max_hops: Option<usize>,
    /// A relay to dial as a cluster peer: a full URL (moqt://, https://, http://, ws://,
    /// wss://, tcp://), with `?cost=N` for the link's price and `?jwt=` for its credential.
    /// Repeatable or comma-separated.
    #[arg(long, value_delimiter = ',')]
    cluster_connect: Vec<String>,
    /// A peer list kept current at run time: an http(s):// URL polled every 30 s (with
    /// `?node=`), or a file re-read when it changes; a JSON array of peer URLs and
    /// `{url, cost, egress, token}` objects.
    #[arg(long)]
    cluster_connect_api: Option<String>,
    /// A peer URL whose host is a DNS name: every A/AAAA address it resolves to (re-resolved
    /// every 5 s) is a peer, dialed at the URL with the host replaced (a Kubernetes headless
    /// Service). Repeatable.
    #[arg(long)]
    cluster_connect_dns: Vec<String>,
    /// This relay's own URL: an entry naming it is not dialed.
    #[arg(long)]
    cluster_node: Option<String>,
    /// A file holding the token sent as `?jwt=` to peers whose URL carries none.
    #[arg(long)]
    cluster_token: Option<PathBuf>,
    /// Dialed peers: trust the CA certificates in this PEM file.
    #[arg(long)]
    connect_tls_root: Option<PathBuf>,
    /// Dialed peers: accept a leaf certificate with this SHA-256 (hex); repeatable.
    #[arg(long)]
    connect_tls_fingerprint: Vec<String>,
    /// Dialed peers: accept any certificate (development only).
    #[arg(long)]
    connect_tls_insecure: bool,
    /// Dialed peers: present this PEM certificate chain when asked (mTLS; with
    /// --connect-tls-key).
    #[arg(long, requires = "connect_tls_key")]
    connect_tls_cert: Option<PathBuf>,
    /// The private key of --connect-tls-cert (PEM).
    #[arg(long, requires = "connect_tls_cert")]
    connect_tls_key: Option<PathBuf>,
    /// How often a dialed peer link sends keep-alives (e.g. `250ms`).
    #[arg(long)]
    cluster_peer_keep_alive: Option<String>,
    /// A dialed peer silent this long is dead: its routes are withdrawn and the link redials
    /// (e.g. `2s`).
    #[arg(long)]
    cluster_peer_idle_timeout: Option<String>,
    /// Removed in moq-relay 0.17: refused with the explanation.
    #[arg(long, hide = true)]
    cluster_mesh: Option<String>,
    /// Removed in moq-relay 0.17: refused with the explanation.
    #[arg(long, hide = true)]
    cluster_linger: Option<String>,
}

/// A byte count flag: `65536`, `64MiB`.
fn size_arg(text: &str) -> Result<u64, String> {
    starling_relay::parse_size(text)
        .filter(|bytes| *bytes > 0)
        .ok_or_else(|| format!("{text:?}: expected bytes, optionally with KiB, MiB or GiB"))
}

fn build(args: RelayArgs) -> anyhow::Result<RelayConfig> {
    let file: FileConfig = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let mut config = RelayConfig::default();
    if let Some(bind) = args.bind.or(file.bind) {
        config.bind = bind;
    }
    let cert = args.tls_cert.or(file.tls.cert);
    let key = args.tls_key.or(file.tls.key);
    let generate = if args.tls_generate.is_empty() {
        file.tls.generate
    } else {
        args.tls_generate
    };
    config.tls = match (cert, key) {
        (Some(cert), Some(key)) => TlsSource::Files { cert, key },
        (None, None) if !generate.is_empty() => TlsSource::Generate(generate),
        (None, None) => TlsSource::Generate(vec!["localhost".into()]),
        _ => anyhow::bail!("tls cert and key go together"),
    };
    config.listen_tls_root = args.listen_tls_root.or(file.tls.root);
    let versions = if args.versions.is_empty() {
        file.versions
            .iter()
            .map(|v| v.parse::<Protocol>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("{e}"))?
    } else {
        args.versions
    };
    if !versions.is_empty() {
        config.versions = versions;
    }
    if let Some(bytes) = args.cache_track_bytes.or(file.cache_track_bytes) {
        config.model_limits.track_cache_bytes = bytes;
    }
    let admission = &mut config.admission;
    if let Some(max) = args.max_sessions.or(file.limits.max_sessions) {
        admission.max_sessions = max;
    }
    if let Some(max) = args.max_sessions_per_ip.or(file.limits.max_sessions_per_ip) {
        admission.max_sessions_per_source = max;
    }
    if let Some(ms) = args.max_lag_ms.or(file.limits.max_lag_ms) {
        admission.max_lag = (ms > 0).then(|| std::time::Duration::from_millis(ms));
    }
    if let Some(rate) = args
        .max_handshakes_per_ip
        .or(file.limits.max_handshakes_per_ip)
    {
        admission.handshakes_per_second_per_source = rate;
    }
    if args.limit_loopback || file.limits.limit_loopback == Some(true) {
        admission.exempt_loopback = false;
    }
    let http = &mut config.http_api;
    if let Some(max) = args
        .max_http_connections
        .or(file.limits.max_http_connections)
    {
        http.server.max_connections = max;
    }
    if let Some(max) = args.max_fetches.or(file.limits.max_fetches) {
        http.max_fetches = max;
    }
    if let Some(max) = args.max_event_clients.or(file.limits.max_event_clients) {
        http.max_event_clients = max;
    }
    if let Some(max) = args.max_track_name.or(file.limits.max_track_name) {
        config.model_limits.max_track_name_bytes = max;
    }
    let from_file = |value: &Option<String>, name: &str| -> anyhow::Result<Option<u64>> {
        value
            .as_deref()
            .map(|text| size_arg(text).map_err(|e| anyhow::anyhow!("[limits] {name}: {e}")))
            .transpose()
    };
    if let Some(bytes) = args
        .receive_window
        .or(from_file(&file.limits.receive_window, "receive_window")?)
    {
        config.receive_windows.connection = bytes;
    }
    if let Some(bytes) = args.stream_receive_window.or(from_file(
        &file.limits.stream_receive_window,
        "stream_receive_window",
    )?) {
        config.receive_windows.stream = bytes;
    }
    config.check_receive_window()?;
    if let Some(budget) = args.cache_budget {
        config.cache_budget = budget;
    } else if let Some(budget) = &file.cache_budget {
        config.cache_budget = budget.parse()?;
    }
    if let Some(budget) = args.receive_budget {
        config.receive_budget = budget;
    } else if let Some(budget) = &file.receive_budget {
        config.receive_budget = budget.parse()?;
    }
    if let Some(budget) = args.state_budget {
        config.state_budget = budget;
    } else if let Some(budget) = &file.state_budget {
        config.state_budget = budget.parse()?;
    }
    config.listen_tcp = args.listen_tcp.or(file.listen_tcp);
    config.internal_listen = match args.internal_listen.as_deref() {
        Some("off") => None,
        Some(addr) => Some(addr.parse().context("--internal-listen")?),
        None => default_internal_listen(),
    };
    if let Some(secs) = args.drain_timeout_secs.or(file.drain_timeout_secs) {
        config.drain_timeout = std::time::Duration::from_secs(secs);
    }
    config.auth = auth(
        FileAuth {
            key: args.auth_key,
            key_dir: args.auth_key_dir,
            public: args.auth_public,
            public_publish: args.auth_public_publish,
            public_subscribe: args.auth_public_subscribe,
            url: args.auth_url,
            max_age: args.auth_max_age,
            node: args.auth_node,
        },
        file.auth,
    )?;
    config.cluster = cluster(args.cluster, file.cluster, file.connect)?;
    Ok(config)
}

/// The cluster flags over the file's `[cluster]` and `[connect]` tables.
fn cluster(
    flags: ClusterArgs,
    file: FileCluster,
    connect: FileConnect,
) -> anyhow::Result<ClusterConfig> {
    for (key, why) in starling_relay::cluster::REMOVED_KEYS {
        let flag = match key {
            "mesh" => flags.cluster_mesh.is_some() || file.mesh.is_some(),
            _ => flags.cluster_linger.is_some() || file.linger.is_some(),
        };
        if flag {
            anyhow::bail!("--cluster-{key} / cluster.{key}: {why}");
        }
    }
    let specs: Vec<PeerSpec> = if flags.cluster_connect.is_empty() {
        file.connect.into_vec()
    } else {
        flags
            .cluster_connect
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| PeerSpec::Url(s.trim().to_string()))
            .collect()
    };
    let mut config = ClusterConfig {
        id: flags.cluster_id.or(file.id),
        connect: parse_peers(&specs).context("--cluster-connect")?,
        node: flags.cluster_node.or(file.node),
        ..ClusterConfig::default()
    };
    let dns = if flags.cluster_connect_dns.is_empty() {
        file.connect_dns.into_vec()
    } else {
        flags.cluster_connect_dns
    };
    config.connect_dns = dns
        .iter()
        .map(|name| {
            DnsPeers::parse(name).with_context(|| format!("--cluster-connect-dns {name:?}"))
        })
        .collect::<anyhow::Result<_>>()?;
    if let Some(api) = flags.cluster_connect_api.or(file.connect_api) {
        config.connect_api = Some(ConnectApi::parse(&api).context("--cluster-connect-api")?);
    }
    if let Some(max_hops) = flags.cluster_max_hops.or(file.max_hops) {
        config.max_hops = max_hops;
    }
    if let Some(path) = flags.cluster_token.or(file.token) {
        let token = std::fs::read_to_string(&path)
            .with_context(|| format!("--cluster-token {}", path.display()))?;
        config.token = Some(token.trim().to_string()).filter(|t| !t.is_empty());
    }
    if let Some(age) = flags.cluster_peer_keep_alive.or(file.peer_keep_alive) {
        config.peer_keep_alive = parse_duration(&age).context("--cluster-peer-keep-alive")?;
    }
    if let Some(age) = flags.cluster_peer_idle_timeout.or(file.peer_idle_timeout) {
        config.peer_idle_timeout = parse_duration(&age).context("--cluster-peer-idle-timeout")?;
    }
    let roots = match flags.connect_tls_root {
        Some(root) => vec![root],
        None => connect.tls.root.into_vec(),
    };
    let fingerprints = if flags.connect_tls_fingerprint.is_empty() {
        connect.tls.fingerprint.into_vec()
    } else {
        flags.connect_tls_fingerprint
    };
    config.connect_identity = match (
        flags.connect_tls_cert.or(connect.tls.cert),
        flags.connect_tls_key.or(connect.tls.key),
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => anyhow::bail!("--connect-tls-cert and --connect-tls-key go together"),
    };
    let insecure = flags.connect_tls_insecure || connect.tls.insecure.unwrap_or(false);
    config.connect_tls = if insecure {
        TlsVerify::Disabled
    } else if !fingerprints.is_empty() {
        let pins = fingerprints
            .iter()
            .map(|hex| {
                starling_net::tls::parse_fingerprint(hex)
                    .with_context(|| format!("--connect-tls-fingerprint {hex:?}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        TlsVerify::PinnedSha256(pins)
    } else {
        match roots.as_slice() {
            [] => TlsVerify::System,
            [root] => TlsVerify::Roots(root.clone()),
            _ => {
                anyhow::bail!("--connect-tls-root: one CA file (bundle several certificates in it)")
            }
        }
    };
    config.validate()?;
    Ok(config)
}

/// The auth flags over the file's `[auth]` table (each flag replaces its key).
fn auth(flags: FileAuth, file: FileAuth) -> anyhow::Result<AuthConfig> {
    let pick = |flag: Vec<String>, file: Vec<String>| if flag.is_empty() { file } else { flag };
    let key = flags.key.or(file.key);
    let key_dir = flags.key_dir.or(file.key_dir);
    let public = pick(flags.public, file.public);
    let public_publish = pick(flags.public_publish, file.public_publish);
    let public_subscribe = pick(flags.public_subscribe, file.public_subscribe);
    let keys = match (key, key_dir) {
        (Some(_), Some(_)) => anyhow::bail!("--auth-key and --auth-key-dir are exclusive"),
        (Some(path), None) => Some(KeySource::File(path)),
        (None, Some(dir)) => Some(KeySource::Dir(dir)),
        (None, None) => None,
    };
    let patterns = |list: &[&Vec<String>]| {
        parse_patterns(list.iter().flat_map(|v| v.iter().map(String::as_str)))
            .context("parsing a public pattern")
    };
    let mut config = AuthConfig {
        keys,
        public_publish: patterns(&[&public, &public_publish])?,
        public_subscribe: patterns(&[&public, &public_subscribe])?,
        url: flags.url.or(file.url),
        ..AuthConfig::default()
    };
    if let Some(age) = flags.max_age.or(file.max_age) {
        config.max_age = parse_duration(&age).context("--auth-max-age")?;
    }
    if let Some(node) = flags.node.or(file.node) {
        config.node = node;
    }
    // Refuse bad patterns, unreadable keys and unusable URLs here, before binding anything.
    config.validate()?;
    Ok(config)
}

/// `250ms`, `1s`, `1.5s`, or bare seconds.
fn parse_duration(text: &str) -> anyhow::Result<std::time::Duration> {
    let text = text.trim();
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .with_context(|| format!("not a duration: {text:?}"))?;
    std::time::Duration::try_from_secs_f64(value * scale)
        .with_context(|| format!("not a duration: {text:?}"))
}

/// Where metrics go when no `--internal-listen` was given.
const DEFAULT_INTERNAL_LISTEN: &str = "127.0.0.1:9090";

fn default_internal_listen() -> Option<SocketAddr> {
    Some(DEFAULT_INTERNAL_LISTEN.parse().expect("valid default"))
}

pub async fn run(args: RelayArgs) -> anyhow::Result<()> {
    let defaulted = args.internal_listen.is_none();
    let config = build(args)?;
    let relay = match Relay::bind(config.clone()).await {
        Ok(relay) => relay,
        // The default metrics port is taken (a second relay on this machine, say): run
        // without metrics rather than not at all. An explicit address stays an error.
        Err(RelayError::Io(err)) if defaulted && err.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!(addr = DEFAULT_INTERNAL_LISTEN, %err, "metrics listener unavailable; pass --internal-listen");
            Relay::bind(RelayConfig {
                internal_listen: None,
                ..config
            })
            .await?
        }
        Err(err) => return Err(err.into()),
    };
    let addr = relay.local_addr()?;
    if let Some(tcp) = relay.tcp_addr() {
        tracing::info!(%tcp, "plaintext QMux over TCP listening");
    }
    if let Some(internal) = relay.internal_addr() {
        tracing::info!(%internal, "metrics listening (/metrics, /health)");
    }
    tracing::info!(%addr, fingerprint = relay.fingerprint(), hop = relay.hop(), "relay listening (QUIC, WebTransport, WebSocket, HTTP)");
    relay
        .run_until(async {
            crate::terminated().await;
            tracing::info!("shutting down");
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests;
