//! `GET /`: the live status page, one HTML file with inline CSS and JS (no build step),
//! embedded in the binary. It renders `/events` snapshots as they arrive.

use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

const PAGE: &str = include_str!("status.html");

pub(crate) async fn status_page() -> Response {
    ([(header::CACHE_CONTROL, "no-cache")], Html(PAGE)).into_response()
}
