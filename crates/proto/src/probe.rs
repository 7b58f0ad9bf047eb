//! PROBE reports on the probe stream (bidi 0x4, publisher → subscriber) (docs/wire.md §4.11).
//!
//! The subscriber sends only the stream type; any byte it writes after that is a decode
//! error (the publisher resets with MALFORMED_TRACK 0x12).

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::version::Version;

/// PROBE (03+): `Bitrate(i), [RTT(i) on 04+]`. 0 means unknown for either field (moq-net sends a
/// measured 0 as 1; all zeros is a retraction).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Probe {
    /// Estimated send rate in bits per second; 0 = unknown.
    pub bitrate: u64,
    /// Round-trip time in ms; 0 = unknown. Not on the wire on 03 (encoder refuses non-zero).
    pub rtt_ms: u64,
}

impl Message for Probe {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_probe() {
            return Err(EncodeError::Unsupported);
        }
        coding::write_varint(w, self.bitrate, version)?;
        if version.has_probe_rtt() {
            coding::write_varint(w, self.rtt_ms, version)?;
        } else if self.rtt_ms != 0 {
            return Err(EncodeError::Unsupported);
        }
        Ok(())
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_probe() {
            return Err(DecodeError::Unsupported);
        }
        let bitrate = coding::read_varint(r, version)?;
        let rtt_ms = if version.has_probe_rtt() {
            coding::read_varint(r, version)?
        } else {
            0
        };
        Ok(Probe { bitrate, rtt_ms })
    }
}
