//! `GET /announced[/{prefix...}]`: the live broadcast paths under a prefix, one per line,
//! relative to that prefix, hidden (`.`-segment) paths left out.
//!
//! Mirrors moq-relay 0.17.10 `web.rs` `serve_announced`: a `String` body (so
//! `text/plain; charset=utf-8`) of the active paths joined by `\n` with no trailing newline,
//! 401 for a prefix outside the request root. With authentication on, the request's `?jwt=`
//! is admitted at the prefix and only broadcasts the grant may subscribe to are listed.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::Uri;

use crate::http::access::{admit, remote_addr, shed_load, Access, Remote};
use crate::http::error::HttpError;
use crate::http::listings::ListingKey;
use crate::http::scope::is_hidden;
use crate::http::HttpState;

pub(crate) async fn announced_root(
    State(state): State<Arc<HttpState>>,
    remote: Remote,
    uri: Uri,
) -> Result<String, HttpError> {
    shed_load(&state, remote_addr(&remote))?;
    let access = admit(&state, "", uri.query()).await?;
    list(&state, &access, "")
}

pub(crate) async fn announced_prefix(
    State(state): State<Arc<HttpState>>,
    UrlPath(prefix): UrlPath<String>,
    remote: Remote,
    uri: Uri,
) -> Result<String, HttpError> {
    shed_load(&state, remote_addr(&remote))?;
    let access = admit(&state, &prefix, uri.query()).await?;
    list(&state, &access, &prefix)
}

fn list(state: &HttpState, access: &Access, requested: &str) -> Result<String, HttpError> {
    let key = ListingKey {
        requested: format!("{}\n{requested}", access.scope.root()),
        grant: access.grant_key(),
    };
    let generation = state.origin.generation();
    let body = state
        .listings
        .get_or_list(key, generation, || list_now(state, access, requested))?;
    Ok(body.to_string())
}

fn list_now(state: &HttpState, access: &Access, requested: &str) -> Result<String, HttpError> {
    let listing = access.scope.listing(requested)?;
    let paths: Vec<String> = state
        .origin
        .announced_paths(&listing.search, None)
        .into_iter()
        .filter(|path| access.can_read(path))
        .filter_map(|path| path.strip_prefix(&listing.base))
        .filter(|relative| !is_hidden(relative))
        .map(|relative| relative.as_str().to_string())
        .collect();
    Ok(paths.join("\n"))
}
