//! The per-connection task: moves records between the carrier and the state machine, runs
//! its timers, and (on WebSocket) the keep-alive: a Ping every 5 s, the session closed after
//! 30 s with nothing received.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use super::carrier::{Carrier, Inbound};
use super::shared::Shared;

/// WebSocket Ping cadence (qmux's `KeepAlive::default()`).
pub(crate) const WS_PING_INTERVAL: Duration = Duration::from_secs(5);
/// WebSocket silence after which the session is closed.
pub(crate) const WS_TIMEOUT: Duration = Duration::from_secs(30);
/// Inbound items handled per poll before yielding, so one busy peer cannot hog a worker.
const BATCH: usize = 64;

pub(crate) struct Driver<C> {
    shared: Arc<Shared>,
    carrier: C,
    timer: Pin<Box<Sleep>>,
    /// WebSocket keep-alive: when the next Ping is due and when something last arrived.
    next_ping: Option<Instant>,
    last_heard: Instant,
    /// The carrier is finished (closed by us or ended by the peer).
    ended: bool,
    /// Records were queued and their flush put off by one turn of the scheduler.
    corked: bool,
}

impl<C: Carrier> Driver<C> {
    pub(crate) fn spawn(shared: Arc<Shared>, carrier: C) {
        tokio::spawn(Self::new(shared, carrier));
    }

    fn new(shared: Arc<Shared>, carrier: C) -> Self {
        let now = Instant::now();
        let next_ping = carrier.has_ping().then(|| now + WS_PING_INTERVAL);
        Driver {
            shared,
            carrier,
            timer: Box::pin(tokio::time::sleep_until(now)),
            next_ping,
            last_heard: now,
            ended: false,
            corked: false,
        }
    }

    /// Feed everything the carrier has; `Ready` when it ended.
    fn poll_inbound(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        for _ in 0..BATCH {
            let item = match self.carrier.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(item) => item,
            };
            let now = Instant::now();
            self.last_heard = now;
            let mut inner = self.shared.lock();
            match item {
                Some(Ok(Inbound::Data(data))) => inner.conn.handle_record(data, now.into_std()),
                Some(Ok(Inbound::Activity)) => {}
                Some(Ok(Inbound::Close)) | None => {
                    inner.conn.handle_lost("the peer closed the carrier");
                    inner.dispatch();
                    return Poll::Ready(());
                }
                Some(Err(e)) => {
                    inner.conn.handle_lost(e);
                    inner.dispatch();
                    return Poll::Ready(());
                }
            }
            inner.dispatch();
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Send what the connection has; `Err` when the carrier failed.
    ///
    /// A flush that has just queued records is put off by one turn of the scheduler: the
    /// tasks that woke the driver (a subscription writing a run of groups, the session
    /// answering a burst of requests) usually have more to write, and it joins the same
    /// write. Without it each group went out in its own `sendto` even in a burst (0.86 per
    /// group), and the peer read each with its own `recvfrom`.
    fn poll_outbound(&mut self, cx: &mut Context<'_>) -> Result<(), String> {
        let mut queued = false;
        loop {
            match self.carrier.poll_ready(cx) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Ready(Ok(())) => {}
            }
            let now = Instant::now();
            if self.next_ping.is_some_and(|at| now >= at) {
                self.next_ping = Some(now + WS_PING_INTERVAL);
                self.carrier.start_ping()?;
                continue;
            }
            let record = {
                let mut inner = self.shared.lock();
                let record = inner.conn.poll_transmit(now.into_std());
                inner.dispatch();
                record
            };
            match record {
                Some(record) => {
                    self.carrier.start_send(record)?;
                    queued = true;
                }
                None => break,
            }
        }
        if queued && !self.corked {
            self.corked = true;
            cx.waker().wake_by_ref();
            return Ok(());
        }
        self.corked = false;
        match self.carrier.poll_flush(cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }
}

impl<C: Carrier> Future for Driver<C> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for _ in 0..8 {
            if !this.ended && this.poll_inbound(cx).is_ready() {
                this.ended = true;
            }

            let now = Instant::now();
            {
                let mut inner = this.shared.lock();
                inner.driver = Some(cx.waker().clone());
                if inner
                    .conn
                    .poll_timeout()
                    .is_some_and(|t| now.into_std() >= t)
                {
                    inner.conn.handle_timeout(now.into_std());
                }
                if this.next_ping.is_some() && now >= this.last_heard + WS_TIMEOUT {
                    inner.conn.handle_lost("WebSocket keep-alive timeout");
                }
                inner.dispatch();
            }

