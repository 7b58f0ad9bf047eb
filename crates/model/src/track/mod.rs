//! One track: its groups in arrival order, the shared cache policy, and per-reader cursors.
//!
//! The producer adds groups; every consumer reads the same cached groups at its own cursor, so
//! fan-out costs one copy of the data however many readers there are. The latest group is always
//! kept; older groups leave the cache once their successor started more than the track's max age
//! ago in presentation time, or when the track's byte or group budget is exceeded. A group that
//! leaves is expired: readers still inside it stop with `Old` (age) or `Evicted` (budget), and a
//! reader whose cursor fell behind the cache skips ahead to what is left. A track given the
//! relay's [`CacheBudget`] also charges what it holds there, and gives up its stalest group
//! when the relay-wide total is over (crate::cache).

use crate::entropy::Map;
use std::collections::BTreeMap;
use std::future::poll_fn;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use starling_proto::StreamCode;

use crate::cache::{CacheBudget, CacheMember, Leave, Membership, FRAME_OVERHEAD, GROUP_OVERHEAD};
use crate::error::ModelError;
use crate::group::{Group, GroupConsumer, GroupHome, GroupProducer, Held, Home, Settle};
use crate::route::Route;
use crate::stats::TrackStats;
use crate::waiters::Waiters;
use crate::Limits;

mod consumer;
mod counts;

pub use consumer::{StartAt, TrackConsumer};
pub use starling_proto::TrackInfo;

use counts::FrameCounts;

fn max_age_ticks(info: &TrackInfo) -> u64 {
    StartAt::ticks(info.max_age_ms, info.timescale)
}

/// What a track's readers ask of its publisher, aggregated the way relays forward it
/// upstream: the highest priority and the longest max age of any reader so far. A track has
/// none until its first reader of groups arrives: a handle that only waits for the info (a
/// TRACK request, a FETCH) asks nothing of the publisher, so a relay holds its upstream
/// SUBSCRIBE until a reader's demand can go with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    pub priority: u8,
    pub max_age_ms: u64,
}

/// A cached group, with the timestamp of its first frame once that frame settled: the age
/// policy and late readers' start read it here, beside the key they walk, never through the
/// group (a cache miss a group, with thousands of tracks).
#[derive(Debug)]
pub(super) struct Cached {
    pub(super) group: Arc<Group>,
    pub(super) start: Option<u64>,
}

#[derive(Debug)]
struct TrackState {
    info: Option<TrackInfo>,
    /// Cached groups by arrival index: only live ones, so sequence gaps or a latest group
    /// that never leaves cannot grow it (it holds at most the cache's group bound, plus the
    /// latest).
    groups: BTreeMap<u64, Cached>,
    /// Arrival index of the next group: at most the next group's (a track in the relay-wide
    /// budget takes the budget's stamps, which other tracks' groups also advance).
    next_arrival: u64,
    /// Sequence to arrival index, for live groups only.
    by_sequence: Map<u64, u64>,
    /// Highest sequence seen and its arrival index.
    latest: Option<(u64, u64)>,
    /// The stamp this track is registered under in the relay-wide budget's index, if it is.
    budget_key: Option<u64>,
    live_groups: usize,
    /// Highest sequence that left the cache; nothing at or below it is accepted again.
    expired_through: Option<u64>,
    closed: Option<Result<(), StreamCode>>,
    /// Exclusive final sequence once the track finished.
    end: Option<u64>,
    consumers: usize,
    /// Peers (by hop) reading the track, with how many readers each: a relay never pulls it
    /// through one of them (split horizon, kept up as readers come and go).
    peer_readers: Vec<(u64, usize)>,
    /// The route a front last handed the track to, pulled through until it is lost (not
    /// always the best route: a better one that comes later takes no track over). A peer on
    /// it is refused as a reader (`TrackConsumer::for_peer`), and it decides what the front's
    /// closing does to the track (`TrackShared::front_closed`).
    source: Option<Route>,
    /// Pulled through a peer, the track's front lost its last route (see `front_closed`).
    front_gone: bool,
    demand: Option<Demand>,
    /// Groups accepted, cumulative (readers wait on it; frames and bytes are counted in
    /// [`FrameCounts`]).
    groups_received: u64,
    waiters: Waiters,
    unused_waiters: Waiters,
    demand_waiters: Waiters,
}

