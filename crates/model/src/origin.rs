//! The origin: one endpoint's tree of broadcasts by path, their routes, and announce interests.
//!
//! Each path holds the routes that reach it (a local publisher, or a peer's announcement with
//! its hop chain and cost); the best route is the one readers get. Interests (a peer asking to
//! hear announces under a prefix) are indexed by prefix, so a change to one path touches only
//! the interests registered at that path's ancestors (at most 32 probes), never a scan. An
//! interest collects the paths that changed; its reader diffs them against what it already told
//! its peer, so a slow reader costs a bounded set of paths, never a growing event queue.
//!
//! Readers of a learned path get its front (`broadcast/request.rs`), which the origin indexes
//! weakly by path and is home to ([`OriginFront`]): a front closes when the last route it may
//! use is removed.

use crate::entropy::{Map, Set};
use std::collections::BTreeMap;
use std::future::poll_fn;
use std::ops::Bound;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use parking_lot::Mutex;
use starling_proto::Path;

use crate::broadcast::{BroadcastConsumer, BroadcastShared, FrontHome, TrackRequest};
use crate::error::ModelError;
use crate::route::{FrontKey, Route};
use crate::waiters::Waiters;

/// The broadcast a path resolves to, with the route that reaches it.
#[derive(Clone, Debug)]
pub struct Announced {
    pub path: Path,
    pub broadcast: BroadcastConsumer,
    pub route: Route,
}

#[derive(Debug)]
struct RouteEntry {
    id: u64,
    broadcast: BroadcastConsumer,
    route: Route,
}

#[derive(Debug)]
struct InterestState {
    prefix: Path,
    dirty: Vec<Path>,
    dirty_set: Set<Path>,
    waiters: Waiters,
}

#[derive(Debug, Default)]
struct OriginState {
    next_id: u64,
    /// Ordered by path, so the paths under a prefix are one range (the prefix itself, then
    /// `prefix/…`), never a scan of every path.
    broadcasts: BTreeMap<Path, Vec<RouteEntry>>,
    route_paths: Map<u64, Path>,
    interests_by_prefix: Map<Path, Vec<u64>>,
    interests: Map<u64, InterestState>,
    /// Fronts by path, held weakly: a front lives as long as its readers.
    fronts: Map<Path, Vec<(FrontKey, Weak<BroadcastShared>)>>,
    /// Tracks handed to another route after their source was lost.
    failovers: u64,
    /// Peers (by hop) that explicitly withdrew a path: every other route to it through them
    /// is stale (never chosen) until they announce it again themselves. Kept only for paths
    /// that still have routes.
    withdrawn: Map<Path, Vec<u64>>,
    /// Bumped by every change to the routes or their staleness: what was announced is the
    /// same while it is (see [`Origin::generation`]).
    generation: u64,
}

impl RouteEntry {
    /// Whether a front of `key` may read through this route.
    fn serves(&self, key: &FrontKey, withdrawn: &[u64]) -> bool {
        self.route.hops.first() == Some(&key.identity) && self.usable(withdrawn)
    }

    /// Live, and not through a peer that withdrew the path.
    fn usable(&self, withdrawn: &[u64]) -> bool {
        !self.broadcast.is_closed() && !withdrawn.iter().any(|hop| self.route.hops.contains(hop))
    }
}

impl OriginState {
    fn mark_dirty(&mut self, path: &Path) {
        for ancestor in path.ancestors() {
            let Some(ids) = self.interests_by_prefix.get(&ancestor) else {
                continue;
            };
            for id in ids {
                if let Some(interest) = self.interests.get_mut(id) {
                    if interest.dirty_set.insert(path.clone()) {
                        interest.dirty.push(path.clone());
                    }
                    interest.waiters.wake_all();
                }
            }
        }
    }

    /// `path` with its best route of fewer than `max_chain` hops, as readers get it.
    fn announced(
        &self,
        path: &Path,
        exclude_hop: Option<u64>,
        max_chain: usize,
    ) -> Option<Announced> {
        self.announced_of(path, self.broadcasts.get(path)?, exclude_hop, max_chain)
    }

