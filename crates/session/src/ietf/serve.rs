//! Serving one IETF subscription through the shared engine (`crate::serve`): the
//! subscriber's events on its request (REQUEST_UPDATE answered here, UNSUBSCRIBE or the FIN),
//! where a group goes (the join group's tail, an Absolute filter's end), the subgroup streams,
//! and the end: an END_OF_TRACK stream and PUBLISH_DONE counting every stream
//! (docs/wire-ietf.md §4.6-§4.8).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use starling_model::GroupConsumer;
use starling_proto::ietf::reply::{RefusalCode, Refused, RequestOk};
use starling_proto::ietf::subscribe::{PublishDone, RequestUpdate};
use starling_proto::ietf::{Control, Draft};
use starling_proto::StreamCode;
use starling_transport::Transport;
use tokio::sync::watch;

use super::data::Subgroups;
use super::request::Request;
use super::wire_stream_code;
use crate::error::Error;
use crate::serve::{Event, Events, Failure, GroupWire, Place, ServeWire, Urgency};
use crate::shared::Shared;
use crate::violation::Violation;
use crate::writer::Writer;

/// PUBLISH_DONE status codes (docs/wire-ietf.md §6.4).
mod done {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const TRACK_ENDED: u64 = 0x2;
    pub const UPDATE_FAILED: u64 = 0x8;
}

/// An IETF subscriber's events on its request: REQUEST_UPDATE (SUBSCRIBE_UPDATE on 14 and
/// 15), answered here, then UNSUBSCRIBE (14-16) or its FIN.
pub(super) struct IetfEvents<'a, T: Transport> {
    pub(super) request: &'a mut Request<T>,
    pub(super) draft: Draft,
}

impl<T: Transport> Events for IetfEvents<'_, T> {
    /// The new priority (model order), if the update changed it.
    type Update = Option<u8>;

    async fn next(&mut self) -> Result<Event<Option<u8>>, Error> {
        let draft = self.draft;
        match self.request.recv().await {
            Ok(Some(Control::RequestUpdate(update))) => match priority_only(&update) {
                Some(wire) => {
                    if draft.has_namespace_messages() {
                        let ok = Control::RequestOk {
                            answers: None,
                            ok: RequestOk {
                                request_id: update.request_id,
                            },
                        };
                        self.request.send(&ok).await?;
                    }
                    Ok(Event::Update(wire.map(|wire| 255 - wire)))
                }
                None => {
                    refuse_update(self.request, &update).await?;
                    Ok(Event::Refused)
                }
            },
            // UNSUBSCRIBE (14-16), or the request closed on the control stream.
            Ok(Some(Control::Unsubscribe(_))) | Ok(None) if draft.has_control_stream() => {
                Ok(Event::Cancel(StreamCode::TooFarBehind))
            }
            // 17 and 18: the subscriber's FIN cancels.
            Ok(None) if draft < Draft::D19 => Ok(Event::Cancel(StreamCode::TooFarBehind)),
            // From 19 the subscriber's FIN says only that no update follows.
            Ok(None) => Ok(Event::Quiet),
            Ok(Some(_)) => Err(Error::ProtocolViolation(
                Violation::UnexpectedMessageOnSubscription,
            )),
            // STOP_SENDING or a reset: cancelled.
            Err(Error::Transport(_)) => Ok(Event::Cancel(StreamCode::TooFarBehind)),
            Err(err) => Err(err),
        }
    }
}

/// An IETF subscription as [`serve::serve`] serves it: the join group's tail from the object
/// after its head, an Absolute filter's end group as the subscription's end, and at the end an
/// END_OF_TRACK stream and PUBLISH_DONE counting every stream (the fill's too). Every stream
/// a subscription stops is reset with TOO_FAR_BEHIND's code.
pub(super) struct IetfServe {
    pub(super) groups: IetfGroups,
    pub(super) request_id: u64,
    /// The last group an Absolute filter with an end asks for.
    pub(super) last_group: Option<u64>,
    /// The group served from a later object than its first, and that object.
    pub(super) tail_of: Option<(u64, usize)>,
    /// The fill's stream, once opened.
    pub(super) fill_opened: Arc<AtomicU64>,
}

