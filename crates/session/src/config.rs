//! What a session is configured with: its origins, root, identity and bounds.

use std::time::Duration;

use starling_model::{Limits, Origin};
use starling_proto::Path;

/// Bounds on what one peer can make this session hold.
#[derive(Clone, Debug)]
pub struct SessionLimits {
    /// Bytes of incomplete messages and frames buffered across all streams.
    pub recv_budget: usize,
    /// The relay-wide receive pool this session's budget and transport window draw on;
    /// `None`: the budget stands alone and the transport keeps its configured window.
    pub recv_pool: Option<crate::ReceivePool>,
    /// The relay-wide ledger this session's announces, subscriptions and interests are
    /// charged to (one entry each); `None`: only the per-session bounds below hold them.
    pub state_ledger: Option<crate::StateLedger>,
    /// Body limit for control messages (SUBSCRIBE, TRACK, announcements …).
    pub max_control_message: usize,
    /// Subscriptions the peer may hold open with us at once.
    pub max_served_subscriptions: usize,
    /// Announce interests the peer may hold open with us at once.
    pub max_announce_interests: usize,
    /// Live announcements the peer may make on one announce stream.
    pub max_announces: usize,
    /// Requests (TRACK, FETCH, PROBE, GOAWAY) the peer may have in flight; more wait for a
    /// slot, up to the request timeout.
    pub max_requests: usize,
    /// Our own upstream subscriptions in flight on this session.
    pub max_upstream_subscriptions: usize,
    /// Group streams one subscription may have in flight before the oldest is reset.
    pub max_inflight_groups: usize,
    /// How long the peer has to send its SETUP.
    pub handshake_timeout: Duration,
    /// How long a request may wait for track info or a route.
    pub request_timeout: Duration,
    /// How long an upstream subscription outlives its last reader.
    pub linger: Duration,
    /// How long a change of an announced path's best route waits before it goes out as
    /// ANNOUNCE_UPDATE; later changes in the window join it (moq-relay: 300 ms). Zero sends
    /// each change at once.
    pub announce_update_hold: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            recv_budget: 64 << 20,
            recv_pool: None,
            state_ledger: None,
            max_control_message: 64 << 10,
            max_served_subscriptions: 4096,
            max_announce_interests: 1024,
            max_announces: 65536,
            max_requests: 1024,
            max_upstream_subscriptions: 4096,
            max_inflight_groups: 32,
            handshake_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            linger: Duration::from_millis(500),
            announce_update_hold: Duration::from_millis(300),
        }
    }
}

impl SessionLimits {
    /// Requests an IETF peer may open ahead of its last on drafts 14-16 (the MAX_REQUEST_ID
    /// window): as many as every request bound together admits.
    pub fn ietf_request_window(&self) -> usize {
        self.max_requests + self.max_served_subscriptions + self.max_announce_interests
    }
}

/// What a session's peer may do, per wire path (relative to the session root). Without one, a
/// session may do whatever its origins allow.
pub trait Access: Send + Sync + std::fmt::Debug + 'static {
    /// May the peer announce (publish) the broadcast at `path`?
    fn can_publish(&self, path: &Path) -> bool;
    /// May the peer subscribe to the broadcast at `path`?
    fn can_subscribe(&self, path: &Path) -> bool;
    /// May the peer subscribe to some broadcast under `prefix` (is an interest worth serving)?
    fn can_subscribe_under(&self, prefix: &Path) -> bool;
}

/// One session's place in its endpoint.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Our origin hop id (split horizon, loop detection). Non-zero.
    pub hop: u64,
    /// What we offer the peer: its announce interests and subscriptions are served from here.
    pub publish: Option<Origin>,
    /// Where the peer's announcements land.
    pub consume: Option<Origin>,
    /// Wire paths are relative to this root.
    pub root: Path,
    /// Prefixes (relative to `root`) we ask the peer to announce, when `consume` is set.
    pub announce_prefixes: Vec<Path>,
    /// A cluster peer also hears hidden (dot-segment) paths.
    pub cluster_peer: bool,
    /// On lite-07, ask the peer for hidden (dot-segment) paths too (ANNOUNCE_REQUEST's Hidden
    /// flag); true by default, as moq-net's clients send it.
    pub hear_hidden: bool,
    /// Our price for routes learned from this peer; else the peer's SETUP cost, else 1.
    pub link_cost: Option<u64>,
    /// The longest hop chain accepted from this peer (after appending its hop); longer
    /// announcements are dropped.
    pub max_hops: usize,
    pub limits: SessionLimits,
    pub model_limits: Limits,
    /// Per-path permissions (a verified token's grant); `None` allows every path.
    pub access: Option<std::sync::Arc<dyn Access>>,
    /// The relay-wide cache budget the tracks this session pulls from its peer charge (and
    /// count the groups their caches drop in).
    pub cache_budget: Option<std::sync::Arc<starling_model::CacheBudget>>,
    /// Pull each track's whole window (its max age) from the peer, whatever the readers so
    /// far asked: a relay caches for readers still to come. Pulled at the first reader's
    /// demand, a track first read at its live edge (a viewer, an HTTP fetch of the latest
    /// group) could never serve the history a later reader reaches back for: publishers do
    /// not resend what a larger max age would have covered.
    pub pull_window: bool,
    /// Where the session reads wall time (a simulation's own).
    pub clock: crate::Clock,
}

impl SessionConfig {
    pub(crate) fn may_publish(&self, wire: &Path) -> bool {
        self.access.as_ref().is_none_or(|a| a.can_publish(wire))
    }

    pub(crate) fn may_subscribe(&self, wire: &Path) -> bool {
        self.access.as_ref().is_none_or(|a| a.can_subscribe(wire))
    }

    pub(crate) fn may_subscribe_under(&self, prefix: &Path) -> bool {
        self.access
            .as_ref()
            .is_none_or(|a| a.can_subscribe_under(prefix))
    }

    pub fn new(hop: u64) -> Self {
        SessionConfig {
            hop,
            publish: None,
            consume: None,
            root: Path::empty(),
            announce_prefixes: vec![Path::empty()],
            cluster_peer: false,
            pull_window: false,
            hear_hidden: true,
            link_cost: None,
            max_hops: starling_proto::limits::MAX_HOPS,
            limits: SessionLimits::default(),
            model_limits: Limits::default(),
            access: None,
            cache_budget: None,
            clock: crate::Clock::system(),
        }
    }

    /// A dynamic broadcast for what the peer serves, in the relay-wide cache budget if given.
    pub(crate) fn dynamic_broadcast(&self) -> starling_model::BroadcastProducer {
        let broadcast = starling_model::BroadcastProducer::dynamic(self.model_limits);
        match &self.cache_budget {
            Some(budget) => broadcast.with_cache_budget(budget.clone()),
            None => broadcast,
        }
    }
}

/// A random hop id below 2^53 (so JavaScript peers read it exactly), never 0; drawn from the
/// thread's generator (`starling_model::entropy`), so a seeded simulation draws the same ids.
pub fn random_hop() -> u64 {
    1 + starling_model::entropy::below((1u64 << 53) - 1)
}
