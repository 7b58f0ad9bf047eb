//! Serving one lite SUBSCRIBE (docs/wire.md §4.6–4.8): where delivery starts, the frame and
//! group bounds, the answers on the subscribe stream, and the group streams' bytes. The
//! serving itself (groups in flight, priority, cancel, the end) is `crate::serve`'s, shared
//! with the IETF drafts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use starling_model::{GroupConsumer, StartAt, TrackConsumer};
use starling_proto::{
    GroupHeader, LegacySubscribeOk, StreamCode, Subscribe, SubscribeResponse, SubscribeUpdate,
    UniType, Version,
};
use starling_transport::Transport;
use tokio::sync::watch;

use crate::error::Error;
use crate::frames::{forward_group, FrameWriter};
use crate::reader::Reader;
use crate::serve::{self, Event, Events, Failure, GroupWire, Place, ServeWire, Urgency};
use crate::shared::Shared;
use crate::violation::Violation;
use crate::writer::Writer;

/// Where delivery starts for a SUBSCRIBE of this version (docs/wire.md §4.6 "Where delivery starts").
pub(crate) fn start_of(version: Version, msg: &Subscribe) -> StartAt {
    if version.resolves_start() {
        StartAt {
            max_age_ms: msg.max_age_ms,
            latest: false,
            floor: msg.group_start,
            priority: msg.priority,
        }
    } else {
        match msg.group_start {
            // lite-05: absent start pins the latest group.
            // lite-05: an absent start pins the latest group; a start reaches back to it.
            None => StartAt {
                max_age_ms: msg.max_age_ms,
                latest: true,
                floor: None,
                priority: msg.priority,
            },
            Some(start) => StartAt {
                max_age_ms: msg.max_age_ms.max(u64::MAX / 4),
                latest: false,
                floor: Some(start),
                priority: msg.priority,
            },
        }
    }
}

/// A subscription's start and end bounds (docs/wire.md §4.6 "Frame bounds").
struct Bounds {
    group_start: Option<u64>,
    frame_start: u64,
    group_end: Option<u64>,
    frame_end: Option<u64>,
}

impl Bounds {
    fn of(msg: &Subscribe) -> Self {
        Bounds {
            group_start: msg.group_start,
            frame_start: msg.frame_start,
            group_end: msg.group_end,
            frame_end: msg.frame_end,
        }
    }

    fn update(&mut self, update: &SubscribeUpdate) {
        self.group_start = update.group_start;
        self.frame_start = update.frame_start;
        self.group_end = update.group_end;
        self.frame_end = update.frame_end;
    }

    /// Whether a group is under the serving cap.
    fn within(&self, sequence: u64) -> bool {
        self.group_end.is_none_or(|end| sequence <= end)
    }

    /// Position a group on its first frame; the last frame to send, if bounded. Frame bounds
    /// qualify only the start and end groups; groups in between go whole.
    fn apply(&self, mut group: GroupConsumer) -> (GroupConsumer, Option<u64>) {
        let sequence = group.sequence();
        if self.group_start == Some(sequence) && self.frame_start > 0 {
            group.seek(self.frame_start as usize);
        }
        let last = if self.group_end == Some(sequence) {
            self.frame_end
        } else {
            None
        };
        (group, last)
    }
}

pub(crate) async fn subscribe<T: Transport>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    let Some(msg) = reader
        .message::<Subscribe>(limits.max_control_message)
        .await
        .map_err(|_| Error::Stream(StreamCode::Cancelled))?
    else {
        return Ok(()); // SUBSCRIBE then FIN before anything: nothing to do
    };
    let _slot = shared
        .take_slot(
            &shared.served_subscriptions,
            limits.max_served_subscriptions,
            crate::Held::Subscription,
        )
        .ok_or(Error::Bound("served subscriptions"))?;
    let mut track = resolve(
        shared,
        &msg.broadcast,
        &msg.track,
        Some(start_of(shared.version, &msg)),
    )?;
    // By reference: what an `async fn` takes by value it holds twice for the subscription's
    // life (its argument and the local it moves into).
    serve(shared, reader, writer, &msg, &mut track).await
}

