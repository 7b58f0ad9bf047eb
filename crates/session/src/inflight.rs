//! A subscription's group streams in flight, driven from the subscription's own task.
//!
//! A subscription writes each group on its own stream, several at once when the subscriber
//! lags. Spawning a task per group per subscriber (with a cancellation token to stop it) cost a
//! spawn, a token and a scheduler round per group per subscriber, which dominated fan-in of
//! many small groups (the dash). Here every group send of a subscription is a future in one
//! set polled by the subscription's task: a group's wake polls only that group's send, and
//! a send is stopped through its own [`Stop`] (the oldest with TOO_FAR_BEHIND when a newer
//! group would pass the bound).
//!
//! The subscription's task also waits on its control stream and its track. [`Gate`] keeps
//! those from being polled on the wakes that were meant for a group send: each has a waker
//! of its own that raises a flag, and is polled only when its flag is up.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::future::Either;
use futures::stream::FuturesUnordered;
use futures::task::AtomicWaker;
use futures::StreamExt;
use starling_proto::StreamCode;

use crate::stop::Stop;

/// The group sends of one subscription, at most `max` at once. Each send resolves to its
/// group's sequence.
pub(crate) struct InFlight<F: Future> {
    sends: FutureSet<F>,
    /// The sends not yet resolved, oldest first.
    order: VecDeque<(u64, Arc<Stop>)>,
    max: usize,
    last_started: Option<u64>,
}

impl<F: Future<Output = u64>> InFlight<F> {
    pub(crate) fn new(max: usize) -> Self {
        InFlight {
            sends: FutureSet::default(),
            order: VecDeque::new(),
            max: max.max(1),
            last_started: None,
        }
    }

    /// The sequence of the group started last.
    pub(crate) fn last_started(&self) -> Option<u64> {
        self.last_started
    }

    /// Start sending group `sequence` with the send `make` builds around its abort; the
    /// oldest sends past the bound are aborted with TOO_FAR_BEHIND. Returns how many were.
    pub(crate) fn start(&mut self, sequence: u64, make: impl FnOnce(Arc<Stop>) -> F) -> u64 {
        let mut skipped = 0;
        while self.order.len() >= self.max {
            let Some((_, oldest)) = self.order.pop_front() else {
                break;
            };
            oldest.stop(StreamCode::TooFarBehind);
            skipped += 1;
        }
        let abort = Arc::new(Stop::default());
        self.sends.push(make(abort.clone()));
        self.order.push_back((sequence, abort));
        self.last_started = Some(sequence);
        skipped
    }

    /// Abort every send not yet resolved. They go on being polled until each has reset its
    /// stream (at once: an aborted send writes nothing more).
    pub(crate) fn abort_all(&mut self, code: StreamCode) {
        for (_, abort) in self.order.drain(..) {
            abort.stop(code);
        }
    }

    /// Drive the sends; ready with a sequence when its send resolves. Pending while none is
    /// in flight, so it can sit in a `select!` for the subscription's whole life.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<u64> {
        let sequence = std::task::ready!(self.sends.poll_next(cx));
        if let Some(at) = self.order.iter().position(|(s, _)| *s == sequence) {
            self.order.remove(at);
        }
        Poll::Ready(sequence)
    }

    pub(crate) async fn next(&mut self) -> u64 {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Wait until every send resolved (completed, or reset after an abort).
    pub(crate) async fn drain(&mut self) {
        while !self.sends.is_empty() {
            self.sends.next().await;
        }
        self.order.clear();
    }
}

/// Futures polled as one set by the task that owns it, each only when it woke.
///
/// A `FuturesUnordered` with one more member that never resolves: `FuturesUnordered` wakes
/// its task again whenever one poll went through every member, which with a single member
/// (one group in flight, one data stream open: the usual case) doubled the polls of every
/// wake. The sentinel is polled once, so no later poll goes through every member.
///
/// Members are boxed: a `FuturesUnordered` keeps a stub node (and here the sentinel) the size
/// of its member type, which for a group send is over a kilobyte per subscription and per
/// session, held while idle. Boxed, the set costs a few hundred bytes, and a member one more
/// allocation.
pub(crate) struct FutureSet<F: Future> {
    set: FuturesUnordered<Member<F>>,
    len: usize,
}

/// A boxed member, or the sentinel.
type Member<F> = Either<Pin<Box<F>>, std::future::Pending<<F as Future>::Output>>;

impl<F: Future> Default for FutureSet<F> {
    fn default() -> Self {
        let set = FuturesUnordered::new();
        set.push(Either::Right(std::future::pending()));
        FutureSet { set, len: 0 }
    }
}

