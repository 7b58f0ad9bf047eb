//! Latency recording in bounded memory: a log-linear (HDR-style) histogram of nanoseconds.
//!
//! Values below 256 ns are counted exactly; above that each power-of-two range is split into
//! 128 buckets, so any recorded value is known to within 1/128 (under 0.8 %) whatever its
//! size. That is 7424 buckets for the whole `u64` range: one fixed array per histogram,
//! however many samples. Recording is lock-free (relaxed atomic adds), so every reader task
//! of a run records into the same histogram; a [`Snapshot`] copies it out for percentiles.
//! Percentiles report the highest value of the bucket they fall in, clamped to the exact
//! minimum and maximum (which are tracked exactly).

use std::sync::atomic::{AtomicU64, Ordering};

/// Mantissa bits per power-of-two range.
const SUB_BITS: u32 = 7;
/// Buckets per power-of-two range above the exact region.
const SUB: u64 = 1 << SUB_BITS;
/// Buckets covering every `u64`.
pub const BUCKETS: usize = ((64 - SUB_BITS as usize) * SUB as usize) + SUB as usize;

/// The bucket holding `value`.
fn index(value: u64) -> usize {
    if value < 2 * SUB {
        return value as usize;
    }
    let msb = 63 - value.leading_zeros();
    let shift = msb - SUB_BITS;
    let mantissa = value >> shift; // in [SUB, 2 * SUB)
    ((shift as u64 + 1) * SUB + (mantissa - SUB)) as usize
}

/// The lowest and highest value that land in bucket `index`.
fn bounds(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < 2 * SUB {
        return (index, index);
    }
    let shift = index / SUB - 1;
    let mantissa = index % SUB + SUB;
    let low = mantissa << shift;
    (low, low + ((1u64 << shift) - 1))
}

/// A concurrent histogram of `u64` samples (nanoseconds, by convention).
#[derive(Debug)]
pub struct Histogram {
    counts: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
        }
    }

    /// Count one sample.
    pub fn record(&self, value: u64) {
        self.counts[index(value)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.min.fetch_min(value, Ordering::Relaxed);
        self.max.fetch_max(value, Ordering::Relaxed);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// A copy to compute percentiles on.
    pub fn snapshot(&self) -> Snapshot {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        Snapshot {
            count: counts.iter().sum(),
            counts,
            sum: self.sum.load(Ordering::Relaxed) as u128,
            min: self.min.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's contents at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Snapshot {
    /// A snapshot of exactly these samples (tests, merging plain values).
    pub fn from_values(values: impl IntoIterator<Item = u64>) -> Self {
        let histogram = Histogram::new();
        for value in values {
            histogram.record(value);
        }
        histogram.snapshot()
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn min(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.max)
    }

    pub fn mean(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum as f64 / self.count as f64)
    }

    /// The value at quantile `q` (0.5 for the median, 0.99, 1.0 for the maximum): the
    /// smallest bucket whose cumulative count reaches `ceil(q * count)`, reported as that
    /// bucket's highest value within the exact minimum and maximum. `None` when empty.
    pub fn percentile(&self, q: f64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (_, high) = bounds(i);
                return Some(high.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Add `other`'s samples to these.
    pub fn merge(&mut self, other: &Snapshot) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The cumulative distribution: for each occupied bucket, its highest value (within the
    /// exact minimum and maximum) and the fraction of samples at or below it.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let mut seen = 0u64;
        let mut points = Vec::new();
        for (i, &n) in self.counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            seen += n;
            let (_, high) = bounds(i);
            points.push((
                high.clamp(self.min, self.max),
                seen as f64 / self.count as f64,
            ));
        }
        points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let mut expected_low = 0u64;
        for i in 0..BUCKETS {
            let (low, high) = bounds(i);
            assert_eq!(low, expected_low, "bucket {i}");
            assert!(high >= low);
            assert_eq!(index(low), i);
            assert_eq!(index(high), i);
            expected_low = high.wrapping_add(1);
        }
        assert_eq!(expected_low, 0, "the last bucket ends at u64::MAX");
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn every_bucket_is_narrower_than_one_128th_of_its_values() {
        for i in (2 * SUB as usize)..BUCKETS {
            let (low, high) = bounds(i);
            assert!(
                (high - low) as f64 / low as f64 <= 1.0 / SUB as f64,
                "bucket {i}"
            );
        }
    }
}