    /// [`OriginState::announced`] among `routes`, the routes of `path` already looked up.
    fn announced_of(
        &self,
        path: &Path,
        routes: &[RouteEntry],
        exclude_hop: Option<u64>,
        max_chain: usize,
    ) -> Option<Announced> {
        self.best_of(path, routes, exclude_hop, max_chain)
            .map(|entry| Announced {
                path: path.clone(),
                broadcast: entry.broadcast.clone(),
                route: entry.route.clone(),
            })
    }

    /// `sender` withdrew `path`: unless it still announces the path on another session, the
    /// routes through it there go stale.
    fn withdraw(&mut self, path: &Path, sender: u64) {
        let Some(routes) = self.broadcasts.get(path) else {
            return; // no route left to go stale
        };
        if routes.iter().any(|r| r.route.hops.last() == Some(&sender)) {
            return;
        }
        let withdrawn = self.withdrawn.entry(path.clone()).or_default();
        if !withdrawn.contains(&sender) && withdrawn.len() < MAX_WITHDRAWN {
            withdrawn.push(sender);
            self.generation += 1;
        }
        self.prune_withdrawn(path);
    }

    /// Forget the withdrawals at `path` that no route there passes through any more: a route
    /// learned later through that peer is news the withdrawal does not cover (moq-net prunes
    /// the same way). Kept, such a withdrawal would hide every later route through the peer
    /// until the peer announced the path to us directly, which it never does once our link
    /// to it is gone.
    fn prune_withdrawn(&mut self, path: &Path) {
        let Some(withdrawn) = self.withdrawn.get_mut(path) else {
            return;
        };
        let routes = self.broadcasts.get(path);
        let before = withdrawn.len();
        withdrawn.retain(|hop| {
            routes.is_some_and(|routes| routes.iter().any(|r| r.route.hops.contains(hop)))
        });
        if withdrawn.len() != before {
            self.generation += 1;
        }
        if withdrawn.is_empty() {
            self.withdrawn.remove(path);
        }
    }

    fn withdrawn(&self, path: &Path) -> &[u64] {
        self.withdrawn
            .get(path)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Every path at or under `prefix` with its routes, in path order.
    fn under<'a>(
        &'a self,
        prefix: &Path,
    ) -> Box<dyn Iterator<Item = (&'a Path, &'a [RouteEntry])> + 'a> {
        if prefix.is_empty() {
            return Box::new(self.broadcasts.iter().map(|(p, r)| (p, r.as_slice())));
        }
        // The prefix itself, then `prefix/…`: every string starting with `prefix/` sorts at or
        // after it and before `prefix0` ('0' follows '/').
        let children_from = format!("{prefix}/");
        let children_to = format!("{prefix}0");
        let children = self
            .broadcasts
            .range::<str, _>((
                Bound::Included(children_from.as_str()),
                Bound::Excluded(children_to.as_str()),
            ))
            .map(|(p, r)| (p, r.as_slice()));
        Box::new(
            self.broadcasts
                .get_key_value(prefix)
                .map(|(p, r)| (p, r.as_slice()))
                .into_iter()
                .chain(children),
        )
    }

    fn best<'a>(&'a self, path: &Path, exclude_hop: Option<u64>) -> Option<&'a RouteEntry> {
        self.best_within(path, exclude_hop, usize::MAX)
    }

    /// The best usable route of fewer than `max_chain` hops, skipping routes through
    /// `exclude_hop`.
    fn best_within<'a>(
        &'a self,
        path: &Path,
        exclude_hop: Option<u64>,
        max_chain: usize,
    ) -> Option<&'a RouteEntry> {
        self.best_of(path, self.broadcasts.get(path)?, exclude_hop, max_chain)
    }

    /// [`OriginState::best_within`] among `routes`, the routes of `path` already looked up.
    fn best_of<'a>(
        &'a self,
        path: &Path,
        routes: &'a [RouteEntry],
        exclude_hop: Option<u64>,
        max_chain: usize,
    ) -> Option<&'a RouteEntry> {
        let withdrawn = self.withdrawn(path);
        routes
            .iter()
            .filter(|r| r.route.hops.len() < max_chain)
            .filter(|r| match exclude_hop {
                Some(hop) if hop != 0 => !r.route.hops.contains(&hop),
                _ => true,
            })
            .filter(|r| r.usable(withdrawn))
            // Lowest rank wins; among equals the newest route (a reconnecting publisher).
            .min_by(|a, b| {
                a.route
                    .rank(path)
                    .cmp(&b.route.rank(path))
                    .then(b.id.cmp(&a.id))
            })
    }

    /// The best route a front of `key` may read through, other than `lost`.
    fn best_for(
        &self,
        key: &FrontKey,
        readers: &[u64],
        lost: Option<&BroadcastConsumer>,
    ) -> Option<&RouteEntry> {
        let withdrawn = self.withdrawn(&key.path);
        self.broadcasts
            .get(&key.path)?
            .iter()
            .filter(|r| r.serves(key, withdrawn))
            .filter(|r| !readers.iter().any(|hop| r.route.hops.contains(hop)))
            .filter(|r| lost.is_none_or(|lost| !r.broadcast.same(lost)))
            .min_by(|a, b| {
                a.route
                    .rank(&key.path)
                    .cmp(&b.route.rank(&key.path))
                    .then(b.id.cmp(&a.id))
            })
    }

    /// The fronts at `path` that no route serves any more; the caller closes them outside
    /// the lock.
    fn orphaned_fronts(&mut self, path: &Path) -> Vec<BroadcastConsumer> {
        let Some(fronts) = self.fronts.get(path) else {
            return Vec::new();
        };
        let routes = self.broadcasts.get(path);
        let withdrawn = self.withdrawn(path);
        fronts
            .iter()
            .filter(|(key, _)| {
                routes.is_none_or(|routes| !routes.iter().any(|r| r.serves(key, withdrawn)))
            })
            .filter_map(|(_, weak)| BroadcastConsumer::upgrade(weak))
            .collect()
    }

    fn remove_route(&mut self, id: u64) -> Option<Path> {
        let path = self.route_paths.remove(&id)?;
        self.generation += 1;
        if let Some(routes) = self.broadcasts.get_mut(&path) {
            routes.retain(|r| r.id != id);
            if routes.is_empty() {
                self.broadcasts.remove(&path);
            }
        }
        self.prune_withdrawn(&path);
        Some(path)
    }
}

