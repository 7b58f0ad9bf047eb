//! The publisher half of an IETF session: SUBSCRIBE and FETCH served from the origin we
//! publish (docs/wire-ietf.md §4.3-§4.12, §7.4 item 2).
//!
//! A Next Object subscription (a live join) that lands in a group still being written is
//! answered with that Largest Location: the group's tail goes on its stream from the next
//! object, its head by the joining FETCH (14-19) or the fill (20 on) the subscriber asks for,
//! as moq-net serves them. Otherwise a subscription starts at the first object of the latest
//! group (or its filter's start group), reported with no Largest. Once answered, the
//! subscription is served by the engine both families share (`crate::serve`, the IETF side
//! in `serve.rs`). A FETCH is served for one cached group.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use starling_model::StartAt;
use starling_proto::ietf::fetch::{Fetch, FetchKind, FetchOk};
use starling_proto::ietf::fields::GroupOrder;
use starling_proto::ietf::properties::TrackProperties;
use starling_proto::ietf::reply::{RefusalCode, Refused};
use starling_proto::ietf::subscribe::{Subscribe, SubscribeOk};
use starling_proto::ietf::{Control, Filter, Location};
use starling_transport::Transport;

use super::data::{write_fetch, Fetched, Subgroups};
use super::request::Request;
use super::serve::{IetfEvents, IetfGroups, IetfServe};
use super::{refusal_for, refuse};
use crate::error::Error;
use crate::publisher::resolve;
use crate::serve;
use crate::shared::ietf::Ietf;
use crate::shared::ietf::Join;
use crate::writer::Writer;

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
    shared: &'a Ietf<T>,
    id: u64,
}

impl<T: Transport> Drop for Joined<'_, T> {
    fn drop(&mut self) {
        self.shared.state().joins.lock().remove(&self.id);
    }
}

pub(crate) async fn subscribe<T: Transport>(
    shared: &Ietf<T>,
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
            .for_peer(shared.exclude_hop())
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
            .state()
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
    let fill_opened = Arc::new(AtomicU64::new(0));
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
        let (id, task_opened) = (msg.request_id, fill_opened.clone());
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
    let tail_of = match (&join, msg.filter) {
        (Some(join), _) => Some((join.group, join.head.len())),
        (None, Filter::Absolute { start, .. }) if start.object > 0 => {
            Some((start.group, start.object as usize))
        }
        _ => None,
    };
    let mut wire = IetfServe {
        groups: IetfGroups { subgroups },
        request_id: msg.request_id,
        last_group: end_of(&msg),
        tail_of,
        fill_opened,
    };
    let mut events = IetfEvents { request, draft };
    serve::serve(
        shared,
        &mut wire,
        &mut events,
        &mut track,
        255 - msg.priority,
    )
    .await
}

/// FETCH: one cached group (docs/wire-ietf.md §4.12).
pub(crate) async fn fetch<T: Transport>(
    shared: &Ietf<T>,
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
    shared: &Ietf<T>,
    request: &mut Request<T>,
    msg: &Fetch,
    joining: u64,
) -> Result<(), Error> {
    let draft = request.draft()?;
    let join = shared.state().joins.lock().get(&joining).cloned();
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
