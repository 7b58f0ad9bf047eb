//! `GET /`: the live status page, one HTML file with inline CSS and JS (no build step),
//! embedded in the binary. It renders `/events` snapshots as they arrive.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, Uri};
use axum::response::{Html, IntoResponse, Response};

use crate::http::access::admit_operator;
use crate::http::HttpState;

const PAGE: &str = include_str!("status.html");

/// The page forwards its own query (`?jwt=`) to `/events` and `/status.json`.
pub(crate) async fn status_page(State(state): State<Arc<HttpState>>, uri: Uri) -> Response {
    if let Err(err) = admit_operator(&state, uri.query()).await {
        return err.into_response();
    }
    ([(header::CACHE_CONTROL, "no-cache")], Html(PAGE)).into_response()
}
