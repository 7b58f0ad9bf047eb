//! The publisher half: answers the peer's requests (announce interests, SUBSCRIBE, TRACK,
//! FETCH) from the origin we publish.

mod announce;
mod announce_wire;
mod probe;
mod subscribe;

use std::sync::Arc;

use starling_proto::{BidiType, Fetch, Goaway, StreamCode, Track, TrackInfo};
use starling_transport::Transport;

use crate::error::Error;
use crate::frames::FrameWriter;
use crate::reader::Reader;
use crate::serve::send_order;
use crate::shared::Shared;
use crate::writer::Writer;

pub(crate) use announce::announce;
pub(crate) use probe::probe;
pub(crate) use subscribe::{resolve, subscribe};

/// A request stream's one message; one that fails to decode is dropped with CANCELLED, as
/// moq-net does (docs/wire.md §9).
async fn request<T: Transport, M: starling_proto::Message>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
) -> Result<M, Error> {
    reader
        .message::<M>(shared.config.limits.max_control_message)
        .await
        .map_err(|_| Error::Stream(StreamCode::Cancelled))?
        .ok_or(Error::Stream(StreamCode::Cancelled))
}

/// TRACK → TRACK_INFO, FIN (docs/wire.md §4.5). The track stays read until the requester FINs, so an
/// upstream pulled for it is still there for the SUBSCRIBE that usually follows.
pub(crate) async fn track<T: Transport>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    let _slot = shared.request_slot().await?;
    let msg: Track = request(shared, reader).await?;
    let track = subscribe::resolve(shared, &msg.broadcast, &msg.track, None)?;
    let info: TrackInfo = tokio::select! {
        biased;
        info = tokio::time::timeout(limits.request_timeout, track.info()) => match info {
            Ok(info) => info.map_err(Error::Stream)?,
            Err(_) => return Err(Error::Stream(StreamCode::ControlTimeout)),
        },
        // A FIN or reset before TRACK_INFO cancels the request (docs/wire.md §4.5).
        _ = reader.finished() => return Err(Error::Stream(StreamCode::Cancelled)),
    };
    writer.message(&info).await?;
    writer.finish()?;
    let _ = tokio::time::timeout(limits.request_timeout, reader.finished()).await;
    Ok(())
}

/// FETCH → the group's frames from Frame Start, FIN (docs/wire.md §4.9).
pub(crate) async fn fetch<T: Transport>(
    shared: &Arc<Shared<T>>,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    let _slot = shared.request_slot().await?;
    let msg: Fetch = request(shared, reader).await?;
    let mut group = match cached(shared, &msg)? {
        Some(group) => group,
        None => pulled(shared, &msg).await?,
    };
    group.seek(msg.frame_start as usize);
    // A fetched group ranks mid-span within its priority.
    writer.set_priority(send_order(
        msg.priority,
        msg.group,
        msg.group.saturating_sub(1 << 21),
    ));
    let send = async {
        let mut frames_out = FrameWriter::default();
        let mut index = msg.frame_start;
        while let Some(frame) = group.next_frame().await.map_err(Error::Stream)? {
            if msg.frame_end.is_some_and(|end| index > end) {
                break;
            }
            index += 1;
            frames_out.write(writer, frame).await?;
        }
        writer.flush().await?;
        Ok::<_, Error>(())
    };
    tokio::select! {
        biased;
        result = send => result?,
        _ = reader.finished() => return Err(Error::Stream(StreamCode::Cancelled)),
    }
    writer.finish()?;
    let _ = tokio::time::timeout(limits.request_timeout, reader.finished()).await;
    Ok(())
}

/// The fetched group, when the relay holds it; NOT_FOUND for a group past the latest of a
/// track the relay holds (a FETCH reaches back, never ahead).
fn cached<T: Transport>(
    shared: &Arc<Shared<T>>,
    msg: &Fetch,
) -> Result<Option<starling_model::GroupConsumer>, Error> {
    let track = subscribe::resolve(shared, &msg.broadcast, &msg.track, None)?;
    if let Some(group) = track.group(msg.group) {
        return Ok(Some(group));
    }
    match track.latest_sequence() {
        Some(latest) if latest < msg.group => Err(Error::Stream(StreamCode::NotFound)),
        _ => Ok(None),
    }
}

/// A group the relay does not hold is asked of the track's source: the track is read from
/// that group on (a reader reaching back as far as the source keeps, which the front pulls
/// upstream), until the group arrives or the request times out (NOT_FOUND). moq-cli's HLS
/// server fetches every segment's groups this way.
async fn pulled<T: Transport>(
    shared: &Arc<Shared<T>>,
    msg: &Fetch,
) -> Result<starling_model::GroupConsumer, Error> {
    let start = starling_model::StartAt {
        max_age_ms: u64::MAX / 4,
        latest: false,
        floor: Some(msg.group),
        priority: msg.priority,
    };
    let track = subscribe::resolve(shared, &msg.broadcast, &msg.track, Some(start))?;
    let arrived = async {
        let mut seen = 0;
        loop {
            if let Some(group) = track.group(msg.group) {
                return Ok(group);
            }
            if track.is_closed() {
                return Err(Error::Stream(StreamCode::NotFound));
            }
            seen = track.groups_changed(seen).await;
        }
    };
    tokio::time::timeout(shared.config.limits.request_timeout, arrived)
        .await
        .unwrap_or(Err(Error::Stream(StreamCode::NotFound)))
}

/// PROBE streams get our reports; a GOAWAY is read and noted.
pub(crate) async fn hold<T: Transport>(
    shared: &Arc<Shared<T>>,
    kind: BidiType,
    reader: &mut Reader<T::Recv>,
    writer: &mut Writer<T::Send>,
) -> Result<(), Error> {
    let limits = &shared.config.limits;
    let _slot = shared.request_slot().await?;
    match kind {
        BidiType::Goaway => {
            let goaway = reader
                .message::<Goaway>(limits.max_control_message)
                .await
                .ok()
                .flatten();
            let uri = goaway.map(|g| g.uri).unwrap_or_default();
            if let Err(err) = shared.goaway_arrived(uri) {
                shared.fail(err);
            }
            Ok(())
        }
        _ => probe(shared, reader, writer).await,
    }
}
