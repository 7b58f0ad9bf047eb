//! Overload as the runtime's lag: how late a probe timer runs. When every worker is busy,
//! ready tasks queue and a timer due now runs only when its turn comes, so its lateness is
//! the queueing delay every other task sees too. Admission refuses new connections while it
//! is past a bound (`AdmissionLimits::max_lag`), so a burst larger than the host can serve
//! is refused at the door instead of slowing every admitted session past its deadline.
//!
//! Sans-IO: [`Lag`] takes the probe's due and firing times as inputs; [`spawn_probe`] is
//! the thin task that feeds it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;
use std::time::{Duration, Instant};

/// How often the probe asks to run.
pub const PROBE_PERIOD: Duration = Duration::from_millis(20);
/// A lateness seen once counts half as much this much later.
const HALF_LIFE: Duration = Duration::from_millis(250);
/// No probe pending.
const NONE: u64 = u64::MAX;

/// The runtime's recent lag, readable from any thread.
#[derive(Debug)]
pub struct Lag {
    base: Instant,
    /// When the pending probe is due (ns since `base`), or [`NONE`].
    due_ns: AtomicU64,
    /// The largest recent lateness (ns) and when it was seen (ns since `base`).
    seen_ns: AtomicU64,
    seen_at_ns: AtomicU64,
}

impl Lag {
    pub fn new(base: Instant) -> Self {
        Lag {
            base,
            due_ns: AtomicU64::new(NONE),
            seen_ns: AtomicU64::new(0),
            seen_at_ns: AtomicU64::new(0),
        }
    }

    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// The probe will run at `due`.
    pub fn expect(&self, due: Instant) {
        self.due_ns.store(self.ns(due), Ordering::Relaxed);
    }

    /// The probe ran at `now`: its lateness joins the recent lag.
    pub fn fired(&self, now: Instant) {
        let due = self.due_ns.swap(NONE, Ordering::Relaxed);
        if due == NONE {
            return;
        }
        let now_ns = self.ns(now);
        let late = now_ns.saturating_sub(due);
        if late >= self.decayed(now_ns) {
            self.seen_ns.store(late, Ordering::Relaxed);
            self.seen_at_ns.store(now_ns, Ordering::Relaxed);
        }
    }

    /// The recent largest lateness, halved every [`HALF_LIFE`] since it was seen.
    fn decayed(&self, now_ns: u64) -> u64 {
        let seen = self.seen_ns.load(Ordering::Relaxed);
        let age = now_ns.saturating_sub(self.seen_at_ns.load(Ordering::Relaxed));
        let halvings = age as f64 / HALF_LIFE.as_nanos() as f64;
        (seen as f64 * 0.5f64.powf(halvings)) as u64
    }

    /// The lag at `now`: the recent lateness, or how overdue the pending probe already is,
    /// whichever is larger (a probe stuck in a long queue says so before it runs).
    pub fn at(&self, now: Instant) -> Duration {
        let now_ns = self.ns(now);
        let due = self.due_ns.load(Ordering::Relaxed);
        let overdue = if due == NONE {
            0
        } else {
            now_ns.saturating_sub(due)
        };
        Duration::from_nanos(self.decayed(now_ns).max(overdue))
    }
}

/// Run the probe on the current runtime, feeding `lag` until it is dropped.
pub fn spawn_probe(lag: Weak<Lag>) {
    tokio::spawn(async move {
        loop {
            let due = tokio::time::Instant::now() + PROBE_PERIOD;
            let Some(gauge) = lag.upgrade() else { return };
            gauge.expect(due.into_std());
            // Not held across the wait, so dropping the owner ends the probe.
            drop(gauge);
            tokio::time::sleep_until(due).await;
            let Some(gauge) = lag.upgrade() else { return };
            gauge.fired(Instant::now());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_late_probe_sets_the_lag_and_it_decays_by_half_lives() {
        let base = Instant::now();
        let lag = Lag::new(base);
        assert_eq!(lag.at(base), Duration::ZERO);
        lag.expect(base + 20 * MS);
        lag.fired(base + 420 * MS);
        assert_eq!(lag.at(base + 420 * MS), 400 * MS);
        let later = lag.at(base + 420 * MS + HALF_LIFE);
        assert!(later > 199 * MS && later <= 200 * MS, "{later:?}");
        // A punctual probe does not erase a recent lateness at once.
        lag.expect(base + 440 * MS);
        lag.fired(base + 441 * MS);
        assert!(lag.at(base + 441 * MS) > 300 * MS);
        // Long after, it is gone.
        assert!(lag.at(base + 5000 * MS) < MS);
    }

    #[test]
    fn a_probe_stuck_in_the_queue_counts_before_it_runs() {
        let base = Instant::now();
        let lag = Lag::new(base);
        lag.expect(base + 20 * MS);
        assert_eq!(lag.at(base + 10 * MS), Duration::ZERO);
        assert_eq!(lag.at(base + 620 * MS), 600 * MS);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_probe_reports_a_runtime_held_busy() {
        let lag = std::sync::Arc::new(Lag::new(Instant::now()));
        spawn_probe(std::sync::Arc::downgrade(&lag));
        tokio::task::yield_now().await;
        // The runtime's only worker is held busy for 300 ms (the blocking is the load under
        // test, not a wait), so the probe cannot run when due.
        std::thread::sleep(300 * MS);
        assert!(lag.at(Instant::now()) >= 250 * MS);
    }
}
