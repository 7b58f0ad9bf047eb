//! The clock sessions and their relay read. Durations and deadlines come from tokio's clock
//! (`tokio::time`), which a simulation pauses and advances itself; wall time, which tokens and
//! status pages need, comes from here: the system's, or a simulation's fixed epoch plus the
//! virtual time that has passed, so a seeded run reads the same wall time on every replay.

use std::time::SystemTime;

/// Where wall time comes from.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// A simulation's epoch, and tokio's reading when the run began.
    simulated: Option<(SystemTime, tokio::time::Instant)>,
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock whose wall time starts at `epoch` now and advances with tokio's clock (made
    /// inside the runtime whose clock it follows).
    pub fn simulated(epoch: SystemTime) -> Clock {
        Clock {
            simulated: Some((epoch, tokio::time::Instant::now())),
        }
    }

    /// Now, as wall time.
    pub fn wall(&self) -> SystemTime {
        match self.simulated {
            Some((epoch, start)) => epoch + start.elapsed(),
            None => SystemTime::now(),
        }
    }

    /// Now, in milliseconds since the Unix epoch: the stamp of a frame that carries none.
    pub fn wall_ms(&self) -> u64 {
        self.wall()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_simulated_clock_follows_the_paused_runtime() {
        let epoch = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let clock = Clock::simulated(epoch);
        assert_eq!(clock.wall(), epoch);
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.wall(), epoch + Duration::from_secs(90));
    }
}