#[derive(Debug)]
pub(crate) struct TrackShared {
    /// This track, for the cache budget's index (a weak handle: the index never keeps a
    /// track alive).
    me: Weak<TrackShared>,
    name: String,
    limits: Limits,
    /// Fed by whichever source currently serves it (a relay's front): groups a lost source
    /// was writing wait for the next one instead of ending.
    resumable: AtomicBool,
    /// The relay-wide budget this track charges, if any.
    cache: Option<Membership>,
    /// What each frame updates without the lock below.
    counts: FrameCounts,
    state: Mutex<TrackState>,
}

impl TrackShared {
    /// Note the route the track is handed to (see `TrackState::source`).
    pub(crate) fn set_source(&self, route: &Route) {
        self.state.lock().source = Some(route.clone());
    }

    /// The track's front lost its last route (the publisher unannounced): a track a
    /// publisher's own session pulls is left to that session, one pulled through a cluster
    /// peer is marked for its pull to end after a grace (see [`TrackProducer::front_gone`]),
    /// and any other ends now with INTERNAL_ERROR.
    pub(crate) fn front_closed(&self) {
        let mut state = self.state.lock();
        match &state.source {
            Some(route) if !route.peer => {}
            Some(_) => {
                state.front_gone = true;
                state.waiters.wake_all();
            }
            None => {
                drop(state);
                self.close(Err(StreamCode::Internal));
            }
        }
    }

    /// Count a frame charged to one of this track's groups (under that group's lock: atomics
    /// only); the policy runs in [`Self::settle`] when this frame may have moved it.
    fn charge(&self, size: usize, timestamp: u64, first: bool) -> Settle {
        let cost = size + FRAME_OVERHEAD;
        let charged = self.counts.frame(size, cost, timestamp);
        Settle {
            // A group's first frame sets the start its predecessor ages by.
            policy: first || charged.aged || charged.cached_bytes > self.limits.track_cache_bytes,
            budget: self
                .cache
                .as_ref()
                .is_some_and(|cache| cache.budget.charge(cost)),
            started: first.then_some(timestamp),
        }
    }

    fn settle(&self, arrival: u64, settle: Settle) {
        if settle.policy {
            let mut state = self.state.lock();
            if let (Some(start), Some(cached)) = (settle.started, state.groups.get_mut(&arrival)) {
                cached.start = Some(start);
            }
            self.enforce_cache(&mut state);
        }
        if settle.budget {
            self.shrink_budget();
        }
    }

    fn shrink_budget(&self) {
        if let Some(cache) = &self.cache {
            cache.budget.shrink(Some(self));
        }
    }

    /// What this track's cached groups are charged in the relay-wide budget.
    fn cost(&self) -> usize {
        self.counts.cost()
    }

    /// The relay-wide budget is over and this track, which charged last, holds more than
    /// `share`: give up its oldest-arrived cached group other than its latest (groups may
    /// arrive out of order, so the first to arrive may be the newest), and re-register under
    /// what is left. Its latest group goes only when it is all the track holds and that is
    /// more than twice its share: a track slightly over keeps the group readers want most,
    /// and staler tracks pay first. `false` when nothing was given up.
    fn give_up_own_oldest(&self, share: usize) -> bool {
        let Some(cache) = &self.cache else {
            return false;
        };
        let mut state = self.state.lock();
        let cost = self.counts.cost();
        if cost <= share {
            return false;
        }
        let latest = state.latest.map(|(_, arrival)| arrival);
        let victim = match state.groups.keys().find(|a| Some(**a) != latest).copied() {
            Some(older) => older,
            None if cost > share.saturating_mul(2) => match latest {
                Some(latest) if state.groups.contains_key(&latest) => latest,
                _ => return false,
            },
            None => return false,
        };
        self.remove_group(&mut state, victim, Leave::Pressed);
        self.enforce_cache(&mut state);
        state.waiters.wake_all();
        if let Some(key) = state.budget_key.take() {
            cache.budget.leave(key, cache.id);
        }
        self.reenter(&mut state, cache);
        true
    }

    /// Register in the budget's index under the stamp of the oldest group left, if any.
    fn reenter(&self, state: &mut TrackState, cache: &Membership) {
        if let Some(next) = state.groups.keys().next().copied() {
            state.budget_key = Some(next);
            cache.budget.enter(next, cache.id, self.me.clone());
        }
    }

