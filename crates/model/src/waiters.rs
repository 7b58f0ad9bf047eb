//! A list of task wakers to notify when shared state changes (the model's only wake primitive).
//!
//! The model is runtime-agnostic: readers poll with a `Context` and park their waker here; the
//! writer wakes them all after a change. No tokio, no channels, no per-reader allocation per event.
//!
//! Registering is O(1): a task that registers twice in a row is recognised at the tail, and
//! other duplicates (one task parked through two futures, say) are allowed until the list
//! doubles past its last compacted size, when one pass drops them. So N readers parked on one
//! group cost O(N) per frame, not O(N²), and the list never holds more than about twice the
//! distinct tasks waiting (plus a small constant).

use std::collections::HashSet;
use std::task::{Context, Waker};

/// Below this many entries the list is never compacted.
const COMPACT_FLOOR: usize = 32;

#[derive(Default, Debug)]
pub(crate) struct Waiters {
    wakers: Vec<Waker>,
    /// Compact when the list grows past this.
    compact_at: usize,
}

impl Waiters {
    /// Park the current task until the next `wake_all`.
    pub fn register(&mut self, cx: &Context<'_>) {
        let waker = cx.waker();
        if self.wakers.last().is_some_and(|last| last.will_wake(waker)) {
            return;
        }
        self.wakers.push(waker.clone());
        if self.wakers.len() > self.compact_at.max(COMPACT_FLOOR) {
            self.compact();
        }
    }

    /// Drop duplicate wakers (the same task parked more than once), keeping the first of each.
    fn compact(&mut self) {
        let mut seen = HashSet::with_capacity(self.wakers.len());
        self.wakers.retain(|waker| {
            seen.insert((waker.data() as usize, waker.vtable() as *const _ as usize))
        });
        self.compact_at = self.wakers.len() * 2;
    }

    #[inline]
    pub fn wake_all(&mut self) {
        self.compact_at = 0;
        // Most changes find nobody parked (a group's first frame before any reader polled it).
        if self.wakers.is_empty() {
            return;
        }
        for waker in self.wakers.drain(..) {
            waker.wake();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.wakers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn task() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        (count, waker)
    }

    #[test]
    fn every_parked_task_is_woken_and_the_list_stays_bounded() {
        let mut waiters = Waiters::default();
        let tasks: Vec<_> = (0..100).map(|_| task()).collect();
        // Each task registers many times, interleaved with the others.
        for _ in 0..50 {
            for (_, waker) in &tasks {
                waiters.register(&Context::from_waker(waker));
            }
        }
        assert!(
            waiters.len() <= 2 * tasks.len() + COMPACT_FLOOR,
            "{}",
            waiters.len()
        );
        waiters.wake_all();
        for (count, _) in &tasks {
            assert!(count.0.load(Ordering::SeqCst) >= 1);
        }
        assert_eq!(waiters.len(), 0);
    }

    #[test]
    fn a_task_registering_twice_in_a_row_is_kept_once() {
        let mut waiters = Waiters::default();
        let (count, waker) = task();
        for _ in 0..10 {
            waiters.register(&Context::from_waker(&waker));
        }
        assert_eq!(waiters.len(), 1);
        waiters.wake_all();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }
}
