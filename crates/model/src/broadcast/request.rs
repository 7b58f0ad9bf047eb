//! Track requests, and fronts: how a relay keeps a track flowing when the route serving it dies.
//!
//! Readers of a broadcast learned from a peer do not read that peer's copy directly. They read
//! the path's *front*: one broadcast per (path, content identity) owned by the origin (its
//! [`FrontHome`]). The identity is the route's first hop, the original publisher: every route
//! with the same first hop carries the same content, reached another way. Each track a reader
//! opens on the front is a *resumable* track, handed to the best qualifying route's session as
//! a [`TrackRequest`]; that session pulls it. When the session is lost (a crash, a partition, a
//! drained peer closing), the request goes back to the front, which hands the same track to the
//! next best route with the same first hop. The new source starts at the oldest group the lost
//! one left unfinished, continues it at the first frame not yet held, and skips the groups
//! already complete, so readers see no gap and no duplicate. With no qualifying route left the
//! track ends, and the front closes once its last route is gone. Split horizon holds per track:
//! a track is never handed to a route through a peer that reads it from us, and a peer on the
//! route a track is pulled through is refused as its reader (`TrackConsumer::for_peer`).

use std::sync::Arc;

use starling_proto::StreamCode;

use super::BroadcastConsumer;
use crate::route::FrontKey;
use crate::track::TrackProducer;

/// Where a front lives: the origin that hands its tracks to routes. Defined here, with the
/// requests it takes, so the broadcast needs nothing of the origin's.
pub(crate) trait FrontHome: Send + Sync + std::fmt::Debug {
    /// The content this front serves.
    fn key(&self) -> &FrontKey;
    /// Hand `request` to the best route for this front other than `lost`; the request comes
    /// back when no route qualifies.
    fn dispatch(
        &self,
        request: TrackRequest,
        lost: Option<&BroadcastConsumer>,
    ) -> Result<(), TrackRequest>;
}

/// A track a reader asked a dynamic broadcast for, to be pulled by the session that owns the
/// broadcast. A front's request dropped unanswered (its session gone) is handed on like
/// [`source_lost`].
///
/// [`source_lost`]: TrackRequest::source_lost
#[derive(Debug)]
pub struct TrackRequest {
    track: Option<Arc<TrackProducer>>,
    /// The front the track belongs to, and the source it was handed to.
    front: Option<FrontLink>,
}

#[derive(Debug)]
pub(crate) struct FrontLink {
    /// Held while the track is pulled, so later readers find the same front and track.
    pub(crate) front: BroadcastConsumer,
    pub(crate) source: Option<BroadcastConsumer>,
    /// An earlier source served this track.
    pub(crate) handed_over: bool,
}

impl TrackRequest {
    /// A request read by readers of the source broadcast itself.
    pub(crate) fn direct(track: TrackProducer) -> Self {
        TrackRequest {
            track: Some(Arc::new(track)),
            front: None,
        }
    }

    /// A request for a front's track, not yet handed to a source.
    pub(crate) fn fronted(track: TrackProducer, front: BroadcastConsumer) -> Self {
        TrackRequest {
            track: Some(Arc::new(track)),
            front: Some(FrontLink {
                front,
                source: None,
                handed_over: false,
            }),
        }
    }

    pub(crate) fn set_source(&mut self, source: BroadcastConsumer) {
        if let Some(front) = &mut self.front {
            front.source = Some(source);
        }
    }

    /// The track to pull.
    pub fn track(&self) -> &Arc<TrackProducer> {
        self.track.as_ref().expect("a live request holds its track")
    }

    /// Whether an earlier source served this track: the new source must start where it
    /// stopped ([`TrackProducer::resume_point`]) and serve the same track info.
    pub fn is_handover(&self) -> bool {
        self.front.as_ref().is_some_and(|f| f.handed_over)
    }

    /// The track is complete.
    pub fn finish(mut self) {
        if let Some(track) = self.track.take() {
            track.finish();
        }
    }

    /// The track ended for a reason a new source would not change (the publisher refused it,
    /// its info changed, the last reader left).
    pub fn abort(mut self, code: StreamCode) {
        if let Some(track) = self.track.take() {
            track.abort(code);
        }
    }

    /// The source serving the track is gone: a front hands it to its next best route with the
    /// same first hop; with none left, or outside a front, the track ends.
    pub fn source_lost(mut self) {
        if self.front.is_some() {
            self.hand_over();
        } else if let Some(track) = self.track.take() {
            track.abort(StreamCode::Cancelled);
        }
    }

    /// Give a front's track to its next route (a direct request's track just loses this
    /// handle, and closes with its last one).
    fn hand_over(&mut self) {
        let Some(mut front) = self.front.take() else {
            return;
        };
        let Some(track) = self.track.take() else {
            return;
        };
        if track.is_closed() {
            return;
        }
        let lost = front.source.take();
        front.handed_over = true;
        let Some(home) = front.front.home() else {
            return;
        };
        let request = TrackRequest {
            track: Some(track),
            front: Some(front),
        };
        if let Err(mut request) = home.dispatch(request, lost.as_ref()) {
            // No qualifying route: moq-relay ends such a track with INTERNAL_ERROR.
            if let Some(track) = request.track.take() {
                track.abort(StreamCode::Internal);
            }
        }
    }
}

impl Drop for TrackRequest {
    fn drop(&mut self) {
        self.hand_over();
    }
}
