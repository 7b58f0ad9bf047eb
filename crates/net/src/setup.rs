//! How many connections may be setting up at once: an adaptive concurrency limit on the
//! work between a connection's first packet (or HTTP upgrade) and its moq session being
//! established (TLS or WebSocket handshake, QMux and moq SETUP, the credential checked).
//!
//! That work is the burst's cost: a cold burst of members is all handshakes, and past the
//! host's knee they crowd out the sessions already admitted. The limit finds the knee by
//! itself from the runtime's lag ([`crate::overload`]), the queueing delay every task
//! sees, so it needs no per-host figure:
//!
//! * **Calm** (lag at most a quarter of the lag bound): every arrival may set up, and each
//!   setup that completes raises the limit by `1 / limit`, about one more slot per limit's
//!   worth of completions, up to [`SETUP_CEILING`]. Setups waiting on something other than
//!   the CPU (an auth server, a slow client) cost the host nothing, so a calm host refuses
//!   none of them.
//! * **Busy** (lag past a quarter of the bound): the limit falls by a quarter, at most once
//!   per [`DECREASE_EVERY`], down to [`SETUP_FLOOR`], and arrivals are refused while the
//!   limit's worth are setting up.
//! * **Overloaded** (lag past the bound): arrivals are refused while [`SETUP_FLOOR`] are
//!   setting up, whatever the limit.
//!
//! So setups in progress, and the CPU they take, are bounded while the runtime runs late,
//! and established sessions keep the rest. A lone connection is never refused for lag: the
//! floor admits the few that a test, an operator or a reconnecting peer open at once.
//!
//! Sans-IO: the caller passes the time and the pressure.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Setups the limit always allows at once.
pub const SETUP_FLOOR: usize = 16;
/// The most the limit grows to.
pub const SETUP_CEILING: usize = 4096;
/// The limit a relay starts with.
pub const SETUP_INITIAL: usize = 64;
/// Decreases are at least this far apart (the lag a decrease relieves takes a while to
/// show: the probe's lateness halves every 250 ms).
pub const DECREASE_EVERY: Duration = Duration::from_millis(100);
/// Each decrease keeps this share of the limit.
const BACKOFF: f64 = 0.75;

/// How loaded the host is now, from the runtime's lag against its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressure {
    /// The lag is at most a quarter of the bound, or no bound is set.
    Calm,
    /// The lag is past a quarter of the bound.
    Busy,
    /// The lag is past the bound.
    Overloaded,
}

impl Pressure {
    /// The pressure of `lag` against the bound `max` (`None`: never loaded).
    pub fn of(lag: Duration, max: Option<Duration>) -> Self {
        match max {
            Some(max) if lag > max => Pressure::Overloaded,
            Some(max) if lag > max / 4 => Pressure::Busy,
            _ => Pressure::Calm,
        }
    }
}

/// Why a setup could not begin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupFull {
    /// The adaptive limit is reached.
    Limit,
    /// The runtime is past its lag bound and the floor is reached.
    Overloaded,
}

/// The adaptive setup limit; shared by every listener through the admission gate.
#[derive(Debug)]
pub struct SetupLimit {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    limit: f64,
    in_setup: usize,
    decreased: Option<Instant>,
    /// Setups that completed, and that were abandoned (failed, timed out, refused later).
    completed: u64,
    abandoned: u64,
}

/// What the limit shows the metrics and the status page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetupStats {
    pub limit: usize,
    pub in_setup: usize,
    pub completed: u64,
    pub abandoned: u64,
}

impl Default for SetupLimit {
    fn default() -> Self {
        SetupLimit {
            state: Mutex::new(State {
                limit: SETUP_INITIAL as f64,
                in_setup: 0,
                decreased: None,
                completed: 0,
                abandoned: 0,
            }),
        }
    }
}

impl SetupLimit {
    /// Begin one setup at `now`, or say why not.
    pub fn try_begin(&self, now: Instant, pressure: Pressure) -> Result<(), SetupFull> {
        let mut state = self.state.lock();
        state.feel(now, pressure);
        if pressure == Pressure::Overloaded && state.in_setup >= SETUP_FLOOR {
            return Err(SetupFull::Overloaded);
        }
        if pressure == Pressure::Busy && state.in_setup >= state.limit as usize {
            return Err(SetupFull::Limit);
        }
        state.in_setup += 1;
        Ok(())
    }

    /// One setup begun with [`try_begin`](Self::try_begin) ended at `now`: `completed`
    /// when its session was established, not when it failed or was abandoned.
    pub fn end(&self, now: Instant, pressure: Pressure, completed: bool) {
        let mut state = self.state.lock();
        state.in_setup = state.in_setup.saturating_sub(1);
        if completed {
            state.completed += 1;
        } else {
            state.abandoned += 1;
        }
        state.feel(now, pressure);
        if completed && pressure == Pressure::Calm {
            state.limit = (state.limit + 1.0 / state.limit).min(SETUP_CEILING as f64);
        }
    }

    /// Whether half the limit is setting up already, or the runtime runs late: a QUIC
    /// listener then asks unvalidated addresses for a Retry first.
    pub fn strained(&self, pressure: Pressure) -> bool {
        let state = self.state.lock();
        pressure != Pressure::Calm || state.in_setup * 2 >= state.limit as usize
    }

    pub fn stats(&self) -> SetupStats {
        let state = self.state.lock();
        SetupStats {
            limit: state.limit as usize,
            in_setup: state.in_setup,
            completed: state.completed,
            abandoned: state.abandoned,
        }
    }
}

