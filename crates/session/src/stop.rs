//! A one-shot stop with a stream code, awaited by one future at a time: how a subscription
//! stops one of its group sends, and how the receive budget evicts a reader.
//!
//! Cheaper than a cancellation token where it is polled on every wake of a busy future: a
//! waiter registers its waker once (again only if polled with another), and a check is one
//! atomic load.

use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Poll, Waker};

use futures::task::AtomicWaker;
use starling_proto::StreamCode;

const STOPPED: u64 = 1 << 32;

#[derive(Debug, Default)]
pub(crate) struct Stop {
    /// `STOPPED` with the stream code in the low bits, once stopped; 0 until then.
    code: AtomicU64,
    waker: AtomicWaker,
}

impl Stop {
    /// Stop with `code`; a second stop changes nothing.
    pub(crate) fn stop(&self, code: StreamCode) {
        let _ = self.code.compare_exchange(
            0,
            STOPPED | u64::from(code.to_code()),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.waker.wake();
    }

    /// The code, once stopped.
    pub(crate) fn code(&self) -> Option<StreamCode> {
        match self.code.load(Ordering::Acquire) {
            0 => None,
            code => Some(StreamCode::from_code(code as u32)),
        }
    }

    /// Resolves with the code once stopped. It registers its waker once, and again only
    /// when polled with another: a stop is the only wake, and it comes once.
    pub(crate) async fn stopped(&self) -> StreamCode {
        let mut registered: Option<Waker> = None;
        poll_fn(|cx| {
            if let Some(code) = self.code() {
                return Poll::Ready(code);
            }
            if !registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                self.waker.register(cx.waker());
                registered = Some(cx.waker().clone());
                // A stop between the check and the registration still wakes us.
                if let Some(code) = self.code() {
                    return Poll::Ready(code);
                }
            }
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_waiting_future_sees_the_first_code() {
        let stop = Arc::new(Stop::default());
        assert_eq!(stop.code(), None);
        let waiter = tokio::spawn({
            let stop = stop.clone();
            async move { stop.stopped().await }
        });
        tokio::task::yield_now().await;
        stop.stop(StreamCode::Evicted);
        stop.stop(StreamCode::Cancelled);
        assert_eq!(waiter.await.unwrap(), StreamCode::Evicted);
        assert_eq!(stop.code(), Some(StreamCode::Evicted));
    }
}
