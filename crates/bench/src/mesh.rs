//! Relays over the in-memory transport: each relay is one origin with bounded caches, accepting
//! clients and, in a full mesh, every other relay as a cluster peer.
//!
//! A link is one `mem::pair()`: the dialing side runs `Session::connect`, the accepting side
//! `Accepting::new(..).start(config)`, both polled together on the caller's task. Between relays
//! both ends publish and consume their own origin with `cluster_peer` set, so hidden (`.stats`)
//! paths cross the mesh; split horizon (the peer's hop) and the hop chain keep routes from
//! looping, and the direct route (one hop, cost 1) wins over routes through a third relay.

use starling_model::{Limits, Origin};
use starling_proto::{Protocol, SessionCode};
use starling_session::{random_hop, Accepting, ClientSetup, Session, SessionConfig, SessionLimits};
use starling_transport::mem::{pair, MemTransport};

use crate::{Error, VERSION};

/// Per-track cache bounds every relay applies: a few 1-s GOPs of 1 KB frames, or a few seconds
/// of stats groups. Small on purpose, so a bench that leaked groups would show it.
pub fn cache_limits() -> Limits {
    Limits {
        track_cache_bytes: 1 << 20,
        max_cached_groups: 8,
        ..Limits::default()
    }
}

/// Session bounds for bench sessions: the defaults, except that the dashboard's one session
/// legitimately holds thousands of subscriptions and TRACK requests at once (4080 in the
/// production shape, above the default 1024 requests in flight).
pub fn session_limits() -> SessionLimits {
    SessionLimits {
        max_requests: 1 << 16,
        max_served_subscriptions: 1 << 16,
        max_upstream_subscriptions: 1 << 16,
        ..SessionLimits::default()
    }
}

/// One relay: an origin shared by every session it holds.
pub struct Relay {
    pub origin: Origin,
    pub hop: u64,
    /// The version its links speak.
    pub version: Protocol,
    sessions: Vec<Session<MemTransport>>,
}

impl Default for Relay {
    fn default() -> Self {
        Self::new()
    }
}

impl Relay {
    pub fn new() -> Self {
        Self::on(VERSION)
    }

    /// A relay whose links speak `version`.
    pub fn on(version: impl Into<Protocol>) -> Self {
        let version = version.into();
        Relay {
            origin: Origin::new(),
            hop: random_hop(),
            version,
            sessions: Vec::new(),
        }
    }

    /// This relay's side of a session: publish and consume its origin, bounded caches.
    pub fn config(&self, cluster_peer: bool) -> SessionConfig {
        let mut config = SessionConfig::new(self.hop);
        config.publish = Some(self.origin.clone());
        config.consume = Some(self.origin.clone());
        config.cluster_peer = cluster_peer;
        // As the relay's sessions do: pull each track's whole window.
        config.pull_window = true;
        config.limits = session_limits();
        config.model_limits = cache_limits();
        config
    }

    /// Accept a client configured with `client`; returns the client's session. The relay keeps
    /// its side until [`Relay::close`].
    pub async fn accept(&mut self, client: SessionConfig) -> Result<Session<MemTransport>, Error> {
        let (client, server) = link(client, self.config(false), self.version).await?;
        self.sessions.push(server);
        Ok(client)
    }

    /// Close every session this relay holds.
    pub fn close(&mut self) {
        for session in self.sessions.drain(..) {
            session.close(SessionCode::NoError, "bench over");
        }
    }
}

/// Connect a client (`dialer`) to a server (`acceptor`) over a fresh in-memory pair, speaking
/// `version`.
pub async fn link(
    dialer: SessionConfig,
    acceptor: SessionConfig,
    version: Protocol,
) -> Result<(Session<MemTransport>, Session<MemTransport>), Error> {
    let (client, server) = pair();
    let timeout = acceptor.limits.handshake_timeout;
    let (client, server) = tokio::join!(
        async move {
            match version {
                Protocol::Lite(v) => {
                    Session::connect(client, v, ClientSetup::default(), dialer).await
                }
                Protocol::Ietf(d) => {
                    Session::connect_ietf(client, d, ClientSetup::default(), dialer).await
                }
            }
        },
        async move {
            let accepting = match version {
                Protocol::Lite(v) => Accepting::new(server, v, timeout).await?,
                Protocol::Ietf(d) => Accepting::ietf(server, d, timeout).await?,
            };
            accepting.start(acceptor).await
        }
    );
    Ok((client?, server?))
}

/// A full mesh: every pair of relays linked once, both ends cluster peers.
pub struct Mesh {
    pub relays: Vec<Relay>,
}

impl Mesh {
    /// `count` relays, each linked to every other (the higher index dials the lower), every
    /// link speaking `version`.
    pub async fn full(count: usize, version: impl Into<Protocol>) -> Result<Mesh, Error> {
        let version = version.into();
        let mut relays: Vec<Relay> = (0..count).map(|_| Relay::on(version)).collect();
        for dialer in 1..count {
            for acceptor in 0..dialer {
                let (out, back) = link(
                    relays[dialer].config(true),
                    relays[acceptor].config(true),
                    version,
                )
                .await?;
                relays[dialer].sessions.push(out);
                relays[acceptor].sessions.push(back);
            }
        }
        Ok(Mesh { relays })
    }

    /// Close every session of every relay.
    pub fn close(&mut self) {
        for relay in &mut self.relays {
            relay.close();
        }
    }
}