impl State {
    /// Back off when the runtime runs late, at most once per [`DECREASE_EVERY`].
    fn feel(&mut self, now: Instant, pressure: Pressure) {
        if pressure == Pressure::Calm {
            return;
        }
        if self
            .decreased
            .is_some_and(|at| now.saturating_duration_since(at) < DECREASE_EVERY)
        {
            return;
        }
        self.decreased = Some(now);
        self.limit = (self.limit * BACKOFF).max(SETUP_FLOOR as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn fill(limit: &SetupLimit, now: Instant, pressure: Pressure) -> usize {
        let mut begun = 0;
        while limit.try_begin(now, pressure).is_ok() {
            begun += 1;
        }
        begun
    }

    #[test]
    fn calm_setups_grow_the_limit_by_about_one_per_limit_completions() {
        let limit = SetupLimit::default();
        let now = Instant::now();
        for _ in 0..SETUP_INITIAL {
            limit.try_begin(now, Pressure::Calm).unwrap();
        }
        for _ in 0..SETUP_INITIAL {
            limit.end(now, Pressure::Calm, true);
        }
        assert_eq!(limit.stats().limit, SETUP_INITIAL, "just short of one more");
        limit.try_begin(now, Pressure::Calm).unwrap();
        limit.end(now, Pressure::Calm, true);
        assert_eq!(limit.stats().limit, SETUP_INITIAL + 1);
        // Abandoned setups free their slot but do not grow the limit.
        for _ in 0..SETUP_INITIAL + 1 {
            limit.try_begin(now, Pressure::Calm).unwrap();
        }
        for _ in 0..SETUP_INITIAL + 1 {
            limit.end(now, Pressure::Calm, false);
        }
        let stats = limit.stats();
        assert_eq!(stats.limit, SETUP_INITIAL + 1);
        assert_eq!((stats.completed, stats.abandoned), (65, 65));
        assert_eq!(stats.in_setup, 0);
    }

    #[test]
    fn a_calm_host_refuses_no_setup_however_many() {
        let limit = SetupLimit::default();
        let now = Instant::now();
        for _ in 0..10 * SETUP_INITIAL {
            limit.try_begin(now, Pressure::Calm).unwrap();
        }
        assert_eq!(limit.stats().in_setup, 10 * SETUP_INITIAL);
        // Busy now: nothing more until they drain below the (shrunk) limit.
        assert_eq!(limit.try_begin(now, Pressure::Busy), Err(SetupFull::Limit));
        for _ in 0..10 * SETUP_INITIAL - 47 {
            limit.end(now, Pressure::Busy, true);
        }
        assert_eq!(limit.try_begin(now, Pressure::Busy), Ok(()));
        assert_eq!(limit.try_begin(now, Pressure::Busy), Err(SetupFull::Limit));
    }

    #[test]
    fn a_late_runtime_shrinks_the_limit_a_quarter_per_interval_down_to_the_floor() {
        let limit = SetupLimit::default();
        let t0 = Instant::now();
        assert_eq!(fill(&limit, t0, Pressure::Busy), 48);
        assert_eq!(limit.stats().limit, 48);
        // Not again within the interval, however many arrive.
        for _ in 0..10 {
            limit.end(t0 + 50 * MS, Pressure::Busy, true);
            let _ = limit.try_begin(t0 + 50 * MS, Pressure::Busy);
        }
        assert_eq!(
            limit.stats().limit,
            48,
            "completions under pressure do not grow it"
        );
        let mut at = t0;
        for _ in 0..20 {
            at += DECREASE_EVERY;
            limit.end(at, Pressure::Busy, true);
        }
        assert_eq!(limit.stats().limit, SETUP_FLOOR);
    }

    #[test]
    fn past_the_lag_bound_only_the_floor_sets_up_and_then_it_recovers() {
        let limit = SetupLimit::default();
        let now = Instant::now();
        assert_eq!(fill(&limit, now, Pressure::Overloaded), SETUP_FLOOR);
        assert_eq!(
            limit.try_begin(now, Pressure::Overloaded),
            Err(SetupFull::Overloaded)
        );
        for _ in 0..SETUP_FLOOR {
            limit.end(now, Pressure::Overloaded, true);
        }
        // Calm again: the limit (48 after one decrease) grows with completions.
        assert_eq!(limit.stats().limit, 48);
        for _ in 0..48 {
            limit.try_begin(now, Pressure::Calm).unwrap();
        }
        for _ in 0..48 {
            limit.end(now, Pressure::Calm, true);
        }
        limit.try_begin(now, Pressure::Calm).unwrap();
        limit.end(now, Pressure::Calm, true);
        assert_eq!(limit.stats().limit, 49);
    }

    #[test]
    fn pressure_is_the_lag_against_a_quarter_of_the_bound_and_the_bound() {
        let max = Some(100 * MS);
        assert_eq!(Pressure::of(25 * MS, max), Pressure::Calm);
        assert_eq!(Pressure::of(26 * MS, max), Pressure::Busy);
        assert_eq!(Pressure::of(101 * MS, max), Pressure::Overloaded);
        assert_eq!(Pressure::of(10_000 * MS, None), Pressure::Calm);
    }

    #[test]
    fn the_limit_strains_at_half_full_or_under_pressure() {
        let limit = SetupLimit::default();
        let now = Instant::now();
        assert!(!limit.strained(Pressure::Calm));
        assert!(limit.strained(Pressure::Busy));
        for _ in 0..SETUP_INITIAL / 2 {
            limit.try_begin(now, Pressure::Calm).unwrap();
        }
        assert!(limit.strained(Pressure::Calm));
    }
}
