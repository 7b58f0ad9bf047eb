//! The subscriber half of an IETF session (docs/wire-ietf.md §4.10, §4.11, §5, §7.4 items 1
//! and 3): the peer's namespaces become routes in the origin we consume, each a dynamic
//! broadcast whose tracks are pulled with SUBSCRIBE, one upstream subscription per track
//! however many readers, and the subgroup streams and datagrams fill the shared track.
//!
//! A subscription asks for everything from the start of the latest group (Unfiltered, which
//! moq-net serves so on every draft), so each group arrives whole from its first object and
//! maps onto one model group; a stream that does not start there, skips an object, or is not
//! subgroup 0 is refused (stopped), as moq-net refuses it.

use starling_model::entropy::Map;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use starling_model::{Demand, Frame, TrackRequest};
use starling_proto::ietf::datagram::{DatagramBody, ObjectDatagram};
use starling_proto::ietf::namespace::{ClusterParams, PublishNamespace, SubscribeNamespace};
use starling_proto::ietf::reply::{RefusalCode, Refused, RequestOk};
use starling_proto::ietf::subgroup::{status, ObjectHeader, SubgroupFlags, SubgroupHeader};
use starling_proto::ietf::subscribe::{Subscribe, DEFAULT_PRIORITY};
use starling_proto::ietf::{Control, Filter};
use starling_proto::{Path, RouteCost, StreamCode, TrackInfo};
use starling_transport::Transport;

use super::data::{Object, ObjectIds};
use super::request::Request;
use super::{refuse, wire_stream_code};
use crate::error::Error;
use crate::frames::read_payload;
use crate::hearing::Heard;
use crate::pulls::{unused, PullEnd, PullWire, Pulled, Puller, Unregister};
use crate::reader::Reader;
use crate::shared::ietf::Ietf;
use crate::shared::Upstream;
use crate::violation::Violation;

/// How long a data stream waits for its track alias to be bound (moq-net waits as long).
const ALIAS_WAIT: Duration = Duration::from_secs(1);

/// How long an ended subscription waits for the group streams its PUBLISH_DONE counts.
const OWED_GRACE: Duration = Duration::from_secs(1);

/// Re-price `heard` as a re-advertisement says (MoQ Cluster: a REQUEST_UPDATE on
/// PUBLISH_NAMESPACE, a repeated NAMESPACE; the link's price in the cost): what is absent, or
/// sent by a peer that did not declare clustering, is kept. A chain that now passes through
/// us (or runs too long) takes the route out of the origin, as lite's ANNOUNCE_UPDATE does,
/// and a later clean one puts it back.
fn reprice<T: Transport>(
    shared: &Ietf<T>,
    heard: &mut Heard,
    cluster: Option<&ClusterParams>,
) -> Result<(), Error> {
    let cluster = cluster.filter(|_| shared.state().peer_clusters());
    let hops = cluster
        .and_then(|c| c.hop_path.as_ref())
        .map(|hops| hops.as_slice().to_vec());
    let cost = cluster
        .and_then(|c| c.route_cost)
        .map(|cost| RouteCost::new(cost).charged(shared.link_cost()));
    heard.reprice(shared, hops, cost)
}

