//! The publisher half of an IETF session: SUBSCRIBE and FETCH served from the origin we
//! publish (docs/wire-ietf.md §4.3-§4.12, §7.4 item 2).
//!
//! A Next Object subscription (a live join) that lands in a group still being written is
//! answered with that Largest Location: the group's tail goes on its stream from the next
//! object, its head by the joining FETCH (14-19) or the fill (20 on) the subscriber asks for,
//! as moq-net serves them. Otherwise a subscription starts at the first object of the latest
//! group (or its filter's start group), reported with no Largest.
//! Groups go out one stream each, driven from the subscription's task, a bounded number in
//! flight (the oldest is reset past it, as on lite); a finished track ends with an
//! END_OF_TRACK stream and PUBLISH_DONE counting every stream. A FETCH is served for one
//! cached group.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use starling_model::StartAt;
use starling_proto::ietf::fetch::{Fetch, FetchKind, FetchOk};
use starling_proto::ietf::fields::GroupOrder;
use starling_proto::ietf::properties::TrackProperties;
use starling_proto::ietf::reply::{RefusalCode, Refused, RequestOk};
use starling_proto::ietf::subscribe::{PublishDone, RequestUpdate, Subscribe, SubscribeOk};
use starling_proto::ietf::{Control, Filter, Location};
use starling_proto::StreamCode;
use starling_transport::Transport;

use super::data::{write_fetch, Fetched, Subgroups};
use super::request::Request;
use super::{refusal_for, refuse, wire_stream_code};
use crate::error::Error;
use crate::gate::Gate;
use crate::inflight::InFlight;
use crate::publisher::{resolve, send_order};
use crate::shared::ietf::Join;
use crate::shared::Shared;
use crate::violation::Violation;
use crate::writer::Writer;

/// PUBLISH_DONE status codes (docs/wire-ietf.md §6.4).
mod done {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const TRACK_ENDED: u64 = 0x2;
    pub const UPDATE_FAILED: u64 = 0x8;
}

/// Where a subscription starts in the cache (model terms) for its filter, given the latest
/// group cached now: Unfiltered and Next Object at the latest group, Next Group (Relative 0)
/// after it, Relative n (20 on) n - 1 groups before it, Absolute at its start group.
fn start_of(msg: &Subscribe, latest: Option<u64>) -> StartAt {
    let priority = 255 - msg.priority;
    let from = |floor: Option<u64>| StartAt {
        max_age_ms: u64::MAX / 4,
        latest: false,
        floor,
        priority,
    };
    match (msg.filter, latest) {
        (Filter::Absolute { start, .. }, _) => from(Some(start.group)),
        (Filter::Relative(n), Some(latest)) => from(Some((latest + 1).saturating_sub(n))),
        _ => StartAt {
            max_age_ms: 0,
            latest: true,
            floor: None,
            priority,
        },
    }
}

/// The last group an Absolute filter with an end asks for.
fn end_of(msg: &Subscribe) -> Option<u64> {
    match msg.filter {
        Filter::Absolute { end: Some(end), .. } => Some(end.group),
        _ => None,
    }
}

/// Where a Next Object subscription joins: the latest group while it is still being written
/// (and has a frame), with the frames written so far, its head. A finished or empty latest
/// group is served whole instead, with no Largest reported (moq-net then owes no head).
fn join_point(track: &starling_model::TrackConsumer) -> Option<Join> {
    let sequence = track.latest_sequence()?;
    let mut group = track.group(sequence)?;
    let mut head = Vec::new();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match group.poll_frames(&mut cx, &mut head) {
        std::task::Poll::Ready(Ok(false)) if !head.is_empty() => Some(Join {
            group: sequence,
            head,
        }),
        _ => None,
    }
}

/// Forgets a subscription's join point when the subscription ends.
struct Joined<'a, T: Transport> {
    shared: &'a Shared<T>,
    id: u64,
}

impl<T: Transport> Drop for Joined<'_, T> {
    fn drop(&mut self) {
        if let Ok(state) = self.shared.ietf() {
            state.joins.lock().remove(&self.id);
        }
    }
}

