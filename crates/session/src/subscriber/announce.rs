//! Hearing the peer's announcements under a prefix and turning them into routes in our origin
//! (docs/wire.md §4.2–4.4). Each announced broadcast becomes a dynamic broadcast whose tracks this
//! session pulls from the peer on demand.

use starling_model::entropy::{Map, Set};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use starling_model::{BroadcastProducer, Route, RouteHandle};
use starling_proto::{
    Announce, AnnounceDecoder, AnnounceInit, AnnounceOk, AnnounceRequest, AnnounceStatus,
    Announcement, BidiType, CompressedAnnouncement, DecodeError, Hops, Path, RouteCost, StreamCode,
};
use starling_transport::Transport;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::{reset_code, Shared};
use crate::violation::Violation;
use crate::writer::Writer;

/// One live announcement from the peer.
struct Live {
    path: Path,
    route: RouteHandle,
    /// The route's chain, kept to re-price it when the peer drains.
    hops: Arc<[u64]>,
    broadcast: Arc<BroadcastProducer>,
    stop: CancellationToken,
    /// Its entry in the relay-wide state ledger, released with it.
    _entry: Option<crate::StateEntry>,
}

impl Live {
    fn end(self) -> RouteHandle {
        self.broadcast.close();
        self.stop.cancel();
        self.route
    }
}

impl<T: Transport> Announces<T> {
    /// Take a live announcement out, uncounting its route.
    fn take(&mut self, id: u64) -> Option<Live> {
        let live = self.by_id.remove(&id)?;
        self.shared.stats.routes.fetch_sub(1, Ordering::Relaxed);
        Some(live)
    }
}

/// Run one announce interest for `prefix` (relative to the root) for the session's lifetime.
/// Any failure on the stream ends the session, as moq-net does.
pub(crate) async fn announced<T: Transport>(shared: Arc<Shared<T>>, prefix: Path) {
    if let Err(err) = run(&shared, &prefix).await {
        let err = match reset_code(&err) {
            Some(_) => Error::Stream(StreamCode::Internal),
            None => err,
        };
        if !matches!(err, Error::Transport(_)) {
            shared.fail(err);
        }
    }
}

async fn run<T: Transport>(shared: &Arc<Shared<T>>, prefix: &Path) -> Result<(), Error> {
    let origin = shared.config.consume.clone().ok_or(Error::Closed)?;
    let base = shared.absolute(prefix)?;
    let (send, recv) = shared.transport.open_bi().await?;
    let mut writer = Writer::new(send, shared.version);
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
    writer.queue_varint(BidiType::Announce.code())?;
    writer
        .message(&AnnounceRequest {
            prefix: prefix.clone(),
            exclude_hop: shared.config.hop,
            hidden: shared.config.hear_hidden,
        })
        .await?;
    let limits = &shared.config.limits;
    let version = shared.version;
    // Who answered: from 05 the ANNOUNCE_OK names the peer's hop, which we append to each
    // chain. Before 05 there is none: on 04 the sender has appended itself already; on 01-03
    // (no ids on the wire) the session's assigned hop stands for the peer.
    let (responder, initial) = if version.has_announce_ok() {
        let ok = reader
            .message::<AnnounceOk>(limits.max_control_message)
            .await?
            .ok_or(Error::Decode(DecodeError::Truncated))?;
        (ok.hop, Vec::new())
    } else if version.has_announce_init() {
        let init = reader
            .message::<AnnounceInit>(limits.max_control_message)
            .await?
            .ok_or(Error::Decode(DecodeError::Truncated))?;
        (shared.peer.hop, init.suffixes)
    } else if version.has_hop_list() {
        (0, Vec::new())
    } else {
        (shared.peer.hop, Vec::new())
    };
    let link = shared.config.link_cost.or(shared.peer.cost).unwrap_or(1);

    let mut state = Announces {
        shared: shared.clone(),
        origin,
        base,
        responder,
        link,
        by_id: Map::default(),
        by_suffix: Map::default(),
        dropped: Set::default(),
        next_id: 0,
        draining: false,
    };
    // 01/02: what ANNOUNCE_INIT listed is live, as if announced one by one.
    for suffix in initial {
        state.on_announce(Announce {
            status: AnnounceStatus::Active,
            suffix,
            hops: Hops::new(),
        })?;
    }
    let mut decoder = shared
        .version
        .has_announce_compression()
        .then(AnnounceDecoder::new);
    let result = loop {
        let draining = state.draining;
        let next = async {
            if let Some(decoder) = &mut decoder {
                // Lite-07: references resolve against this stream's live announcements; one
                // that does not is session-fatal.
                match reader
                    .typed::<CompressedAnnouncement>(limits.max_control_message)
                    .await
                {
                    Ok(Some(msg)) => Some(
                        decoder
                            .resolve(msg)
                            .map_err(Error::from)
                            .and_then(|msg| state.on_announcement(msg)),
                    ),
                    Ok(None) => None,
                    Err(err) => Some(Err(err)),
                }
            } else if shared.version.has_announce_id() {
                match reader
                    .typed::<Announcement>(limits.max_control_message)
                    .await
                {
                    Ok(Some(msg)) => Some(state.on_announcement(msg)),
                    Ok(None) => None,
                    Err(err) => Some(Err(err)),
                }
            } else {
                match reader.message::<Announce>(limits.max_control_message).await {
                    Ok(Some(msg)) => Some(state.on_announce(msg)),
                    Ok(None) => None,
                    Err(err) => Some(Err(err)),
                }
            }
        };
        let step = tokio::select! {
            biased;
            _ = shared.going_away(), if !draining => {
                state.drain();
                continue;
            }
            step = next => step,
        };
        match step {
            None => break Ok(()),
            Some(Err(err)) => break Err(err),
            Some(Ok(())) => {}
        }
    };
    state.end_all();
    result
}

