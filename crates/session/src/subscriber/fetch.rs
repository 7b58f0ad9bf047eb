//! Fetching one group from the peer on a FETCH stream (docs/wire.md §4.9): the frames arrive bare, from
//! the requested frame on, and the stream ends with FIN; a missing group is a reset.

use std::sync::Arc;

use starling_model::{GroupConsumer, GroupProducer};
use starling_proto::{BidiType, Fetch, Path, StreamCode};
use starling_transport::Transport;

use crate::error::Error;
use crate::frames::FrameReader;
use crate::rank::Rank;
use crate::reader::Reader;
use crate::shared::{reset_code, Shared};
use crate::writer::Writer;

/// Start fetching; the group fills as frames arrive and ends as the peer's stream does.
pub(crate) fn fetch<T: Transport>(
    shared: &Arc<Shared<T>>,
    request: Fetch,
) -> Result<GroupConsumer, Error> {
    if !shared.version.has_track_stream() {
        return Err(Error::Stream(StreamCode::Internal));
    }
    let group = GroupProducer::standalone(request.group, shared.config.model_limits);
    let consumer = group.consume();
    let task_shared = shared.clone();
    shared.spawn(async move {
        let mut group = group;
        if let Err(err) = run(&task_shared, request, &mut group).await {
            let code = reset_code(&err).unwrap_or_else(|| err.stream_code());
            group.abort(code);
        } else {
            group.finish();
        }
    });
    Ok(consumer)
}

async fn run<T: Transport>(
    shared: &Arc<Shared<T>>,
    request: Fetch,
    group: &mut GroupProducer,
) -> Result<(), Error> {
    let (send, recv) = shared.transport.open_bi().await?;
    let mut writer = Writer::new(send, shared.version);
    let mut reader = Reader::new(recv, shared.version, &shared.budget, Rank::Control);
    writer.queue_varint(BidiType::Fetch.code())?;
    writer.message(&request).await?;
    // Our side stays open until the response completes (docs/wire.md §4.9).
    let mut frames = FrameReader::new(
        shared.config.model_limits.max_frame_bytes as u64,
        shared.version,
        shared.config.clock,
    );
    while frames.read_into(&mut reader, group).await?.is_some() {}
    // The response is complete; the peer may already have stopped our side.
    let _ = writer.finish();
    Ok(())
}

/// The FETCH message for a wire path.
pub(crate) fn request(broadcast: Path, track: &str, group: u64, frame_start: u64) -> Fetch {
    Fetch {
        broadcast,
        track: track.to_string(),
        priority: 0,
        group,
        frame_start,
        frame_end: None,
    }
}
