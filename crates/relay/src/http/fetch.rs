//! `GET /fetch/{broadcast...}/{track}?group=N|latest`: one group's frames over HTTP.
//!
//! Mirrors moq-relay 0.17.10 `web.rs` `serve_fetch` / `ServeGroup` and `fetch.rs`
//! `fetch_group`: the last path segment is the track and at least one segment must name the
//! broadcast (else 400); `group` is a sequence or `latest` (the default; anything else is a
//! query rejection, 400); a broadcast outside the request root is 401. Everything after that
//! runs under one deadline (30 s by default): waiting for a route to the broadcast (a
//! publisher announcing a moment later is served), then for the group; past the deadline the
//! answer is 504, so an unknown broadcast is 504 once the wait ends. A track or group that
//! does not exist, or that already left the cache, is 404; a track that failed otherwise is
//! 500. The body is the group's frame payloads concatenated, unframed, with no content type,
//! streamed as frames arrive; a group aborted mid-body, or the deadline passing, cuts the body.
//! At most `max_fetches` requests are served at once (from before the access check to the
//! body's end); one more is 503 with Retry-After.
//!
//! A track the relay does not hold yet is pulled: subscribing through the broadcast (dynamic
//! for a peer's announcement) queues one upstream subscription. A numbered group asks with an
//! unbounded max age and a floor at that sequence, which reaches back into what the publisher
//! still has (on lite-06; a lite-05 subscription without a start pins the latest group, so
//! there only groups the relay already holds can be fetched by number).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::response::Response;
use starling_model::{BroadcastConsumer, GroupConsumer, Origin, StartAt, TrackConsumer};
use starling_proto::Path;
use tokio::time::Instant;

use crate::http::error::HttpError;
use crate::http::HttpState;

/// Once a track holds a group, a missing one is given up on after this long without any
/// group arriving…
const SETTLE_QUIET: Duration = Duration::from_millis(250);
/// …or this long after the wait began, whichever comes first.
const SETTLE_MAX: Duration = Duration::from_secs(2);

/// Which group a fetch asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FetchGroup {
    Sequence(u64),
    #[default]
    Latest,
}

impl<'de> serde::Deserialize<'de> for FetchGroup {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        match value.parse::<u64>() {
            Ok(sequence) => Ok(FetchGroup::Sequence(sequence)),
            Err(_) if value == "latest" => Ok(FetchGroup::Latest),
            Err(_) => Err(serde::de::Error::custom(format!(
                "invalid group value: {value}"
            ))),
        }
    }
}

/// The query string; `jwt` is read by admission from the raw query, other keys ignored.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct FetchParams {
    #[serde(default)]
    group: FetchGroup,
}

/// A group being served, with the reader that keeps its track subscribed meanwhile.
struct Serving {
    _reader: TrackConsumer,
    group: GroupConsumer,
}

pub(crate) async fn fetch(
    State(state): State<Arc<HttpState>>,
    UrlPath(path): UrlPath<String>,
    Query(params): Query<FetchParams>,
    remote: crate::http::access::Remote,
    uri: axum::http::Uri,
) -> Result<Response, HttpError> {
    let Some((broadcast, track)) = path.rsplit_once('/') else {
        return Err(HttpError::BadRequest(
            "a broadcast and a track are required",
        ));
    };
    crate::http::access::shed_load(&state, crate::http::access::remote_addr(&remote))?;
    // Held until the body is sent (or the client goes).
    let slot = state
        .fetches
        .clone()
        .try_acquire_owned()
        .map_err(|_| HttpError::Busy)?;
    let access = crate::http::access::admit(&state, broadcast, uri.query()).await?;
    let broadcast = access.broadcast(broadcast)?;
    tracing::debug!(%broadcast, track, group = ?params.group, "http fetch");
    let deadline = Instant::now() + state.config.fetch_timeout;
    let serving = tokio::time::timeout_at(
        deadline,
        resolve(&state.origin, &broadcast, track, params.group),
    )
    .await
    .map_err(|_| HttpError::Timeout)??;
    Ok(stream_body(serving, deadline, slot))
}

async fn resolve(
    origin: &Origin,
    path: &Path,
    track: &str,
    group: FetchGroup,
) -> Result<Serving, HttpError> {
    let broadcast = routed(origin, path).await?;
    match group {
        FetchGroup::Latest => latest(&broadcast, track).await,
        FetchGroup::Sequence(sequence) => numbered(&broadcast, track, sequence).await,
    }
}

