//! The relay's HTTP side on its TCP port: the certificate pin and health check, the
//! moq-relay-compatible API (`/announced`, `/fetch`), and the live status page (`/`,
//! `/events`, `/status.json`), behind a hook that hands WebSocket upgrades to another service.
//!
//! Every API handler admits its request first ([`access`]): with authentication on, through
//! the relay's [`Authority`] with the request's `?jwt=`; otherwise scoped to the HTTP root.

mod access;
mod announced;
mod assets;
mod cors;
mod error;
mod feed;
mod fetch;
mod history;
mod listings;
mod page;
mod scope;
mod snapshot;
mod upgrade;

use std::sync::Arc;

use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use starling_model::Origin;

use crate::auth::Authority;
use crate::config::HttpConfig;
use crate::metrics::RelayMetrics;
use crate::registry::SessionRegistry;

pub use error::HttpError;
pub(crate) use upgrade::gate_upgrade;
pub use upgrade::is_websocket_upgrade;

/// What every handler shares.
pub(crate) struct HttpState {
    origin: Origin,
    scope: scope::Scope,
    /// Decides each request when authentication is on.
    authority: Option<Authority>,
    config: HttpConfig,
    feed: Arc<feed::StatusFeed>,
    /// `/fetch` requests in flight, at most `config.max_fetches`.
    fetches: Arc<tokio::sync::Semaphore>,
    /// `/announced` listings shared by requests under the same grant.
    listings: listings::Listings,
    /// The relay's admission gate: API requests are refused past its lag bound.
    admission: Option<Arc<starling_net::Admission>>,
    /// The relay's recent series (`/history.json`), when the API was given its metrics.
    history: Option<Arc<history::History>>,
}

/// Builds the relay's HTTP router.
pub struct HttpApi {
    origin: Origin,
    sessions: SessionRegistry,
    fingerprint: String,
    config: HttpConfig,
    /// WebSocket (QMux) hook: when set, a request carrying `Upgrade: websocket` on any path
    /// is handed to this service before every route below.
    upgrade: Option<Router>,
    authority: Option<Authority>,
    receive_pool: Option<starling_session::ReceivePool>,
    admission: Option<Arc<starling_net::Admission>>,
    metrics: Option<RelayMetrics>,
}

impl HttpApi {
    /// The API over `origin`, listing `sessions`, pinning `fingerprint` (hex SHA-256).
    pub fn new(
        origin: Origin,
        sessions: SessionRegistry,
        fingerprint: impl Into<String>,
        config: HttpConfig,
    ) -> Self {
        HttpApi {
            origin,
            sessions,
            fingerprint: fingerprint.into(),
            config,
            upgrade: None,
            authority: None,
            receive_pool: None,
            admission: None,
            metrics: None,
        }
    }

    /// Keep the relay's series over the last `config.status_history` from `metrics`
    /// (`/history.json`, the status page's charts).
    pub fn with_metrics(mut self, metrics: RelayMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Refuse `/fetch` and `/announced` with 503 and Retry-After while `admission` finds the
    /// relay past its lag bound (counted `reason="lag"`).
    pub fn with_admission(mut self, admission: Arc<starling_net::Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Show the relay-wide receive budget on the status page.
    pub fn with_receive_pool(mut self, pool: starling_session::ReceivePool) -> Self {
        self.receive_pool = Some(pool);
        self
    }

    /// Admit every request through `authority` (when it has authentication on).
    pub fn with_authority(mut self, authority: Authority) -> Self {
        self.authority = authority.is_enabled().then_some(authority);
        self
    }

    /// WebSocket (QMux) hook: route every request carrying `Upgrade: websocket` (any path,
    /// `/` included, any method) to `service` before the HTTP routes. The request reaches it
    /// untouched, so axum's `WebSocketUpgrade` extractor works in it.
    pub fn with_upgrade(mut self, service: Router) -> Self {
        self.upgrade = Some(service);
        self
    }

    /// The router. Starts the status ticker (it samples only while `/events` has clients and
    /// stops once the router is dropped), so call it inside a Tokio runtime.
    pub fn router(self) -> Router {
        let history = self.metrics.map(|metrics| {
            let history = history::History::new(
                metrics,
                self.sessions.clone(),
                self.config.status_interval,
                self.config.status_history,
            );
            history.spawn_ticker();
            history
        });
        let sampler = snapshot::Sampler::new(
            self.origin.clone(),
            self.sessions,
            self.config.status_interval,
            self.config.status_max_items,
            self.receive_pool,
            history.clone(),
        );
        let feed = feed::StatusFeed::new(
            sampler,
            self.config.status_interval,
            self.config.max_event_clients,
        );
        feed.spawn_ticker();
        let state = Arc::new(HttpState {
            origin: self.origin,
            scope: scope::Scope::new(self.config.root.clone()),
            authority: self.authority,
            fetches: Arc::new(tokio::sync::Semaphore::new(self.config.max_fetches)),
            listings: listings::Listings::default(),
            admission: self.admission,
            history,
            config: self.config,
            feed,
        });
        let api = Router::new()
            .route("/", get(page::status_page))
            .route("/status.json", get(feed::status_json))
            .route("/events", get(feed::events))
            .route("/history.json", get(history::history_json))
            .route("/assets/player.js", get(assets::player))
            .route("/announced", get(announced::announced_root))
            .route("/announced/{*prefix}", get(announced::announced_prefix))
            .route("/fetch/{*path}", get(fetch::fetch))
            .with_state(state)
            .merge(starling_net::certificate_router(self.fingerprint))
            .fallback(not_found)
            .layer(axum::middleware::from_fn(cors::get_cors));
        match self.upgrade {
            // Outermost, so an upgrade never reaches a route (or the CORS layer).
            Some(upgrade) => api.layer(axum::middleware::from_fn_with_state(
                upgrade,
                upgrade::dispatch,
            )),
            None => api,
        }
    }
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found\n")
}
