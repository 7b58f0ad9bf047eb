//! The wires the mesh simulation's links speak (every one that carries hop chains), and what
//! of a route's cost each carries to the far side.

use rand::rngs::StdRng;
use rand::Rng;
use starling_proto::ietf::Draft;
use starling_proto::{RouteCost, Version};

/// The protocol a link speaks: every wire that carries hop chains.
#[derive(Clone, Copy, Debug)]
pub enum Wire {
    Lite(Version),
    Ietf(Draft),
}

impl Wire {
    pub fn random(rng: &mut StdRng) -> Wire {
        let lite = [Version::Lite05, Version::Lite06, Version::Lite07Wip];
        let ietf = [
            Draft::D17,
            Draft::D18,
            Draft::D19,
            Draft::D20,
            Draft::D21,
            Draft::D22,
        ];
        let pick = rng.gen_range(0..lite.len() + ietf.len());
        match lite.get(pick) {
            Some(version) => Wire::Lite(*version),
            None => Wire::Ietf(ietf[pick - lite.len()]),
        }
    }

    /// What of a route's cost reaches the far side: lite-06 on carries both halves, lite-05
    /// none (free warm, unknown cold), the IETF drafts' cluster parameters the warm half
    /// (read as both), or the maximum for a route of unknown cost.
    pub fn carry(self, cost: RouteCost) -> RouteCost {
        match self {
            Wire::Lite(version) if version.has_route_cost() => cost,
            Wire::Lite(_) => RouteCost::UNKNOWN,
            Wire::Ietf(_) if cost.cold >= RouteCost::MAX_HALF => RouteCost::MAX,
            Wire::Ietf(_) => RouteCost::new(cost.warm),
        }
    }
}