    /// Take the group that arrived `arrival`-th out of the cache and expire it.
    fn remove_group(&self, state: &mut TrackState, arrival: u64, why: Leave) {
        let Some(Cached { group, .. }) = state.groups.remove(&arrival) else {
            return;
        };
        let sequence = group.sequence();
        state.by_sequence.remove(&sequence);
        state.live_groups -= 1;
        state.expired_through = state.expired_through.max(Some(sequence));
        let (bytes, cost) = group.expire(match why {
            Leave::Aged => StreamCode::Old,
            Leave::Evicted | Leave::Pressed => StreamCode::Evicted,
        });
        self.counts.release(bytes, cost);
        if let Some(cache) = &self.cache {
            cache.budget.release(cost);
            cache.budget.count(why);
        }
    }

    /// The relay-wide budget is over and this track was registered under `stamp`: give up
    /// the oldest cached group if it is that stalest one, and re-register under what is left.
    fn give_up_stalest(&self, stamp: u64) {
        let Some(cache) = &self.cache else {
            return;
        };
        let mut state = self.state.lock();
        state.budget_key = None;
        let Some(oldest) = state.groups.keys().next().copied() else {
            return;
        };
        if oldest <= stamp {
            self.remove_group(&mut state, oldest, Leave::Pressed);
            self.enforce_cache(&mut state);
            state.waiters.wake_all();
        }
        self.reenter(&mut state, cache);
    }

    /// Drop groups until the track is within its bounds and none has aged out, then leave
    /// the frames' path the timestamp at which the next one would age out.
    fn enforce_cache(&self, state: &mut TrackState) {
        loop {
            // The oldest-arrived group other than the latest, which always stays (groups
            // that arrive late, below the latest, are candidates like any other).
            let latest = state.latest.map(|(_, arrival)| arrival);
            let Some(index) = state
                .groups
                .keys()
                .find(|arrival| Some(**arrival) != latest)
                .copied()
            else {
                self.counts.set_age_trip(u64::MAX);
                return;
            };
            let over_budget = self.counts.cached_bytes() > self.limits.track_cache_bytes
                || state.live_groups > self.limits.max_cached_groups;
            // It ages out once the newest frame is more than the max age past the start of
            // the group after it.
            let successor_start = state
                .groups
                .range(index + 1..)
                .next()
                .and_then(|(_, cached)| cached.start);
            let trip = match (&state.info, successor_start) {
                (Some(info), Some(start)) => start.saturating_add(max_age_ticks(info)),
                _ => u64::MAX,
            };
            let aged = self.counts.newest_timestamp() > trip;
            if !(over_budget || aged) {
                self.counts.set_age_trip(trip);
                // A frame counted before the trip was set would have missed it.
                if self.counts.newest_timestamp() <= trip {
                    return;
                }
                continue;
            }
            let why = if aged { Leave::Aged } else { Leave::Evicted };
            self.remove_group(state, index, why);
        }
    }

    /// A copy of the track's counters and cache occupancy.
    pub(crate) fn stats(&self) -> TrackStats {
        let state = self.state.lock();
        TrackStats {
            groups: state.groups_received,
            frames: self.counts.frames(),
            bytes: self.counts.bytes(),
            consumers: state.consumers,
            cached_bytes: self.counts.cached_bytes(),
            cached_groups: state.live_groups,
            latest_sequence: state.latest.map(|(s, _)| s),
            expired_through: state.expired_through,
            closed: state.closed.is_some(),
        }
    }

    /// The track's info, once known.
    pub(crate) fn info(&self) -> Option<TrackInfo> {
        self.state.lock().info
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn close(&self, result: Result<(), StreamCode>) {
        let mut state = self.state.lock();
        if state.closed.is_none() {
            if result.is_ok() {
                state.end = Some(state.latest.map(|(s, _)| s + 1).unwrap_or(0));
            }
            state.closed = Some(result);
            state.waiters.wake_all();
            if self.resumable.load(Ordering::Relaxed) {
                // No source will continue them now.
                let code = result.err().unwrap_or(StreamCode::Cancelled);
                Self::abort_orphans(&state, code, |_| true);
            }
        }
    }

    fn abort_orphans(state: &TrackState, code: StreamCode, which: impl Fn(u64) -> bool) {
        for Cached { group, .. } in state.groups.values() {
            if which(group.sequence()) && group.is_orphaned() {
                group.abort(code);
            }
        }
    }

    /// A resumable group lost its producer: keep it open for the next source unless the track
    /// is closed. False when the group must be aborted instead.
    fn orphan(&self, group: &Group) -> bool {
        let state = self.state.lock();
        state.closed.is_none() && group.orphan()
    }
}

/// Publishes a track: sets its info and writes groups.
#[derive(Debug)]
pub struct TrackProducer {
    pub(crate) shared: Arc<TrackShared>,
}

impl TrackProducer {
    pub fn new(name: impl Into<String>, info: Option<TrackInfo>, limits: Limits) -> Self {
        Self::counted(name, info, limits, None)
    }