pub(crate) async fn subscribe<T: Transport>(
    shared: &Arc<Shared<T>>,
    request: &mut Request<T>,
    msg: Subscribe,
) -> Result<(), Error> {
    let draft = request.draft()?;
    let limits = &shared.config.limits;
    let refused = |reason| (Refused::Subscribe, RefusalCode::NotSupported, reason);
    let unsupported = if !msg.forward {
        Some(refused("FORWARD 0 is not supported"))
    } else if msg.range_filters || msg.fill.as_ref().is_some_and(|f| f.range_filters) {
        Some(refused("range filters are not supported"))
    } else {
        None
    };
    if let Some((kind, code, reason)) = unsupported {
        return refuse(request, kind, code, reason).await;
    }
    let Some(_slot) = shared.take_slot(
        &shared.served_subscriptions,
        limits.max_served_subscriptions,
        crate::Held::Subscription,
    ) else {
        return refuse(
            request,
            Refused::Subscribe,
            RefusalCode::InternalError,
            "too many subscriptions",
        )
        .await;
    };
    let mut track = match resolve(
        shared,
        &msg.namespace,
        &msg.track,
        Some(start_of(&msg, None)),
    ) {
        Ok(track) => track,
        Err(Error::Stream(code)) => {
            return refuse(
                request,
                Refused::Subscribe,
                refusal_for(code),
                "no such track",
            )
            .await
        }
        Err(err) => return Err(err),
    };
    if matches!(msg.filter, Filter::Relative(_)) && track.latest_sequence().is_some() {
        // Placed against the latest group cached now.
        track = match track
            .resubscribe(start_of(&msg, track.latest_sequence()))
            .for_peer(shared.peer.exclude_hop())
        {
            Ok(track) => track,
            Err(code) => {
                return refuse(request, Refused::Subscribe, refusal_for(code), "no route").await
            }
        };
    }
    let info = match tokio::time::timeout(limits.request_timeout, track.info()).await {
        Ok(Ok(info)) => info,
        Ok(Err(code)) => {
            return refuse(
                request,
                Refused::Subscribe,
                refusal_for(code),
                "no such track",
            )
            .await
        }
        Err(_) => {
            return refuse(
                request,
                Refused::Subscribe,
                RefusalCode::Timeout,
                "track timed out",
            )
            .await
        }
    };
    let alias = msg.request_id;
    // Next Object joins mid-group: the tail on the group's stream from Largest + 1, the head
    // by joining FETCH (14-19) or the fill the SUBSCRIBE asked for (20 on).
    let join = matches!(msg.filter, Filter::NextObject)
        .then(|| join_point(&track))
        .flatten();
    let largest = join.as_ref().map(|join| Location {
        group: join.group,
        object: join.head.len() as u64 - 1,
    });
    if let Some(join) = &join {
        shared
            .ietf()?
            .joins
            .lock()
            .insert(msg.request_id, join.clone());
    }
    let _joined = join.is_some().then_some(Joined {
        shared,
        id: msg.request_id,
    });
    request
        .send(&Control::SubscribeOk(SubscribeOk {
            request_id: msg.request_id,
            track_alias: alias,
            largest,
            properties: TrackProperties {
                timescale: Some(info.timescale),
                priority: Some(255 - info.priority),
                group_order: Some(GroupOrder::Descending),
            },
        }))
        .await?;

    let subgroups = Subgroups {
        draft,
        alias,
        priority: 255 - info.priority,
        properties: msg.include_properties,
    };
    let (priority_tx, priority) = tokio::sync::watch::channel(255 - msg.priority);
    let last_group = end_of(&msg);
    let opened = Arc::new(AtomicU64::new(0));
    let fill = msg.fill.is_some() && draft.has_fill();
    if let (true, Some(join)) = (fill, &join) {
        // The head on a FETCH_HEADER stream named by the SUBSCRIBE (it counts in PUBLISH_DONE).
        let task_shared = shared.clone();
        let fetched = Fetched {
            group: join.group,
            first: 0,
            frames: join.head.clone(),
            timestamps: msg.include_properties,
        };
        let (id, task_opened) = (msg.request_id, opened.clone());
        shared.spawn(async move {
            let pending = std::future::pending::<()>();
            if let Some(mut writer) = task_shared.group_stream(pending, &task_opened).await {
                if write_fetch(&mut writer, draft, id, fetched).await.is_err() {
                    writer.reset(0);
                }
            }
        });
    }
    // The join group's tail starts after its head; an Absolute start inside its group there.
    let mut tail_of = match (&join, msg.filter) {
        (Some(join), _) => Some((join.group, join.head.len())),
        (None, Filter::Absolute { start, .. }) if start.object > 0 => {
            Some((start.group, start.object as usize))
        }
        _ => None,
    };
    let mut inflight = InFlight::new(limits.max_inflight_groups);
    let mut base = None;
    // The request and the track are polled only when they woke the task, not on the wakes
    // of the group sends.
    let (mut control_gate, mut track_gate) = (Gate::default(), Gate::default());
    let mut control = Box::pin(recv_on(request));
    // The track itself ended in error (rather than the request).
    let mut track_failed = false;
    let outcome: Result<Option<u64>, (u64, Error)> = loop {
        tokio::select! {
            biased;
            (request, event) = control_gate.future(control.as_mut()) => {
                match event {
                    Ok(Some(Control::RequestUpdate(update))) => {
                        match priority_only(&update) {
                            Some(wire) => {
                                if let Some(wire) = wire {
                                    priority_tx.send_replace(255 - wire);
                                }
                                if draft.has_namespace_messages() {
                                    let ok = Control::RequestOk { answers: None, ok: RequestOk { request_id: update.request_id } };
                                    request.send(&ok).await?;
                                }
                            }
                            None => {
                                refuse_update(request, &update).await?;
                                break Err((done::UPDATE_FAILED, Error::Stream(StreamCode::Cancelled)));
                            }
                        }
                    }
                    // UNSUBSCRIBE (14-16), or the request closed on the control stream.
                    Ok(Some(Control::Unsubscribe(_))) | Ok(None) if draft.has_control_stream() => {
                        cancel_all(&mut inflight).await;
                        return Ok(());
                    }
                    Ok(None) if draft < starling_proto::ietf::Draft::D19 => {
                        // 17 and 18: the subscriber's FIN cancels.
                        cancel_all(&mut inflight).await;
                        request.finish();
                        return Ok(());
                    }
                    // From 19 the subscriber's FIN says only that no update follows.
                    Ok(None) => {}
                    Ok(Some(_)) => return Err(Error::ProtocolViolation(Violation::UnexpectedMessageOnSubscription)),
                    // STOP_SENDING or a reset: cancelled.
                    Err(Error::Transport(_)) => {
                        cancel_all(&mut inflight).await;
                        request.finish();
                        return Ok(());
                    }
                    Err(err) => return Err(err),
                }
                control.set(recv_on(request));
            }
            next = track_gate.wait(|cx| track.poll_group(cx)) => match next {
                Ok(Some(mut group)) => {
                    if let Some((sequence, head)) = tail_of.take() {
                        if group.sequence() == sequence {
                            group.seek(head);
                        }
                    }
                    if last_group.is_some_and(|last| group.sequence() > last) {
                        break Ok(Some(group.sequence()));
                    }
                    let base = *base.get_or_insert(group.sequence());
                    let sequence = group.sequence();
                    let order = send_order(*priority.borrow(), sequence, base);
                    let opened = &opened;
                    let skipped = inflight.start(sequence, |stop| async move {
                        let mut group = group;
                        let stats = &shared.stats;
                        let write = async |writer: &mut Writer<T::Send>| {
                            subgroups.write_group(writer, &mut group, |size| {
                                stats.frames_sent.fetch_add(1, Ordering::Relaxed);
                                stats.bytes_sent.fetch_add(size as u64, Ordering::Relaxed);
                            }).await
                        };
                        let reset = |code| wire_stream_code(code, subgroups.draft);
                        shared.send_group(sequence, &stop, opened, order, write, reset).await
                    });
                    shared.stats.groups_skipped.fetch_add(skipped, Ordering::Relaxed);
                }
                Ok(None) => break Ok(track.end()),
                Err(code) => {
                    track_failed = true;
                    break Err((done::INTERNAL_ERROR, Error::Stream(code)));
                }
            },
            _ = inflight.next() => {}
        }
    };
    drop(control);
    match outcome {
        Ok(end) => {
            inflight.drain().await;
            if let Some(end) = end {
                if let Ok(stream) = shared.transport.open_uni().await {
                    opened.fetch_add(1, Ordering::Relaxed);
                    let mut writer = Writer::new(stream, shared.version);
                    subgroups.write_end(&mut writer, end).await?;
                }
            }
            finish(
                request,
                msg.request_id,
                done::TRACK_ENDED,
                opened.load(Ordering::Relaxed),
                "",
            )
            .await
        }
        Err((status, err)) => {
            if track_failed {
                inflight
                    .finish_whole(&track, StreamCode::TooFarBehind)
                    .await;
            } else {
                cancel_all(&mut inflight).await;
            }
            let reason = err.to_string();
            finish(
                request,
                msg.request_id,
                status,
                opened.load(Ordering::Relaxed),
                &reason,
            )
            .await
        }
    }
}

