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
use crate::pulls::{source_lost, unused, PullEnd, PullWire, Pulled, Puller, Unregister};
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
    let demand = tokio::select! {
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
    // Readers' demand, aggregated (priority max, max age max) and clamped to the publisher's
    // window, goes upstream; it is updated as readers with larger demands arrive. A relay
    // asks for the whole window (`pull_window`).
    let window = track.info().map(|i| i.max_age_ms).unwrap_or(u64::MAX);
    let mut subscription = LiteWire::<T> {
        version: shared.version,
        max_message: limits.max_control_message,
        writer: Writer::new(send, shared.version),
        reader: Reader::new(recv, shared.version, &shared.budget, Rank::Control),
        arrived,
        resume,
        first: None,
        end: None,
        demand,
        window,
        whole: shared.config.pull_window && window != u64::MAX,
    };
    subscription
        .writer
        .queue_varint(BidiType::Subscribe.code())?;
    let first = subscription.wanted(demand);
    subscription
        .writer
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
    // Before 05 the publisher answers one OK (untyped on 01/02) and ends the subscription
    // with a FIN alone.
    if !shared.version.has_typed_responses() {
        subscription
            .reader
            .message::<LegacySubscribeOk>(limits.max_control_message)
            .await?
            .ok_or(Error::Stream(StreamCode::Cancelled))?;
    }
    crate::pulls::follow(subscription, track, demand, unused.as_mut()).await
}

/// A lite subscription's stream as the pull engine drives it. It keeps the first group the
/// publisher serves (SUBSCRIBE_START) and the exclusive end (SUBSCRIBE_END): the groups
/// between them are owed.
struct LiteWire<T: Transport> {
    version: starling_proto::Version,
    max_message: usize,
    writer: Writer<T::Send>,
    reader: Reader<T::Recv>,
    arrived: Arc<Upstream>,
    /// After a handover, where the subscription asked to resume.
    resume: Option<u64>,
    first: Option<u64>,
    /// (END's group, END's stream count).
    end: Option<(u64, Option<u64>)>,
    demand: Demand,
    window: u64,
    /// Ask for the publisher's whole window whatever the readers want (a relay's pull).
    whole: bool,
}

impl<T: Transport> LiteWire<T> {
    fn wanted(&self, demand: Demand) -> SubscribeUpdate {
        SubscribeUpdate {
            priority: demand.priority,
            max_age_ms: if self.whole {
                self.window
            } else {
                demand.max_age_ms.min(self.window)
            },
            group_start: None,
            group_end: None,
            frame_start: 0,
            frame_end: None,
        }
    }

    /// The end as owed: what to wait for, and for how long (the max age asked for, else
    /// 1 s, as moq-net waits).
    fn owed(
        &self,
        end: (u64, Option<u64>),
        legacy: bool,
        settled: Result<Pulled, Error>,
        unsettled: Result<Pulled, Error>,
    ) -> PullEnd {
        let grace = match self.demand.max_age_ms.min(self.window) {
            0 => OWED_GROUP_GRACE,
            ms => Duration::from_millis(ms),
        };
        let (arrived, first) = (self.arrived.clone(), self.first);
        let owed = async move {
            match (end.1, first) {
                (Some(count), _) => arrived.streams.reached(count).await,
                // Before 05 there is no END: whatever arrives within the grace.
                (None, _) if legacy => std::future::pending::<()>().await,
                (None, Some(first)) => arrived.track.arrived(first..end.0).await,
                (None, None) => {}
            }
        };
        PullEnd {
            owed: Box::pin(owed),
            grace,
            settled,
            unsettled,
        }
    }
}

impl<T: Transport> PullWire for LiteWire<T> {
    async fn next(&mut self) -> Result<Option<PullEnd>, Error> {
        let response = match next_response(&mut self.reader, self.version, self.max_message).await {
            Ok(response) => response,
            // The publisher declared the end, then its stream died with its session before
            // the FIN (moq-cli closes at the end of its input, at times before finishing
            // every subscription): the END still says what is owed, and a track whose owed
            // groups all arrived is whole.
            Err(err @ (Error::Transport(_) | Error::Closed)) if self.end.is_some() => {
                let end = self.end.expect("checked");
                return Ok(Some(self.owed(end, false, Ok(Pulled::Finished), Err(err))));
            }
            Err(err) => return Err(err),
        };
        match response {
            Some(SubscribeResponse::Start { group }) => {
                if self.first.is_none() && self.resume.is_some() {
                    // Unfinished groups below where the new source starts are lost.
                    self.arrived.track.abandon_orphans_below(group);
                }
                self.first = self.first.or(Some(group));
            }
            Some(SubscribeResponse::End {
                group,
                streams: count,
            }) => self.end = Some((group, count)),
            Some(SubscribeResponse::Ok { .. } | SubscribeResponse::Drop { .. }) => {}
            None => {
                // Before 05 (no END) whatever arrives within the grace is the end.
                let legacy = !self.version.has_track_stream();
                let end = match self.end {
                    Some(end) => end,
                    None if legacy => (0, None),
                    None => {
                        return Err(Error::ProtocolViolation(Violation::SubscribeFinWithoutEnd))
                    }
                };
                return Ok(Some(self.owed(
                    end,
                    legacy,
                    Ok(Pulled::Finished),
                    Ok(Pulled::Finished),
                )));
            }
        }
        Ok(None)
    }

    async fn update(&mut self, demand: Demand) -> Result<(), Error> {
        self.demand = demand;
        // 01/02 have no SUBSCRIBE_UPDATE: the subscription keeps what it first asked.
        if self.version.has_subscribe_update() {
            let update = self.wanted(demand);
            self.writer.message(&update).await?;
        }
        Ok(())
    }

    fn ended(&mut self) {}

    async fn unsubscribe(mut self) -> Result<(), Error> {
        // A FIN unsubscribes.
        self.writer.finish()
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