    /// A track charging (and counting the groups its cache drops in) the relay-wide `budget`.
    pub(crate) fn counted(
        name: impl Into<String>,
        info: Option<TrackInfo>,
        limits: Limits,
        budget: Option<Arc<CacheBudget>>,
    ) -> Self {
        TrackProducer {
            shared: Arc::new_cyclic(|me| TrackShared {
                me: me.clone(),
                name: name.into(),
                limits,
                resumable: AtomicBool::new(false),
                cache: budget.map(|budget| Membership {
                    id: budget.track_id(),
                    budget,
                }),
                counts: FrameCounts::default(),
                state: Mutex::new(TrackState {
                    info,
                    groups: BTreeMap::new(),
                    next_arrival: 0,
                    by_sequence: Map::default(),
                    latest: None,
                    budget_key: None,
                    live_groups: 0,
                    expired_through: None,
                    closed: None,
                    end: None,
                    consumers: 0,
                    peer_readers: Vec::new(),
                    source: None,
                    front_gone: false,
                    demand: None,
                    groups_received: 0,
                    waiters: Waiters::default(),
                    unused_waiters: Waiters::default(),
                    demand_waiters: Waiters::default(),
                }),
            }),
        }
    }

    /// Make a fresh track resumable (see [`TrackShared::resumable`]); call it before any
    /// handle on the track exists.
    pub(crate) fn resumable(self) -> Self {
        debug_assert_eq!(
            Arc::strong_count(&self.shared),
            1,
            "resumable set on a shared track"
        );
        self.shared.resumable.store(true, Ordering::Relaxed);
        self
    }

    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Where a new source should start so that nothing is missed or sent twice: the oldest
    /// group a lost source left unfinished, else the group after the latest. `None` before
    /// any group arrived.
    pub fn resume_point(&self) -> Option<u64> {
        let state = self.shared.state.lock();
        let orphan = state
            .groups
            .values()
            .filter(|cached| cached.group.is_orphaned())
            .map(|cached| cached.group.sequence())
            .min();
        orphan.or(state.latest.map(|(latest, _)| latest + 1))
    }

    /// The new source starts at `first`: orphaned groups below it will never be continued.
    pub fn abandon_orphans_below(&self, first: u64) {
        let state = self.shared.state.lock();
        TrackShared::abort_orphans(&state, StreamCode::Cancelled, |sequence| sequence < first);
    }

    pub fn set_info(&self, info: TrackInfo) {
        let mut state = self.shared.state.lock();
        state.info = Some(info);
        // The max age is the info's.
        self.shared.enforce_cache(&mut state);
        state.waiters.wake_all();
    }

    pub fn info(&self) -> Option<TrackInfo> {
        self.shared.state.lock().info
    }

    /// Where a group of this track that arrived `arrival`-th reports its frames.
    fn home(&self, arrival: u64) -> Home {
        Home {
            track: self.shared.clone() as Arc<dyn GroupHome>,
            arrival,
        }
    }

    /// Start group `sequence`. Refused for a sequence already cached or past the track's end.
    pub fn create_group(&self, sequence: u64) -> Result<GroupProducer, ModelError> {
        let group = Group::charged(sequence, GROUP_OVERHEAD);
        let arrival;
        let mut over = false;
        {
            let mut state = self.shared.state.lock();
            if state.closed.is_some() {
                return Err(ModelError::Ended);
            }
            if let Some(&arrival) = state.by_sequence.get(&sequence) {
                // A new source continuing a group the lost one left unfinished.
                let orphan = state
                    .groups
                    .get(&arrival)
                    .and_then(|cached| Some((cached.group.clone(), cached.group.adopt()?)));
                return match orphan {
                    Some((group, held)) => {
                        Ok(
                            GroupProducer::new(group, self.shared.limits, Some(self.home(arrival)))
                                .resuming(held),
                        )
                    }
                    None => Err(ModelError::DuplicateGroup(sequence)),
                };
            }
            if state
                .expired_through
                .is_some_and(|through| sequence <= through)
            {
                // Older than a group that already left the cache: never delivered again.
                return Err(ModelError::Expired(sequence));
            }
            arrival = match &self.shared.cache {
                Some(cache) => cache.budget.stamp().max(state.next_arrival),
                None => state.next_arrival,
            };
            state.next_arrival = arrival + 1;
            state.groups.insert(
                arrival,
                Cached {
                    group: group.clone(),
                    start: None,
                },
            );
            self.shared.counts.group(GROUP_OVERHEAD);
            if let Some(cache) = &self.shared.cache {
                over = cache.budget.charge(GROUP_OVERHEAD);
                if state.budget_key.is_none() {
                    let oldest = state.groups.keys().next().copied().unwrap_or(arrival);
                    state.budget_key = Some(oldest);
                    cache.budget.enter(oldest, cache.id, self.shared.me.clone());
                }
            }
            state.by_sequence.insert(sequence, arrival);
            state.live_groups += 1;
            state.groups_received += 1;
            if state.latest.is_none_or(|(latest, _)| sequence > latest) {
                state.latest = Some((sequence, arrival));
            }
            self.shared.enforce_cache(&mut state);
            state.waiters.wake_all();
        }
        if over {
            self.shared.shrink_budget();
        }
        let producer = GroupProducer::new(group, self.shared.limits, Some(self.home(arrival)));
        Ok(if self.shared.resumable.load(Ordering::Relaxed) {
            producer.resuming(Held::default())
        } else {
            producer
        })
    }