/// A tree of broadcasts; cheap to clone, shared by every session of an endpoint.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    state: Arc<Mutex<OriginState>>,
    limits: OriginLimits,
}

/// Bounds on what the origin holds.
#[derive(Clone, Copy, Debug)]
pub struct OriginLimits {
    pub max_routes: usize,
    pub max_interests: usize,
}

impl Default for OriginLimits {
    fn default() -> Self {
        OriginLimits {
            max_routes: 1 << 20,
            max_interests: 1 << 20,
        }
    }
}

impl Origin {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_limits(limits: OriginLimits) -> Self {
        Origin {
            state: Default::default(),
            limits,
        }
    }

    /// Add a route to `path`. The returned handle removes it when dropped.
    pub fn publish(
        &self,
        path: Path,
        broadcast: BroadcastConsumer,
        route: Route,
    ) -> Result<RouteHandle, ModelError> {
        let mut state = self.state.lock();
        if state.route_paths.len() >= self.limits.max_routes {
            return Err(ModelError::TooMany("routes"));
        }
        let id = state.next_id;
        state.next_id += 1;
        state.generation += 1;
        state.route_paths.insert(id, path.clone());
        // A peer announcing the path itself again ends the staleness of routes through it.
        if let (Some(sender), Some(withdrawn)) = (route.hops.last(), state.withdrawn.get_mut(&path))
        {
            withdrawn.retain(|hop| hop != sender);
            if withdrawn.is_empty() {
                state.withdrawn.remove(&path);
            }
        }
        state
            .broadcasts
            .entry(path.clone())
            .or_default()
            .push(RouteEntry {
                id,
                broadcast,
                route,
            });
        state.mark_dirty(&path);
        Ok(RouteHandle {
            origin: self.clone(),
            id,
        })
    }