/// Find the broadcast for a wire path and read one of its tracks from `start`, or only watch
/// it for its info (`None`: TRACK and FETCH, which add no demand upstream).
pub(crate) fn resolve<T: Transport>(
    shared: &Arc<Shared<T>>,
    broadcast: &starling_proto::Path,
    track: &str,
    start: Option<StartAt>,
) -> Result<TrackConsumer, Error> {
    let origin = shared
        .config
        .publish
        .as_ref()
        .ok_or(Error::Stream(StreamCode::Unroutable))?;
    if !shared.config.may_subscribe(broadcast) {
        // Outside the peer's grant: indistinguishable from a path with no route.
        return Err(Error::Stream(StreamCode::Unroutable));
    }
    let path = shared
        .absolute(broadcast)
        .map_err(|_| Error::Stream(StreamCode::Unroutable))?;
    let broadcast = origin
        .consume(&path, shared.peer.exclude_hop())
        .ok_or(Error::Stream(StreamCode::Unroutable))?;
    match start {
        Some(start) => broadcast.subscribe_track(track, start),
        None => broadcast.watch_track(track),
    }
    // While this peer reads, the track is never pulled through it (split horizon); a peer the
    // track is pulled through now is refused.
    .and_then(|track| track.for_peer(shared.peer.exclude_hop()))
    .map_err(|code| match code {
        // A track name past the bound: the peer's fault, counted as such.
        StreamCode::MalformedTrack => Error::ProtocolViolation(Violation::TrackNameTooLong),
        code => Error::Stream(code),
    })
}

async fn serve<T: Transport>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
    msg: &Subscribe,
    track: &mut TrackConsumer,
) -> Result<(), Error> {
    let version = shared.version;
    let legacy = !version.has_track_stream();
    if legacy {
        // Before 05 the subscription is answered with one OK as soon as it is served (typed
        // from 03, untyped on 01/02), carrying nothing but the priority, as moq-net sends it;
        // its end is the stream's FIN.
        if version.has_typed_responses() {
            writer
                .typed(&SubscribeResponse::Ok {
                    priority: msg.priority,
                    max_age_ms: 0,
                    start: None,
                    end: None,
                })
                .await?;
        } else {
            writer
                .message(&LegacySubscribeOk {
                    priority: msg.priority,
                })
                .await?;
        }
    }
    let mut wire = LiteServe {
        writer,
        version,
        id: msg.id,
        bounds: Bounds::of(msg),
        held: VecDeque::new(),
        max_held: shared.config.limits.max_inflight_groups.max(1),
    };
    let mut events = LiteEvents {
        reader,
        version,
        max: shared.config.limits.max_control_message,
    };
    serve::serve(shared, &mut wire, &mut events, track, msg.priority).await
}

/// A lite subscriber's events: SUBSCRIBE_UPDATEs on its subscribe stream, then its FIN.
struct LiteEvents<'a, R: starling_transport::RecvStream> {
    reader: &'a mut Reader<R>,
    version: Version,
    max: usize,
}

impl<R: starling_transport::RecvStream> Events for LiteEvents<'_, R> {
    type Update = SubscribeUpdate;

    /// The subscriber's next SUBSCRIBE_UPDATE; on 01/02, which have none, only its FIN (any
    /// byte is a protocol violation). The FIN cancels.
    async fn next(&mut self) -> Result<Event<SubscribeUpdate>, Error> {
        let update = if self.version.has_subscribe_update() {
            self.reader.message::<SubscribeUpdate>(self.max).await?
        } else {
            self.reader.finished().await.map(|()| None)?
        };
        Ok(match update {
            Some(update) => Event::Update(update),
            None => Event::Cancel(StreamCode::Cancelled),
        })
    }
}

/// A lite subscription as [`serve::serve`] serves it: its bounds (Group End is a serving cap,
/// not a terminator: groups above it wait, bounded, for an update to raise it), the START
/// before its first group (05 on), and SUBSCRIBE_END (05 on) or the FIN at its end.
struct LiteServe<'a, S: starling_transport::SendStream> {
    writer: &'a mut Writer<S>,
    version: Version,
    id: u64,
    bounds: Bounds,
    held: VecDeque<GroupConsumer>,
    max_held: usize,
}

impl<T: Transport> ServeWire<T, LiteEvents<'_, T::Recv>> for LiteServe<'_, T::Send> {
    type Groups = LiteGroups;

    fn groups(&self) -> LiteGroups {
        LiteGroups { id: self.id }
    }

    /// New bounds: every held group is placed again under them.
    fn update(&mut self, update: SubscribeUpdate) -> (Option<u8>, Vec<GroupConsumer>) {
        self.bounds.update(&update);
        (Some(update.priority), self.held.drain(..).collect())
    }

    fn place(&mut self, group: GroupConsumer) -> Place {
        if !self.bounds.within(group.sequence()) {
            if self.held.len() >= self.max_held {
                self.held.pop_front();
            }
            self.held.push_back(group);
            return Place::Held;
        }
        let (group, last) = self.bounds.apply(group);
        Place::Serve(group, last)
    }