struct Announces<T: Transport> {
    shared: Arc<Shared<T>>,
    origin: starling_model::Origin,
    base: Path,
    responder: u64,
    link: u64,
    /// lite-06: live ids.
    by_id: Map<u64, Live>,
    /// Live suffixes (and, on 06, their ids).
    by_suffix: Map<Path, u64>,
    /// lite-06: live ids we did not publish (reflections, or outside the peer's grant).
    dropped: Set<u64>,
    next_id: u64,
    /// The peer sent GOAWAY: every route it announced, now and later, costs the maximum, so
    /// any other route wins while its sessions move (moq-net's drain pricing).
    draining: bool,
}

impl<T: Transport> Announces<T> {
    /// The full chain for a received hop list, or `None` when it must be dropped.
    fn chain(&self, hops: &Hops) -> Option<Vec<u64>> {
        let mut chain: Vec<u64> = hops.iter().collect();
        if self.responder != 0 {
            chain.push(self.responder);
        }
        if chain.first().is_none_or(|first| *first == 0) {
            chain.insert(0, self.shared.anonymous_stamp);
        }
        let hop = self.shared.config.hop;
        let reflected = chain.contains(&hop)
            || (self.responder != 0 && hops.iter().any(|h| h == self.responder));
        if reflected || chain.len() > self.shared.config.max_hops {
            return None;
        }
        Some(chain)
    }

    fn route(&self, chain: Vec<u64>, cost: RouteCost) -> Route {
        let cost = if self.draining {
            RouteCost::MAX
        } else {
            cost.charged(self.link)
        };
        Route::learned(chain, cost, self.shared.config.cluster_peer)
    }

    /// The peer is going away: re-price every live route to the maximum at once.
    fn drain(&mut self) {
        self.draining = true;
        for live in self.by_id.values() {
            let route = Route {
                hops: live.hops.clone(),
                cost: RouteCost::MAX,
                peer: self.shared.config.cluster_peer,
            };
            self.origin.update_route(&live.route, route);
        }
    }

    /// Publish a live announcement; false when it is dropped instead (outside the peer's
    /// grant), which still consumes its id.
    fn start(&mut self, id: u64, suffix: Path, route: Route) -> Result<bool, Error> {
        if self.by_suffix.len() + self.dropped.len() >= self.shared.config.limits.max_announces {
            return Err(Error::Bound("announces"));
        }
        let path = self
            .base
            .join(&suffix)
            .map_err(|_| Error::ProtocolViolation(Violation::AnnouncedPathTooLong))?;
        let wire = path
            .strip_prefix(&self.shared.config.root)
            .unwrap_or_else(|| path.clone());
        if !self.shared.config.may_publish(&wire) {
            tracing::debug!(%wire, "announcement outside the peer's grant dropped");
            return Ok(false);
        }
        let entry = self.shared.charge_route()?;
        let broadcast = Arc::new(self.shared.config.dynamic_broadcast());
        let hops = route.hops.clone();
        let handle = self
            .origin
            .publish(path.clone(), broadcast.consume(), route)?;
        let stop = CancellationToken::new();
        let task = crate::pulls::serve_requests(
            self.shared.clone(),
            wire,
            broadcast.clone(),
            super::LitePull,
        );
        let task_stop = stop.clone();
        self.shared.spawn(async move {
            tokio::select! {
                biased;
                _ = task_stop.cancelled() => {}
                _ = task => {}
            }
        });
        self.by_suffix.insert(suffix, id);
        self.shared.stats.routes.fetch_add(1, Ordering::Relaxed);
        self.by_id.insert(
            id,
            Live {
                path,
                route: handle,
                hops,
                broadcast,
                stop,
                _entry: entry,
            },
        );
        Ok(true)
    }

