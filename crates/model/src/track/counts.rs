//! What a track counts per frame without its lock: a frame takes only its group's lock, and
//! reports here through atomics what the track's cache policy and statistics read.
//!
//! A frame's charge is added under its group's lock, and a group that leaves the cache gives
//! its charge back under the same lock (`Group::expire`), so the totals never go below what
//! the cached groups hold.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The per-frame counters of one track.
#[derive(Debug)]
pub(super) struct FrameCounts {
    /// Frames and payload bytes accepted, cumulative (statistics only).
    frames: AtomicU64,
    bytes: AtomicU64,
    /// Payload bytes the cached groups hold (the track's byte bound reads it).
    cached_bytes: AtomicUsize,
    /// What the cached groups are charged in the relay-wide budget (payload plus overheads).
    cost: AtomicUsize,
    /// The highest timestamp written.
    newest_timestamp: AtomicU64,
    /// The newest timestamp past which the oldest group the policy may drop has aged out
    /// (`u64::MAX`: none can yet). Set under the track's lock whenever the policy runs.
    age_trip: AtomicU64,
}

impl Default for FrameCounts {
    fn default() -> Self {
        FrameCounts {
            frames: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            cached_bytes: AtomicUsize::new(0),
            cost: AtomicUsize::new(0),
            newest_timestamp: AtomicU64::new(0),
            age_trip: AtomicU64::new(u64::MAX),
        }
    }
}

/// Where a frame's charge left the track.
pub(super) struct Charged {
    /// Payload bytes cached, this frame included.
    pub(super) cached_bytes: usize,
    /// Whether a cached group aged out with this frame's timestamp.
    pub(super) aged: bool,
}

impl FrameCounts {
    /// Count a frame of `size` payload bytes costing `cost`, stamped `timestamp`.
    pub(super) fn frame(&self, size: usize, cost: usize, timestamp: u64) -> Charged {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(size as u64, Ordering::Relaxed);
        self.cost.fetch_add(cost, Ordering::Relaxed);
        let cached_bytes = self.cached_bytes.fetch_add(size, Ordering::Relaxed) + size;
        let newest = self
            .newest_timestamp
            .fetch_max(timestamp, Ordering::Relaxed)
            .max(timestamp);
        Charged {
            cached_bytes,
            aged: newest > self.age_trip.load(Ordering::Relaxed),
        }
    }

    /// A new group's overhead.
    pub(super) fn group(&self, cost: usize) {
        self.cost.fetch_add(cost, Ordering::Relaxed);
    }

    /// What a group that left the cache held.
    pub(super) fn release(&self, bytes: usize, cost: usize) {
        self.cached_bytes.fetch_sub(bytes, Ordering::Relaxed);
        self.cost.fetch_sub(cost, Ordering::Relaxed);
    }

    pub(super) fn set_age_trip(&self, trip: u64) {
        self.age_trip.store(trip, Ordering::Relaxed);
    }

    pub(super) fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(super) fn cached_bytes(&self) -> usize {
        self.cached_bytes.load(Ordering::Relaxed)
    }

    pub(super) fn cost(&self) -> usize {
        self.cost.load(Ordering::Relaxed)
    }

    pub(super) fn newest_timestamp(&self) -> u64 {
        self.newest_timestamp.load(Ordering::Relaxed)
    }
}
