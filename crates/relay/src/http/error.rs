//! Why an HTTP API request failed, and the status each reason answers with (moq-relay's).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use starling_proto::StreamCode;

/// A refused or failed API request. The status codes are moq-relay 0.17.10's
/// (`web.rs` `serve_announced`/`serve_fetch`, `auth.rs` `From<&Error> for StatusCode`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The request names no broadcast, or a path that is not a valid path: 400.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The path lies outside the request's root: 401.
    #[error("path outside the request root")]
    Unauthorized,
    /// The track or group does not exist, or no longer does: 404.
    #[error("not found")]
    NotFound,
    /// Nothing resolved before the fetch deadline (no route, no group yet): 504.
    #[error("timed out")]
    Timeout,
    /// The auth server could not be asked: 502, so the client may retry.
    #[error("auth server unavailable")]
    Unavailable,
    /// The relay serves as many of these requests as it may at once: 503 with Retry-After.
    #[error("busy")]
    Busy,
    /// The track failed with another stream code, or the model refused: 500.
    #[error("failed: {0}")]
    Internal(String),
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HttpError::Unauthorized => StatusCode::UNAUTHORIZED,
            HttpError::NotFound => StatusCode::NOT_FOUND,
            HttpError::Timeout => StatusCode::GATEWAY_TIMEOUT,
            HttpError::Unavailable => StatusCode::BAD_GATEWAY,
            HttpError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A track or group that ended with `code`: `NotFound` is 404 (moq-relay maps both a
    /// local miss and an upstream NOT_FOUND reset to 404), a track name past the bound 400,
    /// anything else 500.
    pub fn from_code(code: StreamCode) -> Self {
        match code {
            StreamCode::NotFound => HttpError::NotFound,
            StreamCode::MalformedTrack => HttpError::BadRequest("malformed track name"),
            other => HttpError::Internal(format!("{other:?}")),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        // moq-relay answers these with the bare status and an empty body.
        if self == HttpError::Busy {
            return (self.status(), [(axum::http::header::RETRY_AFTER, "5")]).into_response();
        }
        self.status().into_response()
    }
}
