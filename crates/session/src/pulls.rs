//! What pulling a track from the peer takes whatever the wire: the loop that answers a
//! broadcast's track requests with one pull each, how a pull ends, and the helpers both
//! families' pulls share (the linger before unsubscribing, the grace after the publisher
//! unannounced, the registration of an upstream subscription). Each family's pull is a
//! [`Puller`]: lite's in `subscriber`, the IETF drafts' in `ietf`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use starling_model::{BroadcastProducer, TrackRequest};
use starling_proto::{Path, StreamCode};
use starling_transport::Transport;

use crate::error::Error;
use crate::shared::{reset_code, Shared};

/// One family's pull of one track: SUBSCRIBE (or its draft's equivalent) until the track ends
/// or no reader is left.
pub(crate) trait Puller<T: Transport>: Copy + Send + Sync + 'static {
    fn pull<'a>(
        self,
        shared: &'a Arc<Shared<T>>,
        wire: &'a Path,
        request: &'a TrackRequest,
    ) -> impl Future<Output = Result<Pulled, Error>> + Send + 'a;
}

/// Answer the track requests of one broadcast the peer serves (`wire` is relative to the root).
pub(crate) async fn serve_requests<T: Transport, P: Puller<T>>(
    shared: Arc<Shared<T>>,
    wire: Path,
    broadcast: Arc<BroadcastProducer>,
    puller: P,
) {
    loop {
        let request = tokio::select! {
            biased;
            _ = shared.closing.cancelled() => {
                // The peer is gone: no new pull through it (see `Shared::closing`).
                broadcast.close();
                return;
            }
            request = broadcast.requested() => match request {
                Some(request) => request,
                None => return,
            },
        };
        let task_shared = shared.clone();
        let task_wire = wire.clone();
        let task_broadcast = broadcast.clone();
        shared.spawn(async move {
            let pulling = task_shared.pulling();
            let track = request.track().clone();
            let result = puller.pull(&task_shared, &task_wire, &request).await;
            task_broadcast.remove_track(&track);
            drop(track);
            match result {
                Ok(Pulled::Finished) => request.finish(),
                Ok(Pulled::Unused) => request.abort(StreamCode::Cancelled),
                Err(err) if source_lost(&err) => {
                    tracing::debug!(?err, track = request.track().name(), "upstream lost");
                    request.source_lost();
                }
                Err(err @ Error::Decode(_)) => {
                    // An answer that does not decode (SUBSCRIBE_DROP on lite-07, say) is the
                    // publisher breaking the protocol: its session closes.
                    request.abort(err.stream_code());
                    task_shared.fail(err);
                }
                Err(err) => {
                    tracing::debug!(
                        ?err,
                        track = request.track().name(),
                        "upstream subscription ended"
                    );
                    request.abort(err.stream_code());
                }
            }
            drop(pulling);
            // Cancelled with the session, the request is dropped unanswered and handed on.
        });
    }
}

/// Whether an upstream error means the session serving it is gone (rather than the
/// publisher refusing or ending the track): the track can then go to another route.
pub(crate) fn source_lost(err: &Error) -> bool {
    match err {
        Error::Transport(_) => reset_code(err).is_none(),
        Error::Closed => true,
        Error::Stream(code) => matches!(code, StreamCode::GoingAway | StreamCode::SessionClosed),
        _ => false,
    }
}

/// How a pull ended without error.
pub(crate) enum Pulled {
    /// The publisher ended the track.
    Finished,
    /// The last reader left.
    Unused,
}

/// How long a track pulled through a cluster peer may go on once its front lost its last
/// route (the publisher unannounced): time for the publisher to end it, as moq-cli does right
/// after unannouncing, before the pull ends it (see `TrackProducer::front_gone`).
const FRONT_GONE_GRACE: Duration = Duration::from_secs(1);

/// Resolves [`FRONT_GONE_GRACE`] after the track's front lost its last route while we pull it
/// from a peer: the pull then ends the track.
pub(crate) async fn front_gone_grace(track: &starling_model::TrackProducer) {
    track.front_gone().await;
    tokio::time::sleep(FRONT_GONE_GRACE).await;
}

/// Ready once no reader of `track` is left and none came back within `linger`.
pub(crate) async fn unused(track: &starling_model::TrackProducer, linger: Duration) {
    loop {
        track.unused().await;
        tokio::time::sleep(linger).await;
        if track.consumers() == 0 {
            return;
        }
    }
}

/// Forgets an upstream subscription (by subscribe id or IETF track alias) when dropped.
pub(crate) struct Unregister<T: Transport> {
    pub shared: Arc<Shared<T>>,
    pub id: u64,
}

impl<T: Transport> Drop for Unregister<T> {
    fn drop(&mut self) {
        self.shared.upstream.lock().remove(&self.id);
    }
}
