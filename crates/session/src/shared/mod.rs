//! The state both halves of a session share, and what the peer said in its SETUP: a leaf
//! under the handshake, the dispatcher and the halves, which all hold an `Arc<Shared>`.
//! (`ietf` holds what an IETF session keeps beside it.)

pub(crate) mod ietf;

use starling_model::entropy::Map;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use starling_model::TrackProducer;
use starling_proto::{Path, ProbeLevel, Role, Setup, StreamCode, Version};
use starling_transport::{RecvStream, Transport, TransportError};
use tokio_util::sync::CancellationToken;

use crate::budget::RecvBudget;
use crate::config::SessionConfig;
use crate::error::Error;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::stop::Stop;
use crate::violation::Violation;
use crate::writer::Writer;

/// What the peer said in its SETUP.
#[derive(Clone, Debug, Default)]
pub struct PeerSetup {
    pub hop: u64,
    pub role: Option<Role>,
    pub path: Option<String>,
    pub cost: Option<u64>,
    pub probe: ProbeLevel,
    /// The IETF drafts' AUTHORIZATION_TOKEN value (a JWT), presented like `?jwt=`.
    pub token: Option<String>,
}

impl PeerSetup {
    /// A peer whose version has no SETUP (lite-01…04): it names nothing, so a random hop is
    /// assigned to it for split horizon, as moq-net does.
    pub(crate) fn assigned() -> Self {
        PeerSetup {
            hop: crate::config::random_hop(),
            ..PeerSetup::default()
        }
    }

    pub(crate) fn from_setup(setup: &Setup) -> Result<Self, Error> {
        Ok(PeerSetup {
            hop: setup.hop().unwrap_or(0),
            role: setup.role(),
            path: setup.path().map(str::to_string),
            cost: setup.cost(),
            probe: setup.probe(),
            token: None,
        })
    }

    /// The peer's hop for split horizon, if it sent one.
    pub fn exclude_hop(&self) -> Option<u64> {
        (self.hop != 0).then_some(self.hop)
    }
}

/// Counters one session keeps (read by metrics).
#[derive(Debug, Default)]
pub struct SessionStats {
    pub groups_sent: AtomicU64,
    pub frames_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub groups_received: AtomicU64,
    pub frames_received: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Group streams a slow subscriber skipped (reset TOO_FAR_BEHIND).
    pub groups_skipped: AtomicU64,
    /// Routes the peer's announcements hold in our origin now.
    pub routes: AtomicU64,
    /// Streams we reset or stopped because of the peer's input, by moq-lite stream code.
    stream_errors: Mutex<std::collections::BTreeMap<u32, u64>>,
}

impl SessionStats {
    /// A datagram arrived whole as a one-frame group of `size` payload bytes.
    pub(crate) fn datagram_received(&self, size: u64) {
        self.groups_received.fetch_add(1, Ordering::Relaxed);
        self.frames_received.fetch_add(1, Ordering::Relaxed);
        self.bytes_received.fetch_add(size, Ordering::Relaxed);
    }

    pub(crate) fn stream_error(&self, code: StreamCode) {
        *self.stream_errors.lock().entry(code.to_code()).or_default() += 1;
    }

    /// Streams failed on the peer's input so far, by stream code.
    pub fn stream_errors(&self) -> std::collections::BTreeMap<u32, u64> {
        self.stream_errors.lock().clone()
    }
}

/// One subscription of ours to the peer: the track its groups go to, and how many group
/// streams for it have arrived (lite-07's SUBSCRIBE_END settles the tail on that count).
pub(crate) struct Upstream {
    pub track: Arc<TrackProducer>,
    pub streams: StreamCount,
}

/// The group streams of one upstream subscription that arrived. Counting is one atomic add;
/// only an ended subscription waiting for the streams its end counts is ever notified.
#[derive(Debug, Default)]
pub(crate) struct StreamCount {
    count: AtomicU64,
    waiting: std::sync::atomic::AtomicBool,
    reached: tokio::sync::Notify,
}

impl StreamCount {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.reached.notify_waiters();
        }
    }

    /// Resolves once `count` streams arrived.
    pub async fn reached(&self, count: u64) {
        loop {
            let notified = self.reached.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            self.waiting.store(true, Ordering::SeqCst);
            if self.count.load(Ordering::SeqCst) >= count {
                return;
            }
            notified.await;
        }
    }
}

impl Upstream {
    /// A group stream of this subscription arrived: count it, and rank its reader by the
    /// priority our readers asked of the subscription (within it, older groups are evicted
    /// first).
    pub fn arrived<R: RecvStream>(&self, reader: &mut Reader<R>, sequence: u64) {
        self.streams.add();
        reader.set_rank(Rank::Data {
            priority: self.track.demand().map_or(0, |demand| demand.priority),
            sequence,
        });
    }
}

