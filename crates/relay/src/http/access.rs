//! Per-request authorization for the HTTP side.
//!
//! With authentication on, each request is admitted like a one-shot session (transport
//! `http`, the requested path as the dialed path, the raw query carrying `jwt=`) through
//! the same cached decisions as every other session, and answered 401 when refused (502
//! when the auth server cannot be asked). `/fetch` needs a grant to subscribe to the
//! broadcast itself; `/announced` lists only what the grant may subscribe to; the status
//! endpoints need an operator's grant: subscribe to everything from `/`. With
//! authentication off, every request is scoped to the configured HTTP root.

use starling_auth::{Pattern, Patterns, Permissions};
use starling_proto::Path;

use crate::auth::{Refusal, SessionFacts, TransportKind};
use crate::http::error::HttpError;
use crate::http::scope::Scope;
use crate::http::HttpState;

/// What one request may see.
pub(crate) struct Access {
    pub scope: Scope,
    /// The grant's patterns, relative to the scope's root; `None` when auth is off.
    permissions: Option<Permissions>,
}

impl Access {
    /// What identifies the grant for sharing a listing: its root and subscribe patterns.
    pub fn grant_key(&self) -> Option<String> {
        self.permissions.as_ref().map(|p| {
            let mut key = p.root.clone();
            for pattern in p.subscribe.iter() {
                key.push('\n');
                key.push_str(pattern.as_str());
            }
            key
        })
    }

    /// Whether the broadcast at `path` (absolute) may be read.
    pub fn can_read(&self, path: &Path) -> bool {
        match &self.permissions {
            None => true,
            Some(permissions) => path
                .strip_prefix(self.scope.root())
                .is_some_and(|relative| permissions.can_subscribe(relative.as_str())),
        }
    }

    /// The broadcast a `/fetch` names: under auth, the grant's root (which an auth server
    /// may alias), readable itself.
    pub fn broadcast(&self, requested: &str) -> Result<Path, HttpError> {
        match &self.permissions {
            None => self.scope.broadcast(requested),
            Some(permissions) if permissions.can_subscribe("") => Ok(self.scope.root().clone()),
            Some(_) => Err(HttpError::Unauthorized),
        }
    }
}

fn refused(refusal: &Refusal) -> HttpError {
    if refusal.is_outage() {
        HttpError::Unavailable
    } else {
        HttpError::Unauthorized
    }
}

/// Refuse an API request while the relay runs past its lag bound: 503 with Retry-After,
/// before any work is done for it.
pub(crate) fn shed_load(
    state: &HttpState,
    remote: Option<std::net::SocketAddr>,
) -> Result<(), HttpError> {
    match &state.admission {
        Some(admission) => admission
            .admit_request(
                remote.map(|r| r.ip().to_canonical()),
                std::time::Instant::now(),
            )
            .map_err(|_| HttpError::Busy),
        None => Ok(()),
    }
}

/// The peer's address, when the server knows it.
pub(crate) type Remote = Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>;

/// The address in a [`Remote`].
pub(crate) fn remote_addr(remote: &Remote) -> Option<std::net::SocketAddr> {
    remote.as_ref().map(|r| r.0 .0)
}

/// Admit a request for `path` (as in the URL, without its leading `/`) with `query`.
pub(crate) async fn admit(
    state: &HttpState,
    path: &str,
    query: Option<&str>,
) -> Result<Access, HttpError> {
    let Some(authority) = &state.authority else {
        return Ok(Access {
            scope: state.scope.clone(),
            permissions: None,
        });
    };
    let grant = authority
        .check(SessionFacts::from_parts(TransportKind::Http, path, query))
        .await
        .map_err(|refusal| {
            tracing::debug!(%refusal, "http request refused");
            refused(&refusal)
        })?;
    if !grant.subscribe {
        return Err(HttpError::Unauthorized);
    }
    Ok(Access {
        scope: Scope::new(grant.root),
        permissions: grant.permissions,
    })
}

/// Admit a request for the status endpoints: with auth on, only a grant to subscribe to
/// everything from `/` (an operator's) sees the relay's sessions and broadcasts.
pub(crate) async fn admit_operator(
    state: &HttpState,
    query: Option<&str>,
) -> Result<(), HttpError> {
    if state.authority.is_none() {
        return Ok(());
    }
    let access = admit(state, "", query).await?;
    let everything: Patterns = ["**".parse::<Pattern>().expect("valid pattern")]
        .into_iter()
        .collect();
    match &access.permissions {
        Some(p) if p.root.is_empty() && p.subscribe.covers(&everything) => Ok(()),
        _ => Err(HttpError::Unauthorized),
    }
}
