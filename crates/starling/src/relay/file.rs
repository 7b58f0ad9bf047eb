//! The `starling relay` TOML file's shape (`--config`): every section optional, unknown
//! keys refused; `build` merges it under the flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use starling_relay::cluster::PeerSpec;

/// The TOML file's shape.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) bind: Option<SocketAddr>,
    #[serde(default)]
    pub(super) tls: FileTls,
    #[serde(default)]
    pub(super) versions: Vec<String>,
    pub(super) cache_track_bytes: Option<usize>,
    pub(super) cache_budget: Option<String>,
    pub(super) receive_budget: Option<String>,
    pub(super) state_budget: Option<String>,
    pub(super) drain_timeout_secs: Option<u64>,
    pub(super) listen_tcp: Option<SocketAddr>,
    #[serde(default)]
    pub(super) auth: FileAuth,
    #[serde(default)]
    pub(super) cluster: FileCluster,
    #[serde(default)]
    pub(super) connect: FileConnect,
    #[serde(default)]
    pub(super) limits: FileLimits,
}

/// `[limits]`: the relay-wide bounds, as the flags of the same names.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLimits {
    pub(super) max_sessions: Option<usize>,
    pub(super) max_sessions_per_ip: Option<usize>,
    pub(super) max_handshakes_per_ip: Option<u32>,
    pub(super) limit_loopback: Option<bool>,
    pub(super) max_lag_ms: Option<u64>,
    pub(super) max_http_connections: Option<usize>,
    pub(super) max_fetches: Option<usize>,
    pub(super) max_event_clients: Option<usize>,
    pub(super) max_track_name: Option<usize>,
    pub(super) receive_window: Option<String>,
    pub(super) stream_receive_window: Option<String>,
}

/// `[cluster]`: `id`, `max_hops`, `connect` (a URL, or an array of URLs and `{url, cost,
/// egress, token}` objects), `connect_api`, `connect_dns`, `node`, `token` (a file), `peer_keep_alive`, `peer_idle_timeout`.
/// `mesh` and `linger` are refused (removed by moq-relay).
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileCluster {
    pub(super) id: Option<u64>,
    pub(super) max_hops: Option<usize>,
    #[serde(default)]
    pub(super) connect: OneOrMany<PeerSpec>,
    pub(super) connect_api: Option<String>,
    #[serde(default)]
    pub(super) connect_dns: OneOrMany<String>,
    pub(super) node: Option<String>,
    pub(super) token: Option<PathBuf>,
    pub(super) peer_keep_alive: Option<String>,
    pub(super) peer_idle_timeout: Option<String>,
    pub(super) mesh: Option<toml::Value>,
    pub(super) linger: Option<toml::Value>,
}

/// `[connect]`: how dialed peers are verified, moq-relay's `[connect.tls]` `root`,
/// `fingerprint`, `insecure`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConnect {
    #[serde(default)]
    pub(super) tls: FileConnectTls,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConnectTls {
    #[serde(default)]
    pub(super) root: OneOrMany<PathBuf>,
    #[serde(default)]
    pub(super) fingerprint: OneOrMany<String>,
    pub(super) insecure: Option<bool>,
    pub(super) cert: Option<PathBuf>,
    pub(super) key: Option<PathBuf>,
}

/// One value or an array of them.
#[derive(Deserialize, Debug)]
#[serde(untagged)]
pub(super) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl<T> OneOrMany<T> {
    pub(super) fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(one) => vec![one],
            OneOrMany::Many(many) => many,
        }
    }
}

/// `[auth]`: `key`, `key_dir`, `public`, `public_publish`, `public_subscribe`, `url`,
/// `max_age`, `node`.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAuth {
    pub(super) key: Option<PathBuf>,
    pub(super) key_dir: Option<PathBuf>,
    pub(super) url: Option<url::Url>,
    pub(super) max_age: Option<String>,
    pub(super) node: Option<String>,
    #[serde(default)]
    pub(super) public: Vec<String>,
    #[serde(default)]
    pub(super) public_publish: Vec<String>,
    #[serde(default)]
    pub(super) public_subscribe: Vec<String>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTls {
    pub(super) cert: Option<PathBuf>,
    pub(super) key: Option<PathBuf>,
    #[serde(default)]
    pub(super) generate: Vec<String>,
    /// `--listen-tls-root`.
    pub(super) root: Option<PathBuf>,
}
