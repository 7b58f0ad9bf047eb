//! Send scheduling: the highest `set_priority` first, round-robin among equals.
//!
//! A stream is queued at most once (its `scheduled` flag lives in the stream). The connection
//! emits one frame (at most a record) per turn and then re-queues the stream at the back of its
//! level, so a large stream interleaves with its peers frame by frame. A priority change takes
//! effect lazily: a stream popped from a level it no longer belongs to is moved.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};

use crate::version::StreamId;

#[derive(Debug, Default)]
pub(crate) struct Scheduler {
    levels: BTreeMap<Reverse<i32>, VecDeque<StreamId>>,
}

impl Scheduler {
    /// Queue at the back of `priority`'s level.
    pub(crate) fn push_back(&mut self, id: StreamId, priority: i32) {
        self.levels
            .entry(Reverse(priority))
            .or_default()
            .push_back(id);
    }

    /// Queue at the front of `priority`'s level (a stream that could not use its turn).
    pub(crate) fn push_front(&mut self, id: StreamId, priority: i32) {
        self.levels
            .entry(Reverse(priority))
            .or_default()
            .push_front(id);
    }

    /// The next stream to serve, with the priority it was queued under.
    pub(crate) fn pop(&mut self) -> Option<(StreamId, i32)> {
        loop {
            let mut entry = self.levels.first_entry()?;
            let level = entry.key().0;
            match entry.get_mut().pop_front() {
                Some(id) => {
                    if entry.get().is_empty() {
                        entry.remove();
                    }
                    return Some((id, level));
                }
                None => {
                    entry.remove();
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_round_robin() {
        let mut s = Scheduler::default();
        s.push_back(StreamId(0), 0);
        s.push_back(StreamId(4), 5);
        s.push_back(StreamId(8), 0);
        s.push_back(StreamId(12), -3);
        assert_eq!(s.pop(), Some((StreamId(4), 5)));
        assert_eq!(s.pop(), Some((StreamId(0), 0)));
        s.push_back(StreamId(0), 0);
        assert_eq!(s.pop(), Some((StreamId(8), 0)));
        assert_eq!(s.pop(), Some((StreamId(0), 0)));
        assert_eq!(s.pop(), Some((StreamId(12), -3)));
        assert_eq!(s.pop(), None);
        assert!(s.is_empty());
    }
}
