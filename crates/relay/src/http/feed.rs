//! The live status feed: `GET /status.json` (one snapshot) and `GET /events` (server-sent
//! events, one snapshot per interval).
//!
//! A ticker samples once per interval while at least one `/events` client is connected,
//! serializes the snapshot once, and publishes it on a watch channel: every client reads the
//! same `Arc<str>`, and a client that reads slowly only ever has the newest one waiting (the
//! watch holds one value and hyper polls the event stream only when the socket takes more),
//! so a slow client never grows memory. At most `max_event_clients` streams are open at once;
//! one more is answered 503 with Retry-After.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use tokio::sync::watch;

use crate::http::access::admit_operator;
use crate::http::snapshot::{Sampler, Snapshot};
use crate::http::HttpState;

/// Snapshots, sampled on demand and pushed to event-stream clients.
pub(crate) struct StatusFeed {
    sampler: Mutex<Sampler>,
    latest: watch::Sender<Arc<str>>,
    interval: Duration,
    /// One permit per open `/events` stream.
    clients: Arc<tokio::sync::Semaphore>,
}

/// How long a client refused for want of a slot is told to wait.
const RETRY_AFTER_SECS: &str = "5";

impl StatusFeed {
    pub fn new(sampler: Sampler, interval: Duration, max_clients: usize) -> Arc<Self> {
        let (latest, _) = watch::channel(Arc::from(""));
        Arc::new(StatusFeed {
            sampler: Mutex::new(sampler),
            latest,
            interval,
            clients: Arc::new(tokio::sync::Semaphore::new(max_clients)),
        })
    }

    pub fn snapshot(&self) -> Snapshot {
        self.sampler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .sample()
    }

    fn snapshot_json(&self) -> Arc<str> {
        // Plain structs, strings and numbers: serialization cannot fail.
        Arc::from(serde_json::to_string(&self.snapshot()).unwrap_or_default())
    }

    /// Sample every interval while anyone listens; ends once the feed is dropped.
    pub fn spawn_ticker(self: &Arc<Self>) {
        let feed: Weak<StatusFeed> = Arc::downgrade(self);
        let interval = self.interval;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(feed) = feed.upgrade() else { return };
                if feed.latest.receiver_count() > 0 {
                    let json = feed.snapshot_json();
                    feed.latest.send_replace(json);
                }
            }
        });
    }

    /// A client's event stream: a fresh snapshot at once, then each published one.
    /// An event stream holding `slot` while it is open.
    fn events(
        &self,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
        let mut receiver = self.latest.subscribe();
        receiver.mark_unchanged();
        let first = self.snapshot_json();
        futures::stream::unfold(
            (Some(first), receiver, slot),
            |(first, mut receiver, slot)| async move {
                let json = match first {
                    Some(json) => json,
                    None => {
                        receiver.changed().await.ok()?;
                        let json = receiver.borrow_and_update().clone();
                        json
                    }
                };
                let event = Event::default().event("status").data(&*json);
                Some((Ok(event), (None, receiver, slot)))
            },
        )
    }
}

pub(crate) async fn status_json(State(state): State<Arc<HttpState>>, uri: Uri) -> Response {
    if let Err(err) = admit_operator(&state, uri.query()).await {
        return err.into_response();
    }
    (
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(state.feed.snapshot()),
    )
        .into_response()
}

pub(crate) async fn events(State(state): State<Arc<HttpState>>, uri: Uri) -> Response {
    if let Err(err) = admit_operator(&state, uri.query()).await {
        return err.into_response();
    }
    let Ok(slot) = state.feed.clients.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, RETRY_AFTER_SECS)],
            "too many event streams\n",
        )
            .into_response();
    };
    (
        [(header::CACHE_CONTROL, "no-store")],
        Sse::new(state.feed.events(slot)).keep_alive(KeepAlive::default()),
    )
        .into_response()
}
