//! A way to reach a broadcast (the hops of its chain and their cost, learned or local) and
//! the order moq-relay 0.17.10 ranks such routes in.

use std::sync::Arc;

use starling_proto::{Path, RouteCost};

/// A front's identity in the origin: its path and the first hop every route it reads through
/// starts with (the original publisher, so the same content however it is reached).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FrontKey {
    pub(crate) path: Path,
    pub(crate) identity: u64,
}

/// One way to reach a broadcast.
#[derive(Clone, Debug)]
pub struct Route {
    /// Origin hop ids, original publisher first; excludes this endpoint.
    pub hops: Arc<[u64]>,
    pub cost: RouteCost,
    /// Learned over a cluster peer link: ties between equal peer routes are broken by a hash
    /// of the path and chain that every relay computes alike, so a mesh picks one upstream.
    pub peer: bool,
}

impl Route {
    pub fn local() -> Self {
        Route {
            hops: Arc::from(Vec::new()),
            cost: RouteCost { warm: 0, cold: 0 },
            peer: false,
        }
    }

    /// A learned route with this chain and cost.
    pub fn learned(hops: Vec<u64>, cost: RouteCost, peer: bool) -> Self {
        Route {
            hops: Arc::from(hops),
            cost,
            peer,
        }
    }

    /// The order routes are chosen in, lowest first: moq-relay 0.17.10's (chains naming every
    /// hop before anonymous ones, a 0 anywhere; warm, cold, fewer hops, a broadcast published
    /// here having none; then, for routes learned from cluster peers, [`fnv_key`] of the path
    /// and chain; the newest entry breaks what is left), with one change: a route whose cost
    /// is not known (cold at the maximum: it crossed a link that carries no costs, lite-05 and
    /// older, or a draining peer) ranks after every route whose cost is, and among such routes
    /// fewer hops come first. A link without costs restarts warm at its price, so under
    /// moq-relay's order a relay can rank a route below what its neighbour pays for it, and two
    /// relays can each rank the route through the other first: each then refuses the other
    /// (split horizon) for good. With this order a route always ranks worse at the receiver
    /// than at the sender, so at convergence no relay's chosen route runs through a peer that
    /// reads the same content through it (docs/cluster.md).
    pub(crate) fn rank(&self, path: &Path) -> (bool, bool, usize, u64, u64, usize, u64) {
        let unknown = self.cost.cold >= RouteCost::MAX_HALF;
        (
            self.hops.contains(&0),
            unknown,
            if unknown { self.hops.len() } else { 0 },
            self.cost.warm,
            self.cost.cold,
            self.hops.len(),
            if self.peer {
                fnv_key(path, &self.hops)
            } else {
                0
            },
        )
    }
}

/// FNV-1a (64-bit, basis `0x420C0DECB00B`) over the path's bytes, then each hop as 8
/// little-endian bytes: the tie-break moq-relay uses between equal peer routes.
pub fn fnv_key(path: &Path, hops: &[u64]) -> u64 {
    const BASIS: u64 = 0x420C_0DEC_B00B;
    const PRIME: u64 = 0x0100_0000_01B3;
    let mut hash = BASIS;
    let mut eat = |byte: u8| {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(PRIME);
    };
    for byte in path.as_str().bytes() {
        eat(byte);
    }
    for hop in hops {
        for byte in hop.to_le_bytes() {
            eat(byte);
        }
    }
    hash
}
