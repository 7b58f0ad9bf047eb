//! Route cost, `Warm(i) | Cold(i)` on lite-06 ANNOUNCE_START/UPDATE (docs/wire.md §2, §4.4).
//!
//! Each half saturates at 2^62 - 1 on decode and on encode; both are opaque ranking data
//! (lower warm wins, cold breaks the tie).

use crate::coding::{self, DecodeError, EncodeError};
use crate::limits::MAX_VARINT;
use crate::version::Version;

/// A route's price: `warm` right now, `cold` with no cache discount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteCost {
    pub warm: u64,
    pub cold: u64,
}

impl RouteCost {
    /// Where each half saturates: 2^62 - 1.
    pub const MAX_HALF: u64 = MAX_VARINT;

    /// Both halves at the ceiling (a draining peer's routes).
    pub const MAX: RouteCost = RouteCost {
        warm: MAX_VARINT,
        cold: MAX_VARINT,
    };

    /// What a pre-06 peer's announcements are worth: free warm, unknown (MAX) cold.
    pub const UNKNOWN: RouteCost = RouteCost {
        warm: 0,
        cold: MAX_VARINT,
    };

    /// Both halves at `cost`.
    pub const fn new(cost: u64) -> RouteCost {
        RouteCost {
            warm: cost,
            cold: cost,
        }
    }

    /// Both halves clamped to the ceiling.
    pub fn saturated(self) -> RouteCost {
        RouteCost {
            warm: self.warm.min(MAX_VARINT),
            cold: self.cold.min(MAX_VARINT),
        }
    }

    /// Add a link price to both halves, saturating at the ceiling.
    pub fn charged(self, link: u64) -> RouteCost {
        RouteCost {
            warm: self.warm.saturating_add(link).min(MAX_VARINT),
            cold: self.cold.saturating_add(link).min(MAX_VARINT),
        }
    }

    /// Read `Warm(i) | Cold(i)`.
    pub fn decode(r: &mut &[u8], version: Version) -> Result<RouteCost, DecodeError> {
        let warm = coding::read_varint(r, version)?;
        let cold = coding::read_varint(r, version)?;
        Ok(RouteCost { warm, cold }.saturated())
    }

    /// Write `Warm(i) | Cold(i)`, saturating each half.
    pub fn encode(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        let c = self.saturated();
        coding::write_varint(w, c.warm, version)?;
        coding::write_varint(w, c.cold, version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates() {
        let mut w = Vec::new();
        RouteCost {
            warm: u64::MAX,
            cold: 1,
        }
        .encode(&mut w, Version::Lite06)
        .unwrap();
        assert_eq!(
            RouteCost::decode(&mut &w[..], Version::Lite06).unwrap(),
            RouteCost {
                warm: MAX_VARINT,
                cold: 1
            }
        );
        assert_eq!(RouteCost::MAX.charged(5), RouteCost::MAX);
        assert_eq!(RouteCost::new(1).charged(1), RouteCost::new(2));
    }
}
