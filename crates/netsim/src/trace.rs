//! What a seeded simulation run did, line by line (events, arrivals in virtual time,
//! counters), and where two runs of one seed first part: a run replays exactly when the
//! traces of two runs are equal. With the checks every simulation makes of its seeds: each
//! replays, and a planted bug is found and fails the same way on replay.

use std::sync::{Arc, Mutex};

/// A run's trace; clones write to the same one.
#[derive(Clone, Default)]
pub struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    pub fn push(&self, line: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Where two runs' traces first differ: the line number and each run's line there.
pub fn divergence(
    first: &[String],
    second: &[String],
) -> Option<(usize, Option<String>, Option<String>)> {
    (0..first.len().max(second.len()))
        .find(|&i| first.get(i) != second.get(i))
        .map(|i| (i, first.get(i).cloned(), second.get(i).cloned()))
}

/// One seeded run of a simulation: its trace, and what failed.
pub struct Run {
    pub trace: Vec<String>,
    pub result: Result<(), String>,
}

/// How many seeds the environment variable `var` asks for, else `default`.
pub fn seed_count(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The seeds a run checks: the one `one` names (a replay), else `count`'s number of them from
/// 0 (`default` when unset).
pub fn chosen_seeds(one: &str, count: &str, default: u64) -> std::ops::Range<u64> {
    match std::env::var(one) {
        Ok(seed) => {
            let seed: u64 = seed.parse().unwrap_or_else(|_| panic!("{one} is a number"));
            seed..seed + 1
        }
        Err(_) => 0..seed_count(count, default),
    }
}

/// Runs each of `seeds`; panics with the first failure and how to replay it (`replay`=seed).
pub fn check_seeds(seeds: std::ops::Range<u64>, replay: &str, run: impl Fn(u64) -> Run) {
    for seed in seeds {
        if let Err(err) = run(seed).result {
            panic!("seed {seed} failed (replay: {replay}={seed}): {err}");
        }
    }
}

/// Runs each of `seeds` twice; panics naming the first seed that fails or whose two runs
/// write different traces (and the first line where they part).
pub fn assert_replays(seeds: std::ops::Range<u64>, run: impl Fn(u64) -> Run) {
    for seed in seeds {
        let (first, second) = (run(seed), run(seed));
        if let Err(err) = &first.result {
            panic!("seed {seed}: {err}");
        }
        if let Some((line, a, b)) = divergence(&first.trace, &second.trace) {
            panic!("seed {seed} diverged at trace line {line}:\n  first:  {a:?}\n  second: {b:?}");
        }
    }
}

/// The first of `seeds` whose run fails, with its failure, once a second run of it failed the
/// same way with the same trace (a planted bug found and replayed); panics otherwise.
pub fn find_and_replay(seeds: std::ops::Range<u64>, run: impl Fn(u64) -> Run) -> (u64, String) {
    let tried = seeds.clone();
    let (seed, err, trace) = seeds
        .into_iter()
        .find_map(|seed| {
            let first = run(seed);
            first.result.err().map(|err| (seed, err, first.trace))
        })
        .unwrap_or_else(|| panic!("seeds {tried:?} all passed"));
    let replay = run(seed);
    assert_eq!(
        replay.result,
        Err(err.clone()),
        "seed {seed} failed otherwise on replay"
    );
    if let Some((line, a, b)) = divergence(&trace, &replay.trace) {
        panic!(
            "seed {seed}'s replay diverged at trace line {line}:\n  first:  {a:?}\n  replay: {b:?}"
        );
    }
    (seed, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_line_is_named() {
        let a = vec!["x".to_string(), "y".to_string()];
        let b = vec!["x".to_string(), "z".to_string(), "w".to_string()];
        assert_eq!(divergence(&a, &a), None);
        assert_eq!(
            divergence(&a, &b),
            Some((1, Some("y".into()), Some("z".into())))
        );
        assert_eq!(divergence(&a[..1], &a), Some((1, None, Some("y".into()))));
    }

    #[test]
    fn a_failing_seed_is_found_and_replayed() {
        let run = |seed: u64| Run {
            trace: vec![format!("seed {seed}")],
            result: if seed >= 3 {
                Err(format!("broke at {seed}"))
            } else {
                Ok(())
            },
        };
        assert_eq!(find_and_replay(0..10, run), (3, "broke at 3".into()));
        assert_replays(0..3, run);
        check_seeds(0..3, "SEED", run);
    }

    #[test]
    #[should_panic(expected = "seed 3 failed (replay: SEED=3)")]
    fn a_failing_seed_names_its_replay() {
        check_seeds(0..5, "SEED", |seed| Run {
            trace: Vec::new(),
            result: if seed == 3 {
                Err("broke".into())
            } else {
                Ok(())
            },
        });
    }

    #[test]
    #[should_panic(expected = "diverged")]
    fn a_run_that_differs_on_replay_is_caught() {
        let count = std::sync::atomic::AtomicU64::new(0);
        assert_replays(0..1, |_| Run {
            trace: vec![count
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .to_string()],
            result: Ok(()),
        });
    }
}