            if !this.ended {
                if let Err(e) = this.poll_outbound(cx) {
                    let mut inner = this.shared.lock();
                    inner.conn.handle_lost(e);
                    inner.dispatch();
                    this.ended = true;
                }
            }

            let drained = this.shared.lock().conn.is_drained();
            if drained || this.ended {
                if !this.ended {
                    // Everything including our close frame is queued; send the WebSocket
                    // Close (or the TCP FIN) after it.
                    match this.carrier.poll_close(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(_) => {}
                    }
                }
                let mut inner = this.shared.lock();
                inner.conn.handle_lost("carrier ended");
                inner.driver = None;
                inner.dispatch();
                return Poll::Ready(());
            }

            let deadline = {
                let inner = this.shared.lock();
                let conn = inner.conn.poll_timeout().map(Instant::from_std);
                let ws = this
                    .next_ping
                    .map(|ping| ping.min(this.last_heard + WS_TIMEOUT));
                [conn, ws].into_iter().flatten().min()
            };
            match deadline {
                Some(at) => {
                    this.timer.as_mut().reset(at);
                    if this.timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
                None => return Poll::Pending,
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    use bytes::Bytes;
    use starling_qmux::{Config, Connection, Framing, Side, WireVersion};

    use super::*;

    /// A carrier with nothing to read and room for everything written, counting records
    /// sent and flushes.
    #[derive(Default)]
    struct Quiet {
        sent: Arc<AtomicUsize>,
        flushes: Arc<AtomicUsize>,
    }

    impl Carrier for Quiet {
        fn poll_recv(&mut self, _: &mut Context<'_>) -> Poll<Option<Result<Inbound, String>>> {
            Poll::Pending
        }
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
            Poll::Ready(Ok(()))
        }
        fn start_send(&mut self, _: Bytes) -> Result<(), String> {
            self.sent.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        fn poll_flush(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
            self.flushes.fetch_add(1, Ordering::Relaxed);
            Poll::Ready(Ok(()))
        }
        fn poll_close(&mut self, _: &mut Context<'_>) -> Poll<Result<(), String>> {
            Poll::Ready(Ok(()))
        }
    }

    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn driver(carrier: Quiet) -> Driver<Quiet> {
        let config = Config::new(WireVersion::Qmux01, Framing::Message, Side::Server);
        let conn = Connection::new(config, Instant::now().into_std());
        Driver::new(Shared::new(conn, None), carrier)
    }

    #[tokio::test]
    async fn an_idle_driver_does_not_wake_itself() {
        let mut driver = driver(Quiet::default());
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        // The first poll queues the connection's opening records and puts their flush off
        // by one turn (one wake); the second flushes them. Nothing else is due.
        for _ in 0..2 {
            assert!(Pin::new(&mut driver).poll(&mut cx).is_pending());
        }
        let opening = wakes.0.load(Ordering::Relaxed);
        assert!(opening <= 1, "{opening} wakes for the opening records");
        // Woken by its own poll, the driver would be polled again at once, forever.
        for _ in 0..3 {
            assert!(Pin::new(&mut driver).poll(&mut cx).is_pending());
        }
        assert_eq!(
            wakes.0.load(Ordering::Relaxed),
            opening,
            "the driver woke itself"
        );
    }

    #[tokio::test]
    async fn records_queued_in_one_poll_are_flushed_together_a_turn_later() {
        let carrier = Quiet::default();
        let (sent, flushes) = (carrier.sent.clone(), carrier.flushes.clone());
        let mut driver = driver(carrier);
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut driver).poll(&mut cx).is_pending());
        // The opening records (transport parameters, the first QX_PING) are queued, not yet
        // written, and the driver asked to run again.
        assert!(sent.load(Ordering::Relaxed) >= 2);
        assert_eq!(flushes.load(Ordering::Relaxed), 0);
        assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
        assert!(Pin::new(&mut driver).poll(&mut cx).is_pending());
        assert_eq!(
            flushes.load(Ordering::Relaxed),
            1,
            "one write for all of them"
        );
    }
}