/// The request's next message as a future that owns the request's borrow and hands it back
/// with the message, so the subscription keeps one such future across its loop.
async fn recv_on<T: Transport>(
    request: &mut Request<T>,
) -> (&mut Request<T>, Result<Option<Control>, Error>) {
    let event = request.recv().await;
    (request, event)
}

/// A REQUEST_UPDATE that changes only the priority (and keeps FORWARD on): its new wire
/// priority (`None`: unchanged). Anything else is refused (docs/wire-ietf.md §4.6).
fn priority_only(update: &RequestUpdate) -> Option<Option<u8>> {
    let other = update.start.is_some()
        || update.end_group.is_some()
        || update.forward == Some(false)
        || update.filter.is_some()
        || update.fill.is_some()
        || update.delivery_timeout.is_some()
        || update.subgroup_delivery_timeout.is_some()
        || update.new_group_request.is_some()
        || !update.authorization_tokens.is_empty()
        || update.range_filters
        || update.hop_path.is_some()
        || update.route_cost.is_some();
    (!other).then_some(update.priority)
}

async fn refuse_update<T: Transport>(
    request: &mut Request<T>,
    update: &RequestUpdate,
) -> Result<(), Error> {
    let draft = request.draft()?;
    if !draft.has_namespace_messages() {
        // SUBSCRIBE_UPDATE (14, 15) has no answer.
        return Ok(());
    }
    let error = starling_proto::ietf::reply::RequestError {
        request_id: update.request_id,
        code: RefusalCode::NotSupported.code(draft, Refused::Subscribe),
        retry_interval: 0,
        reason: "only the priority can be updated".to_string(),
    };
    request
        .send(&Control::RequestError {
            answers: None,
            error,
        })
        .await
}