impl<F: Future> FutureSet<F> {
    pub(crate) fn push(&mut self, future: F) {
        self.set.push(Either::Left(Box::pin(future)));
        self.len += 1;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The next output; pending while the set is empty.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.set.poll_next_unpin(cx) {
            Poll::Ready(Some(output)) => {
                self.len -= 1;
                Poll::Ready(output)
            }
            // The sentinel never resolves, so the set is never exhausted.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    pub(crate) async fn next(&mut self) -> F::Output {
        poll_fn(|cx| self.poll_next(cx)).await
    }
}

/// A flag raised by its own waker, which also wakes the task that last polled the gate.
#[derive(Default)]
struct Flag {
    raised: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.raised.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// Polls one source of a task (a control stream, a track, the session's cancellation) only
/// when the source woke it, or when the source has not been parked yet.
pub(crate) struct Gate {
    flag: Arc<Flag>,
    waker: Waker,
    /// The source returned pending and has not woken since.
    parked: bool,
    /// The task waker the flag holds, while it holds one.
    task: Option<Waker>,
}

impl Default for Gate {
    fn default() -> Self {
        let flag = Arc::new(Flag::default());
        Gate {
            waker: Waker::from(flag.clone()),
            flag,
            parked: false,
            task: None,
        }
    }
}

impl Gate {
    /// Poll the source through the gate. The source must register any wake it needs with the
    /// context it is given (the gate's own waker), as any poll function does.
    ///
    /// A parked, silent source costs one atomic load: the flag still holds the task's waker
    /// (only a wake takes it, and a wake raises the flag first), so it is registered again
    /// only after a wake or when the task's waker changed.
    pub(crate) fn poll<R>(
        &mut self,
        cx: &mut Context<'_>,
        source: impl FnOnce(&mut Context<'_>) -> Poll<R>,
    ) -> Poll<R> {
        let raised = self.flag.raised.load(Ordering::Acquire)
            && self.flag.raised.swap(false, Ordering::AcqRel);
        if raised || !self.task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
            self.flag.task.register(cx.waker());
            self.task = Some(cx.waker().clone());
        }
        if self.parked && !raised {
            return Poll::Pending;
        }
        let result = source(&mut Context::from_waker(&self.waker));
        self.parked = result.is_pending();
        result
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
        assert!(task.raised.load(Ordering::SeqCst));
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

    /// A set with one member in flight does not wake its task again after polling it (a
    /// bare FuturesUnordered does, after a poll went through every member, so every wake cost
    /// two polls).
    #[test]
    fn polling_the_one_member_that_woke_does_not_wake_the_task_again() {
        let task = Arc::new(Flag::default());
        let waker = Waker::from(task.clone());
        let mut cx = Context::from_waker(&waker);
        let parked: Arc<parking_lot::Mutex<Option<Waker>>> = Default::default();
        let member = {
            let parked = parked.clone();
            poll_fn(move |cx| {
                *parked.lock() = Some(cx.waker().clone());
                Poll::<()>::Pending
            })
        };
        let mut set = FutureSet::default();
        set.push(member);
        assert!(set.poll_next(&mut cx).is_pending());
        for _ in 0..3 {
            // The member wakes (so does the task), and is polled: no further wake.
            parked.lock().take().unwrap().wake();
            assert!(task.raised.swap(false, Ordering::SeqCst));
            assert!(set.poll_next(&mut cx).is_pending());
            assert!(!task.raised.load(Ordering::SeqCst));
        }
        assert!(!set.is_empty());
    }

    #[tokio::test]
    async fn the_oldest_send_past_the_bound_is_aborted() {
        let mut inflight = InFlight::new(2);
        let send = |sequence: u64| {
            move |abort: Arc<Stop>| async move {
                let code = abort.stopped().await;
                assert_eq!(code, StreamCode::TooFarBehind);
                sequence
            }
        };
        assert_eq!(inflight.start(1, send(1)), 0);
        assert_eq!(inflight.start(2, send(2)), 0);
        assert_eq!(inflight.start(3, send(3)), 1);
        // Group 1's send saw its abort and resolved; 2 and 3 are still in flight.
        assert_eq!(inflight.next().await, 1);
        assert_eq!(inflight.last_started(), Some(3));
        assert_eq!(inflight.order.len(), 2);
        inflight.abort_all(StreamCode::TooFarBehind);
        inflight.drain().await;
        assert!(inflight.order.is_empty() && inflight.sends.is_empty());
    }
}
