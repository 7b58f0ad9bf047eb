//! Frames on a group or FETCH stream (docs/wire.md §4.8-4.9): each frame is a header (its
//! timestamp as a delta from the previous frame's, then its size) and its payload. One writer
//! and one reader of that encoding, shared by subscriptions and fetches on both sides, and
//! the one forwarder of a group's frames that every wire family's group streams go through.
//!
//! The reader hands every frame to its group. A small frame, or one already read whole, goes
//! in one piece; a larger one goes piece by piece as it arrives, so the receive budget never
//! holds more of a stream than a small frame, whatever the number of streams and the size of
//! their frames. The forwarder sends those pieces on as they come (cut-through): a large
//! frame leaves the relay while it is still arriving.

use std::future::poll_fn;

use bytes::Bytes;
use starling_model::{Frame, GroupConsumer, GroupProducer, Unit};
use starling_proto::{limits, FrameHeader, StreamCode};
use starling_transport::{RecvStream, SendStream};

use crate::error::Error;
use crate::reader::Reader;
use crate::writer::Writer;

/// Writes frames with their timestamps as deltas.
#[derive(Debug, Default)]
pub(crate) struct FrameWriter {
    previous: u64,
}

impl FrameWriter {
    /// Queue the frame's header and write it with its payload. A timestamp whose distance
    /// from the previous one no delta can carry (a publisher's crafted jump) is refused with
    /// TIMESTAMP_MISMATCH instead of overflowing.
    pub(crate) async fn write<S: SendStream>(
        &mut self,
        writer: &mut Writer<S>,
        frame: Frame,
    ) -> Result<(), Error> {
        self.queue_head(writer, frame.timestamp, frame.payload.len())?;
        writer.write_payload(frame.payload).await
    }

    /// Queue the header of a frame stamped `timestamp` whose `size` payload bytes follow.
    pub(crate) fn queue_head<S: SendStream>(
        &mut self,
        writer: &mut Writer<S>,
        timestamp: u64,
        size: usize,
    ) -> Result<(), Error> {
        // Before lite-05 no timestamp travels, so none can be out of reach.
        let delta = if writer.version().has_frame_timestamps() {
            let delta = timestamp as i128 - self.previous as i128;
            i64::try_from(delta)
                .ok()
                .filter(|d| (limits::MIN_ZIGZAG..=limits::MAX_ZIGZAG).contains(d))
                .ok_or(Error::Stream(StreamCode::TimestampMismatch))?
        } else {
            0
        };
        self.previous = timestamp;
        writer.queue_frame(&FrameHeader {
            timestamp_delta: delta,
            size: size as u64,
        })
    }
}

/// Forward `group` from its current frame on `writer`, through frame `last` when bounded:
/// each frame's header as `head` queues it (given the writer, the frame's timestamp and
/// size), then its payload, a whole frame's with its header in one write, a frame still
/// arriving as its pieces come, those one turn took in one write. `sent` counts each frame
/// once its last byte is written. A group aborted or expired meanwhile ends the stream with
/// its code, even while a write waits on a slow reader.
pub(crate) async fn forward_group<S: SendStream>(
    writer: &mut Writer<S>,
    group: &mut GroupConsumer,
    last: Option<u64>,
    mut head: impl FnMut(&mut Writer<S>, u64, usize) -> Result<(), Error>,
    mut sent: impl FnMut(usize),
) -> Result<(), StreamCode> {
    let mut index = group.frame_index() as u64;
    let past_last = |index: u64| last.is_some_and(|last| index > last);
    let mut units = Vec::new();
    // The pieces of the arriving frame taken and not yet written.
    let mut pieces = Vec::new();
    // The arriving frame: its size and the bytes of it still to take.
    let mut size = 0;
    let mut left = 0;
    let mut done = past_last(index);
    // A write, unless the group is aborted or expires first (its code, then). Written in
    // place: a future of its own per frame costs a copy of its state.
    macro_rules! racing {
        ($write:expr) => {
            tokio::select! {
                biased;
                written = $write => written.map_err(write_code)?,
                code = group.aborted() => return Err(code),
            }
        };
    }
    while !done {
        done = poll_fn(|cx| group.poll_units(cx, &mut units)).await?;
        for unit in units.drain(..) {
            let whole = match unit {
                Unit::Frame(frame) => {
                    let len = frame.payload.len();
                    head(writer, frame.timestamp, len).map_err(write_code)?;
                    racing!(writer.write_payload(frame.payload));
                    Some(len)
                }
                Unit::Head {
                    timestamp,
                    size: next,
                } => {
                    head(writer, timestamp, next).map_err(write_code)?;
                    (size, left) = (next, next);
                    // An empty frame's header goes at once, as a whole one's would.
                    if next == 0 {
                        racing!(writer.flush());
                    }
                    (next == 0).then_some(0)
                }
                Unit::Bytes(bytes) => {
                    left = left.saturating_sub(bytes.len());
                    pieces.push(bytes);
                    if left == 0 {
                        racing!(writer.write_payloads(&mut pieces));
                    }
                    (left == 0).then_some(size)
                }
            };
            if let Some(len) = whole {
                index += 1;
                sent(len);
                // Frame End bounds the end group: stop after the last requested frame.
                if past_last(index) {
                    done = true;
                    break;
                }
            }
        }
        if !pieces.is_empty() {
            racing!(writer.write_payloads(&mut pieces));
        }
    }
    writer.flush().await.map_err(write_code)?;
    Ok(())
}

