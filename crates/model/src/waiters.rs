//! A list of task wakers to notify when shared state changes (the model's only wake primitive).
//!
//! The model is runtime-agnostic: readers poll with a `Context` and park their waker here; the
//! writer wakes them all after a change. No tokio, no channels, no per-reader allocation per event.

use std::task::{Context, Waker};

#[derive(Default, Debug)]
pub(crate) struct Waiters {
    wakers: Vec<Waker>,
}

impl Waiters {
    /// Park the current task until the next `wake_all`.
    pub fn register(&mut self, cx: &Context<'_>) {
        let waker = cx.waker();
        if !self.wakers.iter().any(|w| w.will_wake(waker)) {
            self.wakers.push(waker.clone());
        }
    }

    pub fn wake_all(&mut self) {
        for waker in self.wakers.drain(..) {
            waker.wake();
        }
    }
}
