//! One broadcast: a named set of tracks, either published locally or pulled on demand.
//!
//! A local publisher creates its tracks up front. A broadcast learned from a peer is *dynamic*:
//! the first reader of a track name creates the shared track and queues a request that the
//! owning session answers with one upstream subscription. Later readers of the same name share
//! that track, so fan-out costs one upstream whatever the number of readers.
//!
//! A *front* (see `request.rs`) is a dynamic broadcast too, but its requests are not queued for
//! an owner: each new track is handed at once to the best route's broadcast, and handed on
//! when that route's session is lost.

use crate::entropy::Map;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::Mutex;
use starling_proto::StreamCode;

use crate::cache::CacheBudget;
use crate::route::FrontKey;
use crate::stats::TrackSummary;
use crate::track::{StartAt, TrackConsumer, TrackInfo, TrackProducer};
use crate::waiters::Waiters;
use crate::Limits;

mod request;

pub(crate) use request::FrontHome;
pub use request::TrackRequest;

#[derive(Debug)]
struct BroadcastState {
    tracks: Map<String, TrackConsumer>,
    requests: VecDeque<TrackRequest>,
    dynamic: bool,
    closed: bool,
    waiters: Waiters,
}

#[derive(Debug)]
pub(crate) struct BroadcastShared {
    limits: Limits,
    /// The relay-wide cache budget this broadcast's tracks charge.
    budget: Option<Arc<CacheBudget>>,
    /// Set on a front: where its tracks are dispatched from.
    front: Option<Arc<dyn FrontHome>>,
    state: Mutex<BroadcastState>,
}

impl BroadcastShared {
    fn new(
        limits: Limits,
        budget: Option<Arc<CacheBudget>>,
        front: Option<Arc<dyn FrontHome>>,
        dynamic: bool,
    ) -> Self {
        BroadcastShared {
            limits,
            budget,
            front,
            state: Mutex::new(BroadcastState {
                tracks: Map::default(),
                requests: VecDeque::new(),
                dynamic,
                closed: false,
                waiters: Waiters::default(),
            }),
        }
    }

    fn close(&self) {
        let (requests, tracks) = {
            let mut state = self.state.lock();
            state.closed = true;
            state.waiters.wake_all();
            let tracks = match self.front {
                // The content is gone from every route: its tracks end with it (a pull kept
                // alive only by a peer pulling back through us would otherwise never end).
                // But a publisher unannounces before it ends its tracks, and their last
                // groups are still owed: see `TrackShared::front_closed`.
                Some(_) => state.tracks.drain().map(|(_, track)| track).collect(),
                None => Vec::new(),
            };
            (std::mem::take(&mut state.requests), tracks)
        };
        // Outside the broadcast's lock: each takes the track's.
        for track in tracks {
            track.shared().front_closed();
        }
        // Outside the lock: an unanswered request is handed to another route as it drops.
        drop(requests);
    }
}

/// Owns a broadcast: creates tracks, or answers track requests when dynamic.
#[derive(Debug)]
pub struct BroadcastProducer {
    shared: Arc<BroadcastShared>,
}

impl BroadcastProducer {
    /// A broadcast whose tracks the owner creates with `create_track`.
    pub fn new(limits: Limits) -> Self {
        Self::with_mode(limits, false)
    }

    /// A broadcast whose tracks are created on first request and served by the owner.
    pub fn dynamic(limits: Limits) -> Self {
        Self::with_mode(limits, true)
    }

    fn with_mode(limits: Limits, dynamic: bool) -> Self {
        BroadcastProducer {
            shared: Arc::new(BroadcastShared::new(limits, None, None, dynamic)),
        }
    }

    /// Charge this broadcast's tracks to the relay-wide `budget` (which also counts the groups
    /// their caches drop). Call it on a fresh producer, before any track exists.
    pub fn with_cache_budget(mut self, budget: Arc<CacheBudget>) -> Self {
        match Arc::get_mut(&mut self.shared) {
            Some(shared) => shared.budget = Some(budget),
            None => debug_assert!(false, "cache budget set on a shared broadcast"),
        }
        self
    }