    /// Start the group after the latest one (or group 0).
    pub fn append_group(&self) -> Result<GroupProducer, ModelError> {
        let next = self
            .shared
            .state
            .lock()
            .latest
            .map(|(s, _)| s + 1)
            .unwrap_or(0);
        self.create_group(next)
    }

    pub fn latest_sequence(&self) -> Option<u64> {
        self.shared.state.lock().latest.map(|(s, _)| s)
    }

    /// Ready once every sequence in `range` has arrived: it is cached, or it is at or below
    /// the highest group that left the cache (nothing there is accepted again). Costs at most
    /// one lookup per cached group, however wide the range.
    pub fn poll_arrived(&self, cx: &mut Context<'_>, range: Range<u64>) -> Poll<()> {
        let mut state = self.shared.state.lock();
        let start = match state.expired_through {
            Some(through) => range.start.max(through.saturating_add(1)),
            None => range.start,
        };
        let owed = range.end.saturating_sub(start);
        let arrived = owed <= state.by_sequence.len() as u64
            && (start..range.end).all(|sequence| state.by_sequence.contains_key(&sequence));
        if arrived {
            Poll::Ready(())
        } else {
            state.waiters.register(cx);
            Poll::Pending
        }
    }

    pub async fn arrived(&self, range: Range<u64>) {
        poll_fn(|cx| self.poll_arrived(cx, range.clone())).await
    }

    /// The track is complete: readers get every cached group, then the end.
    pub fn finish(&self) {
        self.shared.close(Ok(()));
    }

    /// The track failed: readers stop with `code`.
    pub fn abort(&self, code: StreamCode) {
        self.shared.close(Err(code));
    }

    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed.is_some()
    }

