//! Clustering: this relay as one member of a mesh of relays, moq-dev's convention as
//! moq-relay 0.17.10 runs it (docs/wire-roadmap.md §4).
//!
//! There is no cluster wire: a peer link is an ordinary moq-lite session that both publishes
//! and subscribes. The dialer sends SETUP with its cluster id as Hop, its price as Cost and no
//! Role; both sides ask each other for every announcement, chains grow by one hop per link
//! (the receiver appends the sender's ANNOUNCE_OK hop), loops and split horizon are the
//! session layer's, and each relay pulls a track once from its best route whatever the number
//! of readers. This module owns the configuration and the links this relay dials.

mod api;
mod dial;
mod dns;
mod peer;
mod redial;

use std::time::Duration;

use starling_net::TlsVerify;

pub use api::{parse_list, ApiError, ConnectApi, FILE_CHECK, POLL};
pub(crate) use dial::{dials_any, start, start_with, Mesh};
pub use dial::{Connected, Connector};
pub use dns::{DnsPeers, RESOLVE_EVERY};
pub use peer::{parse_peers, PeerEntry, PeerError, PeerObject, PeerSpec};
pub use redial::{Redial, RedialPolicy};

/// The largest hop id (ids are varints below 2^62).
const MAX_ID: u64 = (1 << 62) - 1;

/// Configuration keys moq-relay removed, refused at startup with its explanation.
pub const REMOVED_KEYS: [(&str, &str); 2] = [
    (
        "mesh",
        "cluster gossip was removed (moq-relay 0.17.0): list peers with --cluster-connect or \
         serve them from --cluster-connect-api",
    ),
    (
        "linger",
        "the broadcast linger was removed: a broadcast now closes once its last publisher is \
         lost; overlapping routes (redundant peers, a GOAWAY handover) carry failover",
    ),
];

/// This relay's place in a cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// This relay's hop id (`--cluster-id`): its SETUP Hop, its ANNOUNCE_OK hop and the id
    /// other relays find in chains. Random in [1, 2^53) when unset.
    pub id: Option<u64>,
    /// The longest hop chain accepted from a peer (1..=32).
    pub max_hops: usize,
    /// The relays this one dials, always.
    pub connect: Vec<PeerEntry>,
    /// A peer list kept up to date at run time (`--cluster-connect-api`): peers it adds are
    /// dialed, peers it drops are released, changed ones redialed.
    pub connect_api: Option<ConnectApi>,
    /// DNS names whose addresses are peers (`--cluster-connect-dns`), re-resolved every 5 s.
    pub connect_dns: Vec<DnsPeers>,
    /// The credential for peers whose entry carries none (`--cluster-token`'s file).
    pub token: Option<String>,
    /// This relay's own URL (`--cluster-node`): a peer entry with its key is not dialed.
    pub node: Option<String>,
    /// How dialed peers' certificates are verified (`--connect-tls-*`).
    pub connect_tls: TlsVerify,
    /// The certificate and key (PEM files) presented to peers that ask for one
    /// (`--connect-tls-cert`, `--connect-tls-key`): the mTLS identity of this relay's dials.
    pub connect_identity: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// Keep-alive interval on dialed peer links.
    pub peer_keep_alive: Duration,
    /// A dialed peer silent this long is dead: its routes go and the link redials. QUIC uses
    /// the smaller of both sides' idle timeouts, so the peer notices just as soon.
    pub peer_idle_timeout: Duration,
    /// Redial pacing per peer link.
    pub redial: RedialPolicy,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            id: None,
            max_hops: starling_proto::limits::MAX_HOPS,
            connect: Vec::new(),
            connect_api: None,
            connect_dns: Vec::new(),
            token: None,
            node: None,
            connect_tls: TlsVerify::System,
            connect_identity: None,
            peer_keep_alive: Duration::from_millis(250),
            peer_idle_timeout: Duration::from_secs(2),
            redial: RedialPolicy::default(),
        }
    }
}

/// Why a cluster configuration cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ClusterConfigError {
    #[error("cluster id must be in 1..2^62, got {0}")]
    Id(u64),
    #[error("cluster max hops must be in 1..=32, got {0}")]
    MaxHops(usize),
    #[error("the peer idle timeout must be longer than the keep-alive interval")]
    IdleTimeout,
    #[error(transparent)]
    Peer(#[from] PeerError),
    #[error("connect api: {0}")]
    Api(String),
    #[error("--connect-tls-cert/--connect-tls-key: {0}")]
    Identity(String),
}

impl ClusterConfig {
    /// Refuse what moq-relay refuses at startup.
    pub fn validate(&self) -> Result<(), ClusterConfigError> {
        if let Some(id) = self.id {
            if id == 0 || id > MAX_ID {
                return Err(ClusterConfigError::Id(id));
            }
        }
        if !(1..=starling_proto::limits::MAX_HOPS).contains(&self.max_hops) {
            return Err(ClusterConfigError::MaxHops(self.max_hops));
        }
        if self.peer_idle_timeout <= self.peer_keep_alive {
            return Err(ClusterConfigError::IdleTimeout);
        }
        Ok(())
    }

    /// The configured peers to dial (see [`ClusterConfig::filter`]).
    pub fn dials(&self) -> Vec<PeerEntry> {
        self.filter(self.connect.clone())
    }

    /// Peers as this relay dials them: the node's own entry left out, the cluster token
    /// added where an entry carries no credential.
    pub fn filter(&self, peers: Vec<PeerEntry>) -> Vec<PeerEntry> {
        let own = self
            .node
            .as_deref()
            .and_then(|node| PeerEntry::parse(node).ok())
            .map(|entry| entry.key);
        peers
            .into_iter()
            .filter(|peer| Some(&peer.key) != own.as_ref())
            .map(|peer| match &self.token {
                Some(token) => peer.with_token(token),
                None => peer,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_hop_limits_are_checked() {
        assert!(ClusterConfig::default().validate().is_ok());
        for config in [
            ClusterConfig {
                id: Some(0),
                ..Default::default()
            },
            ClusterConfig {
                id: Some(1 << 62),
                ..Default::default()
            },
            ClusterConfig {
                max_hops: 0,
                ..Default::default()
            },
            ClusterConfig {
                max_hops: 33,
                ..Default::default()
            },
        ] {
            assert!(config.validate().is_err(), "{config:?}");
        }
    }

    #[test]
    fn the_node_is_not_dialed_and_the_token_fills_in() {
        let config = ClusterConfig {
            connect: parse_peers(&[
                PeerSpec::Url("moqt://a:1/".into()),
                PeerSpec::Url("moqt://b:1/?jwt=own".into()),
            ])
            .unwrap(),
            node: Some("moqt://a:1".into()),
            token: Some("T".into()),
            ..Default::default()
        };
        let dials = config.dials();
        assert_eq!(dials.len(), 1);
        assert_eq!(dials[0].url.as_str(), "moqt://b:1/?jwt=own");
    }
}
