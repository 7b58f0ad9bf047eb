//! What an IETF session keeps beside the state every session shares: the draft, what the
//! peer declared in its SETUP, the request ids of both sides (docs/wire-ietf.md §3.5), and
//! the control stream (drafts 14-16) or our SETUP stream (17 on), which carries GOAWAY.

use starling_model::entropy::{Map, Set};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use starling_proto::ietf::{Control, Draft, SetupOptions};
use starling_proto::Path;
use starling_transport::Transport;
use tokio::sync::{mpsc, Notify};

use crate::error::Error;
use crate::shared::Shared;
use crate::violation::Violation;
use crate::writer::Writer;

/// A request multiplexed on the control stream of drafts 14-16 (docs/wire-ietf.md §4.2).
pub(crate) struct Route {
    /// Where the messages that name it go.
    pub tx: mpsc::Sender<Control>,
    /// PUBLISH_NAMESPACE on 14 and 15: withdrawals and cancellations name the namespace.
    pub namespace: Option<Path>,
    /// We opened it (else the peer did).
    pub ours: bool,
}

/// Request ids: ours, and on 14-16 the peer's with the credit we grant it.
struct Ids {
    next: u64,
    /// 14-16: the peer's MAX_REQUEST_ID; `None` is no limit (a SETUP without one, as moq-net
    /// reads it).
    peer_max: Option<u64>,
    /// 14-16: one past the highest id the peer used (its parity).
    peer_next: u64,
    /// 14-16: the MAX_REQUEST_ID we granted.
    granted: u64,
    /// 14-16: requests granted ahead of the peer's last.
    window: u64,
}

/// An IETF session: its shared state and its family's, known to be there. The IETF code takes
/// this, made once when the session starts, so none of it asks at run time which family it
/// serves.
pub(crate) struct Ietf<T: Transport> {
    shared: Arc<Shared<T>>,
    state: Arc<State<T>>,
}

impl<T: Transport> Clone for Ietf<T> {
    fn clone(&self) -> Self {
        Ietf {
            shared: self.shared.clone(),
            state: self.state.clone(),
        }
    }
}

impl<T: Transport> Ietf<T> {
    /// The IETF session `shared` is, if it is one (only the session's entry points ask).
    pub fn of(shared: &Arc<Shared<T>>) -> Option<Self> {
        let state = shared.ietf.clone()?;
        Some(Ietf {
            shared: shared.clone(),
            state,
        })
    }

    pub fn state(&self) -> &State<T> {
        &self.state
    }

    /// The session's shared state, for what both families share.
    pub fn shared(&self) -> &Arc<Shared<T>> {
        &self.shared
    }
}

impl<T: Transport> std::ops::Deref for Ietf<T> {
    type Target = Arc<Shared<T>>;

    fn deref(&self) -> &Arc<Shared<T>> {
        &self.shared
    }
}

pub(crate) struct State<T: Transport> {
    pub draft: Draft,
    /// We accepted the session (our ids are odd).
    pub server: bool,
    /// The peer's SETUP; on 17 and later a client has it only once the server's SETUP
    /// stream arrived (`setup_arrived`).
    peer: Mutex<Option<SetupOptions>>,
    setup_arrived: Notify,
    /// 14-16: the control stream; 17 on: our SETUP stream (GOAWAY follows the SETUP on it).
    pub control: tokio::sync::Mutex<Option<Writer<T::Send>>>,
    /// 14-16: requests on the control stream, by request id.
    pub routes: Mutex<Map<u64, Route>>,
    ids: Mutex<Ids>,
    ids_changed: Notify,
    /// A track alias was bound (a SUBSCRIBE_OK arrived): data streams waiting for one look
    /// again.
    pub aliases_changed: Notify,
    /// Broadcasts (absolute paths) advertised to the peer with a PUBLISH_NAMESPACE of ours.
    pub advertised: Mutex<Set<Path>>,
    /// Subscriptions served from the middle of a group (Next Object), by request id: the
    /// head a joining FETCH asks for.
    pub joins: Mutex<Map<u64, Join>>,
}

/// The head of the group a Next Object subscription started in the middle of: its sequence
/// and the frames before the subscription's first object (Largest is the last of them).
#[derive(Clone)]
pub(crate) struct Join {
    pub group: u64,
    pub head: Vec<starling_model::Frame>,
}

/// Requests a peer may open ahead of its last on 14-16, at most.
const MAX_WINDOW: u64 = 1 << 16;

