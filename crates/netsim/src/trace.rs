//! What a seeded simulation run did, line by line (events, arrivals in virtual time,
//! counters), and where two runs of one seed first part: a run replays exactly when the
//! traces of two runs are equal.

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
}
