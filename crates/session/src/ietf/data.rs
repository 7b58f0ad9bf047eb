//! The drafts' data streams for Starling's groups (docs/wire-ietf.md §5): one subgroup-0
//! stream per group, its frames as objects numbered from the group's first, each frame's
//! timestamp as the Timestamp property; the end of a track as an END_OF_TRACK object on a
//! stream of its own; a fetched group on a FETCH_HEADER stream. One writer of each, shared
//! by every draft, and the reader of subgroup objects. A subgroup's objects go through the
//! session's one group forwarder (`frames.rs`), a large one's payload as it arrives.

use starling_model::{Frame, GroupConsumer};
use starling_proto::ietf::fetch_stream::{encode_header, FetchEntry, FetchObject, FetchSubgroup};
use starling_proto::ietf::properties::ObjectProperties;
use starling_proto::ietf::subgroup::{status, ObjectHeader, SubgroupFlags, SubgroupHeader};
use starling_proto::ietf::Draft;
use starling_proto::StreamCode;
use starling_transport::SendStream;

use crate::error::Error;
use crate::frames::forward_group;
use crate::violation::Violation;
use crate::writer::Writer;

/// How a subscription's groups go out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subgroups {
    pub draft: Draft,
    pub alias: u64,
    /// Publisher priority in the header (wire: lower is more urgent).
    pub priority: u8,
    /// Objects carry their properties (the timestamp).
    pub properties: bool,
}

impl Subgroups {
    fn header(&self, group: u64, first_object: bool, properties: bool) -> SubgroupHeader {
        SubgroupHeader {
            flags: SubgroupFlags {
                properties,
                first_object,
                ..SubgroupFlags::default()
            },
            track_alias: self.alias,
            group,
            subgroup: 0,
            priority: Some(self.priority),
        }
    }

    /// Write `group` from its current frame to its end; the FIN ends the group. Each frame
    /// counts into `sent` (frames, bytes).
    pub async fn write_group<S: SendStream>(
        &self,
        writer: &mut Writer<S>,
        group: &mut GroupConsumer,
        sent: impl FnMut(usize),
    ) -> Result<(), StreamCode> {
        let first = group.frame_index() as u64;
        self.header(group.sequence(), first == 0, self.properties)
            .encode(self.draft, writer.queued())
            .map_err(|_| StreamCode::Internal)?;
        let mut next_id = first;
        let head = |writer: &mut Writer<S>, timestamp, size| {
            // The first object's delta is its id; contiguous ones follow at 0.
            let id_delta = if next_id == first { first } else { 0 };
            next_id += 1;
            self.queue_object_head(writer, id_delta, timestamp, size)
        };
        forward_group(writer, group, None, head, sent).await
    }

    /// Queue the header of an object of `size` payload bytes stamped `timestamp`.
    fn queue_object_head<S: SendStream>(
        &self,
        writer: &mut Writer<S>,
        id_delta: u64,
        timestamp: u64,
        size: usize,
    ) -> Result<(), Error> {
        ObjectHeader {
            id_delta,
            properties: self.properties.then_some(ObjectProperties {
                timestamp: Some(timestamp),
                timescale: None,
            }),
            length: size as u64,
            status: (size == 0).then_some(status::NORMAL),
        }
        .encode(self.draft, writer.queued())?;
        Ok(())
    }

    /// The track ended before group `end`: one stream whose only object, at 0, says
    /// END_OF_TRACK (docs/wire-ietf.md §5.2).
    pub async fn write_end<S: SendStream>(
        &self,
        writer: &mut Writer<S>,
        end: u64,
    ) -> Result<(), Error> {
        self.header(end, true, false)
            .encode(self.draft, writer.queued())?;
        ObjectHeader {
            id_delta: 0,
            properties: None,
            length: 0,
            status: Some(status::END_OF_TRACK),
        }
        .encode(self.draft, writer.queued())?;
        writer.flush().await?;
        writer.finish()
    }
}

/// What a FETCH_HEADER stream carries: one group's frames from object `first`, each with its
/// timestamp when `timestamps` (a joining FETCH or a fill; a standalone FETCH carries none,
/// as moq-net's).
pub(crate) struct Fetched {
    pub group: u64,
    pub first: u64,
    pub frames: Vec<Frame>,
    pub timestamps: bool,
}

/// Write `fetched` on a FETCH_HEADER stream for request `request_id`, then FIN.
pub(crate) async fn write_fetch<S: SendStream>(
    writer: &mut Writer<S>,
    draft: Draft,
    request_id: u64,
    fetched: Fetched,
) -> Result<(), Error> {
    let Fetched {
        group,
        first,
        frames,
        timestamps,
    } = fetched;
    encode_header(request_id, draft, writer.queued())?;
    for (n, frame) in frames.into_iter().enumerate() {
        // The first object names its place; later ones follow it, except on draft 14, whose
        // objects all carry every field.
        let explicit = n == 0 || draft.has_inline_fields();
        let object = FetchObject {
            subgroup: FetchSubgroup::Zero,
            group: explicit.then_some(group),
            object: explicit.then_some(first + n as u64),
            priority: explicit.then_some(0),
            properties: timestamps.then_some(ObjectProperties {
                timestamp: Some(frame.timestamp),
                timescale: None,
            }),
            length: frame.payload.len() as u64,
            status: (frame.payload.is_empty() && draft.has_fetch_object_status())
                .then_some(status::NORMAL),
        };
        FetchEntry::Object(object).encode(draft, writer.queued())?;
        writer.write_payload(frame.payload).await?;
    }
    writer.flush().await?;
    writer.finish()
}

/// An object read off a subgroup stream.
pub(crate) struct Object {
    pub id: u64,
    /// An empty object's status (Normal for every object with a payload).
    pub status: u64,
    pub length: usize,
    pub timestamp: Option<u64>,
}

/// Objects' ids on one subgroup stream: the first is absolute, each next a delta.
#[derive(Default)]
pub(crate) struct ObjectIds {
    previous: Option<u64>,
}

impl ObjectIds {
    /// The id an object header names.
    pub fn next(&mut self, header: &ObjectHeader) -> Result<u64, Error> {
        let id = match self.previous {
            None => header.id_delta,
            Some(prev) => prev
                .checked_add(header.id_delta)
                .and_then(|v| v.checked_add(1))
                .ok_or(Error::ProtocolViolation(Violation::ObjectIdOverflows))?,
        };
        self.previous = Some(id);
        Ok(id)
    }
}

impl Object {
    pub fn of(header: ObjectHeader, id: u64) -> Object {
        Object {
            id,
            status: header.status.unwrap_or(status::NORMAL),
            length: header.length as usize,
            timestamp: header.properties.and_then(|p| p.timestamp),
        }
    }
}
