//! Polling one of a task's sources only when that source woke the task.
//!
//! A task that waits on several things (a subscription on its control stream, its track and
//! its group sends; a session's accept loop on its accepts and its data streams) is woken by
//! any of them, and a `select!` then polls them all: a lock or a stream poll per wake for
//! sources that had nothing to say. A [`Gate`] gives a source a waker of its own that raises
//! a flag before waking the task, and polls the source only when its flag is up.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// A flag raised by its own waker, which also wakes the task that last polled the gate.
#[derive(Default)]
pub(crate) struct Flag {
    raised: AtomicBool,
    /// Wakes that took the task's waker out of `task`, counted before the task is woken: a
    /// gate that sees the count move since it registered knows the flag no longer holds it.
    takes: AtomicU64,
    task: AtomicWaker,
}

impl Flag {
    fn raise(&self) {
        self.raised.store(true, Ordering::Release);
    }

    /// Take the task's waker, count the take, then wake the task: any poll this wake causes
    /// sees the count moved and registers again. (Checking the raised flag alone lost a wake
    /// on two threads: a poll could take the flag between a wake's raise and its take, and
    /// register the waker that take then removed.)
    fn notify(&self) {
        let task = self.task.take();
        self.takes.fetch_add(1, Ordering::AcqRel);
        if let Some(task) = task {
            task.wake();
        }
    }
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.raise();
        self.notify();
    }
}

/// Polls one source of a task (a control stream, a track, the session's cancellation) only
/// when the source woke it, or when the source has not been parked yet.
pub(crate) struct Gate {
    flag: Arc<Flag>,
    waker: Waker,
    /// The source returned pending and has not woken since.
    parked: bool,
    /// The task waker last registered with the flag.
    task: Option<Waker>,
    /// The flag's take count when that waker was registered: while it has not moved, the
    /// flag still holds the waker.
    registered_at: u64,
}

impl Default for Gate {
    fn default() -> Self {
        let flag = Arc::new(Flag::default());
        Gate {
            waker: Waker::from(flag.clone()),
            flag,
            parked: false,
            task: None,
            registered_at: 0,
        }
    }
}

impl Gate {
    /// Poll the source through the gate. The source must register any wake it needs with the
    /// context it is given (the gate's own waker), as any poll function does.
    ///
    /// A parked, silent source costs two atomic loads: the flag still holds the task's waker
    /// while no wake has taken it (the take count has not moved), so it is registered again
    /// only after a wake or when the task's waker changed.
    pub(crate) fn poll<R>(
        &mut self,
        cx: &mut Context<'_>,
        source: impl FnOnce(&mut Context<'_>) -> Poll<R>,
    ) -> Poll<R> {
        let takes = self.flag.takes.load(Ordering::Acquire);
        let raised = self.flag.raised.load(Ordering::Acquire)
            && self.flag.raised.swap(false, Ordering::AcqRel);
        if raised
            || takes != self.registered_at
            || !self.task.as_ref().is_some_and(|t| t.will_wake(cx.waker()))
        {
            self.flag.task.register(cx.waker());
            self.task = Some(cx.waker().clone());
            self.registered_at = takes;
        }
        if self.parked && !raised {
            return Poll::Pending;
        }
        let result = source(&mut Context::from_waker(&self.waker));
        self.parked = result.is_pending();
        result
    }

    /// A poll function through the gate, as a future (a `select!` branch).
    pub(crate) fn wait<'a, R>(
        &'a mut self,
        mut source: impl FnMut(&mut Context<'_>) -> Poll<R> + 'a,
    ) -> impl Future<Output = R> + 'a {
        poll_fn(move |cx| self.poll(cx, &mut source))
    }

    /// A pinned future through the gate, as a future (a `select!` branch). The future must
    /// live across calls, as a gated source is not polled again until it wakes.
    pub(crate) fn future<'a, F: Future>(
        &'a mut self,
        mut future: Pin<&'a mut F>,
    ) -> impl Future<Output = F::Output> + 'a {
        self.wait(move |cx| future.as_mut().poll(cx))
    }
}

#[cfg(test)]
impl Flag {
    /// Whether the flag was raised since the last call (tests use a flag as a task's waker).
    pub(crate) fn take_raised(&self) -> bool {
        self.raised.swap(false, Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gated_source_is_polled_only_after_its_own_wake() {
        // The task polling the gate: a flag of its own, raised when it is woken.
        let task = Arc::new(Flag::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut gate = Gate::default();
        let polls = std::cell::Cell::new(0);
        let parked: std::cell::RefCell<Option<Waker>> = Default::default();
        let source = |cx: &mut Context<'_>| {
            polls.set(polls.get() + 1);
            *parked.borrow_mut() = Some(cx.waker().clone());
            Poll::<()>::Pending
        };
        // First poll reaches the source; the next ones (woken for something else) do not.
        assert!(gate.poll(&mut cx, source).is_pending());
        assert!(gate.poll(&mut cx, source).is_pending());
        assert!(gate.poll(&mut cx, source).is_pending());
        assert_eq!(polls.get(), 1);
        // The source's wake reaches the task and lets the next poll through.
        parked.borrow_mut().take().unwrap().wake();
        assert!(task.take_raised());
        assert!(gate.poll(&mut cx, source).is_pending());
        assert_eq!(polls.get(), 2);
        // A source that is ready is polled again next time (it may have more).
        parked.borrow_mut().take().unwrap().wake();
        let mut ready = 0;
        assert!(gate
            .poll(&mut cx, |_| {
                ready += 1;
                Poll::Ready(())
            })
            .is_ready());
        assert!(gate
            .poll(&mut cx, |_| {
                ready += 1;
                Poll::Ready(())
            })
            .is_ready());
        assert_eq!(ready, 2);
    }

    /// Two threads, one order: a wake raises the flag; the task, polled for something else,
    /// takes the flag and registers; the wake then takes that registration. The next source
    /// wake must still reach the task.
    #[test]
    fn a_wake_racing_a_poll_is_not_lost() {
        let task = Arc::new(Flag::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let mut gate = Gate::default();
        let parked: std::cell::RefCell<Option<Waker>> = Default::default();
        let source = |cx: &mut Context<'_>| {
            *parked.borrow_mut() = Some(cx.waker().clone());
            Poll::<()>::Pending
        };
        assert!(gate.poll(&mut cx, source).is_pending());
        // The source wakes: its raise lands, its notify is late.
        let flag = gate.flag.clone();
        flag.raise();
        assert!(gate.poll(&mut cx, source).is_pending());
        flag.notify();
        // That notify woke the task (spuriously): it polls again, nothing new.
        assert!(task.take_raised());
        assert!(gate.poll(&mut cx, source).is_pending());
        // The source's next wake reaches the task.
        parked.borrow_mut().take().unwrap().wake();
        assert!(task.take_raised(), "the source's wake was lost");
    }
}
