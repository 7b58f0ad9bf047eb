//! The shared control stream of drafts 14-16 (docs/wire-ietf.md §4.2): every message is
//! routed by its request id to a virtual request stream, so the halves serve every draft the
//! way they serve a stream per request from 17 on. A message that opens a request starts its
//! handler; answers, updates and closings go to the request they name; MAX_REQUEST_ID and
//! GOAWAY belong to the session; anything else ends it.

use starling_proto::ietf::control::Control;
use starling_proto::ietf::namespace::Advertisement;
use starling_transport::Transport;
use tokio::sync::mpsc;

use super::request::{read_control, Request, ROUTE_QUEUE};
use crate::error::Error;
use crate::reader::Reader;
use crate::shared::ietf::Ietf;
use crate::shared::ietf::Route;
use crate::violation::Violation;

/// Read the control stream until it or the session ends; its end ends the session.
pub(crate) async fn run<T: Transport>(shared: Ietf<T>, mut reader: Reader<T::Recv>) {
    let result: Result<(), Error> = async {
        let draft = shared.state().draft;
        let max = shared.config.limits.max_control_message;
        loop {
            match read_control(&mut reader, draft, max).await? {
                Some(msg) => route(&shared, msg).await?,
                None => return Err(Error::ProtocolViolation(Violation::ControlStreamEnded)),
            }
        }
    }
    .await;
    if let Err(err) = result {
        shared.fail(err);
    }
}

/// Where one message goes.
async fn route<T: Transport>(shared: &Ietf<T>, msg: Control) -> Result<(), Error> {
    let state = shared.state();
    let draft = state.draft;
    tracing::trace!(?msg, "control message in");
    if let Some(id) = super::first_request_id(&msg) {
        let namespace = match &msg {
            // Draft 16 moved it to a stream of its own.
            Control::SubscribeNamespace(_) if draft.has_namespace_messages() => {
                return Err(Error::ProtocolViolation(
                    Violation::SubscribeNamespaceOnControlStream,
                ))
            }
            // 14 and 15 withdraw and cancel it by namespace.
            Control::PublishNamespace(m) if !draft.has_namespace_messages() => {
                Some(m.namespace.clone())
            }
            _ => None,
        };
        return open(shared, id, namespace, msg).await;
    }
    // Where an answer, update or closing goes, and whether it ends the request there.
    let addressed = match &msg {
        Control::SubscribeOk(m) => Some((m.request_id, false)),
        Control::FetchOk(m) => Some((m.request_id, false)),
        Control::PublishOk(m) => Some((m.request_id, false)),
        Control::RequestOk { ok, .. } => Some((ok.request_id, false)),
        // An update names the subscription it updates.
        Control::RequestUpdate(m) => Some((m.subscription_id, false)),
        Control::Unsubscribe(id) | Control::FetchCancel(id) | Control::UnsubscribeNamespace(id) => {
            Some((*id, true))
        }
        Control::PublishDone(m) => Some((m.request_id, true)),
        Control::RequestError { error, .. } => Some((error.request_id, true)),
        // A withdrawal names an advertisement its sender made; a cancellation one its sender
        // received (ours). An unknown one is ignored.
        Control::PublishNamespaceDone(m) => match find(shared, &m.advertisement, false) {
            Some(id) => Some((id, true)),
            None => return Ok(()),
        },
        Control::PublishNamespaceCancel(m) => match find(shared, &m.advertisement, true) {
            Some(id) => Some((id, true)),
            None => return Ok(()),
        },
        _ => None,
    };
    if let Some((id, closes)) = addressed {
        return deliver(shared, id, msg, closes);
    }
    match msg {
        Control::MaxRequestId(max) => state.raise_peer_max(max),
        Control::Goaway(goaway) => shared.goaway_arrived(goaway.uri),
        // The drafts let a blocked peer say so; credit is granted ahead of its requests, so
        // there is nothing to do (moq-net closes the session on one, Starling does not).
        Control::RequestsBlocked(_) => Ok(()),
        _ => Err(Error::ProtocolViolation(
            Violation::UnexpectedMessageOnControlStream,
        )),
    }
}

/// The request a withdrawal or cancellation names: by id from 16, by namespace (the first
/// live one) on 14 and 15. An unknown one is ignored.
fn find<T: Transport>(shared: &Ietf<T>, advertisement: &Advertisement, ours: bool) -> Option<u64> {
    let state = shared.state();
    match advertisement {
        Advertisement::Request(id) => Some(*id),
        Advertisement::Namespace(namespace) => state
            .routes
            .lock()
            .iter()
            .filter(|(_, r)| r.ours == ours && r.namespace.as_ref() == Some(namespace))
            .map(|(id, _)| *id)
            .min(),
    }
}

/// Hand a message to the request it names; `closes` ends the request after it. A message
/// for no live request is dropped, as moq-net drops it (a PUBLISH_DONE after UNSUBSCRIBE).
fn deliver<T: Transport>(
    shared: &Ietf<T>,
    id: u64,
    msg: Control,
    closes: bool,
) -> Result<(), Error> {
    let state = shared.state();
    let mut routes = state.routes.lock();
    let Some(route) = routes.get(&id) else {
        return Ok(());
    };
    match route.tx.try_send(msg) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(_)) => {
            return Err(Error::Bound("messages queued for one request"))
        }
        // Its handler is gone; it is forgotten below.
        Err(mpsc::error::TrySendError::Closed(_)) => {}
    }
    if closes {
        routes.remove(&id);
    }
    Ok(())
}

/// A request the peer opened: its id is checked, a MAX_REQUEST_ID goes out when the window
/// needs it, and its handler starts with the first message.
async fn open<T: Transport>(
    shared: &Ietf<T>,
    id: u64,
    namespace: Option<starling_proto::Path>,
    first: Control,
) -> Result<(), Error> {
    let state = shared.state();
    let grant = state.admit(id)?;
    let (tx, rx) = mpsc::channel(ROUTE_QUEUE);
    {
        let mut routes = state.routes.lock();
        if routes.contains_key(&id) {
            return Err(Error::ProtocolViolation(Violation::RequestIdInUse));
        }
        routes.insert(
            id,
            Route {
                tx,
                namespace,
                ours: false,
            },
        );
    }
    if let Some(max) = grant {
        let mut control = state.control.lock().await;
        if let Some(writer) = control.as_mut() {
            Control::MaxRequestId(max).encode(state.draft, writer.queued())?;
            writer.flush().await?;
        }
    }
    let request = Request::mux(shared.clone(), id, rx);
    let task = shared.clone();
    shared.spawn(async move { super::handle(task, request, first).await });
    Ok(())
}
