//! A one-line progress display on stderr, redrawn in place, only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

const REDRAW_EVERY: Duration = Duration::from_millis(200);

/// The running display; [`Progress::finish`] clears it.
pub struct Progress {
    task: Option<(JoinHandle<()>, Arc<Notify>)>,
}

impl Progress {
    /// Redraw `line()` every 200 ms while running, if `wanted` and stderr is a terminal.
    pub fn start(wanted: bool, line: impl Fn() -> String + Send + 'static) -> Progress {
        if !wanted || !std::io::stderr().is_terminal() {
            return Progress { task: None };
        }
        let done = Arc::new(Notify::new());
        let stop = done.clone();
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(REDRAW_EVERY);
            loop {
                tokio::select! {
                    _ = every.tick() => {
                        let mut err = std::io::stderr().lock();
                        let _ = write!(err, "\r\x1b[2K{}", line());
                        let _ = err.flush();
                    }
                    _ = stop.notified() => break,
                }
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        });
        Progress {
            task: Some((task, done)),
        }
    }

    /// Stop redrawing and clear the line.
    pub async fn finish(self) {
        if let Some((task, done)) = self.task {
            done.notify_one();
            let _ = task.await;
        }
    }
}
