//! Counting deliveries: readers add to a per-reader slot and a total; the driver waits for the
//! total to reach a target with one wake, not one per delivery.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::{within, Error};

/// Deliveries per reader, a total, and errors (a gap, a wrong size, a failed stream).
pub struct Tally {
    slots: Vec<AtomicU64>,
    total: AtomicU64,
    target: AtomicU64,
    errors: AtomicU64,
    reached: Notify,
}

impl Tally {
    pub fn new(readers: usize) -> Self {
        Tally {
            slots: (0..readers).map(|_| AtomicU64::new(0)).collect(),
            total: AtomicU64::new(0),
            target: AtomicU64::new(u64::MAX),
            errors: AtomicU64::new(0),
            reached: Notify::new(),
        }
    }

    /// Reader `slot` received one more item.
    pub fn add(&self, slot: usize) {
        if let Some(count) = self.slots.get(slot) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        let now = self.total.fetch_add(1, Ordering::AcqRel) + 1;
        if now == self.target.load(Ordering::Acquire) {
            // One wake per target; a stored permit covers a driver not yet waiting.
            self.reached.notify_one();
        }
    }

    /// A reader saw something wrong.
    pub fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        // Wake the driver so it can fail fast instead of waiting out the timeout.
        self.reached.notify_one();
    }

    /// Wait until the total reaches `target`; fails on a reader error or the bench timeout.
    pub async fn wait_for(&self, target: u64) -> Result<(), Error> {
        self.target.store(target, Ordering::Release);
        within("deliveries", async {
            loop {
                if self.errors() > 0 {
                    return Err(Error::Delivery);
                }
                if self.total.load(Ordering::Acquire) >= target {
                    return Ok(());
                }
                self.reached.notified().await;
            }
        })
        .await?
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Acquire)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Acquire)
    }

    /// Deliveries per reader, in slot order.
    pub fn counts(&self) -> Vec<u64> {
        self.slots
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}
