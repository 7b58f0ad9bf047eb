//! A countdown to await: "every reader has received its first frame", without polling.

use tokio::sync::watch;

/// Starts at `n`; [`Countdown::wait`] resolves once it reached zero.
#[derive(Debug)]
pub struct Countdown {
    remaining: watch::Sender<usize>,
}

impl Countdown {
    pub fn new(n: usize) -> Self {
        Countdown {
            remaining: watch::Sender::new(n),
        }
    }

    /// One fewer to wait for (never below zero).
    pub fn count_down(&self) {
        self.count_down_by(1);
    }

    pub fn count_down_by(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.remaining.send_if_modified(|remaining| {
            let before = *remaining;
            *remaining = remaining.saturating_sub(n);
            *remaining != before
        });
    }

    pub fn remaining(&self) -> usize {
        *self.remaining.borrow()
    }

    /// Resolves once the count reached zero.
    pub async fn wait(&self) {
        let mut rx = self.remaining.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|remaining| *remaining == 0).await;
    }
}
