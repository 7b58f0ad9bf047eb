//! One clock per run: a monotonic instant anchored to the Unix epoch.
//!
//! Scheduled send times and arrival times are both read from it as nanoseconds since the
//! epoch, so a frame header carries a time any process can compare against, while within one
//! run the readings never go backwards (the wall clock is read once, at the anchor).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A monotonic clock that reads as nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    anchor: Instant,
    anchor_unix_ns: u64,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// Anchor a clock at the current instant and wall time.
    pub fn new() -> Self {
        let anchor = Instant::now();
        let anchor_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Clock {
            anchor,
            anchor_unix_ns,
        }
    }

    /// Now, in nanoseconds since the Unix epoch.
    pub fn now_ns(&self) -> u64 {
        self.ns_at(Instant::now())
    }

    /// `instant` in nanoseconds since the Unix epoch.
    pub fn ns_at(&self, instant: Instant) -> u64 {
        let since = instant.saturating_duration_since(self.anchor);
        self.anchor_unix_ns + since.as_nanos() as u64
    }

    /// The instant that reads as `unix_ns` (the anchor for earlier times).
    pub fn instant_at(&self, unix_ns: u64) -> Instant {
        self.anchor + Duration::from_nanos(unix_ns.saturating_sub(self.anchor_unix_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_are_monotonic_and_convert_both_ways() {
        let clock = Clock::new();
        let a = clock.now_ns();
        let b = clock.now_ns();
        assert!(b >= a);
        let later = clock.instant_at(a + 5_000_000);
        assert_eq!(clock.ns_at(later), a + 5_000_000);
    }
}
