//! Serving one SUBSCRIBE: reading the shared track at this subscriber's cursor and writing each
//! group on its own stream, newest first (docs/wire.md §4.6–4.8).
//!
//! Every group stream is its own future, driven from the subscription's task
//! (`crate::inflight`), so a subscriber that reads slowly stalls only its own streams; the
//! shared cache and other subscribers never wait for it. A subscription keeps a
//! bounded number of group streams in flight: when a newer group starts beyond the bound, the
//! oldest stream is reset with TOO_FAR_BEHIND, and a group that leaves the cache while being
//! written is reset with the code it left with (OLD or EVICTED).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use starling_model::{GroupConsumer, StartAt, TrackConsumer};
use starling_proto::{
    GroupHeader, LegacySubscribeOk, StreamCode, Subscribe, SubscribeResponse, SubscribeUpdate,
    UniType, Version,
};
use starling_transport::Transport;

use crate::error::Error;
use crate::frames::FrameWriter;
use crate::gate::Gate;
use crate::inflight::InFlight;
use crate::reader::Reader;
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

/// The span of group ranks within one priority (23 bits).
const SPAN: u64 = 0x7f_ffff;

/// QUIC send order: subscriber priority first, then newer groups first, ranked by how far a
/// group is past the subscription's `base` sequence. Relative, so it does not wrap whatever the
/// publisher numbers its groups with (a clock in milliseconds, say): the subscription moves its
/// base up as its groups approach the top of the span (see [`Urgency::started`]).
pub(crate) fn send_order(priority: u8, sequence: u64, base: u64) -> i32 {
    let rank = sequence.saturating_sub(base).min(SPAN);
    ((priority as i32) << 23) | rank as i32
}

/// What orders a subscription's group streams: its priority, and the base its groups are
/// ranked from.
#[derive(Clone, Copy, Debug)]
struct Urgency {
    priority: u8,
    base: Option<u64>,
}

impl Urgency {
    fn order(&self, sequence: u64) -> i32 {
        send_order(self.priority, sequence, self.base.unwrap_or(0))
    }

