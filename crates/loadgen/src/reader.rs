//! Reading one track the way a measuring viewer does: every group at once as it arrives, each
//! frame's header checked, latency and sequence recorded, and a failed group (reset, or a
//! frame that does not decode) counted and skipped while the subscription goes on.
//!
//! Groups are read concurrently within the caller's task (a stuck group never holds back the
//! next). The read ends when the track ends, when `stop` resolves, or once the publisher has
//! said which group was its last and every group from the first through that one has ended
//! here (delivered or failed): the end condition is an event, never a fixed wait.

use std::future::Future;

use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use starling_model::{GroupConsumer, TrackConsumer};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::countdown::Countdown;
use crate::frame::FrameHeader;
use crate::loss::SeqTracker;
use crate::recorder::Recorder;

/// Called with every measured frame's header and arrival time (ns since the epoch).
pub type FrameHook = dyn Fn(&FrameHeader, u64) + Send + Sync;

/// Where a reader records, and who it tells about its first frame.
pub struct ReadContext<'a> {
    pub clock: &'a Clock,
    pub recorder: &'a Recorder,
    /// Counted down once, at this track's first frame (prime or measured).
    pub ready: Option<&'a Countdown>,
    pub on_frame: Option<&'a FrameHook>,
}

/// What one reader saw of one track.
#[derive(Clone, Debug)]
pub struct TrackRead {
    /// Measured frames by sequence.
    pub frames: SeqTracker,
    /// Groups that ended here (delivered or failed), by group sequence.
    pub groups: SeqTracker,
    /// When the first frame of any kind arrived (ns since the epoch).
    pub first_frame_ns: Option<u64>,
}

impl TrackRead {
    pub fn new(frames: SeqTracker, groups: SeqTracker) -> Self {
        TrackRead {
            frames,
            groups,
            first_frame_ns: None,
        }
    }

    /// A reader subscribed before the run: every frame and group from 0 is expected.
    pub fn from_start() -> Self {
        Self::new(SeqTracker::expecting_from(0), SeqTracker::expecting_from(0))
    }

    /// A late joiner: expectations start at what it first sees.
    pub fn late() -> Self {
        Self::new(SeqTracker::new(), SeqTracker::new())
    }
}

/// Frame-level state shared by the concurrent group reads.
struct Shared {
    frames: SeqTracker,
    first_frame_ns: Option<u64>,
}

/// Read `track` until it ends, `stop` resolves, or every group through the last one named
/// on `last_group` has ended.
pub async fn read_track(
    mut track: TrackConsumer,
    ctx: &ReadContext<'_>,
    read: TrackRead,
    mut last_group: watch::Receiver<Option<u64>>,
    stop: impl Future<Output = ()>,
) -> TrackRead {
    tokio::pin!(stop);
    let TrackRead {
        frames,
        mut groups,
        first_frame_ns,
    } = read;
    let shared = Mutex::new(Shared {
        frames,
        first_frame_ns,
    });
    let mut reading = FuturesUnordered::new();
    let mut track_open = true;
    let mut watching = true;
    let complete = |groups: &SeqTracker, last: &watch::Receiver<Option<u64>>| {
        last.borrow()
            .is_some_and(|last| groups.is_complete_through(last))
    };
    while !complete(&groups, &last_group) && (track_open || !reading.is_empty()) {
        tokio::select! {
            _ = &mut stop => break,
            next = track.next_group(), if track_open => match next {
                Ok(Some(group)) => reading.push(read_group(group, ctx, &shared)),
                Ok(None) => track_open = false,
                Err(code) => {
                    ctx.recorder.errors.count(&format!("track_failed:{code:?}"));
                    track_open = false;
                }
            },
            Some(sequence) = reading.next() => {
                groups.record(sequence);
            }
            changed = last_group.changed(), if watching => {
                if changed.is_err() {
                    watching = false;
                }
            }
        }
    }
    drop(reading);
    let shared = shared.into_inner();
    TrackRead {
        frames: shared.frames,
        groups,
        first_frame_ns: shared.first_frame_ns,
    }
}

/// Read one group to its end; returns its sequence. A reset or a frame that does not decode
/// fails the group: counted, and the rest of the group skipped.
async fn read_group(
    mut group: GroupConsumer,
    ctx: &ReadContext<'_>,
    shared: &Mutex<Shared>,
) -> u64 {
    let sequence = group.sequence();
    let recorder = ctx.recorder;
    let failed = loop {
        match group.next_frame().await {
            Ok(Some(frame)) => {
                let now = ctx.clock.now_ns();
                let header = match FrameHeader::decode(&frame.payload) {
                    Ok(header) => header,
                    Err(err) => {
                        recorder.errors.count(err.kind());
                        break true;
                    }
                };
                let first = {
                    let mut shared = shared.lock();
                    if !header.prime {
                        shared.frames.record(header.sequence);
                    }
                    let first = shared.first_frame_ns.is_none();
                    if first {
                        shared.first_frame_ns = Some(now);
                    }
                    first
                };
                if first {
                    if let Some(ready) = ctx.ready {
                        ready.count_down();
                    }
                }
                if !header.prime {
                    recorder
                        .delivery
                        .record(now.saturating_sub(header.scheduled_ns));
                    Recorder::bump(&recorder.frames, 1);
                    Recorder::bump(&recorder.bytes, frame.payload.len() as u64);
                    recorder.delivered_at(now);
                    if let Some(hook) = ctx.on_frame {
                        hook(&header, now);
                    }
                }
            }
            Ok(None) => break false,
            Err(code) => {
                recorder.errors.count(&format!("group_reset:{code:?}"));
                break true;
            }
        }
    };
    Recorder::bump(&recorder.groups, 1);
    if failed {
        Recorder::bump(&recorder.groups_failed, 1);
    }
    sequence
}
