//! Cross-origin reads: every GET response may be read from any origin, and a preflight for a
//! GET is answered, as moq-relay 0.17.10 does (`web.rs` `get_cors`). Other methods are left to
//! the router.

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub(crate) async fn get_cors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let preflight_get = method == Method::OPTIONS
        && request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_METHOD)
            .is_some_and(|m| m.as_bytes() == b"GET");
    if preflight_get {
        let requested_headers = request
            .headers()
            .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
            .cloned();
        let mut response = StatusCode::OK.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET"),
        );
        if let Some(requested) = requested_headers {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested);
        }
        return response;
    }
    let mut response = next.run(request).await;
    if method == Method::GET {
        response
            .headers_mut()
            .entry(header::ACCESS_CONTROL_ALLOW_ORIGIN)
            .or_insert(HeaderValue::from_static("*"));
    }
    response
}
