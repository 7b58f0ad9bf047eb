//! The HTTP agent: `GET /fetch/{broadcast…}/{track}` (the latest group) on the relay's TCP
//! port, timed to the response headers and to the end of the body.
//!
//! The body is the group's frame payloads concatenated, so it opens with the first frame's
//! header. Each agent uses a fresh connection (the client keeps none idle), as a new viewer
//! would.

use std::time::Instant;

use url::Url;

use crate::frame::{FrameError, FrameHeader};

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("HTTP request: {0}")]
    Request(#[from] reqwest::Error),
    #[error("HTTP status {0}")]
    Status(u16),
    /// 503 with a Retry-After in seconds: the relay refused the request cleanly, for now.
    #[error("HTTP 503, retry after {0:?}")]
    Refused(std::time::Duration),
}

impl FetchError {
    /// A stable name for counting errors by kind.
    pub fn kind(&self) -> String {
        match self {
            FetchError::Request(err) if err.is_timeout() => "http_timeout".into(),
            FetchError::Request(err) if err.is_connect() => "http_connect".into(),
            FetchError::Request(_) => "http_request".into(),
            FetchError::Status(status) => format!("http_status_{status}"),
            FetchError::Refused(_) => "http_refused".into(),
        }
    }

    /// The error a response that is not a success stands for: a 503 carrying a
    /// Retry-After in seconds is a clean refusal, anything else its status.
    pub fn from_response(response: &reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        match (status, retry_after) {
            (503, Some(secs)) => FetchError::Refused(std::time::Duration::from_secs(secs)),
            _ => FetchError::Status(status),
        }
    }
}

/// One fetched group.
#[derive(Debug)]
pub struct Fetched {
    /// Nanoseconds from sending the request to the response headers.
    pub headers_ns: u64,
    /// Nanoseconds from sending the request to the end of the body.
    pub body_ns: u64,
    pub bytes: usize,
    /// The header of the body's first frame.
    pub first: Result<FrameHeader, FrameError>,
}

/// An HTTP client that opens a new connection per request.
pub fn client() -> Result<reqwest::Client, FetchError> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?)
}

/// `base/fetch/{broadcast}/{track}`: `base`'s path prefixes the broadcast, as a session
/// URL's path roots its broadcasts.
pub fn fetch_url(base: &Url, broadcast: &str, track: &str) -> Url {
    let root = base.path().trim_matches('/');
    let broadcast = broadcast.trim_matches('/');
    let full = if root.is_empty() {
        broadcast.to_string()
    } else {
        format!("{root}/{broadcast}")
    };
    let mut url = base.clone();
    url.set_path(&format!("/fetch/{full}/{track}"));
    url
}

/// Fetch the latest group of `track`.
pub async fn fetch_latest(client: &reqwest::Client, url: &Url) -> Result<Fetched, FetchError> {
    let started = Instant::now();
    let mut response = client.get(url.clone()).send().await?;
    let headers_ns = started.elapsed().as_nanos() as u64;
    if !response.status().is_success() {
        return Err(FetchError::from_response(&response));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        headers_ns,
        body_ns: started.elapsed().as_nanos() as u64,
        bytes: body.len(),
        first: FrameHeader::decode(&body),
    })
}