/// Publish the peer's namespace `wire` (relative to the root) as a route, or say why not.
fn publish_route<T: Transport>(
    shared: &Ietf<T>,
    wire: &Path,
    cluster: Option<&ClusterParams>,
) -> Result<Result<Heard, RefusalCode>, Error> {
    let state = shared.state();
    let Some(origin) = shared.config.consume.clone() else {
        return Ok(Err(RefusalCode::Unauthorized));
    };
    if !shared.config.may_publish(wire) {
        return Ok(Err(RefusalCode::Unauthorized));
    }
    let hop_path = cluster.and_then(|c| c.hop_path.as_ref());
    let link = shared.link_cost();
    let (chain, cost) = if state.peer_clusters() {
        let hops = hop_path.ok_or(Error::ProtocolViolation(
            Violation::AdvertisementWithoutHopPath,
        ))?;
        if hops.contains(shared.config.hop) {
            return Ok(Err(RefusalCode::Uninterested));
        }
        let cost = RouteCost::new(cluster.and_then(|c| c.route_cost).unwrap_or(0));
        (hops.as_slice().to_vec(), cost.charged(link))
    } else {
        if hop_path.is_some() {
            return Err(Error::ProtocolViolation(
                Violation::ClusterParametersUndeclared,
            ));
        }
        (vec![shared.peer_hop()], RouteCost::UNKNOWN.charged(link))
    };
    if chain.len() > shared.config.max_hops {
        return Ok(Err(RefusalCode::Uninterested));
    }
    if shared.stats.routes.load(Ordering::Relaxed) as usize >= shared.config.limits.max_announces {
        return Err(Error::Bound("announces"));
    }
    let path = shared.absolute(wire)?;
    let draining = shared.goaway.lock().is_some();
    let heard = Heard::start(
        shared,
        origin,
        (path, wire.clone()),
        (chain, cost),
        draining,
        IetfPull(shared.clone()),
    )?;
    Ok(Ok(heard))
}

/// The peer's PUBLISH_NAMESPACE: a route while the request lives (until PUBLISH_NAMESPACE_DONE
/// on 14-16, the peer's FIN from 17).
pub(crate) async fn publish_namespace<T: Transport>(
    shared: &Ietf<T>,
    request: &mut Request<T>,
    msg: PublishNamespace,
) -> Result<(), Error> {
    let cluster = (msg.cluster != ClusterParams::default()).then_some(&msg.cluster);
    let mut heard = match publish_route(shared, &msg.namespace, cluster)? {
        Ok(heard) => heard,
        Err(code) => {
            return refuse(
                request,
                Refused::PublishNamespace,
                code,
                "namespace not accepted",
            )
            .await
        }
    };
    let result = async {
        request
            .send(&Control::RequestOk {
                answers: Some(Refused::PublishNamespace),
                ok: RequestOk {
                    request_id: msg.request_id,
                },
            })
            .await?;
        loop {
            let next = tokio::select! {
                biased;
                _ = shared.going_away(), if !heard.draining() => {
                    heard.drain(shared)?;
                    continue;
                }
                next = request.recv() => next,
            };
            match next {
                Ok(Some(Control::PublishNamespaceDone(_))) | Ok(None) => return Ok(true),
                // A cluster re-pricing: the new cost (and chain) of the same route.
                Ok(Some(Control::RequestUpdate(update))) => {
                    let cluster = ClusterParams {
                        hop_path: update.hop_path.clone(),
                        route_cost: update.route_cost,
                    };
                    reprice(shared, &mut heard, Some(&cluster))?;
                    let ok = Control::RequestOk {
                        answers: None,
                        ok: RequestOk {
                            request_id: update.request_id,
                        },
                    };
                    request.send(&ok).await?;
                }
                Ok(Some(_)) => {
                    return Err(Error::ProtocolViolation(
                        Violation::UnexpectedMessageOnPublishNamespace,
                    ))
                }
                Err(Error::Transport(_)) => return Ok(false),
                Err(err) => return Err(err),
            }
        }
    }
    .await;
    if matches!(result, Ok(true)) {
        heard.withdraw(shared, shared.peer_hop());
    } else {
        Heard::lost(shared, [heard]);
    }
    result.map(|_| ())
}

