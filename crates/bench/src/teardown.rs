//! Route teardown and refollow in the origin (moq-dev's route-teardown shapes): a peer session
//! that announced `per_prefix` broadcasts under each of `prefixes` announce prefixes, and held
//! one announce interest per prefix, leaves and comes back, while a staying viewer listens on
//! every prefix and a second, costlier route to every broadcast stays (so each path's best
//! route changes, as it does when a relay loses one of two peers).
//!
//! Teardown is what the session layer does when a peer goes: every route it announced is
//! removed in one batch (`Origin::unpublish_all`), its interests are dropped, and each staying
//! interest hears every affected path once. Refollow is the peer coming back: its interests
//! registered again, each reading its prefix's current routes as an announce stream starts,
//! and its routes published again. Both should cost the routes and prefixes they touch, no
//! more: linear in the work, whatever else the origin holds.

use starling_model::{BroadcastProducer, Interest, Limits, Origin, Route, RouteHandle};
use starling_proto::{Path, RouteCost};

use crate::Error;

/// The leaving peer's hop in every chain it announces.
const PEER: u64 = 7;
/// The staying route's hop.
const OTHER: u64 = 8;

/// One table shape: `prefixes` x `per_prefix` routes from one peer.
pub struct Teardown {
    origin: Origin,
    prefixes: Vec<Path>,
    paths: Vec<Path>,
    broadcasts: Vec<BroadcastProducer>,
    /// The leaving peer's routes and interests, while it is connected.
    routes: Vec<RouteHandle>,
    interests: Vec<Interest>,
    /// The staying viewer: one interest per prefix, drained after each step.
    viewer: Vec<Interest>,
    /// The costlier route to every path, always there.
    _staying: Vec<RouteHandle>,
    scratch: Vec<Path>,
}

impl Teardown {
    pub fn setup(prefixes: usize, per_prefix: usize) -> Result<Teardown, Error> {
        let origin = Origin::with_limits(starling_model::OriginLimits {
            max_routes: 2 * prefixes * per_prefix + 16,
            max_interests: 2 * prefixes + 16,
        });
        let prefix_paths: Vec<Path> = (0..prefixes)
            .map(|p| Path::new(&format!("org/p{p}")))
            .collect::<Result<_, _>>()?;
        let mut paths = Vec::with_capacity(prefixes * per_prefix);
        for prefix in &prefix_paths {
            for b in 0..per_prefix {
                paths.push(prefix.join(&Path::new(&format!("b{b}"))?)?);
            }
        }
        let broadcasts: Vec<BroadcastProducer> = paths
            .iter()
            .map(|_| BroadcastProducer::dynamic(Limits::default()))
            .collect();
        let viewer = prefix_paths
            .iter()
            .map(|prefix| origin.interest(prefix.clone()))
            .collect::<Result<_, _>>()?;
        let staying_route = Route::learned(vec![OTHER], RouteCost::new(2), true);
        let staying = paths
            .iter()
            .zip(&broadcasts)
            .map(|(path, b)| origin.publish(path.clone(), b.consume(), staying_route.clone()))
            .collect::<Result<_, _>>()?;
        let mut shape = Teardown {
            origin,
            prefixes: prefix_paths,
            paths,
            broadcasts,
            routes: Vec::new(),
            interests: Vec::new(),
            viewer,
            _staying: staying,
            scratch: Vec::new(),
        };
        shape.refollow()?;
        shape.drain_viewer();
        Ok(shape)
    }

    /// Routes the peer announced.
    pub fn routes(&self) -> usize {
        self.paths.len()
    }

    /// The peer leaves; returns the path changes the viewer heard (one per route: each path's
    /// best route is now the staying one).
    pub fn teardown(&mut self) -> usize {
        self.origin.unpublish_all(self.routes.drain(..));
        self.interests.clear();
        self.drain_viewer()
    }

    /// The peer comes back: interests first (each reading its prefix's routes, as an announce
    /// stream starts: the staying routes), then its routes; returns the routes its interests
    /// were first told of.
    pub fn refollow(&mut self) -> Result<usize, Error> {
        let mut told = 0;
        for prefix in &self.prefixes {
            self.interests.push(self.origin.interest(prefix.clone())?);
            told += self.origin.announced(prefix, Some(PEER)).len();
        }
        let route = Route::learned(vec![PEER], RouteCost::new(1), true);
        for (path, broadcast) in self.paths.iter().zip(&self.broadcasts) {
            self.routes.push(self.origin.publish(
                path.clone(),
                broadcast.consume(),
                route.clone(),
            )?);
        }
        self.drain_viewer();
        Ok(told)
    }

    /// Read every change the viewer's interests collected; the count.
    fn drain_viewer(&mut self) -> usize {
        let waker = futures_noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut total = 0;
        for interest in &self.viewer {
            self.scratch.clear();
            let _ = interest.poll_changed(&mut cx, &mut self.scratch);
            total += self.scratch.len();
        }
        for interest in &self.interests {
            self.scratch.clear();
            let _ = interest.poll_changed(&mut cx, &mut self.scratch);
        }
        total
    }
}

/// A waker that does nothing (the bench polls by hand).
fn futures_noop_waker() -> std::task::Waker {
    std::task::Waker::noop().clone()
}