    /// Publish a track under `name`, replacing any earlier track of that name.
    pub fn create_track(&self, name: &str, info: TrackInfo) -> TrackProducer {
        let producer = TrackProducer::counted(
            name,
            Some(info),
            self.shared.limits,
            self.shared.budget.clone(),
        );
        // The broadcast keeps a reader-less handle; it does not count as a consumer.
        let handle = producer.handle();
        let mut state = self.shared.state.lock();
        state.tracks.insert(name.to_string(), handle);
        producer
    }

    /// The next track a reader asked for (dynamic broadcasts); `None` once closed.
    pub fn poll_requested(&self, cx: &mut Context<'_>) -> Poll<Option<TrackRequest>> {
        let mut state = self.shared.state.lock();
        if let Some(track) = state.requests.pop_front() {
            return Poll::Ready(Some(track));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        state.waiters.register(cx);
        Poll::Pending
    }

    pub async fn requested(&self) -> Option<TrackRequest> {
        poll_fn(|cx| self.poll_requested(cx)).await
    }

    /// Forget a track so the next reader requests it afresh.
    pub fn remove_track(&self, track: &TrackProducer) {
        let mut state = self.shared.state.lock();
        if let Some(existing) = state.tracks.get(track.name()) {
            if track.same_track(existing) {
                state.tracks.remove(track.name());
            }
        }
    }

    pub fn consume(&self) -> BroadcastConsumer {
        BroadcastConsumer {
            strong: self.shared.clone(),
        }
    }

    /// End the broadcast: readers see it closed, future requests fail, and pending ones go
    /// to another route when they belong to a front.
    pub fn close(&self) {
        self.shared.close();
    }
}

impl Drop for BroadcastProducer {
    fn drop(&mut self) {
        self.close();
    }
}

/// Reads a broadcast: subscribes to its tracks by name.
#[derive(Debug, Clone)]
pub struct BroadcastConsumer {
    strong: Arc<BroadcastShared>,
}

impl BroadcastConsumer {
    /// A reader of track `name`, sharing the existing track when there is one.
    pub fn subscribe_track(&self, name: &str, start: StartAt) -> Result<TrackConsumer, StreamCode> {
        self.open_track(name, Some(start))
    }

    /// A handle on track `name` that waits for its info only (a TRACK request, a FETCH): it
    /// pulls the track like a reader and keeps it in use, but adds no demand, so a dynamic
    /// track's upstream subscription waits for a reader of groups and carries its max age.
    pub fn watch_track(&self, name: &str) -> Result<TrackConsumer, StreamCode> {
        self.open_track(name, None)
    }

    /// A reader at `start`, or a watcher (`None`), of track `name`.
    fn open_track(&self, name: &str, start: Option<StartAt>) -> Result<TrackConsumer, StreamCode> {
        let open = |track: &TrackConsumer| match start {
            Some(start) => track.resubscribe(start),
            None => track.watch(),
        };
        if name.len() > self.strong.limits.max_track_name_bytes {
            // Refused before it is looked up, requested upstream or keyed anywhere.
            return Err(StreamCode::MalformedTrack);
        }
        let mut state = self.strong.state.lock();
        if state.closed {
            return Err(StreamCode::NotFound);
        }
        if let Some(track) = state.tracks.get(name) {
            if !track.is_closed() {
                return Ok(open(track));
            }
        }
        if !state.dynamic {
            return Err(StreamCode::NotFound);
        }
        if state.tracks.len() >= self.strong.limits.max_tracks_per_broadcast {
            // Finished and failed tracks do not count against the bound.
            state.tracks.retain(|_, track| !track.is_closed());
            if state.tracks.len() >= self.strong.limits.max_tracks_per_broadcast {
                return Err(StreamCode::Internal);
            }
        }
        let producer =
            TrackProducer::counted(name, None, self.strong.limits, self.strong.budget.clone());
        let Some(home) = &self.strong.front else {
            let consumer = open(&producer.handle());
            state.tracks.insert(name.to_string(), producer.handle());
            state.requests.push_back(TrackRequest::direct(producer));
            state.waiters.wake_all();
            return Ok(consumer);
        };
        let producer = producer.resumable();
        let consumer = open(&producer.handle());
        state.tracks.insert(name.to_string(), producer.handle());
        drop(state);
        // Outside the front's lock: dispatching locks the origin and the source.
        let request = TrackRequest::fronted(producer, self.clone());
        if let Err(request) = home.dispatch(request, None) {
            // No route serves this content any more.
            request.abort(StreamCode::NotFound);
            return Err(StreamCode::NotFound);
        }
        Ok(consumer)
    }

