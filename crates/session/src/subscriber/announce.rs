//! Hearing the peer's announcements under a prefix and turning them into routes in our origin
//! (docs/wire.md §4.2–4.4). Each announced broadcast becomes a dynamic broadcast whose tracks this
//! session pulls from the peer on demand.

use starling_model::entropy::{Map, Set};
use std::sync::Arc;

use starling_proto::{
    Announce, AnnounceDecoder, AnnounceInit, AnnounceOk, AnnounceRequest, AnnounceStatus,
    Announcement, BidiType, CompressedAnnouncement, DecodeError, Hops, Path, RouteCost, StreamCode,
};
use starling_transport::Transport;

use crate::error::Error;
use crate::hearing::Heard;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::{reset_code, Shared};
use crate::violation::Violation;
use crate::writer::Writer;

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
                if let Err(err) = state.drain() {
                    break Err(err);
                }
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
    by_id: Map<u64, Heard>,
    /// Live suffixes (and, on 06, their ids).
    by_suffix: Map<Path, u64>,
    /// lite-06: live ids we did not publish (reflections, or outside the peer's grant).
    dropped: Set<u64>,
    next_id: u64,
    /// The peer sent GOAWAY: every route it announced, now and later, costs the maximum.
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

    /// The peer is going away: re-price every live route to the maximum at once.
    fn drain(&mut self) -> Result<(), Error> {
        self.draining = true;
        for heard in self.by_id.values_mut() {
            heard.drain(&self.shared)?;
        }
        Ok(())
    }

    /// Publish a live announcement; false when it is dropped instead (outside the peer's
    /// grant), which still consumes its id.
    fn start(
        &mut self,
        id: u64,
        suffix: Path,
        chain: Vec<u64>,
        cost: RouteCost,
    ) -> Result<bool, Error> {
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
        let heard = Heard::start(
            &self.shared,
            self.origin.clone(),
            (path, wire),
            (chain, cost.charged(self.link)),
            self.draining,
            super::LitePull,
        )?;
        self.by_suffix.insert(suffix, id);
        self.by_id.insert(id, heard);
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
                    Some(chain) => self.start(id, suffix, chain, cost)?,
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
                    if let Some(heard) = self.by_id.remove(&id) {
                        self.by_suffix.retain(|_, v| *v != id);
                        heard.unpublish(&self.shared);
                        self.dropped.insert(id);
                    }
                    return Ok(());
                };
                let cost = cost.charged(self.link);
                match self.by_id.get_mut(&id) {
                    Some(heard) => heard.reprice(&self.shared, Some(chain), Some(cost)),
                    None => Err(Error::ProtocolViolation(Violation::UnknownAnnounceId)),
                }
            }
            Announcement::End { id } => {
                if id >= self.next_id {
                    return Err(Error::ProtocolViolation(Violation::UnknownAnnounceId));
                }
                if self.dropped.remove(&id) {
                    return Ok(());
                }
                let Some(heard) = self.by_id.remove(&id) else {
                    return Err(Error::ProtocolViolation(Violation::RetiredAnnounceId));
                };
                let suffix = heard
                    .path()
                    .strip_prefix(&self.base)
                    .unwrap_or_else(Path::empty);
                self.by_suffix.remove(&suffix);
                heard.withdraw(&self.shared, self.responder);
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
                if let Some(id) = self.by_suffix.get(&msg.suffix) {
                    if !self.shared.version.restart_supported() {
                        // Before 05 a live path is never announced twice.
                        return Err(Error::ProtocolViolation(Violation::DuplicateAnnounce));
                    }
                    let cost = RouteCost::UNKNOWN.charged(self.link);
                    if let Some(heard) = self.by_id.get_mut(id) {
                        heard.reprice(&self.shared, Some(chain), Some(cost))?;
                    }
                    return Ok(());
                }
                let id = self.next_id;
                self.next_id += 1;
                self.start(id, msg.suffix, chain, RouteCost::UNKNOWN)
                    .map(|_| ())
            }
            AnnounceStatus::Ended => {
                if let Some(id) = self.by_suffix.remove(&msg.suffix) {
                    if let Some(heard) = self.by_id.remove(&id) {
                        heard.withdraw(&self.shared, self.responder);
                    }
                }
                Ok(())
            }
        }
    }

    /// The stream ended: every broadcast it announced is gone, removed in one batch.
    fn end_all(&mut self) {
        self.by_suffix.clear();
        let heard = self.by_id.drain().map(|(_, heard)| heard);
        Heard::lost(&self.shared, heard);
    }
}
