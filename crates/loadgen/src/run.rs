//! What every run mode shares: its options, its clock start, and waiting for a broadcast to be
//! announced.

use std::time::{SystemTime, UNIX_EPOCH};

use starling_model::{BroadcastConsumer, ModelError, Origin};
use starling_proto::Path;

/// Options that do not change what is measured.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Relay processes whose CPU time and memory are reported.
    pub relay_pids: Vec<u32>,
    /// Draw a progress line on stderr (only when it is a terminal).
    pub progress: bool,
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Resolves with the broadcast at `path` once `origin` holds it.
pub async fn announced(origin: &Origin, path: &Path) -> Result<BroadcastConsumer, ModelError> {
    let interest = origin.interest(path.clone())?;
    let mut changed = Vec::new();
    loop {
        if let Some(broadcast) = origin.consume(path, None) {
            return Ok(broadcast);
        }
        interest.changed(&mut changed).await;
        changed.clear();
    }
}

/// A stop signal many tasks can await.
#[derive(Clone, Debug)]
pub struct Stop {
    tx: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl Default for Stop {
    fn default() -> Self {
        Self::new()
    }
}

impl Stop {
    pub fn new() -> Self {
        Stop {
            tx: std::sync::Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    pub fn stop(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_stopped(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once [`Stop::stop`] was called.
    pub async fn stopped(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
}

/// Run `work` (given the run's [`Stop`]) to completion; if `interrupt` resolves first, trip
/// the stop and let `work` wind down (it watches the stop), so an interrupted run still
/// reports what it measured.
pub async fn interruptible<T, F: std::future::Future<Output = T>>(
    interrupt: impl std::future::Future<Output = ()>,
    work: impl FnOnce(Stop) -> F,
) -> T {
    let stop = Stop::new();
    let work = work(stop.clone());
    tokio::pin!(work);
    tokio::select! {
        out = &mut work => out,
        _ = interrupt => {
            stop.stop();
            work.await
        }
    }
}

/// Resolves when `stop` trips or `session` closes, whichever is first.
pub async fn stopped_or_closed(
    stop: &Stop,
    session: &starling_session::Session<starling_net::AnyTransport>,
) {
    tokio::select! {
        _ = stop.stopped() => {}
        _ = session.closed() => {}
    }
}
