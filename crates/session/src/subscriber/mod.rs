//! The subscriber half: hears the peer's announcements, pulls the tracks our readers ask for
//! (one upstream subscription per track, however many readers), and receives group streams.

mod announce;
mod fetch;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use starling_model::{Demand, Frame, TrackRequest};
use starling_proto::{
    BidiType, GroupHeader, LegacySubscribeOk, Path, StreamCode, Subscribe, SubscribeResponse,
    SubscribeUpdate, Track, TrackInfo,
};
use starling_transport::Transport;

use crate::error::Error;
use crate::frames::FrameReader;
use crate::pulls::{front_gone_grace, source_lost, unused, Pulled, Puller, Unregister};
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::{reset_code, Shared, Upstream};
use crate::violation::Violation;
use crate::writer::Writer;

pub(crate) use announce::announced;
pub(crate) use fetch::{fetch, request as fetch_request};

/// The moq-lite pull (every lite version).
#[derive(Clone, Copy)]
pub(crate) struct LitePull;

impl<T: Transport> Puller<T> for LitePull {
    fn pull<'a>(
        self,
        shared: &'a Arc<Shared<T>>,
        wire: &'a Path,
        request: &'a TrackRequest,
    ) -> impl std::future::Future<Output = Result<Pulled, Error>> + Send + 'a {
        pull(shared, wire, request)
    }
}

/// Pull one track from the peer: TRACK for its info, then, once a reader of groups arrived,
/// SUBSCRIBE until no reader is left. A track handed over from a lost source is subscribed
/// from where that source stopped, and must carry the same info.
async fn pull<T: Transport>(
    shared: &Arc<Shared<T>>,
    wire: &Path,
    request: &TrackRequest,
) -> Result<Pulled, Error> {
    let track = request.track();
    let limits = &shared.config.limits;
    let unused = unused(track, limits.linger);
    tokio::pin!(unused);
    let known = track.info();
    if known.is_none() || request.is_handover() {
        let info = request_info(shared, wire, track.name()).await?;
        match known {
            Some(known) if known != info => {
                // Another copy of the content must not change what readers were told.
                tracing::debug!(
                    track = track.name(),
                    ?known,
                    ?info,
                    "handover refused: track info differs"
                );
                return Err(Error::Stream(StreamCode::Internal));
            }
            Some(_) => {}
            None => track.set_info(info),
        }
    }
    // A TRACK request wants the info only. The SUBSCRIBE waits for a reader of groups and
    // carries its demand: sent earlier, it would ask for the live edge only, and a publisher
    // that honours that skips every group the reader's max age reaches back to (moq-net drops
    // them as stale), while the SUBSCRIBE_UPDATE with the real max age is still on its way.
    let mut demand = tokio::select! {
        biased;
        demand = track.demand_changed(None) => demand,
        _ = &mut unused => return Ok(Pulled::Unused),
    };
    // After a handover: the oldest group the lost source left unfinished, else the next one.
    let resume = if request.is_handover() {
        track.resume_point()
    } else {
        None
    };

    let id = shared.next_subscribe_id.fetch_add(1, Ordering::Relaxed);
    let arrived = Arc::new(Upstream {
        track: track.clone(),
        streams: Default::default(),
    });
    {
        let mut upstream = shared.upstream.lock();
        if upstream.len() >= limits.max_upstream_subscriptions {
            return Err(Error::Stream(StreamCode::Internal));
        }
        upstream.insert(id, arrived.clone());
    }
    let _registered = Unregister {
        shared: shared.clone(),
        id,
    };

    let (send, recv) = shared.transport.open_bi().await?;
    let mut writer = Writer::new(send, shared.version);
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
    writer.queue_varint(BidiType::Subscribe.code())?;
    // Readers' demand, aggregated (priority max, max age max) and clamped to the publisher's
    // window, goes upstream; it is updated as readers with larger demands arrive. A relay
    // asks for the whole window (`pull_window`).
    let window = track.info().map(|i| i.max_age_ms).unwrap_or(u64::MAX);
    let whole = shared.config.pull_window && window != u64::MAX;
    let wanted = |demand: Demand| SubscribeUpdate {
        priority: demand.priority,
        max_age_ms: if whole {
            window
        } else {
            demand.max_age_ms.min(window)
        },
        group_start: None,
        group_end: None,
        frame_start: 0,
        frame_end: None,
    };
    let first = wanted(demand);
    writer
        .message(&Subscribe {
            id,
            broadcast: wire.clone(),
            track: track.name().to_string(),
            priority: first.priority,
            max_age_ms: first.max_age_ms,
            group_start: resume,
            group_end: first.group_end,
            frame_start: first.frame_start,
            frame_end: first.frame_end,
        })
        .await?;

    // The first group the publisher serves (SUBSCRIBE_START) and the exclusive end
    // (SUBSCRIBE_END): the groups between them are owed. Before 05 the publisher answers one
    // OK (untyped on 01/02) and ends the subscription with a FIN alone.
    let mut first = None;
    let mut end = None;
    if !shared.version.has_typed_responses() {
        reader
            .message::<LegacySubscribeOk>(limits.max_control_message)
            .await?
            .ok_or(Error::Stream(StreamCode::Cancelled))?;
    }
    let mut front_gone = std::pin::pin!(front_gone_grace(track));
    loop {
        tokio::select! {
            biased;
            response = next_response(&mut reader, shared.version, limits.max_control_message) => {
                let response = match response {
                    Ok(response) => response,
                    Err(err) => match (err, end) {
                        // The publisher declared the end, then its stream died with its
                        // session before the FIN (moq-cli closes at the end of its input, at
                        // times before finishing every subscription): the END still says what
                        // is owed, and a track whose owed groups all arrived is whole.
                        (err @ (Error::Transport(_) | Error::Closed), Some(end)) => {
                            let owed = Owed { first, end, legacy: false };
                            if owed.settle(track, &arrived, demand, window, &mut unused).await {
                                tracing::debug!(track = track.name(), %err, "subscription ended after its END");
                                return Ok(Pulled::Finished);
                            }
                            return Err(err);
                        }
                        (err, _) => return Err(err),
                    },
                };
                match response {
                    Some(SubscribeResponse::Start { group }) => {
                        if first.is_none() && resume.is_some() {
                            // Unfinished groups below where the new source starts are lost.
                            track.abandon_orphans_below(group);
                        }
                        first = first.or(Some(group));
                    }
                    Some(SubscribeResponse::End { group, streams: count }) => end = Some((group, count)),
                    Some(SubscribeResponse::Ok { .. } | SubscribeResponse::Drop { .. }) => {}
                    None => {
                        // Before 05 (no END) whatever arrives within the grace is the end.
                        let legacy = !shared.version.has_track_stream();
                        let end = match end {
                            Some(end) => end,
                            None if legacy => (0, None),
                            None => {
                                return Err(Error::ProtocolViolation(Violation::SubscribeFinWithoutEnd))
                            }
                        };
                        let owed = Owed { first, end, legacy };
                        if !owed.settle(track, &arrived, demand, window, &mut unused).await {
                            tracing::debug!(track = track.name(), ?first, ?end, "owed group streams never arrived");
                        }
                        return Ok(Pulled::Finished);
                    }
                }
            }
            now = track.demand_changed(Some(demand)) => {
                demand = now;
                // 01/02 have no SUBSCRIBE_UPDATE: the subscription keeps what it first asked.
                if shared.version.has_subscribe_update() {
                    writer.message(&wanted(demand)).await?;
                }
            }
            _ = &mut unused => {
                // Last reader gone: unsubscribe with a FIN.
                writer.finish()?;
                return Ok(Pulled::Unused);
            }
            _ = track.closed() => {
                // Ended here (its front closed with the last route): unsubscribe.
                writer.finish()?;
                return Ok(Pulled::Unused);
            }
            _ = &mut front_gone => {
                // The track did not end within the grace: it ends here, as a front's
                // tracks do with its last route.
                writer.finish()?;
                return Err(Error::Stream(StreamCode::Internal));
            }
        }
    }
}