    /// Replace the route of an existing handle in place (a peer's UPDATE).
    pub fn update_route(&self, handle: &RouteHandle, route: Route) {
        let mut state = self.state.lock();
        let Some(path) = state.route_paths.get(&handle.id).cloned() else {
            return;
        };
        if let Some(entry) = state
            .broadcasts
            .get_mut(&path)
            .and_then(|routes| routes.iter_mut().find(|r| r.id == handle.id))
        {
            entry.route = route;
        }
        state.prune_withdrawn(&path);
        state.mark_dirty(&path);
        let orphaned = state.orphaned_fronts(&path);
        drop(state);
        close_fronts(orphaned);
    }

    /// Remove many routes in one pass, touching each affected path once.
    pub fn unpublish_all(&self, handles: impl IntoIterator<Item = RouteHandle>) {
        self.remove_all(handles, None);
    }

    /// Remove routes that their peer explicitly withdrew (ANNOUNCE_END from the peer with hop
    /// `sender`). Where the peer no longer announces a path at all, every other route to it
    /// through that peer goes stale until the peer announces it again (moq-relay's guard
    /// against path hunting through a peer that said it has no route).
    pub fn withdraw_all(&self, sender: u64, handles: impl IntoIterator<Item = RouteHandle>) {
        self.remove_all(handles, Some(sender).filter(|hop| *hop != 0));
    }

    /// Remove routes in one pass, each affected path recomputed once; with `withdrawn_by`,
    /// mark the paths that peer no longer announces.
    fn remove_all(
        &self,
        handles: impl IntoIterator<Item = RouteHandle>,
        withdrawn_by: Option<u64>,
    ) {
        let mut state = self.state.lock();
        let mut touched = Set::default();
        for mut handle in handles {
            if let Some(path) = state.remove_route(handle.id) {
                touched.insert(path);
            }
            handle.id = u64::MAX; // already removed; its drop does nothing
        }
        let mut orphaned = Vec::new();
        for path in touched {
            if let Some(sender) = withdrawn_by {
                state.withdraw(&path, sender);
            }
            state.mark_dirty(&path);
            orphaned.extend(state.orphaned_fronts(&path));
        }
        drop(state);
        close_fronts(orphaned);
    }

    /// Tell interests that `path` may have changed (its broadcast closed, say).
    pub fn touch(&self, path: &Path) {
        self.state.lock().mark_dirty(path);
    }

    /// The best live route to exactly `path`, skipping routes through `exclude_hop`.
    /// Every route held at `path` (live or not), oldest first: for status pages and tests.
    pub fn routes(&self, path: &Path) -> Vec<Route> {
        let state = self.state.lock();
        state
            .broadcasts
            .get(path)
            .map(|routes| routes.iter().map(|r| r.route.clone()).collect())
            .unwrap_or_default()
    }

    pub fn route(&self, path: &Path, exclude_hop: Option<u64>) -> Option<Announced> {
        self.forwardable(path, exclude_hop, usize::MAX)
    }

    /// The best route to `path` a peer with hop `exclude_hop` can take from us: not through
    /// it, and with fewer than `max_hops` hops so its append still fits (a longer best route
    /// falls back to a shorter one rather than withdrawing the path).
    pub fn forwardable(
        &self,
        path: &Path,
        exclude_hop: Option<u64>,
        max_hops: usize,
    ) -> Option<Announced> {
        self.state.lock().announced(path, exclude_hop, max_hops)
    }

    /// The broadcast to read for exactly `path`, by its best route: a broadcast published
    /// here is read directly, a learned one through its front, which follows the content to
    /// another route when this one is lost.
    pub fn consume(&self, path: &Path, exclude_hop: Option<u64>) -> Option<BroadcastConsumer> {
        // Handles upgraded under the lock are dropped after it: a front's last handle
        // unregisters the front from this origin as it drops.
        let mut graveyard = Vec::new();
        let front = self.consume_locked(path, exclude_hop, &mut graveyard);
        drop(graveyard);
        front
    }

