//! The HTTP server loop on the TCP port: a bounded number of connections, a deadline for
//! every request head (slowloris), and the peer's address handed to handlers as axum's
//! `ConnectInfo`.
//!
//! One connection past the bound is answered `503 Service Unavailable` with `Retry-After`
//! and closed, without reading its request. A connection that takes longer than the head
//! deadline to send a request head (including an idle keep-alive connection waiting for its
//! next request) is closed by hyper.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tower_service::Service;

/// The answer to a connection past the bound.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\n\
Content-Type: text/plain\r\nContent-Length: 22\r\nConnection: close\r\n\r\ntoo many connections\r\n";

/// Bounds of the HTTP server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once; one more is answered 503 and closed.
    pub max_connections: usize,
    /// How long a client has to send a request head.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub max_h2_streams: u32,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            max_h2_streams: 64,
        }
    }
}

/// What the server has seen, for metrics.
#[derive(Debug, Default)]
pub struct HttpCounters {
    /// Connections open now.
    pub open: AtomicUsize,
    /// Connections refused with 503 because `max_connections` were open.
    pub refused: AtomicU64,
}

/// Serve `router` on `listener` within `limits`; run it in its own task and abort the task
/// to stop. Accept errors (a reset handshake, descriptors exhausted) are waited out.
pub async fn serve_bounded(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    counters: Arc<HttpCounters>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_h2_streams);
    let builder = Arc::new(builder);
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::debug!(%err, "HTTP accept failed");
                if !is_per_connection(&err) {
                    // Out of descriptors or similar: let some close before trying again.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        let remote = SocketAddr::new(remote.ip().to_canonical(), remote.port());
        let Some(slot) = Slot::take(&counters, limits.max_connections) else {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(refuse(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service =
                hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(remote));
                    let mut router = router.clone();
                    async move { router.call(request).await }
                });
            if let Err(err) = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await
            {
                tracing::trace!(%remote, %err, "HTTP connection ended");
            }
        });
    }
}

/// Failures of one incoming connection, after which the next accept can follow at once.
fn is_per_connection(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        err.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    )
}

/// Answer 503 without reading the request, within a second, and close.
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(BUSY).await?;
        stream.shutdown().await
    })
    .await;
}

/// One open connection's place in the count.
struct Slot(Arc<HttpCounters>);

impl Slot {
    fn take(counters: &Arc<HttpCounters>, max: usize) -> Option<Slot> {
        counters
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            })
            .ok()
            .map(|_| Slot(counters.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}
