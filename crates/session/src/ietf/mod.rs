//! The IETF moq-transport drafts 14 to 22 on the session layer (docs/wire-ietf.md §3-§7).
//!
//! An IETF session is a [`crate::Session`] like any other: the same origin, budget, bounds
//! and counters, with the drafts' wire around them. Requests travel on the shared control
//! stream (14-16, `control.rs`) or on a stream each (17 on); both look the same to the
//! halves (`request.rs`). The publisher half serves SUBSCRIBE, FETCH and SUBSCRIBE_NAMESPACE
//! from the origin we publish and advertises to peers that do not solicit; the subscriber
//! half turns PUBLISH_NAMESPACE (and NAMESPACE) into routes and pulls tracks with SUBSCRIBE.
//! PUBLISH, TRACK_STATUS and SUBSCRIBE_TRACKS are refused with NOT_SUPPORTED, as moq-relay
//! refuses them.

mod announce;
mod control;
mod data;
mod publisher;
mod request;
mod serve;
mod setup;
mod subscriber;

use starling_proto::ietf::reply::{RefusalCode, Refused, RequestError};
use starling_proto::ietf::stream::UniStream;
use starling_proto::ietf::Control;
use starling_proto::StreamCode;
use starling_transport::Transport;

use crate::error::Error;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::ietf::Ietf;
use crate::violation::Violation;

pub(crate) use announce::advertise;
pub(crate) use setup::send_goaway;
pub(crate) use setup::{accept, connect, peer_of, start, Handshake, Started};
pub(crate) use subscriber::{datagram, subscribe_namespace, IetfPull};

use request::Request;

/// Start the session's own tasks: reading the control stream (14-16) or the rest of the
/// peer's SETUP stream (17 on, server side), advertising to a peer that does not solicit,
/// and asking for announcements under the configured prefixes.
pub(crate) fn begin<T: Transport>(shared: &Ietf<T>, recv: Option<(T::Recv, bytes::BytesMut)>) {
    let draft = shared.state().draft;
    if let Some((recv, rest)) = recv {
        let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
        if let Err(err) = reader.prefill(&rest) {
            shared.fail(err);
            return;
        }
        let task = shared.clone();
        if draft.has_control_stream() {
            shared.spawn(async move { control::run(task, reader).await });
        } else {
            shared.spawn(async move {
                if let Err(err) = setup::setup_stream_tail(&task, reader).await {
                    task.fail(err);
                }
            });
        }
    }
    if shared.config.publish.is_some() {
        let task = shared.clone();
        shared.spawn(async move { advertise(task).await });
    }
    if shared.config.consume.is_some() {
        for prefix in shared.config.announce_prefixes.clone() {
            let task = shared.clone();
            shared.spawn(async move { subscribe_namespace(task, prefix).await });
        }
    }
}

/// Serve one request the peer opened, from its first message.
pub(crate) async fn handle<T: Transport>(shared: Ietf<T>, mut request: Request<T>, first: Control) {
    let result = match first {
        Control::Subscribe(msg) => publisher::subscribe(&shared, &mut request, msg).await,
        Control::Fetch(msg) => publisher::fetch(&shared, &mut request, msg).await,
        Control::SubscribeNamespace(msg) => {
            announce::subscribe_namespace(&shared, &mut request, msg).await
        }
        Control::PublishNamespace(msg) => {
            subscriber::publish_namespace(&shared, &mut request, msg).await
        }
        Control::TrackStatus(_) => {
            refuse(
                &mut request,
                Refused::TrackStatus,
                RefusalCode::NotSupported,
                "TRACK_STATUS is not supported",
            )
            .await
        }
        Control::Publish(_) => {
            refuse(
                &mut request,
                Refused::Publish,
                RefusalCode::NotSupported,
                "PUBLISH is not supported",
            )
            .await
        }
        Control::SubscribeTracks => {
            refuse(
                &mut request,
                Refused::Subscribe,
                RefusalCode::NotSupported,
                "SUBSCRIBE_TRACKS is not supported",
            )
            .await
        }
        _ => Err(Error::ProtocolViolation(
            Violation::RequestStreamOpenedWithReply,
        )),
    };
    if let Err(err) = result {
        tracing::debug!(?err, id = request.id, "IETF request failed");
        match request.draft() {
            Ok(draft) if !fatal(&err) => request.reset(wire_stream_code(err.stream_code(), draft)),
            _ => shared.fail(err),
        }
    }
}

/// Whether a request's error ends the session: what the peer sent broke the protocol.
fn fatal(err: &Error) -> bool {
    matches!(
        err,
        Error::Decode(_) | Error::ProtocolViolation(_) | Error::Bound(_)
    )
}

/// Refuse a request with REQUEST_ERROR (draft 14: the request's own error message) and end
/// our side of it.
pub(crate) async fn refuse<T: Transport>(
    request: &mut Request<T>,
    refused: Refused,
    code: RefusalCode,
    reason: &str,
) -> Result<(), Error> {
    let draft = request.draft()?;
    let msg = Control::RequestError {
        answers: Some(refused),
        error: RequestError {
            request_id: request.id,
            code: code.code(draft, refused),
            retry_interval: 0,
            reason: reason.to_string(),
        },
    };
    request.send(&msg).await?;
    request.finish();
    Ok(())
}