    fn on_announcement(&mut self, msg: Announcement) -> Result<(), Error> {
        match msg {
            Announcement::Start { suffix, hops, cost } => {
                let id = self.next_id;
                self.next_id += 1;
                if self.by_suffix.contains_key(&suffix) {
                    return Err(Error::ProtocolViolation(Violation::DuplicateAnnounce));
                }
                let published = match self.chain(&hops) {
                    Some(chain) => {
                        let route = self.route(chain, cost);
                        self.start(id, suffix, route)?
                    }
                    None => false,
                };
                if !published {
                    // Dropped, but the id is consumed and stays live until its END.
                    self.dropped.insert(id);
                }
                Ok(())
            }
            Announcement::Update { id, hops, cost } => {
                if id >= self.next_id {
                    return Err(Error::ProtocolViolation(Violation::UnknownAnnounceId));
                }
                if self.dropped.contains(&id) {
                    return Ok(());
                }
                let Some(chain) = self.chain(&hops) else {
                    // Now a reflection: withdraw it.
                    if let Some(live) = self.take(id) {
                        self.by_suffix.retain(|_, v| *v != id);
                        self.origin.unpublish_all([live.end()]);
                        self.dropped.insert(id);
                    }
                    return Ok(());
                };
                let route = self.route(chain, cost);
                match self.by_id.get_mut(&id) {
                    Some(live) => {
                        live.hops = route.hops.clone();
                        self.origin.update_route(&live.route, route);
                    }
                    None => return Err(Error::ProtocolViolation(Violation::UnknownAnnounceId)),
                }
                Ok(())
            }
            Announcement::End { id } => {
                if id >= self.next_id {
                    return Err(Error::ProtocolViolation(Violation::UnknownAnnounceId));
                }
                if self.dropped.remove(&id) {
                    return Ok(());
                }
                let Some(live) = self.take(id) else {
                    return Err(Error::ProtocolViolation(Violation::RetiredAnnounceId));
                };
                let suffix = live
                    .path
                    .strip_prefix(&self.base)
                    .unwrap_or_else(Path::empty);
                self.by_suffix.remove(&suffix);
                // An explicit END: routes through the peer go stale (cluster statement 15).
                self.origin.withdraw_all(self.responder, [live.end()]);
                Ok(())
            }
            Announcement::Unknown { .. } => Ok(()),
        }
    }

    /// Status announcements (before 06), keyed by suffix.
    fn on_announce(&mut self, msg: Announce) -> Result<(), Error> {
        match msg.status {
            AnnounceStatus::Active | AnnounceStatus::Restart => {
                let Some(chain) = self.chain(&msg.hops) else {
                    return Ok(());
                };
                let route = self.route(chain, RouteCost::UNKNOWN);
                if let Some(id) = self.by_suffix.get(&msg.suffix) {
                    if !self.shared.version.restart_supported() {
                        // Before 05 a live path is never announced twice.
                        return Err(Error::ProtocolViolation(Violation::DuplicateAnnounce));
                    }
                    if let Some(live) = self.by_id.get_mut(id) {
                        live.hops = route.hops.clone();
                        self.origin.update_route(&live.route, route);
                    }
                    return Ok(());
                }
                let id = self.next_id;
                self.next_id += 1;
                self.start(id, msg.suffix, route).map(|_| ())
            }
            AnnounceStatus::Ended => {
                if let Some(id) = self.by_suffix.remove(&msg.suffix) {
                    if let Some(live) = self.take(id) {
                        self.origin.withdraw_all(self.responder, [live.end()]);
                    }
                }
                Ok(())
            }
        }
    }

    /// The stream ended: every broadcast it announced is gone, removed in one batch.
    fn end_all(&mut self) {
        let handles: Vec<RouteHandle> = self.by_id.drain().map(|(_, live)| live.end()).collect();
        self.shared
            .stats
            .routes
            .fetch_sub(handles.len() as u64, Ordering::Relaxed);
        self.by_suffix.clear();
        #[cfg(feature = "faults")]
        if crate::faults::planted(crate::faults::Fault::KeepRoutesOfLostPeers) {
            std::mem::forget(handles);
            return;
        }
        self.origin.unpublish_all(handles);
    }
}
