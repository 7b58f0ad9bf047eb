//! Socket-free benchmarks of whole moq-lite sessions.
//!
//! Every topology here (publishers, a full mesh of relays, viewers and a stats dashboard) runs
//! over `starling_transport::mem::pair()` on one current-thread tokio runtime, so a measurement
//! is the CPU cost of the session, model and codec layers with no sockets, no threads and no
//! scheduler noise. The criterion bench (`benches/session.rs`) measures the shapes; the smoke
//! test (`tests/smoke.rs`) runs each once at tiny sizes and checks every frame arrived.

mod dash;
mod delivery;
mod error;
mod mesh;
mod routes;
mod tally;
mod teardown;

pub use dash::{Dash, DashShape};
pub use delivery::{Delivery, FRAME_BYTES, GOP_FRAMES};
pub use error::Error;
pub use mesh::{cache_limits, link, session_limits, Mesh, Relay};
pub use tally::Tally;
pub use teardown::Teardown;

use std::time::Duration;

use starling_proto::{Protocol, Version};

/// The version every bench session speaks.
pub const VERSION: Protocol = Protocol::Lite(Version::Lite06);

/// How long any awaited event may take before the bench fails instead of hanging.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The runtime a topology runs on (time enabled for session timers): one current thread, or
/// with `STARLING_BENCH_WORKERS=N` a multi-thread runtime of N workers (the relay's kind),
/// to compare a shape's throughput on one core and on more.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    match std::env::var("STARLING_BENCH_WORKERS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(workers) if workers > 0 => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
}

/// Await `future` for at most [`TIMEOUT`]; `what` names the event in the error.
pub(crate) async fn within<F: std::future::Future>(
    what: &'static str,
    future: F,
) -> Result<F::Output, Error> {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .map_err(|_| Error::Timeout(what))
}