/// Reset every group stream in flight (with TOO_FAR_BEHIND's code, as each stream a
/// subscription stops is reset).
async fn cancel_all<F: Future<Output = u64>>(inflight: &mut InFlight<F>) {
    inflight.abort_all(StreamCode::TooFarBehind);
    inflight.drain().await;
}

/// PUBLISH_DONE, then our FIN, then wait (bounded) for the subscriber's.
async fn finish<T: Transport>(
    request: &mut Request<T>,
    request_id: u64,
    status: u64,
    streams: u64,
    reason: &str,
) -> Result<(), Error> {
    request
        .send(&Control::PublishDone(PublishDone {
            request_id,
            status,
            stream_count: streams,
            reason: reason.chars().take(256).collect(),
        }))
        .await?;
    request.finish();
    Ok(())
}

/// FETCH: one cached group (docs/wire-ietf.md §4.12).
pub(crate) async fn fetch<T: Transport>(
    shared: &Arc<Shared<T>>,
    request: &mut Request<T>,
    msg: Fetch,
) -> Result<(), Error> {
    let draft = request.draft()?;
    let limits = &shared.config.limits;
    let _slot = shared.request_slot().await?;
    if msg.range_filters || msg.fill_timeout.is_some() {
        return refuse(
            request,
            Refused::Fetch,
            RefusalCode::NotSupported,
            "not supported",
        )
        .await;
    }
    // The group, its first object, and its last (inclusive) when bounded.
    let (namespace, name, group, first, last) = match &msg.kind {
        FetchKind::Standalone {
            namespace,
            track,
            start,
            end,
        } if start.group == end.group => {
            // An end object of 0 takes the whole end group; any other is exclusive.
            let last = (end.object > 0).then(|| end.object - 1);
            (namespace, track, start.group, start.object, last)
        }
        FetchKind::Filtered {
            namespace,
            track,
            filter:
                Filter::Absolute {
                    start,
                    end: Some(end),
                },
        } if start.group == end.group => (namespace, track, start.group, start.object, end.object),
        FetchKind::RelativeJoining { joining, .. } | FetchKind::AbsoluteJoining { joining, .. } => {
            return joining_fetch(shared, request, &msg, *joining).await;
        }
        _ => {
            return refuse(
                request,
                Refused::Fetch,
                RefusalCode::NotSupported,
                "a FETCH is served for one group",
            )
            .await
        }
    };
    let track = match resolve(shared, namespace, name, None) {
        Ok(track) => track,
        Err(Error::Stream(code)) => {
            return refuse(request, Refused::Fetch, refusal_for(code), "no such track").await
        }
        Err(err) => return Err(err),
    };
    let Some(mut cached) = track.group(group) else {
        return refuse(
            request,
            Refused::Fetch,
            RefusalCode::DoesNotExist,
            "no such group",
        )
        .await;
    };
    cached.seek(first as usize);
    let read = async {
        let mut frames = Vec::new();
        let mut index = first;
        while let Some(frame) = cached.next_frame().await.map_err(Error::Stream)? {
            if last.is_some_and(|last| index > last) {
                break;
            }
            frames.push(frame);
            index += 1;
        }
        Ok::<_, Error>(frames)
    };
    let frames = match tokio::time::timeout(limits.request_timeout, read).await {
        Ok(Ok(frames)) if !frames.is_empty() => frames,
        Ok(Ok(_)) => {
            return refuse(
                request,
                Refused::Fetch,
                RefusalCode::InvalidRange,
                "nothing in range",
            )
            .await
        }
        Ok(Err(err)) => {
            return refuse(
                request,
                Refused::Fetch,
                refusal_for(err.stream_code()),
                "group lost",
            )
            .await
        }
        Err(_) => {
            return refuse(
                request,
                Refused::Fetch,
                RefusalCode::Timeout,
                "group incomplete",
            )
            .await
        }
    };
    let last_object = first + frames.len() as u64 - 1;
    // Before 20 the end is exclusive; from 20 inclusive.
    let end = if draft.has_fill() {
        Location {
            group,
            object: last_object,
        }
    } else {
        Location {
            group,
            object: last_object + 1,
        }
    };
    request
        .send(&Control::FetchOk(FetchOk {
            request_id: msg.request_id,
            group_order: GroupOrder::Ascending,
            end_of_track: false,
            end,
            properties: TrackProperties::default(),
        }))
        .await?;
    let stream = shared.transport.open_uni().await?;
    let mut writer = Writer::new(stream, shared.version);
    let fetched = Fetched {
        group,
        first,
        frames,
        timestamps: false,
    };
    write_fetch(&mut writer, draft, msg.request_id, fetched).await?;
    request.finish();
    // Hold the request until the fetcher is done with it (bounded).
    let _ = tokio::time::timeout(limits.request_timeout, async {
        while let Ok(Some(_)) = request.recv().await {}
    })
    .await;
    Ok(())
}