    /// A base for a group about to start, when the current one no longer ranks it well:
    /// a quarter span below it, so late older groups still rank below it, and a quarter span
    /// of headroom is left before the next move.
    fn rebased(&self, sequence: u64) -> Option<u64> {
        match self.base {
            Some(base) if sequence.saturating_sub(base) <= SPAN / 2 => None,
            _ => Some(sequence.saturating_sub(SPAN / 4)),
        }
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
    let track = resolve(
        shared,
        &msg.broadcast,
        &msg.track,
        Some(start_of(shared.version, &msg)),
    )?;
    serve(shared, reader, writer, msg, track).await
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
    msg: Subscribe,
    mut track: TrackConsumer,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    let version = shared.version;
    // In-flight group streams follow the subscription's priority as updates change it, and
    // rank below each newer group as it starts.
    let (priority_tx, priority) = tokio::sync::watch::channel(Urgency {
        priority: msg.priority,
        base: None,
    });
    let mut bounds = Bounds::of(&msg);
    let mut started = false;
    // Group streams opened for this subscription (lite-07's SUBSCRIBE_END carries the count).
    let opened = AtomicU64::new(0);
    let mut inflight = InFlight::new(limits.max_inflight_groups);
    // Groups above the serving cap wait here (bounded) until an update raises the cap.
    let mut held: VecDeque<GroupConsumer> = VecDeque::new();
    let start = |group: GroupConsumer, bounds: &Bounds, inflight: &mut InFlight<_>| {
        let (group, last_frame) = bounds.apply(group);
        // Rare (every few million groups): streams in flight take the new base at their next
        // frame.
        let rebased = priority_tx.borrow().rebased(group.sequence());
        if let Some(base) = rebased {
            priority_tx.send_modify(|u| u.base = Some(base));
        }
        let mut priority = priority.clone();
        let sequence = group.sequence();
        let order = priority.borrow_and_update().order(sequence);
        let opened = &opened;
        let skipped = inflight.start(sequence, |stop| async move {
            let mut group = group;
            let write = async |writer: &mut Writer<T::Send>| {
                write_group(
                    shared,
                    writer,
                    msg.id,
                    &mut group,
                    last_frame,
                    &mut priority,
                )
                .await
            };
            shared
                .send_group(sequence, &stop, opened, order, write, StreamCode::to_code)
                .await
        });
        shared
            .stats
            .groups_skipped
            .fetch_add(skipped, Ordering::Relaxed);
    };

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
        started = true;
    }
    // The control stream and the track are polled only when they woke the task, not on the
    // wakes of the group sends (one per frame per stream).
    let (mut control_gate, mut track_gate) = (Gate::default(), Gate::default());
    let mut control = Box::pin(update_on(reader, version, limits.max_control_message));
    // The track itself ended in error (rather than the subscriber's stream).
    let mut track_failed = false;
    let outcome: Result<Option<u64>, Error> = loop {
        tokio::select! {
            biased;
            (reader, update) = control_gate.future(control.as_mut()) => {
                control.set(update_on(reader, version, limits.max_control_message));
                match update {
                    Ok(Some(update)) => {
                        priority_tx.send_modify(|u| u.priority = update.priority);
                        bounds.update(&update);
                        let (ready, still): (Vec<_>, Vec<_>) =
                            held.drain(..).partition(|g| bounds.within(g.sequence()));
                        held.extend(still);
                        for group in ready {
                            start(group, &bounds, &mut inflight);
                        }
                    }
                    Ok(None) => {
                        // The subscriber FIN'd: stop, reset what is in flight, FIN our side.
                        inflight.abort_all(StreamCode::Cancelled);
                        inflight.drain().await;
                        writer.finish()?;
                        return Ok(());
                    }
                    Err(err) => break Err(err),
                }
            }
            next = track_gate.wait(|cx| track.poll_group(cx)) => {
                tracing::trace!(id = msg.id, next = ?next.as_ref().map(|g| g.as_ref().map(|g| g.sequence())), "subscription group");
                match next {
                    Ok(Some(group)) => {
                        if !bounds.within(group.sequence()) {
                            // Group End is a serving cap, not a terminator (docs/wire.md §4.6).
                            if held.len() >= limits.max_inflight_groups.max(1) {
                                held.pop_front();
                            }
                            held.push_back(group);
                            continue;
                        }
                        if !started {
                            started = true;
                            writer.typed(&SubscribeResponse::Start { group: group.sequence() }).await?;
                        }
                        start(group, &bounds, &mut inflight);
                    }
                    Ok(None) => break Ok(track.end()),
                    Err(code) => {
                        track_failed = true;
                        break Err(Error::Stream(code));
                    }
                }
            }
            _ = inflight.next() => {}
        }
    };
    drop(control);

    match outcome {
        Ok(end) => {
            // The track finished: announce the exclusive end, let in-flight groups complete.
            // On lite-07 the END also counts the group streams opened for the subscription,
            // so it goes once every one of them has been opened (here: has ended).
            let end = end.unwrap_or_else(|| inflight.last_started().map_or(0, |s| s + 1));
            if legacy {
                // No END before 05: the groups in flight complete, then the FIN says it.
                inflight.drain().await;
                writer.finish()?;
                let _ = reader.finished().await;
                return Ok(());
            }
            if version.has_stream_count() {
                inflight.drain().await;
            }
            let streams = version
                .has_stream_count()
                .then(|| opened.load(Ordering::Relaxed));
            writer
                .typed(&SubscribeResponse::End {
                    group: end,
                    streams,
                })
                .await?;
            inflight.drain().await;
            writer.finish()?;
            // Hold our side until the subscriber FINs or resets.
            let _ = reader.finished().await;
            Ok(())
        }
        Err(err) => {
            if track_failed {
                inflight.finish_whole(&track, err.stream_code()).await;
            } else {
                inflight.abort_all(err.stream_code());
                inflight.drain().await;
            }
            Err(err)
        }
    }
}

/// The next SUBSCRIBE_UPDATE as a future that owns the reader's borrow and hands it back with
/// the update, so the subscription keeps one such future across its loop and makes the next
/// from what the last returned.
async fn update_on<R: starling_transport::RecvStream>(
    reader: &mut Reader<R>,
    version: Version,
    max: usize,
) -> (&mut Reader<R>, Result<Option<SubscribeUpdate>, Error>) {
    let update = next_update(reader, version, max).await;
    (reader, update)
}