/// The broadcast at exactly `path`, waiting for a route to appear.
async fn routed(origin: &Origin, path: &Path) -> Result<BroadcastConsumer, HttpError> {
    // Register before looking, so an announcement between the look and the wait wakes us.
    let interest = origin
        .interest(path.clone())
        .map_err(|err| HttpError::Internal(err.to_string()))?;
    let mut changed = Vec::new();
    loop {
        if let Some(broadcast) = origin.consume(path, None) {
            return Ok(broadcast);
        }
        interest.changed(&mut changed).await;
        changed.clear();
    }
}

/// The latest group: the newest cached one, or the first to arrive.
async fn latest(broadcast: &BroadcastConsumer, track: &str) -> Result<Serving, HttpError> {
    let start = StartAt {
        latest: true,
        ..StartAt::default()
    };
    let mut reader = broadcast
        .subscribe_track(track, start)
        .map_err(HttpError::from_code)?;
    match reader.next_group().await {
        Ok(Some(group)) => Ok(Serving {
            _reader: reader,
            group,
        }),
        // The track ended before any group.
        Ok(None) => Err(HttpError::NotFound),
        Err(code) => Err(HttpError::from_code(code)),
    }
}

/// Group `sequence`: cached, or arriving from the publisher's cache; 404 once it cannot come.
///
/// A group the relay does not hold may still be in flight: a fresh upstream subscription
/// receives the publisher's cached groups as a burst, on concurrent streams, in any order.
/// Once the track holds any group, the burst is taken as over after [`SETTLE_QUIET`] without
/// a new group (at most [`SETTLE_MAX`] in all); a group that has not come by then is 404, as
/// is one the cache already let go, or (on a track that was already flowing) one past the
/// latest: like a FETCH, this never waits for a group that does not exist yet.
async fn numbered(
    broadcast: &BroadcastConsumer,
    track: &str,
    sequence: u64,
) -> Result<Serving, HttpError> {
    let start = StartAt {
        max_age_ms: u64::MAX,
        latest: false,
        floor: Some(sequence),
        priority: 0,
    };
    let reader = broadcast
        .subscribe_track(track, start)
        .map_err(HttpError::from_code)?;
    let flowing = reader.stats().latest_sequence.is_some();
    let mut settle_by: Option<Instant> = None;
    loop {
        if let Some(group) = reader.group(sequence) {
            return Ok(Serving {
                _reader: reader,
                group,
            });
        }
        let stats = reader.stats();
        if stats
            .expired_through
            .is_some_and(|through| sequence <= through)
        {
            return Err(HttpError::NotFound);
        }
        if stats.closed {
            let closed = std::future::poll_fn(|cx| reader.poll_closed(cx)).await;
            return Err(match closed {
                Ok(()) => HttpError::NotFound,
                Err(code) => HttpError::from_code(code),
            });
        }
        let Some(latest) = stats.latest_sequence else {
            // Nothing yet: wait for the first group (or the track's end).
            reader.groups_changed(stats.groups).await;
            continue;
        };
        if flowing && sequence > latest {
            return Err(HttpError::NotFound);
        }
        let now = Instant::now();
        let settle_by = *settle_by.get_or_insert(now + SETTLE_MAX);
        let quiet = SETTLE_QUIET.min(settle_by.saturating_duration_since(now));
        if tokio::time::timeout(quiet, reader.groups_changed(stats.groups))
            .await
            .is_err()
        {
            return Err(HttpError::NotFound);
        }
    }
}

/// The group's frame payloads, concatenated, as they arrive, until the deadline.
fn stream_body(
    serving: Serving,
    deadline: Instant,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    let frames = futures::stream::unfold(Some((serving, slot)), move |state| async move {
        let (mut serving, slot) = state?;
        match tokio::time::timeout_at(deadline, serving.group.next_frame()).await {
            Ok(Ok(Some(frame))) => Some((Ok(frame.payload), Some((serving, slot)))),
            Ok(Ok(None)) => None,
            Ok(Err(code)) => Some((Err(HttpError::from_code(code)), None)),
            Err(_) => Some((Err(HttpError::Timeout), None)),
        }
    });
    Response::new(Body::from_stream(frames))
}
