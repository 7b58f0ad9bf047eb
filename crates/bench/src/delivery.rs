//! The delivery shape: one publisher -> one relay -> N viewers, 1 KB frames on a 30 fps
//! timeline in 1-second groups.
//!
//! The publisher is a client session whose origin holds one broadcast with one video track; the
//! relay accepts it and every viewer. Viewers subscribe without waiting for announcements
//! (`Session::consume_broadcast`), each read by its own task that checks every frame's timestamp
//! and size. Nothing sleeps: [`Delivery::frame`] writes the next frame and returns once every
//! viewer has it, so the bench runs as fast as the pipeline drains while the timestamps still
//! follow the 30 fps schedule.

use std::sync::Arc;

use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, GroupProducer, Origin, Route, RouteHandle, StartAt, TrackConsumer,
    TrackInfo, TrackProducer,
};
use starling_proto::{Path, SessionCode};
use starling_session::{random_hop, Session, SessionConfig};
use starling_transport::mem::MemTransport;
use tokio::task::JoinHandle;

use crate::mesh::{cache_limits, session_limits, Relay};
use crate::routes::wait_routes;
use crate::{Error, Tally};

/// Payload bytes of every frame.
pub const FRAME_BYTES: usize = 1024;
/// Frames per group: one second at 30 fps.
pub const GOP_FRAMES: u64 = 30;
const TRACK: &str = "video";

/// Presentation time of frame `index` in milliseconds (the track's timescale).
fn timestamp(index: u64) -> u64 {
    index * 1000 / 30
}

/// One publisher, one relay, N viewers, ready to deliver frames.
pub struct Delivery {
    relay: Relay,
    _origin: Origin,
    _broadcast: BroadcastProducer,
    _route: RouteHandle,
    track: TrackProducer,
    group: Option<GroupProducer>,
    /// Index of the open group's first frame.
    group_start: u64,
    payload: Bytes,
    publisher: Session<MemTransport>,
    viewer_sessions: Vec<Session<MemTransport>>,
    viewers: Vec<JoinHandle<()>>,
    tally: Arc<Tally>,
    frames: u64,
}

impl Delivery {
    /// Build the topology with `viewers` viewers and deliver the first frame to all of them, so
    /// every subscription is live when this returns.
    pub async fn setup(
        viewers: usize,
        version: impl Into<starling_proto::Protocol>,
    ) -> Result<Self, Error> {
        let version = version.into();
        if viewers == 0 {
            return Err(Error::Shape("no viewers"));
        }
        let mut relay = Relay::on(version);
        let name = Path::new("live/cam")?;

        let origin = Origin::new();
        let broadcast = BroadcastProducer::new(cache_limits());
        let track = broadcast.create_track(TRACK, TrackInfo::default());
        let route = origin.publish(name.clone(), broadcast.consume(), Route::local())?;
        let mut config = client_config();
        config.publish = Some(origin.clone());
        let publisher = relay.accept(config).await?;
        wait_routes(&relay.origin, std::slice::from_ref(&name), |_, _| true).await?;

        let tally = Arc::new(Tally::new(viewers));
        let mut viewer_sessions = Vec::with_capacity(viewers);
        let mut tasks = Vec::with_capacity(viewers);
        for slot in 0..viewers {
            let session = relay.accept(client_config()).await?;
            let reader = session
                .consume_broadcast(name.clone())
                .subscribe_track(TRACK, StartAt::default())
                .map_err(Error::Subscribe)?;
            tasks.push(tokio::spawn(view(reader, slot, tally.clone())));
            viewer_sessions.push(session);
        }

        let mut delivery = Delivery {
            relay,
            _origin: origin,
            _broadcast: broadcast,
            _route: route,
            track,
            group: None,
            group_start: 0,
            payload: Bytes::from(vec![0x5a; FRAME_BYTES]),
            publisher,
            viewer_sessions,
            viewers: tasks,
            tally,
            frames: 0,
        };
        delivery.frame().await?;
        Ok(delivery)
    }

    /// Write the next frame (starting a new group every [`GOP_FRAMES`]) and wait until every
    /// viewer received it.
    pub async fn frame(&mut self) -> Result<(), Error> {
        let index = self.frames;
        let group = match self.group.take() {
            // A group ends after GOP_FRAMES frames; the next frame starts the next group.
            Some(group) if index - self.group_start < GOP_FRAMES => group,
            ended => {
                if let Some(ended) = ended {
                    ended.finish();
                }
                self.group_start = index;
                self.track.append_group()?
            }
        };
        let group = self.group.insert(group);
        group.write_frame(Frame {
            timestamp: timestamp(index),
            payload: self.payload.clone(),
        })?;
        self.frames += 1;
        self.tally
            .wait_for(self.frames * self.viewers.len() as u64)
            .await
    }

    pub fn viewers(&self) -> usize {
        self.viewers.len()
    }

    /// Frames written so far (each delivered to every viewer once `frame` returned).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Stop the viewers and close every session.
    pub fn close(&mut self) {
        for task in self.viewers.drain(..) {
            task.abort();
        }
        for session in self.viewer_sessions.drain(..) {
            session.close(SessionCode::NoError, "bench over");
        }
        self.publisher.close(SessionCode::NoError, "bench over");
        self.relay.close();
    }
}

fn client_config() -> SessionConfig {
    let mut config = SessionConfig::new(random_hop());
    config.limits = session_limits();
    config.model_limits = cache_limits();
    config
}

/// One viewer: every frame of every group, in order, each counted in `slot`.
async fn view(mut track: TrackConsumer, slot: usize, tally: Arc<Tally>) {
    let mut next: Option<u64> = None;
    loop {
        let mut group = match track.next_group().await {
            Ok(Some(group)) => group,
            Ok(None) => return,
            Err(_) => return tally.error(),
        };
        loop {
            match group.next_frame().await {
                Ok(Some(frame)) => {
                    // The first frame fixes where this viewer joined; after it, no gaps.
                    let index = next.unwrap_or(0);
                    if frame.timestamp != timestamp(index) || frame.payload.len() != FRAME_BYTES {
                        tally.error();
                    }
                    next = Some(index + 1);
                    tally.add(slot);
                }
                Ok(None) => break,
                Err(_) => return tally.error(),
            }
        }
    }
}
