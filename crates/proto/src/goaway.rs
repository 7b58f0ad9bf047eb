//! GOAWAY on the goaway stream (bidi 0x5, 04+) (docs/wire.md §4.12).

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::limits::MAX_GOAWAY_URI;
use crate::version::Version;

/// GOAWAY: `New Session URI(s)`, at most [`MAX_GOAWAY_URI`] bytes; empty = reconnect to
/// the same endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Goaway {
    pub uri: String,
}

impl Message for Goaway {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_goaway() {
            return Err(EncodeError::Unsupported);
        }
        if self.uri.len() > MAX_GOAWAY_URI {
            return Err(EncodeError::BoundsExceeded("GOAWAY URI"));
        }
        coding::write_str(w, &self.uri, version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_goaway() {
            return Err(DecodeError::Unsupported);
        }
        // Check the declared length before looking at the bytes.
        let mut peek = *r;
        let len = coding::read_varint(&mut peek, version)?;
        if len > MAX_GOAWAY_URI as u64 {
            return Err(DecodeError::BoundsExceeded("GOAWAY URI"));
        }
        Ok(Goaway {
            uri: coding::read_str(r, version)?.to_string(),
        })
    }
}