    /// A front for `home`, with the limits and cache budget of the broadcast it first reads.
    pub(crate) fn front(home: Arc<dyn FrontHome>, like: &BroadcastConsumer) -> BroadcastConsumer {
        BroadcastConsumer {
            strong: Arc::new(BroadcastShared::new(
                like.strong.limits,
                like.strong.budget.clone(),
                Some(home),
                true,
            )),
        }
    }

    /// Queue a front's track for this broadcast's owner to pull; handed back when the
    /// broadcast is closed.
    pub(crate) fn push_request(&self, mut request: TrackRequest) -> Result<(), TrackRequest> {
        let mut state = self.strong.state.lock();
        if state.closed || !state.dynamic {
            return Err(request);
        }
        request.set_source(self.clone());
        // Listed with the source's tracks (status page), unless the name is taken by a live
        // track or the table is full.
        let name = request.track().name().to_string();
        let listed = state.tracks.get(&name).is_some_and(|t| !t.is_closed());
        if !listed && state.tracks.len() < self.strong.limits.max_tracks_per_broadcast {
            state.tracks.insert(name, request.track().handle());
        }
        state.requests.push_back(request);
        state.waiters.wake_all();
        Ok(())
    }

    /// Close a front whose last route is gone.
    pub(crate) fn close(&self) {
        self.strong.close();
    }

    /// The front's place in its origin, if this is a front.
    pub(crate) fn home(&self) -> Option<Arc<dyn FrontHome>> {
        self.strong.front.clone()
    }

    /// Whether this is a front of `key`, still open.
    pub(crate) fn is_front_of(&self, key: &FrontKey) -> bool {
        self.strong.front.as_ref().is_some_and(|h| h.key() == key) && !self.is_closed()
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<BroadcastShared> {
        Arc::downgrade(&self.strong)
    }

    pub(crate) fn upgrade(weak: &std::sync::Weak<BroadcastShared>) -> Option<BroadcastConsumer> {
        weak.upgrade().map(|strong| BroadcastConsumer { strong })
    }

    pub fn is_closed(&self) -> bool {
        self.strong.state.lock().closed
    }

    /// Resolves when the broadcast ended.
    pub fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.strong.state.lock();
        if state.closed {
            Poll::Ready(())
        } else {
            state.waiters.register(cx);
            Poll::Pending
        }
    }

    pub async fn closed(&self) {
        poll_fn(|cx| self.poll_closed(cx)).await
    }

    /// The broadcast's live (not yet closed) tracks by name, with their info and counters.
    /// Read-only: lists without subscribing, so it never pulls a track or adds a reader.
    pub fn tracks(&self) -> Vec<TrackSummary> {
        let shared: Vec<_> = {
            let state = self.strong.state.lock();
            state.tracks.values().map(|t| t.shared().clone()).collect()
        };
        let mut out: Vec<TrackSummary> = shared
            .iter()
            .map(|track| TrackSummary {
                name: track.name().to_string(),
                info: track.info(),
                stats: track.stats(),
            })
            .filter(|summary| !summary.stats.closed)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Whether tracks are pulled on demand (a broadcast learned from a peer).
    pub fn is_dynamic(&self) -> bool {
        self.strong.state.lock().dynamic
    }

    /// Whether two handles read the same broadcast.
    pub fn same(&self, other: &BroadcastConsumer) -> bool {
        Arc::ptr_eq(&self.strong, &other.strong)
    }
}
