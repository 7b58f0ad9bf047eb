//! TRACK and TRACK_INFO on the track stream (bidi 0x6, 05+) (docs/wire.md §4.5).

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::path::Path;
use crate::version::Version;

/// TRACK: `Broadcast Path(s), Track Name(s)`. Track names are arbitrary strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Track {
    pub broadcast: Path,
    pub track: String,
}

impl Message for Track {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_track_stream() {
            return Err(EncodeError::Unsupported);
        }
        self.broadcast.encode(w, version)?;
        coding::write_str(w, &self.track, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_track_stream() {
            return Err(DecodeError::Unsupported);
        }
        Ok(Track {
            broadcast: Path::decode(r, version)?,
            track: coding::read_str(r, version)?.to_string(),
        })
    }
}

/// TRACK_INFO: `Publisher Priority(8), [Ordered(8)=0 on 05], Max Age Millis(i), Timescale(i)`.
///
/// The retired Ordered byte is written 0 and ignored on read. A timescale of 0 is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackInfo {
    pub priority: u8,
    pub max_age_ms: u64,
    /// Timestamp units per second (1000 = ms; hang media uses 1 000 000). Never 0.
    pub timescale: u64,
}

impl Default for TrackInfo {
    /// moq-net 0.3.18's defaults: priority 127, 5000 ms, timescale 1000.
    fn default() -> Self {
        TrackInfo {
            priority: 127,
            max_age_ms: 5000,
            timescale: 1000,
        }
    }
}

impl Message for TrackInfo {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_track_stream() {
            return Err(EncodeError::Unsupported);
        }
        if self.timescale == 0 {
            return Err(EncodeError::InvalidValue("timescale"));
        }
        coding::write_u8(w, self.priority);
        if version.has_group_order() {
            coding::write_u8(w, 0);
        }
        coding::write_varint(w, self.max_age_ms, version)?;
        coding::write_varint(w, self.timescale, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_track_stream() {
            return Err(DecodeError::Unsupported);
        }
        let priority = coding::read_u8(r)?;
        if version.has_group_order() {
            coding::read_u8(r)?;
        }
        let max_age_ms = coding::read_varint(r, version)?;
        let timescale = coding::read_varint(r, version)?;
        if timescale == 0 {
            return Err(DecodeError::InvalidValue("timescale"));
        }
        Ok(TrackInfo {
            priority,
            max_age_ms,
            timescale,
        })
    }
}
