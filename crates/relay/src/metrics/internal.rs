//! The internal listener (`--internal-listen`): `/metrics`, `/health`, `/nodes` and
//! `/sessions`, for operators and cluster peers' API discovery.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use axum::extract::RawQuery;
use axum::http::{header, StatusCode};
use axum::routing::get;
use axum::Router;
use starling_model::Origin;

use super::RelayMetrics;
use crate::auth::Authority;
use crate::registry::SessionRegistry;
use crate::sessions::{sessions_json, Filter};

/// The internal listener's routes: `/metrics`, `/health`, `/nodes` and `/sessions`.
pub fn internal_router(
    metrics: RelayMetrics,
    sessions: SessionRegistry,
    origin: Origin,
    authority: Authority,
    node: String,
) -> Router {
    let nodes = sessions.clone();
    let accepted = sessions.clone();
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let body = metrics.render(&sessions, &origin, &authority.stats());
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        body,
                    )
                }
            }),
        )
        .route("/health", get(|| async { "ok\n" }))
        .route(
            "/nodes",
            get(move || {
                let body = nodes_json(&nodes);
                async move { ([(header::CONTENT_TYPE, "application/json")], body) }
            }),
        )
        .route(
            "/sessions",
            get(move |RawQuery(query): RawQuery| {
                let body = Filter::from_query(query.as_deref())
                    .map(|filter| sessions_json(&accepted, &node, &filter));
                async move {
                    match body {
                        Ok(body) => (
                            StatusCode::OK,
                            [(header::CONTENT_TYPE, "application/json")],
                            body,
                        ),
                        Err(err) => (
                            StatusCode::BAD_REQUEST,
                            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                            format!("{err}\n"),
                        ),
                    }
                }
            }),
        )
}

/// `/nodes` in moq-relay 0.17.10's shape: the cluster peers this relay dialed and holds a
/// session with, by key (sorted), each with its sessions' ids (ascending); accepted peers are
/// not listed.
fn nodes_json(sessions: &SessionRegistry) -> String {
    let mut nodes: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for entry in sessions.list() {
        if let Some(peer) = &entry.info.peer {
            nodes.entry(peer.clone()).or_default().push(entry.info.id);
        }
    }
    let nodes: Vec<serde_json::Value> = nodes
        .into_iter()
        .map(|(node, ids)| {
            let connections: Vec<serde_json::Value> = ids
                .into_iter()
                .map(|id| serde_json::json!({ "id": id }))
                .collect();
            serde_json::json!({ "connections": connections, "node": node })
        })
        .collect();
    serde_json::json!({ "nodes": nodes }).to_string()
}

/// Serve the internal router on `addr` in its own task.
pub async fn serve_internal(addr: SocketAddr, router: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).await {
            tracing::warn!(%err, "internal listener ended");
        }
    });
    Ok(local)
}