impl<T: Transport> State<T> {
    pub fn new(draft: Draft, server: bool, peer: Option<SetupOptions>, window: usize) -> Self {
        let window = (window as u64).clamp(1, MAX_WINDOW);
        let peer_first = u64::from(!server);
        let peer_max = peer.as_ref().and_then(|p| p.max_request_id);
        State {
            draft,
            server,
            peer: Mutex::new(peer),
            setup_arrived: Notify::new(),
            control: tokio::sync::Mutex::new(None),
            routes: Mutex::new(Map::default()),
            ids: Mutex::new(Ids {
                next: u64::from(server),
                peer_max,
                peer_next: peer_first,
                granted: peer_first + 2 * window,
                window,
            }),
            ids_changed: Notify::new(),
            aliases_changed: Notify::new(),
            advertised: Mutex::new(Set::default()),
            joins: Mutex::new(Map::default()),
        }
    }

    /// The MAX_REQUEST_ID our SETUP grants (14-16).
    pub fn initial_grant(&self) -> u64 {
        self.ids.lock().granted
    }

    /// What the peer declared, once its SETUP arrived.
    pub fn peer(&self) -> Option<SetupOptions> {
        self.peer.lock().clone()
    }

    /// The peer's SETUP, waiting for it (17 on, client side) up to `timeout`.
    pub async fn peer_setup(&self, timeout: Duration) -> Result<SetupOptions, Error> {
        let wait = async {
            loop {
                let notified = self.setup_arrived.notified();
                if let Some(peer) = self.peer() {
                    return peer;
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| Error::Timeout("SETUP"))
    }

    /// Record the peer's SETUP (17 on, client side); a second one is a protocol violation.
    pub fn set_peer(&self, setup: SetupOptions) -> Result<(), Error> {
        let mut peer = self.peer.lock();
        if peer.is_some() {
            return Err(Error::ProtocolViolation(Violation::SecondSetup));
        }
        *peer = Some(setup);
        drop(peer);
        self.setup_arrived.notify_waiters();
        Ok(())
    }

    /// Whether the peer declared MoQ Cluster (HOP_ID, 17 on): advertisements to it carry a
    /// hop path, and its must.
    pub fn peer_clusters(&self) -> bool {
        self.draft.has_cluster() && self.peer().is_some_and(|p| p.hop_id.is_some())
    }

    /// Whether the peer wants advertisements only in answer to its SUBSCRIBE_NAMESPACE
    /// (MoQ Solicit, non-zero).
    pub fn peer_solicits(&self) -> bool {
        self.peer()
            .is_some_and(|p| p.solicit.is_some_and(|s| s != 0))
    }

    /// Whether the peer understands SUBSCRIBE_NAMESPACE's HIDDEN parameter.
    pub fn peer_hides(&self) -> bool {
        self.peer().is_some_and(|p| p.hidden.is_some())
    }

    /// Our next request id, waiting (up to `timeout`) for the peer's MAX_REQUEST_ID to allow
    /// it on 14-16. Starling never sends REQUESTS_BLOCKED (moq-net ends the session on one).
    pub async fn allocate(&self, timeout: Duration) -> Result<u64, Error> {
        let wait = async {
            loop {
                let notified = self.ids_changed.notified();
                {
                    let mut ids = self.ids.lock();
                    if ids.peer_max.is_none_or(|max| ids.next < max) {
                        let id = ids.next;
                        ids.next += 2;
                        return id;
                    }
                }
                notified.await;
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| Error::Timeout("request id credit"))
    }

    /// The peer raised its MAX_REQUEST_ID; lowering it is a protocol violation.
    pub fn raise_peer_max(&self, max: u64) -> Result<(), Error> {
        let mut ids = self.ids.lock();
        if ids.peer_max.is_some_and(|old| max < old) {
            return Err(Error::ProtocolViolation(Violation::MaxRequestIdLowered));
        }
        ids.peer_max = Some(max);
        drop(ids);
        self.ids_changed.notify_waiters();
        Ok(())
    }

    /// Check a request id the peer opened a request with: its parity (a client's are even, a
    /// server's odd) and, on 14-16, the credit granted. Returns a MAX_REQUEST_ID to send when
    /// half the window is used.
    pub fn admit(&self, id: u64) -> Result<Option<u64>, Error> {
        let mut ids = self.ids.lock();
        let peer_parity = u64::from(!self.server);
        if id % 2 != peer_parity {
            return Err(Error::ProtocolViolation(Violation::RequestIdParity));
        }
        if !self.draft.has_control_stream() {
            return Ok(None);
        }
        if id >= ids.granted {
            return Err(Error::ProtocolViolation(Violation::RequestIdPastMax));
        }
        ids.peer_next = ids.peer_next.max(id + 2);
        if ids.granted - ids.peer_next < ids.window {
            ids.granted = ids.peer_next + 2 * ids.window;
            return Ok(Some(ids.granted));
        }
        Ok(None)
    }
}
