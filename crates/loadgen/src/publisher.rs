//! The publishing side of a run: a broadcast of numbered tracks, primed before the run, then
//! written on a fixed schedule.
//!
//! Priming writes one finished single-frame group (sequence 0, the `prime` flag set) on every
//! track. A new subscription starts at the latest group, so every reader that subscribes
//! before the schedule starts receives exactly that frame: once every reader has, every
//! subscription is live end to end and the measured stream can start without losing its
//! first groups. Frame `k` of the schedule is due at `start + k / fps`; it goes into group
//! `1 + k / group_frames` with its sequence `k` and that due time in its header. A sender
//! running late writes the frame at once but keeps the due time, so lateness is measured.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, GroupProducer, Limits, ModelError, Origin, Route, RouteHandle,
    TrackInfo, TrackProducer,
};
use starling_net::AnyTransport;
use starling_proto::{Path, Role};
use starling_session::{Session, SessionConfig};
use url::Url;

use crate::clock::Clock;
use crate::connect::{ConnectError, Dialer};
use crate::frame::{FrameError, FrameHeader};

/// Why publishing failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("model: {0}")]
    Model(#[from] ModelError),
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    #[error("path: {0}")]
    Path(#[from] starling_proto::PathError),
}

/// The name of track `index`.
pub fn track_name(index: usize) -> String {
    format!("t{index}")
}

/// Broadcasts in a local origin, their tracks primed.
pub struct Publication {
    origin: Origin,
    _broadcasts: Vec<(BroadcastProducer, RouteHandle)>,
    tracks: Vec<TrackProducer>,
}

impl Publication {
    /// Publish `path` with `tracks` tracks (`t0`, `t1`, …) and write each one's prime group
    /// (one frame of `prime_size` bytes).
    pub fn new(
        path: Path,
        tracks: usize,
        info: TrackInfo,
        prime_size: usize,
        clock: &Clock,
    ) -> Result<Self, PublishError> {
        Self::with_broadcasts(vec![path], tracks, info, prime_size, clock)
    }

    /// Publish every path in `paths`, each with `tracks` primed tracks.
    pub fn with_broadcasts(
        paths: Vec<Path>,
        tracks: usize,
        info: TrackInfo,
        prime_size: usize,
        clock: &Clock,
    ) -> Result<Self, PublishError> {
        let origin = Origin::new();
        let now = clock.now_ns();
        let payload = FrameHeader::prime(now).frame(prime_size)?;
        let mut broadcasts = Vec::with_capacity(paths.len());
        let mut producers = Vec::with_capacity(paths.len() * tracks);
        for path in paths {
            let broadcast = BroadcastProducer::new(Limits::default());
            for i in 0..tracks {
                let track = broadcast.create_track(&track_name(i), info);
                let mut group = track.create_group(0)?;
                group.write_frame(Frame {
                    timestamp: now / 1_000_000,
                    payload: payload.clone(),
                })?;
                group.finish();
                producers.push(track);
            }
            let route = origin.publish(path, broadcast.consume(), Route::local())?;
            broadcasts.push((broadcast, route));
        }
        Ok(Publication {
            origin,
            _broadcasts: broadcasts,
            tracks: producers,
        })
    }

    /// The origin to serve to the relay.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Every track, broadcast by broadcast.
    pub fn tracks(&self) -> &[TrackProducer] {
        &self.tracks
    }
}

/// Connect a publisher session serving `origin`. `hidden`: also announce dot-segment paths
/// (`.stats/…`), which only cluster peers hear otherwise.
pub async fn connect_publisher(
    dialer: &Dialer,
    url: &Url,
    origin: &Origin,
    hidden: bool,
) -> Result<Session<AnyTransport>, ConnectError> {
    let mut config = SessionConfig::new(0);
    config.publish = Some(origin.clone());
    config.cluster_peer = hidden;
    dialer.connect(url, Role::Publisher, config).await
}

/// The measured stream's shape.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub fps: f64,
    pub frame_size: usize,
    /// Frames per group (at least 1).
    pub group_frames: u64,
    /// Frames per track; `None`: until stopped.
    pub frames: Option<u64>,
}

impl Schedule {
    /// Nanoseconds between frames.
    pub fn period_ns(&self) -> u64 {
        (1e9 / self.fps.max(1e-3)) as u64
    }

    /// The group frame `k` belongs to (group 0 is the prime group).
    pub fn group_of(&self, k: u64) -> u64 {
        1 + k / self.group_frames.max(1)
    }
}

/// What the schedule wrote on each track.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    pub frames: u64,
    /// The last group written; `None` when no frame was.
    pub last_group: Option<u64>,
}

impl Sent {
    /// The last frame sequence written.
    pub fn last_frame(&self) -> Option<u64> {
        self.frames.checked_sub(1)
    }
}

/// Write `schedule` on every track, frame 0 due at `start_ns`, until it is complete or `stop`
/// resolves. `written` counts frames written per track as they go.
pub async fn run_schedule(
    tracks: &[&TrackProducer],
    schedule: Schedule,
    clock: &Clock,
    start_ns: u64,
    written: &AtomicU64,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Sent, PublishError> {
    tokio::pin!(stop);
    let period = schedule.period_ns();
    let group_frames = schedule.group_frames.max(1);
    let mut open: Vec<Option<GroupProducer>> = tracks.iter().map(|_| None).collect();
    let mut k = 0u64;
    while schedule.frames.is_none_or(|n| k < n) {
        let due = start_ns + k * period;
        tokio::select! {
            biased;
            _ = &mut stop => break,
            _ = tokio::time::sleep_until(clock.instant_at(due).into()) => {}
        }
        let payload: Bytes = FrameHeader::new(k, due).frame(schedule.frame_size)?;
        for (track, slot) in tracks.iter().zip(open.iter_mut()) {
            if k.is_multiple_of(group_frames) {
                if let Some(done) = slot.take() {
                    done.finish();
                }
                *slot = Some(track.create_group(schedule.group_of(k))?);
            }
            if let Some(group) = slot.as_mut() {
                group.write_frame(Frame {
                    timestamp: due / 1_000_000,
                    payload: payload.clone(),
                })?;
            }
        }
        k += 1;
        written.store(k, Ordering::Relaxed);
    }
    for group in open.into_iter().flatten() {
        group.finish();
    }
    Ok(Sent {
        frames: k,
        last_group: k.checked_sub(1).map(|last| schedule.group_of(last)),
    })
}