/// The subscriber's next SUBSCRIBE_UPDATE; on 01/02, which have none, only its FIN (any byte
/// is a protocol violation).
async fn next_update<R: starling_transport::RecvStream>(
    reader: &mut Reader<R>,
    version: Version,
    max: usize,
) -> Result<Option<SubscribeUpdate>, Error> {
    if version.has_subscribe_update() {
        reader.message::<SubscribeUpdate>(max).await
    } else {
        reader.finished().await.map(|()| None)
    }
}

async fn write_group<T: Transport>(
    shared: &Shared<T>,
    writer: &mut Writer<T::Send>,
    subscribe_id: u64,
    group: &mut GroupConsumer,
    last_frame: Option<u64>,
    priority: &mut tokio::sync::watch::Receiver<Urgency>,
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
    let mut frames_out = FrameWriter::default();
    let mut index = header.frame_start;
    let mut frames = Vec::new();
    loop {
        let mut done = poll_fn(|cx| group.poll_frames(cx, &mut frames)).await?;
        if let Some(last) = last_frame {
            // Frame End bounds the end group: stop after the last requested frame.
            let room = (last + 1).saturating_sub(index) as usize;
            if frames.len() >= room {
                frames.truncate(room);
                done = true;
            }
        }
        index += frames.len() as u64;
        for frame in frames.drain(..) {
            // A SUBSCRIBE_UPDATE re-prioritizes in-flight streams at the next frame.
            if priority.has_changed().unwrap_or(false) {
                writer.set_priority(priority.borrow_and_update().order(group.sequence()));
            }
            let size = frame.payload.len();
            // A write blocked by a slow reader still notices the group leaving the cache.
            tokio::select! {
                biased;
                written = frames_out.write(writer, frame) => written.map_err(|e| match e {
                    Error::Stream(code) => code,
                    Error::Transport(starling_transport::TransportError::Stopped(code)) => {
                        StreamCode::from_code(code)
                    }
                    Error::Transport(_) => StreamCode::Cancelled,
                    _ => StreamCode::Internal,
                })?,
                code = group.aborted() => return Err(code),
            }
            shared.stats.frames_sent.fetch_add(1, Ordering::Relaxed);
            shared
                .stats
                .bytes_sent
                .fetch_add(size as u64, Ordering::Relaxed);
        }
        if done {
            writer.flush().await.map_err(|_| StreamCode::Cancelled)?;
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{send_order, Urgency};

    #[test]
    fn send_order_ranks_priority_then_newest_group() {
        // A more urgent subscription always goes first, whatever the groups.
        assert!(send_order(2, 0, 0) > send_order(1, 1_000, 0));
        // Within a subscription, newer groups go first.
        assert!(send_order(5, 11, 0) > send_order(5, 10, 0));
        // The extremes stay in range and ordered.
        assert!(send_order(255, 0, u64::MAX) > send_order(254, u64::MAX, 0));
        assert!(send_order(0, 0, u64::MAX) >= 0);
        assert!(send_order(255, u64::MAX, 0) > 0);
    }

    /// Issue 10 item 8: groups numbered by a clock cross 2^23; the newer one still goes
    /// first (23 bits of the sequence used to wrap there).
    #[test]
    fn send_order_does_not_wrap_for_large_sequences() {
        let mut urgency = Urgency {
            priority: 5,
            base: None,
        };
        for first in [(1u64 << 23) - 1, 1_796_000_000_000] {
            urgency.base = urgency.rebased(first).or(urgency.base);
            let mut previous = urgency.order(first);
            // Groups numbered in milliseconds, 33 apart, across many spans.
            for n in 1..2_000_000u64 {
                let sequence = first + n * 33;
                if let Some(base) = urgency.rebased(sequence) {
                    urgency.base = Some(base);
                    previous = urgency.order(sequence - 33);
                }
                let order = urgency.order(sequence);
                assert!(order > previous, "{sequence}: {order} after {previous}");
                previous = order;
            }
        }
    }
}
