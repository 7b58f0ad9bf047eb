//! Stream credit that grows with use.
//!
//! quinn allocates state for every stream the peer may open concurrently as soon as that
//! credit is granted, so granting the 10 000 streams a busy cluster link needs to every
//! connection from the start costs about a megabyte per idle viewer. Instead each
//! connection starts with a small credit per direction and doubles it, up to the configured
//! maximum, whenever the streams the peer has open reach half of it. Counting is per
//! accepted stream: a bidirectional stream counts until its receiving half is dropped.

use std::sync::atomic::{AtomicU64, Ordering};

use quinn::VarInt;

/// The concurrent-stream credit a connection starts with and may grow to, per direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    pub initial: u64,
    pub max_bidi: u64,
    pub max_uni: u64,
}

/// Which way an accepted stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Bidi,
    Uni,
}

#[derive(Debug)]
struct Counter {
    open: AtomicU64,
    granted: AtomicU64,
    max: u64,
}

impl Counter {
    fn new(initial: u64, max: u64) -> Self {
        Counter {
            open: AtomicU64::new(0),
            granted: AtomicU64::new(initial.min(max)),
            max,
        }
    }

    /// Count an accepted stream; the new credit when it should grow.
    fn opened(&self) -> Option<u64> {
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let granted = self.granted.load(Ordering::Acquire);
        if open * 2 < granted || granted >= self.max {
            return None;
        }
        let grown = granted.saturating_mul(2).clamp(1, self.max);
        self.granted
            .compare_exchange(granted, grown, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| grown)
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection's stream credit in both directions.
#[derive(Debug)]
pub(crate) struct StreamCredit {
    bidi: Counter,
    uni: Counter,
}

impl StreamCredit {
    pub fn new(limits: StreamLimits) -> Self {
        StreamCredit {
            bidi: Counter::new(limits.initial, limits.max_bidi),
            uni: Counter::new(limits.initial, limits.max_uni),
        }
    }

    fn counter(&self, direction: Direction) -> &Counter {
        match direction {
            Direction::Bidi => &self.bidi,
            Direction::Uni => &self.uni,
        }
    }

    /// Count a stream the peer opened, growing the credit on `conn` when it runs low.
    pub fn opened(&self, direction: Direction, conn: &quinn::Connection) {
        if let Some(grown) = self.counter(direction).opened() {
            let grown = VarInt::from_u64(grown).unwrap_or(VarInt::MAX);
            match direction {
                Direction::Bidi => conn.set_max_concurrent_bi_streams(grown),
                Direction::Uni => conn.set_max_concurrent_uni_streams(grown),
            }
        }
    }

    /// A stream the peer opened is done.
    pub fn closed(&self, direction: Direction) {
        self.counter(direction).closed();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_doubles_at_half_use_up_to_the_maximum() {
        let counter = Counter::new(4, 20);
        assert_eq!(counter.opened(), None); // 1 of 4
        assert_eq!(counter.opened(), Some(8)); // 2 of 4: grow
        assert_eq!(counter.opened(), None); // 3 of 8
        assert_eq!(counter.opened(), Some(16)); // 4 of 8
        for _ in 0..3 {
            assert_eq!(counter.opened(), None); // 5..7 of 16
        }
        assert_eq!(counter.opened(), Some(20)); // 8 of 16: capped
        assert_eq!(counter.opened(), None);
        // Streams that close make room without growing.
        for _ in 0..9 {
            counter.closed();
        }
        assert_eq!(counter.open.load(Ordering::Relaxed), 0);
        assert_eq!(counter.opened(), None);
    }
}