/// A joining FETCH (14-19): the head of the group subscription `joining` started in the
/// middle of, objects 0 to Largest, with their timestamps; FETCH_OK's end is the
/// subscription's first object (exclusive).
async fn joining_fetch<T: Transport>(
    shared: &Arc<Shared<T>>,
    request: &mut Request<T>,
    msg: &Fetch,
    joining: u64,
) -> Result<(), Error> {
    let draft = request.draft()?;
    let join = shared.ietf()?.joins.lock().get(&joining).cloned();
    let Some(join) = join else {
        return refuse(
            request,
            Refused::Fetch,
            RefusalCode::InvalidJoiningRequestId,
            "no subscription joined mid-group under that id",
        )
        .await;
    };
    let reaches = match msg.kind {
        FetchKind::RelativeJoining { offset, .. } => offset == 0,
        FetchKind::AbsoluteJoining { group, .. } => group == join.group,
        _ => false,
    };
    if !reaches {
        return refuse(
            request,
            Refused::Fetch,
            RefusalCode::NotSupported,
            "a FETCH is served for one group",
        )
        .await;
    }
    request
        .send(&Control::FetchOk(FetchOk {
            request_id: msg.request_id,
            group_order: GroupOrder::Ascending,
            end_of_track: false,
            end: Location {
                group: join.group,
                object: join.head.len() as u64,
            },
            properties: TrackProperties::default(),
        }))
        .await?;
    let stream = shared.transport.open_uni().await?;
    let mut writer = Writer::new(stream, shared.version);
    let fetched = Fetched {
        group: join.group,
        first: 0,
        frames: join.head,
        timestamps: true,
    };
    write_fetch(&mut writer, draft, msg.request_id, fetched).await?;
    request.finish();
    Ok(())
}