/// What a subscription's end owes: the groups from SUBSCRIBE_START (`first`) to the END's
/// exclusive group, or on lite-07 the number of streams the END counts.
struct Owed {
    first: Option<u64>,
    /// (END's group, END's stream count).
    end: (u64, Option<u64>),
    /// Before 05: no END, so whatever arrives within the grace.
    legacy: bool,
}

impl Owed {
    /// Wait for what is owed. QUIC does not order streams: a group stream the publisher opened
    /// before its END can reach us after the subscription's end. The subscription stays
    /// routable until what is owed arrived, or for a grace (the max age asked for, else 1 s),
    /// as moq-net waits. `true` when everything owed arrived (a legacy subscription never
    /// knows, so waits out the grace and answers `false`), or the last reader left.
    async fn settle(
        &self,
        track: &starling_model::TrackProducer,
        arrived: &Upstream,
        demand: Demand,
        window: u64,
        unused: &mut (impl std::future::Future<Output = ()> + Unpin),
    ) -> bool {
        let (end, count) = self.end;
        let grace = match demand.max_age_ms.min(window) {
            0 => OWED_GROUP_GRACE,
            ms => Duration::from_millis(ms),
        };
        let owed = async {
            match (count, self.first) {
                (Some(count), _) => arrived.streams.reached(count).await,
                (None, _) if self.legacy => std::future::pending::<()>().await,
                (None, Some(first)) => track.arrived(first..end).await,
                (None, None) => {}
            }
        };
        tokio::select! {
            biased;
            _ = owed => true,
            _ = tokio::time::sleep(grace) => false,
            _ = unused => true,
        }
    }
}

/// The next subscribe response: typed from 03; before (01/02) nothing follows the OK but the
/// FIN, which a read of a typed response would mistake for garbage.
async fn next_response<R: starling_transport::RecvStream>(
    reader: &mut Reader<R>,
    version: starling_proto::Version,
    max: usize,
) -> Result<Option<SubscribeResponse>, Error> {
    if version.has_typed_responses() {
        reader.typed::<SubscribeResponse>(max).await
    } else {
        reader.finished().await.map(|()| None)
    }
}

