//! The dash's tick board: per tick, how many tracks delivered their group, and when the last
//! one arrived. Updated lock-free from every reader.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::frame::FrameHeader;
use crate::histogram::Histogram;

/// Per-tick arrivals across every track, and each tick's completion.
pub(super) struct TickBoard {
    pub(super) expected: u64,
    pub(super) received: Vec<AtomicU64>,
    /// Arrival of the tick's last track (ns since the epoch); 0 while incomplete.
    pub(super) completed_ns: Vec<AtomicU64>,
    pub(super) completion: Histogram,
}

impl TickBoard {
    pub(super) fn new(ticks: u64, expected: u64) -> Self {
        TickBoard {
            expected,
            received: (0..ticks).map(|_| AtomicU64::new(0)).collect(),
            completed_ns: (0..ticks).map(|_| AtomicU64::new(0)).collect(),
            completion: Histogram::new(),
        }
    }

    pub(super) fn on_frame(&self, header: &FrameHeader, now: u64) {
        let tick = header.sequence as usize;
        let Some(received) = self.received.get(tick) else {
            return;
        };
        if received.fetch_add(1, Ordering::AcqRel) + 1 == self.expected {
            self.completed_ns[tick].store(now, Ordering::Release);
            self.completion
                .record(now.saturating_sub(header.scheduled_ns));
        }
    }

    pub(super) fn complete(&self) -> usize {
        self.completed_ns
            .iter()
            .filter(|c| c.load(Ordering::Acquire) != 0)
            .count()
    }
}
