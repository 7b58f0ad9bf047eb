//! A session's task and the session's end as one future.
//!
//! Every task a session spawns runs until it ends or the session does. Written as an `async`
//! block around a `select!`, such a task is stored twice in its task's memory (the block keeps
//! the task it captured beside the copy the select polls), which for a request stream's task
//! was half of its 2.5 KiB. This future holds the task once, and polls the session's
//! cancellation only when it fired (through a [`Gate`]), not on each of the task's wakes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::gate::Gate;

pin_project_lite::pin_project! {
    /// Resolves when `task` does or when `cancelled` fires, whichever is first; the task is
    /// polled first.
    pub(crate) struct Cancellable<F> {
        #[pin]
        task: F,
        #[pin]
        cancelled: WaitForCancellationFutureOwned,
        gate: Gate,
    }
}

impl<F: Future<Output = ()>> Cancellable<F> {
    pub(crate) fn new(task: F, cancelled: WaitForCancellationFutureOwned) -> Self {
        Cancellable {
            task,
            cancelled,
            gate: Gate::default(),
        }
    }
}

impl<F: Future<Output = ()>> Future for Cancellable<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.task.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let mut cancelled = this.cancelled;
        this.gate.poll(cx, |cx| cancelled.as_mut().poll(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    /// The task is stored once: an `async` block around a `select!` held it twice.
    #[test]
    fn the_task_is_held_once() {
        let task = async {
            let held = [7u8; 1024];
            tokio::task::yield_now().await;
            std::hint::black_box(&held);
        };
        let task_size = std::mem::size_of_val(&task);
        let wrapped = Cancellable::new(task, CancellationToken::new().cancelled_owned());
        assert!(
            std::mem::size_of_val(&wrapped) < task_size + 256,
            "{} bytes around a {task_size}-byte task",
            std::mem::size_of_val(&wrapped)
        );
    }

    /// The session's end ends a task that would never end on its own.
    #[tokio::test]
    async fn cancellation_ends_the_task() {
        let token = CancellationToken::new();
        let task = tokio::spawn(Cancellable::new(
            std::future::pending::<()>(),
            token.clone().cancelled_owned(),
        ));
        tokio::task::yield_now().await;
        assert!(!task.is_finished());
        token.cancel();
        task.await.unwrap();
    }
}
