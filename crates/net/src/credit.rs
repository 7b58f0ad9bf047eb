//! Stream credit that grows with use.
//!
//! quinn allocates state for every stream the peer may open concurrently as soon as that
//! credit is granted, so granting the 10 000 streams a busy cluster link needs to every
//! connection from the start costs about a megabyte per idle viewer. Instead each
//! connection starts with a small credit per direction and doubles it, up to the configured
//! maximum, whenever the streams the peer has open reach half of it. Counting is per
//! accepted stream: a bidirectional stream counts until its receiving half is dropped.
//!
//! Credit is not free: quinn keeps a stream the peer opened until the peer ends it, even
//! after we stopped it and let go, so a peer that never resets what we stop holds its whole
//! credit in quinn's memory. A gate the session installs (the relay-wide receive pool) is
//! asked before each growth and may refuse it; the credit then stays where it is.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use quinn::VarInt;
use starling_transport::StreamGate;

/// The concurrent-stream credit a connection starts with and may grow to, per direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    pub initial_bidi: u64,
    pub initial_uni: u64,
    pub max_bidi: u64,
    pub max_uni: u64,
}

/// Which way an accepted stream goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Bidi,
    Uni,
}

/// What counting a stream did to the credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Growth {
    /// Nothing to do: less than half is open, or the credit is at its maximum.
    Unneeded,
    /// The credit grew to this.
    Grown(u64),
    /// It should have grown and the gate refused.
    Refused,
}

#[derive(Debug)]
struct Counter {
    open: AtomicU64,
    granted: AtomicU64,
    max: u64,
    /// A retry of refused growth is pending (one at a time).
    retrying: AtomicBool,
}

impl Counter {
    fn new(initial: u64, max: u64) -> Self {
        Counter {
            open: AtomicU64::new(0),
            granted: AtomicU64::new(initial.min(max)),
            max,
            retrying: AtomicBool::new(false),
        }
    }

    /// Count an accepted stream, and grow the credit if half of it is open and `allow`
    /// lets it grow by the difference.
    fn opened(&self, allow: impl FnOnce(u64) -> bool) -> Growth {
        self.open.fetch_add(1, Ordering::AcqRel);
        self.grow(allow)
    }

    /// Grow the credit if half of it is open and `allow` lets it grow by the difference.
    fn grow(&self, allow: impl FnOnce(u64) -> bool) -> Growth {
        let open = self.open.load(Ordering::Acquire);
        let granted = self.granted.load(Ordering::Acquire);
        if open * 2 < granted || granted >= self.max {
            return Growth::Unneeded;
        }
        let grown = granted.saturating_mul(2).clamp(1, self.max);
        if !allow(grown - granted) {
            return Growth::Refused;
        }
        // A racing growth won: what `allow` took for this one stays taken (it is given
        // back with the connection), which errs on the side of the bound.
        match self
            .granted
            .compare_exchange(granted, grown, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Growth::Grown(grown),
            Err(_) => Growth::Unneeded,
        }
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection's stream credit in both directions.
pub(crate) struct StreamCredit {
    bidi: Counter,
    uni: Counter,
    /// Asked before any growth, once set.
    gate: OnceLock<StreamGate>,
}

impl std::fmt::Debug for StreamCredit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamCredit")
            .field("bidi", &self.bidi)
            .field("uni", &self.uni)
            .field("gated", &self.gate.get().is_some())
            .finish()
    }
}

impl StreamCredit {
    pub fn new(limits: StreamLimits) -> Self {
        StreamCredit {
            bidi: Counter::new(limits.initial_bidi, limits.max_bidi),
            uni: Counter::new(limits.initial_uni, limits.max_uni),
            gate: OnceLock::new(),
        }
    }

    /// Ask `gate` before every growth from now on (the first gate set stays).
    pub fn set_gate(&self, gate: StreamGate) {
        let _ = self.gate.set(gate);
    }

    fn counter(&self, direction: Direction) -> &Counter {
        match direction {
            Direction::Bidi => &self.bidi,
            Direction::Uni => &self.uni,
        }
    }

    /// Count a stream the peer opened, growing the credit on `conn` when it runs low. True
    /// when the gate refused growth and no retry is pending yet: the caller starts one
    /// (see [`retry`](Self::retry)).
    pub fn opened(&self, direction: Direction, conn: &quinn::Connection) -> bool {
        let counter = self.counter(direction);
        let growth = counter.opened(|more| self.allow(more));
        self.apply(direction, growth, conn);
        growth == Growth::Refused && !counter.retrying.swap(true, Ordering::AcqRel)
    }

    /// Try refused growth again: a peer that opened every stream its credit allows opens
    /// no more, so without a retry it would wait for one of them to end even once the gate
    /// has room. True when the retry is over (grown, or no longer needed).
    pub fn retry(&self, direction: Direction, conn: &quinn::Connection) -> bool {
        let counter = self.counter(direction);
        let growth = counter.grow(|more| self.allow(more));
        self.apply(direction, growth, conn);
        let over = growth != Growth::Refused;
        if over {
            counter.retrying.store(false, Ordering::Release);
        }
        over
    }

    fn allow(&self, more: u64) -> bool {
        self.gate.get().is_none_or(|gate| gate(more))
    }

    fn apply(&self, direction: Direction, growth: Growth, conn: &quinn::Connection) {
        if let Growth::Grown(grown) = growth {
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
        assert_eq!(counter.opened(|_| true), Growth::Unneeded); // 1 of 4
        assert_eq!(counter.opened(|_| true), Growth::Grown(8)); // 2 of 4: grow
        assert_eq!(counter.opened(|_| true), Growth::Unneeded); // 3 of 8
        assert_eq!(counter.opened(|_| true), Growth::Grown(16)); // 4 of 8
        for _ in 0..3 {
            assert_eq!(counter.opened(|_| true), Growth::Unneeded); // 5..7 of 16
        }
        assert_eq!(counter.opened(|_| true), Growth::Grown(20)); // 8 of 16: capped
        assert_eq!(counter.opened(|_| true), Growth::Unneeded);
        // Streams that close make room without growing.
        for _ in 0..9 {
            counter.closed();
        }
        assert_eq!(counter.open.load(Ordering::Relaxed), 0);
        assert_eq!(counter.opened(|_| true), Growth::Unneeded);
    }

    #[test]
    fn a_gate_that_refuses_holds_the_credit_where_it_is_until_a_retry_is_let_through() {
        let counter = Counter::new(4, 20);
        assert_eq!(counter.opened(|_| true), Growth::Unneeded); // 1 of 4
        let mut asked = Vec::new();
        assert_eq!(
            counter.opened(|more| {
                asked.push(more);
                false
            }),
            Growth::Refused,
            "2 of 4 would grow to 8: refused"
        );
        assert_eq!(asked, [4]);
        assert_eq!(counter.granted.load(Ordering::Relaxed), 4);
        assert_eq!(counter.opened(|_| false), Growth::Refused); // 3 of 4
        assert_eq!(counter.opened(|_| false), Growth::Refused); // 4 of 4: all open
                                                                // No stream comes while all are open: a retry, with room now, grows it.
        assert_eq!(counter.grow(|more| more == 4), Growth::Grown(8));
        assert_eq!(
            counter.grow(|_| true),
            Growth::Grown(16),
            "4 of 8: half, again"
        );
        assert_eq!(counter.grow(|_| true), Growth::Unneeded, "4 of 16");
    }
}
