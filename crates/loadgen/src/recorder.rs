//! What one run (or one kind of agent in it) measured: latencies, deliveries and errors.
//!
//! Shared by every task of the run; recording is atomic, so no task waits on another.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::errors::ErrorCounts;
use crate::histogram::Histogram;

/// Latency histograms (nanoseconds), delivery counters and errors.
#[derive(Debug, Default)]
pub struct Recorder {
    /// From starting to dial to a ready session (or, over HTTP, to the response headers).
    pub connect: Histogram,
    /// From starting to dial to the first frame (or, over HTTP, to the whole group body).
    pub first_frame: Histogram,
    /// From each measured frame's scheduled send time to its arrival.
    pub delivery: Histogram,
    /// Connections attempted, and those that reached a ready session.
    pub attempted: AtomicU64,
    pub connected: AtomicU64,
    /// Measured frames received (every copy) and their bytes.
    pub frames: AtomicU64,
    pub bytes: AtomicU64,
    /// Groups that ended, and those that ended in a reset or did not decode.
    pub groups: AtomicU64,
    pub groups_failed: AtomicU64,
    /// When the latest measured frame arrived (the run clock's ns), for throughput.
    pub last_delivery_ns: AtomicU64,
    pub errors: ErrorCounts,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }

    /// A measured frame arrived at `now`.
    pub(crate) fn delivered_at(&self, now: u64) {
        self.last_delivery_ns.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn bump(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn load(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
