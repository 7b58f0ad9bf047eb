//! Helpers for the origin tests: learned routes and broadcasts.

use starling_model::{BroadcastProducer, Limits, Route};
use starling_proto::{Path, RouteCost};

pub fn p(s: &str) -> Path {
    Path::new(s).unwrap()
}

pub fn route(warm: u64, cold: u64, hops: &[u64]) -> Route {
    Route::learned(hops.to_vec(), RouteCost { warm, cold }, false)
}

pub fn broadcast() -> BroadcastProducer {
    BroadcastProducer::new(Limits::default())
}