pub(crate) struct Shared<T: Transport> {
    pub transport: T,
    /// The lite codec in force: the negotiated version, or on an IETF session lite-06, whose
    /// model semantics its tracks take. Never reported: [`crate::Session::protocol`] is.
    pub version: Version,
    pub config: SessionConfig,
    pub peer: PeerSetup,
    pub budget: RecvBudget,
    /// Our subscriptions to the peer, by subscribe id: where its group streams land.
    pub upstream: Mutex<Map<u64, Arc<Upstream>>>,
    pub next_subscribe_id: AtomicU64,
    pub served_subscriptions: AtomicUsize,
    pub announce_interests: AtomicUsize,
    /// Slots for the peer's requests (TRACK, FETCH, PROBE, GOAWAY) in flight; a request past
    /// them waits for one (up to the request timeout) instead of being refused.
    pub requests: tokio::sync::Semaphore,
    /// Stamp for announcements whose chain names no publisher.
    pub anonymous_stamp: u64,
    pub cancel: CancellationToken,
    pub error: Mutex<Option<Error>>,
    /// The peer sent GOAWAY: the URI to reconnect to (empty = the same endpoint).
    pub goaway: Mutex<Option<String>>,
    pub goaway_received: tokio::sync::Notify,
    pub goaway_sent: std::sync::atomic::AtomicBool,
    pub stats: SessionStats,
    /// An IETF session's own state (`None` on moq-lite). Such a session's `version` is
    /// lite-06, whose model semantics its tracks take (docs/wire-ietf.md §7).
    pub ietf: Option<Arc<ietf::State<T>>>,
    /// This session's account in the relay-wide state ledger, when it has one.
    pub state: Option<crate::StateAccount>,
    /// Our subscriptions to the peer still running (see [`Pulling`]): when the peer closes,
    /// the session waits for them to read what it sent before (bounded by `CLOSE_DRAIN`).
    pub pulls: AtomicUsize,
    pub pulls_ended: tokio::sync::Notify,
    /// Fired when the transport closed under us: the broadcasts the peer serves take no new
    /// track request (a request dispatched to a dead session would fail at once and be
    /// handed on, maybe to another dying session and back), while running pulls finish.
    pub closing: CancellationToken,
}

/// Counts one running subscription to the peer in [`Shared::pulls`] while it lives.
pub(crate) struct Pulling<'a> {
    pulls: &'a AtomicUsize,
    ended: &'a tokio::sync::Notify,
}

impl Drop for Pulling<'_> {
    fn drop(&mut self) {
        if self.pulls.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.ended.notify_waiters();
        }
    }
}

