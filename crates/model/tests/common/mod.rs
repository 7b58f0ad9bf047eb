//! Shared helpers for the model tests: a waker that records whether it was woken.

#![allow(dead_code)] // each test binary uses a different subset of the helpers

pub mod origin;
pub mod track;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Waker;

use futures::task::{waker, ArcWake};

/// A waker that records whether it was woken.
#[derive(Default)]
pub struct Flag(AtomicBool);

impl ArcWake for Flag {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.store(true, Ordering::SeqCst);
    }
}

impl Flag {
    pub fn new() -> (Arc<Flag>, Waker) {
        let flag = Arc::new(Flag::default());
        let w = waker(flag.clone());
        (flag, w)
    }

    /// Whether it was woken since the last call.
    pub fn woken(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }
}