/// The code a group stream ends with when writing it failed.
fn write_code(err: Error) -> StreamCode {
    match err {
        Error::Stream(code) => code,
        Error::Transport(starling_transport::TransportError::Stopped(code)) => {
            StreamCode::from_code(code)
        }
        Error::Transport(_) => StreamCode::Cancelled,
        _ => StreamCode::Internal,
    }
}

/// Frames up to this size are read whole before they go to their group; larger ones go in
/// pieces. Every stream may hold one such frame in the receive budget.
pub const WHOLE_FRAME_BYTES: usize = 16 * 1024;

/// Reads frames, adding up their timestamp deltas, into their group.
#[derive(Debug)]
pub(crate) struct FrameReader {
    timestamp: u64,
    max_frame: u64,
    /// Before lite-05 frames carry no timestamp: each is stamped on arrival by this clock, in
    /// milliseconds (the timescale such tracks get), as moq-net stamps them.
    stamped_on_arrival: Option<crate::Clock>,
}

impl FrameReader {
    /// A reader of `version`'s frames refusing any over `max_frame` bytes, stamping those
    /// that carry no timestamp by `clock`.
    pub(crate) fn new(
        max_frame: u64,
        version: starling_proto::Version,
        clock: crate::Clock,
    ) -> Self {
        FrameReader {
            timestamp: 0,
            max_frame,
            stamped_on_arrival: (!version.has_frame_timestamps()).then_some(clock),
        }
    }

    /// Read the next frame into `group`: its payload size, or `None` at the stream's clean
    /// end. A delta taking the timestamp below zero or past 2^64 is TIMESTAMP_MISMATCH.
    pub(crate) async fn read_into<R: RecvStream>(
        &mut self,
        reader: &mut Reader<R>,
        group: &mut GroupProducer,
    ) -> Result<Option<usize>, Error> {
        let Some(header) = reader.frame_header(self.max_frame).await? else {
            return Ok(None);
        };
        self.timestamp = if let Some(clock) = &self.stamped_on_arrival {
            clock.wall_ms()
        } else {
            self.timestamp
                .checked_add_signed(header.timestamp_delta)
                .ok_or(Error::Stream(StreamCode::TimestampMismatch))?
        };
        let size = header.size as usize;
        read_payload(reader, group, self.timestamp, size).await?;
        Ok(Some(size))
    }
}

/// Read one frame's payload of `size` bytes into `group`: whole when small (or already
/// read), else piece by piece as it arrives. Every wire family's frames end here.
pub(crate) async fn read_payload<R: RecvStream>(
    reader: &mut Reader<R>,
    group: &mut GroupProducer,
    timestamp: u64,
    size: usize,
) -> Result<(), Error> {
    if size <= WHOLE_FRAME_BYTES || reader.buffered() >= size {
        let payload: Bytes = reader.payload(size).await?;
        group.write_frame(Frame { timestamp, payload })?;
    } else {
        group.begin_frame(timestamp, size)?;
        reader
            .payload_into(size, |piece| Ok(group.write_chunk(piece)?))
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::Version;
    use starling_transport::mem::pair;
    use starling_transport::Transport;

    fn frame(timestamp: u64) -> Frame {
        Frame {
            timestamp,
            payload: Bytes::from_static(b"x"),
        }
    }

    /// A publisher's crafted jump (1, then 2^63) is refused, not an overflow (it panicked
    /// in debug builds when the delta was `timestamp as i64 - previous as i64`).
    #[tokio::test]
    async fn a_jump_no_delta_can_carry_is_refused() {
        let (a, _b) = pair();
        let mut writer = Writer::new(a.open_uni().await.unwrap(), Version::Lite06);
        let mut frames = FrameWriter::default();
        frames.write(&mut writer, frame(1)).await.unwrap();
        let refused = frames.write(&mut writer, frame(1 << 63)).await;
        assert!(matches!(
            refused,
            Err(Error::Stream(StreamCode::TimestampMismatch))
        ));
        // The largest forward and backward steps a delta carries still go.
        let mut frames = FrameWriter::default();
        let max = limits::MAX_ZIGZAG as u64;
        frames.write(&mut writer, frame(max)).await.unwrap();
        frames.write(&mut writer, frame(0)).await.unwrap();
        let past = frames.write(&mut writer, frame(max + 1)).await;
        assert!(matches!(
            past,
            Err(Error::Stream(StreamCode::TimestampMismatch))
        ));
    }
}