/// Ask the peer for its namespaces under `prefix` (a client listening for announcements):
/// from 16 they come on the request as NAMESPACE and NAMESPACE_DONE; on 14 and 15 as
/// PUBLISH_NAMESPACE requests of the peer's, served like any other.
pub(crate) async fn subscribe_namespace<T: Transport>(shared: Ietf<T>, prefix: Path) {
    let result: Result<(), Error> = async {
        let state = shared.state();
        let draft = state.draft;
        state
            .peer_setup(shared.config.limits.handshake_timeout)
            .await?;
        let hidden = shared.config.hear_hidden && state.peer_hides();
        let mut request = Request::open(&shared, None, |id| {
            Control::SubscribeNamespace(SubscribeNamespace {
                request_id: id,
                prefix: prefix.clone(),
                options: 1,
                hidden,
            })
        })
        .await?;
        match request.reply().await? {
            Some(Control::RequestOk { .. }) => {}
            Some(Control::RequestError { error, .. }) => {
                tracing::debug!(%prefix, reason = %error.reason, "SUBSCRIBE_NAMESPACE refused");
                return Ok(());
            }
            None => return Ok(()),
            Some(_) => {
                return Err(Error::ProtocolViolation(
                    Violation::UnexpectedSubscribeNamespaceReply,
                ))
            }
        }
        let mut live: Map<Path, Heard> = Map::default();
        let mut draining = false;
        let result = async {
            loop {
                let next = tokio::select! {
                    biased;
                    _ = shared.going_away(), if !draining => {
                        // Every route through a draining peer costs the maximum.
                        draining = true;
                        for heard in live.values_mut() {
                            heard.drain(&shared)?;
                        }
                        continue;
                    }
                    next = request.recv() => next,
                };
                match next {
                    Ok(Some(Control::Namespace(ns))) if draft.has_namespace_messages() => {
                        let wire = prefix
                            .join(&ns.suffix)
                            .map_err(|_| Error::ProtocolViolation(Violation::NamespaceTooLong))?;
                        // A repeat for a live suffix is an update.
                        if let Some(heard) = live.get_mut(&wire) {
                            reprice(&shared, heard, ns.cluster.as_ref())?;
                            continue;
                        }
                        if let Ok(heard) = publish_route(&shared, &wire, ns.cluster.as_ref())? {
                            live.insert(wire, heard);
                        }
                    }
                    Ok(Some(Control::NamespaceDone(ns))) if draft.has_namespace_messages() => {
                        let wire = prefix
                            .join(&ns.suffix)
                            .map_err(|_| Error::ProtocolViolation(Violation::NamespaceTooLong))?;
                        if let Some(heard) = live.remove(&wire) {
                            heard.withdraw(&shared, shared.peer_hop());
                        }
                    }
                    Ok(None) | Err(Error::Transport(_)) => return Ok(()),
                    Ok(Some(_)) => {
                        return Err(Error::ProtocolViolation(
                            Violation::UnexpectedMessageOnSubscribeNamespace,
                        ))
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        .await;
        Heard::lost(&shared, live.drain().map(|(_, heard)| heard));
        result
    }
    .await;
    if let Err(err) = result {
        if !matches!(err, Error::Transport(_) | Error::Closed) {
            shared.fail(err);
        }
    }
}

/// The lite stream code an IETF refusal of a SUBSCRIBE stands for (docs/wire-ietf.md §7.4
/// item 8).
fn refusal_code(code: u64, draft: starling_proto::ietf::Draft) -> StreamCode {
    let does_not_exist = RefusalCode::DoesNotExist.code(draft, Refused::Subscribe);
    match code {
        0x1 => StreamCode::Unroutable,
        c if c == does_not_exist => StreamCode::NotFound,
        _ => StreamCode::Internal,
    }
}

/// The IETF drafts' pull.
pub(crate) struct IetfPull<T: Transport>(pub Ietf<T>);

impl<T: Transport> Clone for IetfPull<T> {
    fn clone(&self) -> Self {
        IetfPull(self.0.clone())
    }
}

impl<T: Transport> Puller<T> for IetfPull<T> {
    async fn pull(
        self,
        _shared: &std::sync::Arc<crate::shared::Shared<T>>,
        wire: &Path,
        request: &TrackRequest,
    ) -> Result<Pulled, Error> {
        pull(&self.0, wire, request).await
    }
}

/// Pull one track from the peer: SUBSCRIBE, the info from SUBSCRIBE_OK, the groups on their
/// streams, until PUBLISH_DONE or no reader is left (then UNSUBSCRIBE on 14-16, STOP_SENDING
/// and FIN from 17).
async fn pull<T: Transport>(
    shared: &Ietf<T>,
    wire: &Path,
    request: &TrackRequest,
) -> Result<Pulled, Error> {
    let state = shared.state();
    let draft = state.draft;
    let track = request.track();
    let limits = &shared.config.limits;
    let unused = unused(track, limits.linger);
    tokio::pin!(unused);
    if shared.upstream.lock().len() >= limits.max_upstream_subscriptions {
        return Err(Error::Stream(StreamCode::Internal));
    }
    let priority = track
        .demand()
        .map_or(DEFAULT_PRIORITY, |demand| 255 - demand.priority);
    let mut upstream = Request::open(shared, None, |id| {
        Control::Subscribe(Subscribe {
            request_id: id,
            namespace: wire.clone(),
            track: track.name().to_string(),
            priority,
            filter: Filter::Unfiltered,
            ..Subscribe::default()
        })
    })
    .await?;
    let id = upstream.id;
    let answer = tokio::time::timeout(limits.request_timeout, upstream.reply())
        .await
        .map_err(|_| Error::Stream(StreamCode::ControlTimeout))??;
    let ok = match answer {
        Some(Control::SubscribeOk(ok)) => ok,
        Some(Control::RequestError { error, .. }) => {
            return Err(Error::Stream(refusal_code(error.code, draft)))
        }
        None => return Err(Error::Stream(StreamCode::Cancelled)),
        Some(_) => {
            return Err(Error::ProtocolViolation(
                Violation::UnexpectedSubscribeReply,
            ))
        }
    };
    if track.info().is_none() {
        let defaults = TrackInfo::default();
        track.set_info(TrackInfo {
            priority: ok
                .properties
                .priority
                .map_or(defaults.priority, |p| 255 - p),
            max_age_ms: defaults.max_age_ms,
            timescale: ok
                .properties
                .timescale
                .filter(|t| *t > 0)
                .unwrap_or(defaults.timescale),
        });
    }
    let alias = ok.track_alias;
    let arrived = Arc::new(Upstream {
        track: track.clone(),
        streams: Default::default(),
    });
    {
        let mut aliases = shared.upstream.lock();
        if aliases.contains_key(&alias) {
            let err = Error::ProtocolViolation(Violation::TrackAliasInUse);
            shared.fail(err.clone());
            return Err(err);
        }
        aliases.insert(alias, arrived.clone());
    }
    state.aliases_changed.notify_waiters();
    let _registered = Unregister {
        shared: shared.shared().clone(),
        id: alias,
    };
    let demand = track.demand().unwrap_or_default();
    let subscription = IetfWire {
        upstream,
        arrived,
        id,
        draft,
    };
    crate::pulls::follow(subscription, track, demand, unused.as_mut()).await
}

/// An IETF subscription's request stream as the pull engine drives it.
struct IetfWire<T: Transport> {
    upstream: Request<T>,
    arrived: Arc<Upstream>,
    id: u64,
    draft: starling_proto::ietf::Draft,
}

impl<T: Transport> PullWire for IetfWire<T> {
    async fn next(&mut self) -> Result<Option<PullEnd>, Error> {
        match self.upstream.reply().await? {
            Some(Control::PublishDone(done)) => {
                // Streams may trail the PUBLISH_DONE: wait for those it counts.
                let answer = match done.status {
                    0x2 | 0x3 => Ok(Pulled::Finished),
                    0x1 => Err(Error::Stream(StreamCode::Unroutable)),
                    _ => Err(Error::Stream(StreamCode::Internal)),
                };
                let arrived = self.arrived.clone();
                Ok(Some(PullEnd {
                    owed: Box::pin(async move { arrived.streams.reached(done.stream_count).await }),
                    grace: OWED_GRACE,
                    settled: answer.clone(),
                    unsettled: answer,
                }))
            }
            Some(Control::RequestOk { .. }) => Ok(None),
            // The subscription closed without PUBLISH_DONE.
            None => Err(Error::Stream(StreamCode::Internal)),
            Some(_) => Err(Error::ProtocolViolation(
                Violation::UnexpectedMessageOnSubscribe,
            )),
        }
    }

    // The drafts' subscription keeps what it first asked for.
    async fn update(&mut self, _demand: Demand) -> Result<(), Error> {
        Ok(())
    }

    fn ended(&mut self) {
        self.upstream.finish();
    }

    /// UNSUBSCRIBE on 14-16, STOP_SENDING CANCELLED and our FIN from 17.
    async fn unsubscribe(mut self) -> Result<(), Error> {
        if self.draft.has_control_stream() {
            let _ = self.upstream.send(&Control::Unsubscribe(self.id)).await;
            self.upstream.finish();
        } else {
            self.upstream.cancel(StreamCode::Cancelled.to_code());
        }
        Ok(())
    }
}

/// The subscription an alias names, waiting a little for its SUBSCRIBE_OK (a data stream can
/// overtake it).
async fn bound<T: Transport>(shared: &Ietf<T>, alias: u64) -> Option<Arc<Upstream>> {
    // Bound already, as nearly every stream finds it: no timer armed.
    if let Some(upstream) = shared.upstream.lock().get(&alias).cloned() {
        return Some(upstream);
    }
    let state = shared.state();
    let wait = async {
        loop {
            let notified = state.aliases_changed.notified();
            if let Some(upstream) = shared.upstream.lock().get(&alias).cloned() {
                return upstream;
            }
            notified.await;
        }
    };
    tokio::time::timeout(ALIAS_WAIT, wait).await.ok()
}

/// Read one object header, the stream's FIN before it being `None`.
async fn next_object<R: starling_transport::RecvStream>(
    reader: &mut Reader<R>,
    draft: starling_proto::ietf::Draft,
    properties: bool,
    max_frame: u64,
) -> Result<Option<ObjectHeader>, Error> {
    reader
        .unit(|buf| {
            Ok(
                ObjectHeader::peek(buf, draft, properties, max_frame)?.map(|(header, used)| {
                    let _ = buf.split_to(used);
                    header
                }),
            )
        })
        .await
}

/// Receive one subgroup stream into the group it carries (docs/wire-ietf.md §5.1, §5.2).
pub(crate) async fn subgroup<T: Transport>(
    shared: &Ietf<T>,
    reader: &mut Reader<T::Recv>,
    flags: SubgroupFlags,
) {
    let draft = shared.state().draft;
    let refuse_stream = |reader: &mut Reader<T::Recv>, code: StreamCode| {
        reader.stop(wire_stream_code(code, draft));
    };
    let header = match reader
        .unit(|buf| {
            Ok(SubgroupHeader::peek(buf, draft)?.map(|(header, used)| {
                let _ = buf.split_to(used);
                header
            }))
        })
        .await
    {
        Ok(Some(header)) => header,
        Ok(None) => return,
        Err(err) => {
            if matches!(err, Error::Decode(_)) {
                shared.fail(err);
            }
            return;
        }
    };
    if header.subgroup != 0 {
        refuse_stream(reader, StreamCode::Internal);
        return;
    }
    let Some(upstream) = bound(shared, header.track_alias).await else {
        refuse_stream(reader, StreamCode::Internal);
        return;
    };
    upstream.arrived(reader, header.group);
    let track = &upstream.track;
    let max_frame = shared.config.model_limits.max_frame_bytes as u64;
    let timescale = track.info().map_or(1000, |i| i.timescale);
    let mut ids = ObjectIds::default();
    let first = match next_object(reader, draft, flags.properties, max_frame).await {
        Ok(Some(first)) => first,
        Ok(None) => return,
        Err(err) => {
            refuse_stream(reader, err.stream_code());
            return;
        }
    };
    let Ok(first_id) = ids.next(&first) else {
        refuse_stream(reader, StreamCode::Internal);
        return;
    };
    let first = Object::of(first, first_id);
    if first.length == 0 && first.status == status::END_OF_TRACK {
        // "Group n does not exist; the track ends at n": PUBLISH_DONE settles the rest.
        return;
    }
    if first.id != 0 {
        // A group with no head (Starling asks for whole groups).
        refuse_stream(reader, StreamCode::Internal);
        return;
    }
    let mut group = match track.create_group(header.group) {
        Ok(group) => group,
        Err(err) => {
            refuse_stream(reader, err.stream_code());
            return;
        }
    };
    shared.stats.groups_received.fetch_add(1, Ordering::Relaxed);
    let result: Result<(), Error> = async {
        let mut object = first;
        let mut expected = 0u64;
        loop {
            if object.id != expected {
                return Err(Error::Stream(StreamCode::Internal));
            }
            expected += 1;
            if object.length == 0 {
                match object.status {
                    status::NORMAL => group.write_frame(Frame {
                        timestamp: object
                            .timestamp
                            .unwrap_or_else(|| arrival(timescale, &shared.config.clock)),
                        payload: Bytes::new(),
                    })?,
                    status::END_OF_GROUP | status::END_OF_TRACK => return Ok(()),
                    _ => return Err(Error::Stream(StreamCode::Internal)),
                }
            } else {
                let timestamp = object
                    .timestamp
                    .unwrap_or_else(|| arrival(timescale, &shared.config.clock));
                read_payload(reader, &mut group, timestamp, object.length).await?;
                shared
                    .stats
                    .bytes_received
                    .fetch_add(object.length as u64, Ordering::Relaxed);
            }
            shared.stats.frames_received.fetch_add(1, Ordering::Relaxed);
            let Some(next) = next_object(reader, draft, flags.properties, max_frame).await? else {
                return Ok(());
            };
            let id = ids.next(&next)?;
            object = Object::of(next, id);
        }
    }
    .await;
    match result {
        Ok(()) => group.finish(),
        Err(err) => {
            let code = match &err {
                Error::Transport(starling_transport::TransportError::Reset(code)) => {
                    super::lite_stream_code(*code, draft)
                }
                _ => {
                    let code = err.stream_code();
                    shared.stats.stream_error(code);
                    refuse_stream(reader, code);
                    code
                }
            };
            group.abort(code);
        }
    }
}

/// Now by `clock`, in `timescale` units: the stamp of an object that carries no timestamp.
fn arrival(timescale: u64, clock: &crate::Clock) -> u64 {
    let ms = clock.wall_ms();
    if timescale == 1000 {
        ms
    } else {
        (ms as u128 * timescale as u128 / 1000).min(u64::MAX as u128) as u64
    }
}

/// One OBJECT_DATAGRAM: a one-frame group of a subscription (object 0 only; others, and
/// unbound aliases, are dropped). One that does not decode ends the session.
pub(crate) fn datagram<T: Transport>(shared: &Ietf<T>, payload: Bytes) -> Result<(), Error> {
    let draft = shared.state().draft;
    let datagram = ObjectDatagram::decode(&payload, draft)?;
    if datagram.object.unwrap_or(0) != 0 {
        return Ok(());
    }
    let payload = match datagram.body {
        DatagramBody::Payload(payload) => payload,
        DatagramBody::Status(status::NORMAL) => Bytes::new(),
        DatagramBody::Status(_) => return Ok(()),
    };
    let upstream = shared.upstream.lock().get(&datagram.track_alias).cloned();
    let Some(upstream) = upstream else {
        return Ok(());
    };
    let track = &upstream.track;
    let timescale = track.info().map_or(1000, |i| i.timescale);
    let Ok(mut group) = track.create_group(datagram.group) else {
        return Ok(());
    };
    let size = payload.len() as u64;
    let timestamp = datagram
        .properties
        .and_then(|p| p.timestamp)
        .unwrap_or_else(|| arrival(timescale, &shared.config.clock));
    if group.write_frame(Frame { timestamp, payload }).is_ok() {
        group.finish();
        shared.stats.datagram_received(size);
    }
    Ok(())
}
