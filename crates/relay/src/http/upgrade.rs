//! The WebSocket hook: a request asking for `Upgrade: websocket`, on any path (`/` included),
//! goes to a separate service before any HTTP route sees it.
//!
//! The QMux-over-WebSocket endpoint shares the relay's TCP port; moq-relay mounts it on `/`
//! and `/{*path}`, so the request path is the session's target, like a WebTransport CONNECT
//! path. The upgrade service receives the request untouched (hyper's upgrade handle
//! included), so it can use axum's `WebSocketUpgrade` extractor directly.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use starling_net::Admission;
use std::sync::Arc;
use tower::ServiceExt;

use crate::auth::{Authority, SessionFacts, TransportKind};

/// Whether the request asks to switch to the WebSocket protocol (the `Upgrade` header lists
/// the `websocket` token, case-insensitively).
pub fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("websocket"))
}

/// Route upgrades to `upgrade`; everything else continues to the HTTP routes.
pub(crate) async fn dispatch(
    State(upgrade): State<Router>,
    request: Request,
    next: Next,
) -> Response {
    if is_websocket_upgrade(request.headers()) {
        return match upgrade.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
        .into_response();
    }
    next.run(request).await
}

/// The checks in front of the WebSocket acceptor: admission first, so a relay past its
/// session bounds answers 503 without verifying a token or asking an auth server, then the
/// request URI's token (`?jwt=`): a refused or missing credential is answered 401 (502 when
/// the auth server cannot be asked) and never upgraded. The SETUP Role is checked again once
/// the session's SETUP arrives.
pub(crate) fn gate_upgrade(
    upgrade: Router,
    authority: Authority,
    admission: Option<Arc<Admission>>,
) -> Router {
    upgrade.layer(axum::middleware::from_fn_with_state(
        UpgradeGate {
            authority,
            admission,
        },
        gate,
    ))
}

#[derive(Clone)]
struct UpgradeGate {
    authority: Authority,
    admission: Option<Arc<Admission>>,
}

async fn gate(State(gate): State<UpgradeGate>, mut request: Request, next: Next) -> Response {
    if let Some(admission) = &gate.admission {
        if let Err(refusal) = starling_net::qmux::admit_upgrade(admission, &mut request) {
            return starling_net::qmux::refused_upgrade(refusal);
        }
    }
    if gate.authority.is_enabled() {
        let target = request
            .uri()
            .path_and_query()
            .map(|target| target.as_str().to_owned())
            .unwrap_or_default();
        if let Err(err) = gate
            .authority
            .precheck(SessionFacts::new(TransportKind::WebSocket, &target))
            .await
        {
            tracing::info!(%err, "websocket upgrade refused");
            let status = if err.is_outage() {
                axum::http::StatusCode::BAD_GATEWAY
            } else {
                axum::http::StatusCode::UNAUTHORIZED
            };
            return (status, "unauthorized").into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn recognizes_the_websocket_token() {
        let mut headers = HeaderMap::new();
        assert!(!is_websocket_upgrade(&headers));
        headers.insert(header::UPGRADE, HeaderValue::from_static("WebSocket"));
        assert!(is_websocket_upgrade(&headers));
        headers.insert(header::UPGRADE, HeaderValue::from_static("h2c, websocket"));
        assert!(is_websocket_upgrade(&headers));
        headers.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        assert!(!is_websocket_upgrade(&headers));
    }
}