    /// Ready once the track ended, whoever ended it (a front closing ends its tracks).
    pub fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_until(cx, |state| state.closed.is_some())
    }

    /// Ready once `ready` holds of the track's state.
    fn poll_until(&self, cx: &mut Context<'_>, ready: impl Fn(&TrackState) -> bool) -> Poll<()> {
        let mut state = self.shared.state.lock();
        if ready(&state) {
            Poll::Ready(())
        } else {
            state.waiters.register(cx);
            Poll::Pending
        }
    }

    pub async fn closed(&self) {
        poll_fn(|cx| self.poll_closed(cx)).await
    }

    /// Ready once the track's front lost its last route while the track is pulled through a
    /// cluster peer. The publisher unannounced, maybe before its last groups (moq-cli does):
    /// the pull gives the track a grace to end as the publisher ends it, then ends it, so two
    /// relays left pulling a dead broadcast from each other let go.
    pub fn poll_front_gone(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_until(cx, |state| state.front_gone)
    }

    pub async fn front_gone(&self) {
        poll_fn(|cx| self.poll_front_gone(cx)).await
    }

    /// A new reader.
    pub fn consume(&self, start: StartAt) -> TrackConsumer {
        TrackConsumer::new(self.shared.clone(), start, true)
    }

    /// A handle that does not count as a reader and asks nothing of the publisher (kept by a
    /// broadcast's track table).
    pub(crate) fn handle(&self) -> TrackConsumer {
        TrackConsumer::new(self.shared.clone(), StartAt::default(), false).detached()
    }

    /// Number of live readers.
    pub fn consumers(&self) -> usize {
        self.shared.state.lock().consumers
    }

    /// Ready when no reader is left.
    pub fn poll_unused(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.shared.state.lock();
        if state.consumers == 0 {
            Poll::Ready(())
        } else {
            state.unused_waiters.register(cx);
            Poll::Pending
        }
    }

    pub async fn unused(&self) {
        poll_fn(|cx| self.poll_unused(cx)).await
    }

    /// What the readers ask for so far; `None` until a reader of groups arrived.
    pub fn demand(&self) -> Option<Demand> {
        self.shared.state.lock().demand
    }

    /// Ready with the demand once there is one and it differs from `seen` (`None`: ready at
    /// the first reader of groups).
    pub fn poll_demand(&self, cx: &mut Context<'_>, seen: Option<Demand>) -> Poll<Demand> {
        let mut state = self.shared.state.lock();
        match state.demand {
            Some(demand) if Some(demand) != seen => Poll::Ready(demand),
            _ => {
                state.demand_waiters.register(cx);
                Poll::Pending
            }
        }
    }

    pub async fn demand_changed(&self, seen: Option<Demand>) -> Demand {
        poll_fn(|cx| self.poll_demand(cx, seen)).await
    }

    /// Hops of the peers reading this track now.
    pub fn peer_readers(&self) -> Vec<u64> {
        let state = self.shared.state.lock();
        state.peer_readers.iter().map(|(hop, _)| *hop).collect()
    }

    /// Cached bytes (for metrics and tests).
    pub fn cached_bytes(&self) -> usize {
        self.shared.counts.cached_bytes()
    }

    /// Counters and cache occupancy (read-only; for status pages and metrics).
    pub fn stats(&self) -> TrackStats {
        self.shared.stats()
    }

    pub(crate) fn same_track(&self, consumer: &TrackConsumer) -> bool {
        Arc::ptr_eq(&self.shared, &consumer.shared)
    }
}

impl GroupHome for TrackShared {
    fn charge(&self, size: usize, timestamp: u64, first: bool) -> Settle {
        TrackShared::charge(self, size, timestamp, first)
    }

    fn settle(&self, arrival: u64, settle: Settle) {
        TrackShared::settle(self, arrival, settle)
    }

    fn orphan(&self, group: &Group) -> bool {
        TrackShared::orphan(self, group)
    }
}

impl CacheMember for TrackShared {
    fn cost(&self) -> usize {
        TrackShared::cost(self)
    }

    fn give_up_own_oldest(&self, share: usize) -> bool {
        TrackShared::give_up_own_oldest(self, share)
    }

    fn give_up_stalest(&self, stamp: u64) {
        TrackShared::give_up_stalest(self, stamp)
    }
}

impl Drop for TrackShared {
    /// The track is gone: what it held leaves the relay-wide budget with it.
    fn drop(&mut self) {
        if let Some(cache) = &self.cache {
            cache.budget.release(self.counts.cost());
            let state = self.state.get_mut();
            if let Some(key) = state.budget_key {
                cache.budget.leave(key, cache.id);
            }
        }
    }
}

impl Drop for TrackProducer {
    fn drop(&mut self) {
        self.shared.close(Err(StreamCode::Cancelled));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Frame;

    /// Issue 10 item 3: a publisher that sends group 2^40 and then 0, 1, 2 … keeps its
    /// latest group at the head of the arrival order forever. The index must still hold only
    /// live groups (it used to keep a hole per group that ever left, each scanned per frame).
    #[test]
    fn sequence_gaps_do_not_grow_the_group_index() {
        let limits = Limits {
            max_cached_groups: 8,
            ..Limits::default()
        };
        let track = TrackProducer::new("t", Some(TrackInfo::default()), limits);
        let frame = |timestamp| Frame {
            timestamp,
            payload: bytes::Bytes::from_static(b"x"),
        };
        let mut far = track.create_group(1 << 40).unwrap();
        far.write_frame(frame(0)).unwrap();
        for sequence in 0..10_000u64 {
            let mut group = track.create_group(sequence).unwrap();
            group.write_frame(frame(sequence)).unwrap();
            group.finish();
        }
        let state = track.shared.state.lock();
        assert!(
            state.groups.len() <= 9,
            "{} index entries",
            state.groups.len()
        );
        assert_eq!(state.live_groups, state.groups.len());
        assert_eq!(state.latest.map(|(s, _)| s), Some(1 << 40));
    }
}
