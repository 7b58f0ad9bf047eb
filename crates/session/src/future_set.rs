//! Futures polled as one set by the task that owns them, each only when it woke.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::Either;
use futures::stream::FuturesUnordered;
use futures::StreamExt;

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
    /// The members and the sentinel.
    set: FuturesUnordered<Member<F>>,
}

/// A boxed member, or the sentinel.
type Member<F> = Either<Pin<Box<F>>, std::future::Pending<<F as Future>::Output>>;

impl<F: Future> Default for FutureSet<F> {
    fn default() -> Self {
        let set = FuturesUnordered::new();
        set.push(Either::Right(std::future::pending()));
        FutureSet { set }
    }
}

impl<F: Future> FutureSet<F> {
    pub(crate) fn push(&mut self, future: F) {
        self.set.push(Either::Left(Box::pin(future)));
    }

    /// No member but the sentinel.
    pub(crate) fn is_empty(&self) -> bool {
        self.set.len() == 1
    }

    /// The next output; pending while the set is empty.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.set.poll_next_unpin(cx) {
            Poll::Ready(Some(output)) => Poll::Ready(output),
            // The sentinel never resolves, so the set is never exhausted.
            Poll::Ready(None) | Poll::Pending => Poll::Pending,
        }
    }

    pub(crate) async fn next(&mut self) -> F::Output {
        poll_fn(|cx| self.poll_next(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::Flag;
    use std::sync::Arc;
    use std::task::Waker;

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
            assert!(task.take_raised());
            assert!(set.poll_next(&mut cx).is_pending());
            assert!(!task.take_raised());
        }
        assert!(!set.is_empty());
    }
}