impl<T: Transport> Shared<T> {
    /// Count a subscription to the peer as running until the guard drops.
    pub(crate) fn pulling(&self) -> Pulling<'_> {
        self.pulls.fetch_add(1, Ordering::AcqRel);
        Pulling {
            pulls: &self.pulls,
            ended: &self.pulls_ended,
        }
    }

    /// Resolves once no subscription to the peer is running.
    pub(crate) async fn pulls_settled(&self) {
        loop {
            let ended = self.pulls_ended.notified();
            if self.pulls.load(Ordering::Acquire) == 0 {
                return;
            }
            ended.await;
        }
    }

    /// The peer's hop id as known now: an IETF client on 17 on reads its server's SETUP only
    /// after the session started, so until then (and for a peer that names none) it is the
    /// hop assigned at the start.
    pub(crate) fn peer_hop(&self) -> u64 {
        self.ietf
            .as_ref()
            .and_then(|state| state.peer())
            .and_then(|options| options.hop_id)
            .filter(|hop| *hop != 0)
            .unwrap_or(self.peer.hop)
    }

    /// The peer's hop, for split horizon (see [`Shared::peer_hop`]).
    pub(crate) fn exclude_hop(&self) -> Option<u64> {
        Some(self.peer_hop()).filter(|hop| *hop != 0)
    }

    /// The price of routes learned from the peer: ours for the link, else the cost its SETUP
    /// names (read late, as [`Shared::peer_hop`]), else 1.
    pub(crate) fn link_cost(&self) -> u64 {
        let named = match self.ietf.as_ref().and_then(|state| state.peer()) {
            Some(options) => options.relay_cost,
            None => self.peer.cost,
        };
        self.config.link_cost.or(named).unwrap_or(1)
    }

    /// Run `task` until it ends or the session does.
    pub fn spawn<F>(self: &Arc<Self>, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(crate::cancellable::Cancellable::new(
            task,
            self.cancel.clone().cancelled_owned(),
        ));
    }

    /// A uni stream for one group, unless `abort` resolves before the transport grants one;
    /// counted in `opened` (the stream count a track's end reports). Callers run inside
    /// [`Shared::spawn`], which ends them with the session.
    pub async fn group_stream<A: std::future::Future>(
        &self,
        abort: A,
        opened: &AtomicU64,
    ) -> Option<Writer<T::Send>> {
        let stream = tokio::select! {
            biased;
            stream = self.transport.open_uni() => stream.ok()?,
            _ = abort => return None,
        };
        opened.fetch_add(1, Ordering::Relaxed);
        Some(Writer::new(stream, self.version))
    }

    /// One group on a stream of its own (a subscription's send, both families): the stream
    /// is opened unless `stop` comes first, set to send `order`, written by `write`, then
    /// FIN'd; a group that cannot complete (its write failed, or `stop` came) is reset with
    /// `reset_code` of why. Resolves to `sequence`.
    pub async fn send_group(
        &self,
        sequence: u64,
        stop: &Stop,
        opened: &AtomicU64,
        order: i32,
        write: impl AsyncFnOnce(&mut Writer<T::Send>) -> Result<(), StreamCode>,
        reset_code: impl FnOnce(StreamCode) -> u32,
    ) -> u64 {
        let Some(mut writer) = self.group_stream(stop.stopped(), opened).await else {
            return sequence;
        };
        writer.set_priority(order);
        let result = tokio::select! {
            biased;
            result = write(&mut writer) => result,
            code = stop.stopped() => Err(code),
        };
        tracing::trace!(sequence, ?result, "group stream sent");
        match result {
            Ok(()) => {
                let _ = writer.finish();
                self.stats.groups_sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(code) => writer.reset(reset_code(code)),
        }
        sequence
    }

    /// The peer sent GOAWAY asking to reconnect to `uri`; a second one is a protocol
    /// violation (docs/wire.md §4.12, docs/wire-ietf.md §4.15).
    pub fn goaway_arrived(&self, uri: String) -> Result<(), Error> {
        tracing::info!(%uri, "peer is going away");
        let first = {
            let mut slot = self.goaway.lock();
            let first = slot.is_none();
            slot.get_or_insert(uri);
            first
        };
        self.goaway_received.notify_waiters();
        if first {
            Ok(())
        } else {
            Err(Error::ProtocolViolation(Violation::SecondGoaway))
        }
    }

    /// Resolves once the peer has sent GOAWAY.
    pub async fn going_away(&self) {
        loop {
            let notified = self.goaway_received.notified();
            if self.goaway.lock().is_some() {
                return;
            }
            notified.await;
        }
    }

    /// End the session with the code `err` maps to.
    pub fn fail(&self, err: Error) {
        let code = err.session_code();
        tracing::debug!(?err, ?code, "session failed");
        {
            let mut slot = self.error.lock();
            if slot.is_none() {
                *slot = Some(err.clone());
            }
        }
        self.transport.close(code.to_code(), &err.to_string());
        self.cancel.cancel();
    }

    /// The absolute path for a wire path.
    pub fn absolute(&self, wire: &Path) -> Result<Path, Error> {
        self.config
            .root
            .join(wire)
            .map_err(|_| Error::ProtocolViolation(Violation::PathTooLong))
    }

    /// A slot for one of the peer's requests, waiting up to the request timeout for one to
    /// free (CONTROL_TIMEOUT past it).
    pub async fn request_slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, Error> {
        tokio::time::timeout(self.config.limits.request_timeout, self.requests.acquire())
            .await
            .map_err(|_| Error::Stream(StreamCode::ControlTimeout))?
            .map_err(|_| Error::Stream(StreamCode::Internal))
    }

    /// Take a slot from one of this session's bounded counters, and charge what it holds to
    /// the relay-wide state ledger when the session has an account; `None` when either is
    /// full.
    pub fn take_slot<'a>(
        &self,
        counter: &'a AtomicUsize,
        max: usize,
        held: crate::Held,
    ) -> Option<SlotGuard<'a>> {
        let prev = counter.fetch_add(1, Ordering::AcqRel);
        if prev >= max {
            counter.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let entry = match &self.state {
            Some(account) => match account.charge(held) {
                Some(entry) => Some(entry),
                None => {
                    counter.fetch_sub(1, Ordering::AcqRel);
                    return None;
                }
            },
            None => None,
        };
        Some(SlotGuard {
            counter,
            _entry: entry,
        })
    }

    /// An entry in the relay-wide state ledger for one more announced broadcast: `Ok(None)`
    /// without an account, `Bound` when the ledger refuses it.
    pub fn charge_route(&self) -> Result<Option<crate::StateEntry>, Error> {
        match &self.state {
            Some(account) => account
                .charge(crate::Held::Route)
                .map(Some)
                .ok_or(Error::Bound("relay-wide state ledger")),
            None => Ok(None),
        }
    }
}

/// Releases a bounded-counter slot (and its ledger entry) on drop.
pub(crate) struct SlotGuard<'a> {
    counter: &'a AtomicUsize,
    _entry: Option<crate::StateEntry>,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Map a transport reset into the stream code it carried.
pub(crate) fn reset_code(err: &Error) -> Option<StreamCode> {
    match err {
        Error::Transport(TransportError::Reset(code)) => Some(StreamCode::from_code(*code)),
        _ => None,
    }
}