    fn consume_locked(
        &self,
        path: &Path,
        exclude_hop: Option<u64>,
        graveyard: &mut Vec<BroadcastConsumer>,
    ) -> Option<BroadcastConsumer> {
        let mut state = self.state.lock();
        let best = state.best(path, exclude_hop)?;
        let (Some(&identity), true) = (best.route.hops.first(), best.broadcast.is_dynamic()) else {
            return Some(best.broadcast.clone());
        };
        let source = best.broadcast.clone();
        let key = FrontKey {
            path: path.clone(),
            identity,
        };
        // One front per content identity, so one upstream per track whoever reads it. A peer
        // on the route the front reads through asks us for what we get from it: a loop, only
        // ever transient (at convergence our best route never runs through a peer that routes
        // the same content through us), refused as unroutable until the routes settle. A track
        // already pulled through another route is checked against that one as the peer
        // becomes its reader (`TrackConsumer::for_peer`).
        if let Some(hop) = exclude_hop.filter(|hop| *hop != 0) {
            let through_reader = state
                .best_for(&key, &[], None)
                .is_none_or(|entry| entry.route.hops.contains(&hop));
            if through_reader {
                return None;
            }
        }
        let existing = state.fronts.get(path).into_iter().flatten();
        for (_, weak) in existing.filter(|(k, _)| *k == key) {
            let Some(front) = BroadcastConsumer::upgrade(weak) else {
                continue;
            };
            if front.is_front_of(&key) {
                return Some(front);
            }
            graveyard.push(front); // a closed front of the same content
        }
        let home = Arc::new(OriginFront {
            origin: self.clone(),
            key: key.clone(),
        });
        let front = BroadcastConsumer::front(home, &source);
        state
            .fronts
            .entry(path.clone())
            .or_default()
            .push((key, front.downgrade()));
        Some(front)
    }

    /// Hand a front's track to the best route for `key` other than `lost`; the request comes
    /// back when no route qualifies.
    fn dispatch(
        &self,
        key: &FrontKey,
        mut request: TrackRequest,
        lost: Option<&BroadcastConsumer>,
    ) -> Result<(), TrackRequest> {
        // Never through a peer reading this track from us (split horizon).
        let readers = request.track().peer_readers();
        loop {
            let source = {
                let state = self.state.lock();
                let Some(entry) = state.best_for(key, &readers, lost) else {
                    return Err(request);
                };
                request.track().shared.set_source(&entry.route);
                entry.broadcast.clone()
            };
            let handover = request.is_handover();
            // A source that closed in between is skipped: closed sources never qualify.
            match source.push_request(request) {
                Ok(()) => {
                    if handover {
                        self.state.lock().failovers += 1;
                    }
                    return Ok(());
                }
                Err(back) => request = back,
            }
            if !source.is_closed() {
                // Not a dynamic broadcast: nothing can pull through it.
                return Err(request);
            }
        }
    }

    /// Unregister a front whose last handle dropped.
    fn forget_front(&self, key: &FrontKey) {
        let mut state = self.state.lock();
        if let Some(fronts) = state.fronts.get_mut(&key.path) {
            fronts.retain(|(_, weak)| weak.strong_count() > 0);
            if fronts.is_empty() {
                state.fronts.remove(&key.path);
            }
        }
    }

    /// Tracks handed to another route after the session serving them was lost.
    pub fn failovers(&self) -> u64 {
        self.state.lock().failovers
    }

    /// Every path under `prefix` with a live route, and that route, in path order. Costs the
    /// paths under the prefix, not every path the origin holds.
    pub fn announced(&self, prefix: &Path, exclude_hop: Option<u64>) -> Vec<Announced> {
        self.announced_forwardable(prefix, exclude_hop, usize::MAX)
    }

    /// [`Origin::announced`] as a peer sees it: each path's [`Origin::forwardable`] route.
    pub fn announced_forwardable(
        &self,
        prefix: &Path,
        exclude_hop: Option<u64>,
        max_hops: usize,
    ) -> Vec<Announced> {
        let state = self.state.lock();
        state
            .under(prefix)
            .filter_map(|(path, routes)| state.announced_of(path, routes, exclude_hop, max_hops))
            .collect()
    }

