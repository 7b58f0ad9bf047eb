//! What pulling a track from the peer takes whatever the wire: the loop that answers a
//! broadcast's track requests with one pull each, the engine that runs an open upstream
//! subscription to its end ([`follow`]), how a pull ends, and the helpers both families' pulls
//! share (the linger before unsubscribing, the grace after the publisher unannounced, the
//! registration of an upstream subscription). Each family opens its subscription its own way
//! (a [`Puller`]) and hands the engine a [`PullWire`]: lite's in `subscriber`, the IETF
//! drafts' in `ietf`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use starling_model::{BroadcastProducer, Demand, TrackProducer, TrackRequest};
use starling_proto::{Path, StreamCode};
use starling_transport::Transport;

use crate::error::Error;
use crate::shared::{reset_code, Shared};

/// One family's pull of one track: SUBSCRIBE (or its draft's equivalent) until the track ends
/// or no reader is left.
pub(crate) trait Puller<T: Transport>: Clone + Send + Sync + 'static {
    fn pull<'a>(
        self,
        shared: &'a Arc<Shared<T>>,
        wire: &'a Path,
        request: &'a TrackRequest,
    ) -> impl Future<Output = Result<Pulled, Error>> + Send + 'a;
}

/// An open upstream subscription as the engine sees it, whatever the wire.
pub(crate) trait PullWire: Send {
    /// The publisher's next word: `None` to go on, or how the subscription ends. Must be
    /// cancel-safe (the engine selects over it).
    fn next(&mut self) -> impl Future<Output = Result<Option<PullEnd>, Error>> + Send;
    /// The readers' demand changed.
    fn update(&mut self, demand: Demand) -> impl Future<Output = Result<(), Error>> + Send;
    /// The owed groups arrived or their grace ran out after the publisher ended.
    fn ended(&mut self);
    /// We end the subscription (no reader left, or the track ended here).
    fn unsubscribe(self) -> impl Future<Output = Result<(), Error>> + Send;
}

/// How the publisher ended a subscription: group streams it opened before its end may
/// still be on their way (QUIC does not order streams), so the pull waits for what it owes,
/// within a grace, before it answers.
pub(crate) struct PullEnd {
    /// Resolves once every owed group stream arrived.
    pub owed: Pin<Box<dyn Future<Output = ()> + Send>>,
    pub grace: Duration,
    /// The answer once everything owed arrived (or the last reader left meanwhile).
    pub settled: Result<Pulled, Error>,
    /// The answer when the grace ran out first.
    pub unsettled: Result<Pulled, Error>,
}

/// Run an open upstream subscription until the publisher ends it, no reader is left within
/// the linger (`unused`), the track ends here, or its front stays gone past the grace.
/// Readers' demand goes upstream as it changes, starting from `demand`.
pub(crate) async fn follow<W: PullWire>(
    mut wire: W,
    track: &TrackProducer,
    mut demand: Demand,
    mut unused: Pin<&mut impl Future<Output = ()>>,
) -> Result<Pulled, Error> {
    let mut front_gone = std::pin::pin!(front_gone_grace(track));
    loop {
        tokio::select! {
            biased;
            said = wire.next() => {
                let Some(end) = said? else { continue };
                let settled = tokio::select! {
                    biased;
                    _ = end.owed => true,
                    _ = tokio::time::sleep(end.grace) => false,
                    _ = &mut unused => true,
                };
                wire.ended();
                if !settled {
                    tracing::debug!(track = track.name(), "owed group streams never arrived");
                }
                return if settled { end.settled } else { end.unsettled };
            }
            now = track.demand_changed(Some(demand)) => {
                demand = now;
                wire.update(demand).await?;
            }
            _ = &mut unused => {
                wire.unsubscribe().await?;
                return Ok(Pulled::Unused);
            }
            _ = track.closed() => {
                // Ended here (its front closed with the last route).
                wire.unsubscribe().await?;
                return Ok(Pulled::Unused);
            }
            _ = &mut front_gone => {
                // The track did not end within the grace: it ends here, as a front's
                // tracks do with its last route.
                wire.unsubscribe().await?;
                return Err(Error::Stream(StreamCode::Internal));
            }
        }
    }
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
        let puller = puller.clone();
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
#[derive(Clone, Copy, Debug)]
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
