//! The TCP/HTTP side: a composable axum router serving `/certificate.sha256` and `/health`, and its server loop.

use axum::http::header;
use axum::routing::get;
use axum::Router;

/// A router with `GET /certificate.sha256` (the lowercase hex SHA-256 of the leaf
/// certificate, `text/plain`, readable cross-origin) and `GET /health` (`ok\n`).
/// Merge more routes into it with [`Router::merge`] or [`Router::route`].
pub fn certificate_router(fingerprint_hex: impl Into<String>) -> Router {
    let fingerprint: String = fingerprint_hex.into();
    Router::new()
        .route(
            "/certificate.sha256",
            get(move || {
                let body = fingerprint.clone();
                async move {
                    (
                        [
                            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                            (header::CACHE_CONTROL, "no-store"),
                        ],
                        body,
                    )
                }
            }),
        )
        .route("/health", get(health))
}

async fn health() -> ([(header::HeaderName, &'static str); 1], &'static str) {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "ok\n",
    )
}

/// Serve `router` on `listener` until the listener fails (run it in its own task; abort
/// the task to stop).
pub async fn serve_http(listener: tokio::net::TcpListener, router: Router) -> std::io::Result<()> {
    axum::serve(listener, router).await
}

/// Like [`serve_http`], stopping gracefully once `shutdown` resolves.
pub async fn serve_http_until(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
