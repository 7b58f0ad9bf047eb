//! Stream type varints, the first bytes of every stream (docs/wire.md §3.1).

use bytes::{Buf, BytesMut};

use crate::coding::{DecodeError, EncodeError};
use crate::varint;
use crate::version::Version;

/// The type of a bidirectional stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BidiType {
    /// 0x0: the lite-01/02 session stream; rejected on 03+.
    Session = 0,
    /// 0x1: ANNOUNCE_REQUEST → ANNOUNCE_OK + announcements.
    Announce = 1,
    /// 0x2: SUBSCRIBE, SUBSCRIBE_UPDATE* → SUBSCRIBE_START/END/DROP.
    Subscribe = 2,
    /// 0x3: FETCH → bare FRAMEs (05+).
    Fetch = 3,
    /// 0x4: ← PROBE* only.
    Probe = 4,
    /// 0x5: GOAWAY (04+).
    Goaway = 5,
    /// 0x6: TRACK → TRACK_INFO (05+).
    Track = 6,
}

/// The type of a unidirectional stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum UniType {
    /// 0x0: GROUP header, FRAME*, FIN.
    Group = 0,
    /// 0x1: one SETUP, FIN (05+).
    Setup = 1,
}

impl BidiType {
    /// The wire value.
    pub const fn code(self) -> u64 {
        self as u64
    }

    /// The type a wire value names.
    pub const fn from_code(code: u64) -> Option<BidiType> {
        Some(match code {
            0 => Self::Session,
            1 => Self::Announce,
            2 => Self::Subscribe,
            3 => Self::Fetch,
            4 => Self::Probe,
            5 => Self::Goaway,
            6 => Self::Track,
            _ => return None,
        })
    }

    /// Whether a peer may open this stream type on `version` (moq-net accepts Session on
    /// no version reachable here, FETCH and TRACK from 05, GOAWAY from 04).
    pub const fn allowed_in(self, version: Version) -> bool {
        match self {
            Self::Session => false,
            Self::Announce | Self::Subscribe => true,
            Self::Probe => version.has_probe(),
            Self::Fetch | Self::Track => version.has_track_stream(),
            Self::Goaway => version.has_goaway(),
        }
    }

    /// Read the stream type from the front of `buf`; `Ok(None)` until it has arrived,
    /// [`DecodeError::UnknownType`] for a value outside the table.
    pub fn decode(buf: &mut BytesMut, version: Version) -> Result<Option<BidiType>, DecodeError> {
        decode_type(buf, version, Self::from_code)
    }

    /// Append the stream type.
    pub fn encode(self, out: &mut BytesMut, version: Version) -> Result<(), EncodeError> {
        Ok(varint::encode_as(version.varint(), self.code(), out)?)
    }
}

impl UniType {
    /// The wire value.
    pub const fn code(self) -> u64 {
        self as u64
    }

    /// The type a wire value names.
    pub const fn from_code(code: u64) -> Option<UniType> {
        match code {
            0 => Some(Self::Group),
            1 => Some(Self::Setup),
            _ => None,
        }
    }

    /// Whether a peer may open this stream type on `version`.
    pub const fn allowed_in(self, version: Version) -> bool {
        match self {
            Self::Group => true,
            Self::Setup => version.has_setup_stream(),
        }
    }

    /// Read the stream type from the front of `buf`; `Ok(None)` until it has arrived.
    pub fn decode(buf: &mut BytesMut, version: Version) -> Result<Option<UniType>, DecodeError> {
        decode_type(buf, version, Self::from_code)
    }

    /// Append the stream type.
    pub fn encode(self, out: &mut BytesMut, version: Version) -> Result<(), EncodeError> {
        Ok(varint::encode_as(version.varint(), self.code(), out)?)
    }
}

fn decode_type<T>(
    buf: &mut BytesMut,
    version: Version,
    from: impl Fn(u64) -> Option<T>,
) -> Result<Option<T>, DecodeError> {
    let Some((code, n)) = varint::peek_as(version.varint(), buf)? else {
        return Ok(None);
    };
    let t = from(code).ok_or(DecodeError::UnknownType(code))?;
    buf.advance(n);
    Ok(Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types() {
        for c in 0..7 {
            assert_eq!(BidiType::from_code(c).unwrap().code(), c);
        }
        assert_eq!(BidiType::from_code(7), None);
        let mut buf = BytesMut::from(&[0x06, 0x13][..]);
        assert_eq!(
            BidiType::decode(&mut buf, Version::Lite06),
            Ok(Some(BidiType::Track))
        );
        assert_eq!(&buf[..], &[0x13]);
        let mut buf = BytesMut::from(&[0x40][..]);
        assert_eq!(UniType::decode(&mut buf, Version::Lite06), Ok(None));
        let mut buf = BytesMut::from(&[0x40, 0x07][..]);
        assert_eq!(
            UniType::decode(&mut buf, Version::Lite06),
            Err(DecodeError::UnknownType(7))
        );
        assert!(!BidiType::Track.allowed_in(Version::Lite04));
        assert!(BidiType::Track.allowed_in(Version::Lite05));
        assert!(!UniType::Setup.allowed_in(Version::Lite04));
        let mut out = BytesMut::new();
        UniType::Setup.encode(&mut out, Version::Lite06).unwrap();
        assert_eq!(&out[..], &[1]);
    }
}
