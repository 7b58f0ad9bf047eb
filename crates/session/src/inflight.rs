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
//! The subscription's task also waits on its control stream and its track, each behind a
//! [`crate::gate::Gate`], so a group send's wake does not poll them.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::{Context, Poll};

use starling_model::TrackConsumer;
use starling_proto::StreamCode;

use crate::future_set::FutureSet;
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
            self.next().await;
        }
    }

    /// The subscription's track failed with `code`: the groups already whole in its cache are
    /// still owed and go on to their end (a publisher whose session ends right after its last
    /// group, as moq-cli's does when its input ends, leaves them in flight); those still
    /// growing will not grow now and are reset. Resolves once every send has.
    pub(crate) async fn finish_whole(&mut self, track: &TrackConsumer, code: StreamCode) {
        let whole = |sequence| track.group(sequence).is_some_and(|g| g.is_finished());
        for (sequence, abort) in &self.order {
            if !whole(*sequence) {
                abort.stop(code);
            }
        }
        self.order.clear();
        self.drain().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
