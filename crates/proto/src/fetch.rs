//! FETCH on the fetch stream (bidi 0x3, served on 05+) (docs/wire.md §4.9).
//!
//! The response is bare FRAMEs (see [`crate::group`]) with a timestamp baseline of 0,
//! then FIN; there is no response header.

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::path::Path;
use crate::version::Version;

/// FETCH: `Broadcast Path(s), Track Name(s), Priority(8), Group Sequence(i),
/// [Frame Start(i), Frame End OptGroup(i) on 06]`.
///
/// `frame_start` 0 is the start of the group; `frame_end` is inclusive, `None` = to the
/// end. `frame_end < frame_start` is `InvalidSubscribeLocation` on both sides; frame
/// bounds are refused by the encoder on 05.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fetch {
    pub broadcast: Path,
    pub track: String,
    pub priority: u8,
    pub group: u64,
    pub frame_start: u64,
    pub frame_end: Option<u64>,
}

impl Message for Fetch {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if self.frame_end.is_some_and(|end| end < self.frame_start) {
            return Err(EncodeError::InvalidSubscribeLocation);
        }
        self.broadcast.encode(w, version)?;
        coding::write_str(w, &self.track, version)?;
        coding::write_u8(w, self.priority);
        coding::write_varint(w, self.group, version)?;
        if version.has_frame_bounds() {
            coding::write_varint(w, self.frame_start, version)?;
            coding::write_opt(w, self.frame_end, version)?;
        } else if self.frame_start != 0 || self.frame_end.is_some() {
            return Err(EncodeError::FrameBoundsUnsupported);
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        let broadcast = Path::decode(r, version)?;
        let track = coding::read_str(r, version)?.to_string();
        let priority = coding::read_u8(r)?;
        let group = coding::read_varint(r, version)?;
        let (frame_start, frame_end) = if version.has_frame_bounds() {
            (
                coding::read_varint(r, version)?,
                coding::read_opt(r, version)?,
            )
        } else {
            (0, None)
        };
        if frame_end.is_some_and(|end| end < frame_start) {
            return Err(DecodeError::InvalidSubscribeLocation);
        }
        Ok(Fetch {
            broadcast,
            track,
            priority,
            group,
            frame_start,
            frame_end,
        })
    }
}