/// The refusal a lite stream code from the model stands for.
pub(crate) fn refusal_for(code: StreamCode) -> RefusalCode {
    match code {
        StreamCode::NotFound | StreamCode::Unroutable => RefusalCode::DoesNotExist,
        StreamCode::GoingAway => RefusalCode::GoingAway,
        StreamCode::ControlTimeout => RefusalCode::Timeout,
        _ => RefusalCode::InternalError,
    }
}

/// A lite stream code as the draft can say it (docs/wire-ietf.md §6.2): what the draft does
/// not register is INTERNAL_ERROR.
pub(crate) fn wire_stream_code(code: StreamCode, draft: starling_proto::ietf::Draft) -> u32 {
    use starling_proto::ietf::Draft;
    match code.to_code() {
        c @ 0..=3 => c,
        4 if draft >= Draft::D18 => 4,
        5 if draft >= Draft::D17 => 5,
        0x12 if draft >= Draft::D16 => 0x12,
        _ => 0,
    }
}

/// A lite stream code for one the peer reset or stopped with (docs/wire-ietf.md §6.2).
pub(crate) fn lite_stream_code(code: u32, draft: starling_proto::ietf::Draft) -> StreamCode {
    StreamCode::from_code(wire_stream_code(StreamCode::from_code(code), draft))
}

/// A bidi stream the peer opened: a request on its own stream (17 on; SUBSCRIBE_NAMESPACE
/// on 16, and any request on 14-16 as moq-net serves them). Its first message says which;
/// a stream that dies first is dropped, bytes that do not parse end the session.
pub(crate) async fn request_stream<T: Transport>(shared: Ietf<T>, send: T::Send, recv: T::Recv) {
    let result: Result<(), Error> = async {
        let state = shared.state();
        let draft = state.draft;
        let limits = &shared.config.limits;
        // A request waits for the peer's SETUP (a client on 17 on may be ahead of it).
        state.peer_setup(limits.handshake_timeout).await?;
        let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Unknown);
        let first =
            match request::read_control(&mut reader, draft, limits.max_control_message).await {
                Ok(Some(first)) => first,
                Ok(None) | Err(Error::Transport(_)) => return Ok(()),
                Err(err) => return Err(err),
            };
        reader.set_rank(Rank::Control);
        // SUBSCRIBE_TRACKS is refused unread: it names no id Starling keeps.
        let id = match first {
            Control::SubscribeTracks => 0,
            ref other => {
                let id = first_request_id(other).ok_or(Error::ProtocolViolation(
                    Violation::RequestStreamOpenedWithReply,
                ))?;
                state.admit(id)?;
                id
            }
        };
        let request = Request::stream(shared.clone(), id, reader, request::control_writer(send));
        // Boxed, as the lite request streams' handlers are: the task then holds only its
        // own request's state, not the largest kind's.
        Box::pin(handle(shared.clone(), request, first)).await;
        Ok(())
    }
    .await;
    if let Err(err) = result {
        shared.fail(err);
    }
}

/// The request id of a message that opens a request.
pub(crate) fn first_request_id(msg: &Control) -> Option<u64> {
    match msg {
        Control::Subscribe(m) | Control::TrackStatus(m) => Some(m.request_id),
        Control::Fetch(m) => Some(m.request_id),
        Control::Publish(m) => Some(m.request_id),
        Control::PublishNamespace(m) => Some(m.request_id),
        Control::SubscribeNamespace(m) => Some(m.request_id),
        _ => None,
    }
}

/// A uni stream the peer opened: a subgroup, a fetch, the server's SETUP (17 on, client
/// side) or padding. Any other type ends the session (docs/wire-ietf.md §3.1).
pub(crate) async fn uni_stream<T: Transport>(shared: &Ietf<T>, recv: T::Recv) {
    let result: Result<(), Error> = async {
        let draft = shared.state().draft;
        let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Unknown);
        let code = match reader
            .unit(|buf| {
                Ok(starling_proto::varint::peek_as(
                    starling_proto::coding::Wire::flavor(draft),
                    buf,
                )?
                // Peeked, not consumed: each kind's reader starts at the type.
                .map(|(v, _)| v))
            })
            .await
        {
            Ok(Some(code)) => code,
            // Dead before its type: dropped quietly.
            Ok(None) | Err(Error::Transport(_)) => return Ok(()),
            Err(err) => return Err(err),
        };
        match UniStream::classify(code, draft)? {
            UniStream::Subgroup(flags) => {
                subscriber::subgroup(shared, &mut reader, flags).await;
                Ok(())
            }
            UniStream::Fetch => {
                // Starling asks no FETCH of its peers yet: nothing can be waiting for it.
                reader.stop(StreamCode::Cancelled.to_code());
                Ok(())
            }
            UniStream::Setup => setup::peer_setup_stream(shared, reader).await,
            // Read to its end and dropped.
            UniStream::Padding => reader
                .unit(|buf| {
                    buf.clear();
                    Ok(None::<()>)
                })
                .await
                .map(|_| ()),
        }
    }
    .await;
    if let Err(err) = result {
        shared.fail(err);
    }
}