/// How long an ended subscription waits for an owed group stream when it asked for no max age.
const OWED_GROUP_GRACE: Duration = Duration::from_secs(1);

/// A track pulled over lite-01…04, which has no TRACK_INFO: moq-net's default max age (5 s), at
/// a millisecond timescale (frames are stamped on arrival).
pub(crate) const LEGACY_TRACK_INFO: TrackInfo = TrackInfo {
    priority: 0,
    max_age_ms: 5000,
    timescale: 1000,
};

/// TRACK → TRACK_INFO; our side stays open until the reply arrives (docs/wire.md §4.5).
async fn request_info<T: Transport>(
    shared: &Arc<Shared<T>>,
    wire: &Path,
    name: &str,
) -> Result<TrackInfo, Error> {
    if !shared.version.has_track_stream() {
        // Before 05 there is no TRACK: what moq-net assumes of such a track. Frames carry no
        // timestamp there, so they are stamped in milliseconds on arrival.
        return Ok(LEGACY_TRACK_INFO);
    }
    let limits = &shared.config.limits;
    let (send, recv) = shared.transport.open_bi().await?;
    let mut writer = Writer::new(send, shared.version);
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
    writer.queue_varint(BidiType::Track.code())?;
    writer
        .message(&Track {
            broadcast: wire.clone(),
            track: name.to_string(),
        })
        .await?;
    let info = tokio::time::timeout(
        limits.request_timeout,
        reader.message::<TrackInfo>(limits.max_control_message),
    )
    .await
    .map_err(|_| Error::Stream(StreamCode::ControlTimeout))?
    .map_err(|err| match reset_code(&err) {
        Some(code) => Error::Stream(code),
        None => err,
    })?
    .ok_or(Error::Stream(StreamCode::NotFound))?;
    // The reply is in; the peer may already have stopped our side, which is fine.
    let _ = writer.finish();
    Ok(info)
}

/// Receive one group stream into the track it belongs to (docs/wire.md §4.8).
pub(crate) async fn group<T: Transport>(shared: &Arc<Shared<T>>, reader: &mut Reader<T::Recv>) {
    let limits = &shared.config.limits;
    let header = match reader
        .message::<GroupHeader>(limits.max_control_message)
        .await
    {
        Ok(Some(header)) => header,
        Ok(None) => return,
        Err(err) => {
            reader.stop(err.stream_code().to_code());
            return;
        }
    };
    let upstream = shared.upstream.lock().get(&header.subscribe_id).cloned();
    let Some(upstream) = upstream else {
        reader.stop(StreamCode::Cancelled.to_code());
        return;
    };
    upstream.arrived(reader, header.sequence);
    let track = &upstream.track;
    let created = track.create_group(header.sequence);
    tracing::trace!(
        track = track.name(),
        sequence = header.sequence,
        ok = created.is_ok(),
        "upstream group stream"
    );
    let mut group = match created {
        Ok(group) => group,
        Err(err) => {
            reader.stop(err.stream_code().to_code());
            return;
        }
    };
    shared.stats.groups_received.fetch_add(1, Ordering::Relaxed);
    let mut frames = FrameReader::new(
        shared.config.model_limits.max_frame_bytes as u64,
        shared.version,
        shared.config.clock,
    );
    let result: Result<(), Error> = async {
        while let Some(size) = frames.read_into(reader, &mut group).await? {
            shared.stats.frames_received.fetch_add(1, Ordering::Relaxed);
            shared
                .stats
                .bytes_received
                .fetch_add(size as u64, Ordering::Relaxed);
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => group.finish(),
        // The session went mid-group: a front's next source continues it.
        Err(err) if source_lost(&err) => group.source_lost(),
        Err(err) => {
            let code = match reset_code(&err) {
                Some(code) => code,
                None => {
                    let code = err.stream_code();
                    shared.stats.stream_error(code);
                    reader.stop(code.to_code());
                    code
                }
            };
            group.abort(code);
        }
    }
}

/// One DATAGRAM: a single-frame group on an existing subscription (docs/wire.md §4.10). Anything that
/// does not decode or names no subscription of ours is dropped silently.
pub(crate) fn datagram<T: Transport>(shared: &Arc<Shared<T>>, payload: bytes::Bytes) {
    if !shared.version.has_datagrams() {
        return;
    }
    let Ok(datagram) = starling_proto::Datagram::decode(&payload, shared.version) else {
        return;
    };
    let upstream = shared.upstream.lock().get(&datagram.subscribe_id).cloned();
    let Some(upstream) = upstream else { return };
    let track = &upstream.track;
    let Ok(mut group) = track.create_group(datagram.sequence) else {
        return;
    };
    let size = datagram.payload.len() as u64;
    if group
        .write_frame(Frame {
            timestamp: datagram.timestamp,
            payload: datagram.payload,
        })
        .is_ok()
    {
        group.finish();
        shared.stats.datagram_received(size);
    }
}