impl IetfServe {
    fn streams(&self, opened: &AtomicU64) -> u64 {
        opened.load(Ordering::Relaxed) + self.fill_opened.load(Ordering::Relaxed)
    }
}

impl<T: Transport> ServeWire<T, IetfEvents<'_, T>> for IetfServe {
    type Groups = IetfGroups;

    fn groups(&self) -> IetfGroups {
        self.groups
    }

    fn update(&mut self, priority: Option<u8>) -> (Option<u8>, Vec<GroupConsumer>) {
        (priority, Vec::new())
    }

    fn place(&mut self, mut group: GroupConsumer) -> Place {
        if let Some((sequence, head)) = self.tail_of.take() {
            if group.sequence() == sequence {
                group.seek(head);
            }
        }
        if self.last_group.is_some_and(|last| group.sequence() > last) {
            return Place::End(group.sequence());
        }
        Place::Serve(group, None)
    }

    async fn starting(&mut self, _sequence: u64) -> Result<(), Error> {
        Ok(()) // SUBSCRIBE_OK went before
    }

    fn end_after_streams(&self) -> bool {
        true // PUBLISH_DONE counts them
    }

    async fn ended(
        &mut self,
        shared: &Shared<T>,
        events: &mut IetfEvents<'_, T>,
        end: Option<u64>,
        _last_started: Option<u64>,
        opened: &AtomicU64,
    ) -> Result<(), Error> {
        if let Some(end) = end {
            if let Ok(stream) = shared.transport.open_uni().await {
                opened.fetch_add(1, Ordering::Relaxed);
                let mut writer = Writer::new(stream, shared.version);
                self.groups.subgroups.write_end(&mut writer, end).await?;
            }
        }
        let streams = self.streams(opened);
        publish_done(
            events.request,
            self.request_id,
            done::TRACK_ENDED,
            streams,
            "",
        )
        .await
    }

    async fn closed(&mut self, events: &mut IetfEvents<'_, T>) -> Result<(), Error> {
        events.request.finish();
        Ok(())
    }

    fn cancelled(&mut self, events: &mut IetfEvents<'_, T>) -> Result<(), Error> {
        events.request.finish();
        Ok(())
    }

    fn abort_code(&self, _failure: &Failure) -> StreamCode {
        StreamCode::TooFarBehind
    }

    async fn failed(
        &mut self,
        events: &mut IetfEvents<'_, T>,
        failure: Failure,
        opened: &AtomicU64,
    ) -> Result<(), Error> {
        let (status, err) = match failure {
            Failure::Track(code) => (done::INTERNAL_ERROR, Error::Stream(code)),
            Failure::Refused => (done::UPDATE_FAILED, Error::Stream(StreamCode::Cancelled)),
            Failure::Session(err) => return Err(err),
        };
        let streams = self.streams(opened);
        publish_done(
            events.request,
            self.request_id,
            status,
            streams,
            &err.to_string(),
        )
        .await?;
        events.request.finish();
        Ok(())
    }
}

/// How an IETF group goes out: a subgroup stream of its objects.
#[derive(Clone, Copy)]
pub(super) struct IetfGroups {
    pub(super) subgroups: Subgroups,
}

impl<T: Transport> GroupWire<T> for IetfGroups {
    const REPRIORITIZES: bool = false;

    async fn write(
        &self,
        shared: &Shared<T>,
        writer: &mut Writer<T::Send>,
        group: &mut GroupConsumer,
        _last_frame: Option<u64>,
        _urgency: Option<&mut watch::Receiver<Urgency>>,
    ) -> Result<(), StreamCode> {
        let stats = &shared.stats;
        self.subgroups
            .write_group(writer, group, |size| {
                stats.frames_sent.fetch_add(1, Ordering::Relaxed);
                stats.bytes_sent.fetch_add(size as u64, Ordering::Relaxed);
            })
            .await
    }

    fn reset_code(&self, code: StreamCode) -> u32 {
        wire_stream_code(code, self.subgroups.draft)
    }
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

/// PUBLISH_DONE: the subscription is over, `streams` group streams sent.
async fn publish_done<T: Transport>(
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
        .await
}
