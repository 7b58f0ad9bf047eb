//! Latency maths: percentiles on known inputs, p50/p99/max, empty input, precision, merging.

use starling_loadgen::histogram::{Histogram, Snapshot};
use starling_loadgen::summary::LatencyStats;

#[test]
fn percentiles_of_one_to_a_hundred_are_exact() {
    let s = Snapshot::from_values(1..=100);
    assert_eq!(s.count(), 100);
    assert_eq!(s.percentile(0.5), Some(50));
    assert_eq!(s.percentile(0.99), Some(99));
    assert_eq!(s.percentile(1.0), Some(100));
    assert_eq!(s.percentile(0.0), Some(1));
    assert_eq!(s.min(), Some(1));
    assert_eq!(s.max(), Some(100));
    assert_eq!(s.mean(), Some(50.5));
}

#[test]
fn order_of_recording_does_not_matter() {
    let forward = Snapshot::from_values(1..=1000);
    let backward = Snapshot::from_values((1..=1000).rev());
    assert_eq!(forward, backward);
}

#[test]
fn a_single_outlier_shows_in_max_and_p99_of_few_samples_only() {
    // 99 fast samples and one slow one: the median and p99 stay fast, the max is the outlier.
    let mut values = vec![2_000_000u64; 99];
    values.push(900_000_000);
    let s = Snapshot::from_values(values);
    let p50 = s.percentile(0.5).unwrap();
    let p99 = s.percentile(0.99).unwrap();
    assert!(
        (2_000_000..=2_000_000 + 2_000_000 / 128).contains(&p50),
        "{p50}"
    );
    assert!(
        (2_000_000..=2_000_000 + 2_000_000 / 128).contains(&p99),
        "{p99}"
    );
    assert_eq!(s.max(), Some(900_000_000));
    // With 1000 samples and 11 slow ones, p99 lands on the slow ones.
    let mut values = vec![2_000_000u64; 989];
    values.extend([900_000_000u64; 11]);
    let s = Snapshot::from_values(values);
    assert_eq!(s.percentile(0.99), Some(900_000_000));
}

#[test]
fn large_values_are_within_one_128th() {
    // 1 ms .. 1000 ms in 1 ms steps (nanoseconds).
    let s = Snapshot::from_values((1..=1000u64).map(|ms| ms * 1_000_000));
    for (q, exact) in [
        (0.5, 500_000_000u64),
        (0.9, 900_000_000),
        (0.99, 990_000_000),
    ] {
        let got = s.percentile(q).unwrap();
        let error = got.abs_diff(exact) as f64 / exact as f64;
        assert!(error <= 1.0 / 128.0, "q={q}: {got} vs {exact}");
        assert!(got >= exact, "reported as the bucket's highest value");
    }
    assert_eq!(s.max(), Some(1_000_000_000));
    assert_eq!(s.percentile(1.0), Some(1_000_000_000));
}

#[test]
fn empty_input_has_no_percentiles() {
    let s = Histogram::new().snapshot();
    assert!(s.is_empty());
    assert_eq!(s.percentile(0.5), None);
    assert_eq!(s.percentile(0.99), None);
    assert_eq!(s.max(), None);
    assert_eq!(s.min(), None);
    assert_eq!(s.mean(), None);
    assert!(s.cdf().is_empty());
    let stats = LatencyStats::of(&s);
    assert_eq!(stats.count, 0);
    assert_eq!(stats.p50_ms, None);
    assert_eq!(stats.max_ms, None);
}

#[test]
fn latency_stats_are_in_milliseconds() {
    let s = Snapshot::from_values([1_000_000, 2_000_000, 3_000_000]);
    let stats = LatencyStats::of(&s);
    assert_eq!(stats.count, 3);
    assert_eq!(stats.max_ms, Some(3.0));
    assert_eq!(stats.min_ms, Some(1.0));
    let p50 = stats.p50_ms.unwrap();
    assert!((2.0..=2.0 * (1.0 + 1.0 / 128.0)).contains(&p50), "{p50}");
}

#[test]
fn merging_equals_recording_everything_in_one() {
    let mut a = Snapshot::from_values(1..=500);
    let b = Snapshot::from_values(501..=1000);
    a.merge(&b);
    assert_eq!(a, Snapshot::from_values(1..=1000));
    // Merging into an empty snapshot keeps min and max exact.
    let mut empty = Snapshot::default();
    empty.merge(&Snapshot::from_values([7, 9]));
    assert_eq!((empty.min(), empty.max()), (Some(7), Some(9)));
}

#[test]
fn the_cdf_rises_to_one() {
    let s = Snapshot::from_values([5, 5, 10, 1_000_000]);
    let cdf = s.cdf();
    assert_eq!(cdf.first(), Some(&(5, 0.5)));
    assert_eq!(cdf.last().map(|p| p.1), Some(1.0));
    assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
}

#[test]
fn recording_from_many_threads_loses_nothing() {
    let h = std::sync::Arc::new(Histogram::new());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let h = h.clone();
            std::thread::spawn(move || {
                for v in 0..10_000u64 {
                    h.record(v * 1000 + t);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = h.snapshot();
    assert_eq!(s.count(), 40_000);
    assert_eq!(s.min(), Some(0));
    assert_eq!(s.max(), Some(9_999_003));
}
