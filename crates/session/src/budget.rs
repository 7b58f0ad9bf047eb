//! The per-connection receive budget: bytes held in incomplete messages and frames.
//!
//! Every stream reader charges the bytes it buffers (a header or payload not yet whole) to
//! its connection's budget and releases them once the unit completes. A reader whose charge
//! would overflow the budget is evicted (its stream is stopped with EVICTED), so one peer can
//! never make the relay buffer more than the budget, however many streams it opens.
//!
//! Deliberate simplification for now: the stream that hits the bound is the one evicted, not
//! the lowest-ranked stream of the connection (design.md rule 5 describes the full ranking).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug)]
struct Inner {
    limit: usize,
    used: AtomicUsize,
    evictions: AtomicU64,
}

/// Shared by every reader of one connection.
#[derive(Clone, Debug)]
pub struct RecvBudget(Arc<Inner>);

impl RecvBudget {
    pub fn new(limit: usize) -> Self {
        RecvBudget(Arc::new(Inner {
            limit,
            used: AtomicUsize::new(0),
            evictions: AtomicU64::new(0),
        }))
    }

    /// Charge `bytes`; false (nothing charged) when the budget would overflow.
    pub fn try_charge(&self, bytes: usize) -> bool {
        let mut used = self.0.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = used.checked_add(bytes).filter(|n| *n <= self.0.limit) else {
                self.0.evictions.fetch_add(1, Ordering::Relaxed);
                return false;
            };
            match self
                .0
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => used = actual,
            }
        }
    }

    pub fn release(&self, bytes: usize) {
        self.0.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes currently charged.
    pub fn used(&self) -> usize {
        self.0.used.load(Ordering::Relaxed)
    }

    /// Streams evicted so far.
    pub fn evictions(&self) -> u64 {
        self.0.evictions.load(Ordering::Relaxed)
    }
}