    /// Changes whenever a route is added or removed or goes stale: a listing made at one
    /// generation holds until it changes (or a listed broadcast closes before its route is
    /// removed, which the publisher's session does next).
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }

    /// The paths of [`Origin::announced`] only (a listing): nothing else is copied.
    pub fn announced_paths(&self, prefix: &Path, exclude_hop: Option<u64>) -> Vec<Path> {
        let state = self.state.lock();
        state
            .under(prefix)
            .filter(|(path, routes)| {
                state
                    .best_of(path, routes, exclude_hop, usize::MAX)
                    .is_some()
            })
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Start hearing about changes under `prefix`.
    pub fn interest(&self, prefix: Path) -> Result<Interest, ModelError> {
        let mut state = self.state.lock();
        if state.interests.len() >= self.limits.max_interests {
            return Err(ModelError::TooMany("interests"));
        }
        let id = state.next_id;
        state.next_id += 1;
        state
            .interests_by_prefix
            .entry(prefix.clone())
            .or_default()
            .push(id);
        state.interests.insert(
            id,
            InterestState {
                prefix,
                dirty: Vec::new(),
                dirty_set: Set::default(),
                waiters: Waiters::default(),
            },
        );
        Ok(Interest {
            origin: self.clone(),
            id,
        })
    }

    fn remove_interest(&self, id: u64) {
        let mut state = self.state.lock();
        if let Some(interest) = state.interests.remove(&id) {
            if let Some(ids) = state.interests_by_prefix.get_mut(&interest.prefix) {
                ids.retain(|i| *i != id);
                if ids.is_empty() {
                    state.interests_by_prefix.remove(&interest.prefix);
                }
            }
        }
    }

    /// Number of registered announce interests (statistics).
    pub fn interest_count(&self) -> usize {
        self.state.lock().interests.len()
    }

    /// Number of paths with at least one route.
    pub fn len(&self) -> usize {
        self.state.lock().broadcasts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Keeps a route published; dropping it unpublishes.
#[derive(Debug)]
pub struct RouteHandle {
    origin: Origin,
    id: u64,
}

impl Drop for RouteHandle {
    fn drop(&mut self) {
        if self.id == u64::MAX {
            return;
        }
        let mut state = self.origin.state.lock();
        if let Some(path) = state.remove_route(self.id) {
            state.mark_dirty(&path);
            let orphaned = state.orphaned_fronts(&path);
            drop(state);
            close_fronts(orphaned);
        }
    }
}

/// Peers remembered as having withdrawn one path (a relay has far fewer).
const MAX_WITHDRAWN: usize = 64;

/// A front's home in this origin: what it serves, and where its tracks are dispatched from.
#[derive(Debug)]
struct OriginFront {
    origin: Origin,
    key: FrontKey,
}

impl FrontHome for OriginFront {
    fn key(&self) -> &FrontKey {
        &self.key
    }

    fn dispatch(
        &self,
        request: TrackRequest,
        lost: Option<&BroadcastConsumer>,
    ) -> Result<(), TrackRequest> {
        self.origin.dispatch(&self.key, request, lost)
    }
}

impl Drop for OriginFront {
    /// The front's last handle dropped.
    fn drop(&mut self) {
        self.origin.forget_front(&self.key);
    }
}

/// Close fronts left without a route (outside the origin's lock: the last handle on a front
/// may drop here, and a front's drop unregisters it from the origin).
fn close_fronts(fronts: Vec<BroadcastConsumer>) {
    for front in &fronts {
        front.close();
    }
}

/// Hears which paths under a prefix changed.
#[derive(Debug)]
pub struct Interest {
    origin: Origin,
    id: u64,
}

impl Interest {
    /// Move the paths that changed since the last call into `out`; pending while none did.
    pub fn poll_changed(&self, cx: &mut Context<'_>, out: &mut Vec<Path>) -> Poll<()> {
        let mut state = self.origin.state.lock();
        let Some(interest) = state.interests.get_mut(&self.id) else {
            return Poll::Ready(());
        };
        if interest.dirty.is_empty() {
            interest.waiters.register(cx);
            return Poll::Pending;
        }
        interest.dirty_set.clear();
        out.append(&mut interest.dirty);
        Poll::Ready(())
    }

    pub async fn changed(&self, out: &mut Vec<Path>) {
        poll_fn(|cx| self.poll_changed(cx, out)).await
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }
}

impl Drop for Interest {
    fn drop(&mut self) {
        self.origin.remove_interest(self.id);
    }
}
