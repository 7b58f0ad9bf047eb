//! Redial pacing for a peer link: a jittered, doubling wait between attempts, back to the
//! first step once a session has lasted. Sans-IO: the caller supplies the random draw and
//! says how long the last session lived.

use std::time::Duration;

/// How a peer link paces its redials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedialPolicy {
    /// The first wait (before jitter).
    pub initial: Duration,
    /// The longest wait (before jitter).
    pub max: Duration,
    /// A session that lasted this long was healthy: the next wait starts over.
    pub healthy: Duration,
}

impl Default for RedialPolicy {
    fn default() -> Self {
        RedialPolicy {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(10),
            healthy: Duration::from_secs(10),
        }
    }
}

/// The wait before the next attempt on one peer link.
#[derive(Clone, Debug)]
pub struct Redial {
    policy: RedialPolicy,
    step: Duration,
}

impl Redial {
    pub fn new(policy: RedialPolicy) -> Self {
        Redial {
            policy,
            step: policy.initial,
        }
    }

    /// A session ended after `lived` (none was made: zero). Returns how long to wait before
    /// the next attempt: the current step scaled by `draw` into [1/2, 1) (so peers that lost
    /// one relay together do not redial in lockstep), then the step doubles up to the max; a
    /// healthy session first resets the step.
    pub fn after(&mut self, lived: Duration, draw: f64) -> Duration {
        if lived >= self.policy.healthy {
            self.step = self.policy.initial;
        }
        let draw = draw.clamp(0.0, 1.0);
        let wait = self.step.mul_f64(0.5 + draw / 2.0);
        self.step = (self.step * 2).min(self.policy.max);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RedialPolicy {
        RedialPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(800),
            healthy: Duration::from_secs(10),
        }
    }

    #[test]
    fn waits_double_up_to_the_cap_within_the_jitter() {
        let mut redial = Redial::new(policy());
        let waits: Vec<u128> = (0..6)
            .map(|_| redial.after(Duration::ZERO, 1.0).as_millis())
            .collect();
        assert_eq!(waits, vec![100, 200, 400, 800, 800, 800]);
        let mut redial = Redial::new(policy());
        assert_eq!(redial.after(Duration::ZERO, 0.0).as_millis(), 50);
        assert_eq!(redial.after(Duration::ZERO, 0.5).as_millis(), 150);
    }

    #[test]
    fn a_healthy_session_starts_the_waits_over_and_a_short_one_does_not() {
        let mut redial = Redial::new(policy());
        for _ in 0..5 {
            redial.after(Duration::ZERO, 1.0);
        }
        assert_eq!(redial.after(Duration::from_secs(3), 1.0).as_millis(), 800);
        assert_eq!(redial.after(Duration::from_secs(10), 1.0).as_millis(), 100);
        assert_eq!(redial.after(Duration::ZERO, 1.0).as_millis(), 200);
    }
}
