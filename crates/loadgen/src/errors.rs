//! Errors counted by kind: a run keeps going through failures and reports how many of each.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// Counts of errors by a short, stable kind name (`connect_timeout`, `group_reset:Old`, …).
#[derive(Debug, Default)]
pub struct ErrorCounts {
    counts: Mutex<BTreeMap<String, u64>>,
}

impl ErrorCounts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one error of `kind`.
    pub fn count(&self, kind: &str) {
        self.add(kind, 1);
    }

    /// Count `n` errors of `kind`.
    pub fn add(&self, kind: &str, n: u64) {
        if n == 0 {
            return;
        }
        let mut counts = self.counts.lock();
        match counts.get_mut(kind) {
            Some(count) => *count += n,
            None => {
                counts.insert(kind.to_string(), n);
            }
        }
    }

    /// Errors of every kind.
    pub fn total(&self) -> u64 {
        self.counts.lock().values().sum()
    }

    /// A copy of the counts.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts.lock().clone()
    }
}