    async fn starting(&mut self, sequence: u64) -> Result<(), Error> {
        // Before 05 the OK went out before serving began.
        if self.version.has_track_stream() {
            let start = SubscribeResponse::Start { group: sequence };
            self.writer.typed(&start).await?;
        }
        Ok(())
    }

    fn end_after_streams(&self) -> bool {
        // Before 05 only the FIN tells the end; lite-07's END counts the streams.
        !self.version.has_track_stream() || self.version.has_stream_count()
    }

    async fn ended(
        &mut self,
        _shared: &Shared<T>,
        _events: &mut LiteEvents<'_, T::Recv>,
        end: Option<u64>,
        last_started: Option<u64>,
        opened: &AtomicU64,
    ) -> Result<(), Error> {
        if !self.version.has_track_stream() {
            return Ok(()); // no END before 05
        }
        let end = end.unwrap_or_else(|| last_started.map_or(0, |s| s + 1));
        let streams = self
            .version
            .has_stream_count()
            .then(|| opened.load(Ordering::Relaxed));
        self.writer
            .typed(&SubscribeResponse::End {
                group: end,
                streams,
            })
            .await
    }

    async fn closed(&mut self, events: &mut LiteEvents<'_, T::Recv>) -> Result<(), Error> {
        self.writer.finish()?;
        // Hold our side until the subscriber FINs or resets.
        let _ = events.reader.finished().await;
        Ok(())
    }

    fn cancelled(&mut self, _events: &mut LiteEvents<'_, T::Recv>) -> Result<(), Error> {
        // The subscriber FIN'd: FIN our side.
        self.writer.finish()
    }

    fn abort_code(&self, failure: &Failure) -> StreamCode {
        match failure {
            Failure::Track(code) => *code,
            Failure::Refused => StreamCode::Cancelled,
            Failure::Session(err) => err.stream_code(),
        }
    }

    async fn failed(
        &mut self,
        _events: &mut LiteEvents<'_, T::Recv>,
        failure: Failure,
        _opened: &AtomicU64,
    ) -> Result<(), Error> {
        Err(match failure {
            Failure::Track(code) => Error::Stream(code),
            Failure::Refused => Error::Stream(StreamCode::Cancelled),
            Failure::Session(err) => err,
        })
    }
}

/// How a lite group goes out: GROUP, its header, then each frame.
#[derive(Clone, Copy)]
struct LiteGroups {
    /// The subscription's id, named by every group header.
    id: u64,
}

impl<T: Transport> GroupWire<T> for LiteGroups {
    const REPRIORITIZES: bool = true;

    async fn write(
        &self,
        shared: &Shared<T>,
        writer: &mut Writer<T::Send>,
        group: &mut GroupConsumer,
        last_frame: Option<u64>,
        urgency: Option<&mut watch::Receiver<Urgency>>,
    ) -> Result<(), StreamCode> {
        write_group(shared, writer, self.id, group, last_frame, urgency).await
    }

    fn reset_code(&self, code: StreamCode) -> u32 {
        code.to_code()
    }
}

async fn write_group<T: Transport>(
    shared: &Shared<T>,
    writer: &mut Writer<T::Send>,
    subscribe_id: u64,
    group: &mut GroupConsumer,
    last_frame: Option<u64>,
    mut priority: Option<&mut watch::Receiver<Urgency>>,
) -> Result<(), StreamCode> {
    let header = GroupHeader {
        subscribe_id,
        sequence: group.sequence(),
        frame_start: group.frame_index() as u64,
    };
    writer
        .queue_varint(UniType::Group.code())
        .and_then(|_| writer.queue(&header))
        .map_err(|_| StreamCode::Internal)?;
    let sequence = group.sequence();
    let mut frames_out = FrameWriter::default();
    let head = |writer: &mut Writer<T::Send>, timestamp, size| {
        // A SUBSCRIBE_UPDATE re-prioritizes in-flight streams at the next frame.
        if let Some(priority) = priority
            .as_mut()
            .filter(|p| p.has_changed().unwrap_or(false))
        {
            writer.set_priority(priority.borrow_and_update().order(sequence));
        }
        frames_out.queue_head(writer, timestamp, size)
    };
    forward_group(writer, group, last_frame, head, |size| {
        shared.stats.frames_sent.fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .bytes_sent
            .fetch_add(size as u64, Ordering::Relaxed);
    })
    .await
}
