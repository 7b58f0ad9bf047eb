//! Hearing what a peer announces, whatever the wire: each broadcast it announces becomes a
//! route in the origin we consume, a dynamic broadcast whose tracks this session pulls from the
//! peer on demand; the route is re-priced when the peer says so or drains, taken out while its
//! chain passes through us, and withdrawn when the peer ends it (explicitly: routes through the
//! peer go stale, cluster statement 15) or when what carried it (the announce stream, the
//! request, the session) is gone. Each family reads its own messages and hands over what they
//! mean: lite's in `subscriber/announce.rs`, the drafts' in `ietf/subscriber.rs`. The telling
//! side is `announcing.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use starling_model::{BroadcastProducer, Origin, Route, RouteHandle};
use starling_proto::{Path, RouteCost};
use starling_transport::Transport;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::pulls::Puller;
use crate::shared::Shared;

/// One broadcast the peer announced and we route to.
pub(crate) struct Heard {
    /// The origin the route is published in (the one the session consumes into).
    origin: Origin,
    /// Where the route is published (absolute).
    path: Path,
    /// The route in the origin; `None` while the chain passes through us or runs past the hop
    /// limit (withdrawn until a later announcement is clean again).
    route: Option<RouteHandle>,
    broadcast: Arc<BroadcastProducer>,
    /// Stops the task serving the broadcast's track requests.
    stop: CancellationToken,
    /// The chain as heard (the peer's hop included) and the cost with the link's price.
    hops: Arc<[u64]>,
    cost: RouteCost,
    /// The peer sent GOAWAY: the route costs the maximum from then on, so any other route wins
    /// while its sessions move (moq-net's drain pricing).
    draining: bool,
    /// Its entry in the relay-wide state ledger, released with it.
    _entry: Option<crate::StateEntry>,
}

impl Heard {
    /// Route `path` (absolute; `wire` is the same relative to the session's root) over
    /// `hops` at `cost`, its tracks pulled through `puller`. A draining peer's route starts at
    /// the maximum cost.
    pub fn start<T: Transport, P: Puller<T>>(
        shared: &Arc<Shared<T>>,
        origin: Origin,
        (path, wire): (Path, Path),
        (hops, cost): (Vec<u64>, RouteCost),
        draining: bool,
        puller: P,
    ) -> Result<Heard, Error> {
        let entry = shared.charge_route()?;
        let broadcast = Arc::new(shared.config.dynamic_broadcast());
        let mut heard = Heard {
            origin,
            path,
            route: None,
            broadcast,
            stop: CancellationToken::new(),
            hops: Arc::from(hops),
            cost,
            draining,
            _entry: entry,
        };
        let route = heard.current(shared);
        let published =
            heard
                .origin
                .publish(heard.path.clone(), heard.broadcast.consume(), route)?;
        heard.route = Some(published);
        shared.stats.routes.fetch_add(1, Ordering::Relaxed);
        let task =
            crate::pulls::serve_requests(shared.clone(), wire, heard.broadcast.clone(), puller);
        let stop = heard.stop.clone();
        shared.spawn(async move {
            tokio::select! {
                biased;
                _ = stop.cancelled() => {}
                _ = task => {}
            }
        });
        Ok(heard)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn draining(&self) -> bool {
        self.draining
    }

    /// The route as it stands: its chain, at the maximum cost while the peer drains.
    fn current<T: Transport>(&self, shared: &Shared<T>) -> Route {
        let cost = if self.draining {
            RouteCost::MAX
        } else {
            self.cost
        };
        Route {
            hops: self.hops.clone(),
            cost,
            peer: shared.config.cluster_peer,
        }
    }

    /// The peer re-announced the broadcast: a new chain and cost (the link's price in it),
    /// either left as it was when `None`.
    pub fn reprice<T: Transport>(
        &mut self,
        shared: &Shared<T>,
        hops: Option<Vec<u64>>,
        cost: Option<RouteCost>,
    ) -> Result<(), Error> {
        if let Some(hops) = hops {
            self.hops = Arc::from(hops);
        }
        if let Some(cost) = cost {
            self.cost = cost;
        }
        self.republish(shared)
    }

    /// The peer is going away: the route costs the maximum from now on.
    pub fn drain<T: Transport>(&mut self, shared: &Shared<T>) -> Result<(), Error> {
        self.draining = true;
        self.republish(shared)
    }

    /// Put the route as it stands into the origin: updated in place; taken out while its chain
    /// holds our own hop or runs past the hop limit (a reflection); published again once a
    /// later chain is clean.
    fn republish<T: Transport>(&mut self, shared: &Shared<T>) -> Result<(), Error> {
        let clean =
            !self.hops.contains(&shared.config.hop) && self.hops.len() <= shared.config.max_hops;
        let route = self.current(shared);
        match (&self.route, clean) {
            (Some(handle), true) => self.origin.update_route(handle, route),
            (Some(_), false) => self.origin.unpublish_all(self.route.take()),
            (None, true) => {
                let handle =
                    self.origin
                        .publish(self.path.clone(), self.broadcast.consume(), route)?;
                self.route = Some(handle);
            }
            (None, false) => {}
        }
        Ok(())
    }

    /// Stop serving the broadcast, uncount it, and hand back its origin and route for removal.
    fn close<T: Transport>(self, shared: &Shared<T>) -> (Origin, Option<RouteHandle>) {
        self.broadcast.close();
        self.stop.cancel();
        shared.stats.routes.fetch_sub(1, Ordering::Relaxed);
        (self.origin, self.route)
    }

    /// The peer ended the broadcast: routes through it (`sender`, its hop) go stale.
    pub fn withdraw<T: Transport>(self, shared: &Shared<T>, sender: u64) {
        let (origin, route) = self.close(shared);
        origin.withdraw_all(sender, route);
    }

    /// The broadcast is no longer heard (its chain now passes through us): its route goes at
    /// once.
    pub fn unpublish<T: Transport>(self, shared: &Shared<T>) {
        let (origin, route) = self.close(shared);
        origin.unpublish_all(route);
    }

    /// What carried these broadcasts (one session's) ended: their routes go, removed in one
    /// batch.
    pub fn lost<T: Transport>(shared: &Shared<T>, heard: impl IntoIterator<Item = Heard>) {
        let mut origin = None;
        let routes: Vec<RouteHandle> = heard
            .into_iter()
            .filter_map(|heard| {
                let (from, route) = heard.close(shared);
                origin.get_or_insert(from);
                route
            })
            .collect();
        #[cfg(feature = "faults")]
        if crate::faults::planted(crate::faults::Fault::KeepRoutesOfLostPeers) {
            std::mem::forget(routes);
            return;
        }
        if let Some(origin) = origin {
            origin.unpublish_all(routes);
        }
    }
}
