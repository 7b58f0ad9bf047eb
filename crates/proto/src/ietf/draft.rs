//! The IETF moq-transport rows of the version table: drafts 14 to 22, their names, ALPNs,
//! SETUP codes and varint forms (docs/wire-ietf.md §1).
//!
//! Drafts are ordered, so a layout gate reads `draft >= Draft::D17`.

use std::fmt;

use bytes::{BufMut, BytesMut};

use crate::coding::{DecodeError, EncodeError, Wire};
use crate::framing::Framing;
use crate::varint::Flavor;

/// An IETF moq-transport draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Draft {
    D14,
    D15,
    D16,
    D17,
    D18,
    D19,
    D20,
    D21,
    D22,
}

impl Draft {
    /// Every draft, newest first (moq-relay 0.17.10's preference among the drafts).
    pub const ALL: &'static [Draft] = &[
        Draft::D22,
        Draft::D21,
        Draft::D20,
        Draft::D19,
        Draft::D18,
        Draft::D17,
        Draft::D16,
        Draft::D15,
        Draft::D14,
    ];

    /// The draft number.
    pub const fn number(self) -> u8 {
        match self {
            Self::D14 => 14,
            Self::D15 => 15,
            Self::D16 => 16,
            Self::D17 => 17,
            Self::D18 => 18,
            Self::D19 => 19,
            Self::D20 => 20,
            Self::D21 => 21,
            Self::D22 => 22,
        }
    }

    /// The name (`Display`, `--listen-version`), as moq-dev spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::D14 => "moq-transport-14",
            Self::D15 => "moq-transport-15",
            Self::D16 => "moq-transport-16",
            Self::D17 => "moq-transport-17",
            Self::D18 => "moq-transport-18",
            Self::D19 => "moq-transport-19",
            Self::D20 => "moq-transport-20",
            Self::D21 => "moq-transport-21",
            Self::D22 => "moq-transport-22",
        }
    }

    /// The ALPN and WebTransport protocol: `moq-00` for draft 14, `moqt-NN` after it.
    pub const fn alpn(self) -> &'static str {
        match self {
            Self::D14 => "moq-00",
            Self::D15 => "moqt-15",
            Self::D16 => "moqt-16",
            Self::D17 => "moqt-17",
            Self::D18 => "moqt-18",
            Self::D19 => "moqt-19",
            Self::D20 => "moqt-20",
            Self::D21 => "moqt-21",
            Self::D22 => "moqt-22",
        }
    }

    /// The SETUP code `0xff0000NN` (on the wire only in draft 14's CLIENT/SERVER_SETUP).
    pub const fn code(self) -> u64 {
        0xff00_0000 + self.number() as u64
    }

    /// The draft an ALPN names (matched exactly).
    pub fn from_alpn(alpn: &str) -> Option<Draft> {
        Self::ALL.iter().copied().find(|d| d.alpn() == alpn)
    }

    /// The draft a name names.
    pub fn from_name(name: &str) -> Option<Draft> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// The draft a SETUP code names.
    pub fn from_code(code: u64) -> Option<Draft> {
        Self::ALL.iter().copied().find(|d| d.code() == code)
    }

    /// The QMux-over-WebSocket versions this draft pairs with (`qmux-01.moqt-18` …):
    /// drafts 18 and later require qmux-01.
    pub const fn qmux_versions(self) -> &'static [&'static str] {
        if (self as u8) >= (Self::D18 as u8) {
            &["qmux-01"]
        } else {
            &["qmux-01", "qmux-00"]
        }
    }

    /// Drafts 14 to 16: one bidi control stream carries SETUP and every request, with
    /// request ids and MAX_REQUEST_ID. From 17: a SETUP uni stream per side and a bidi
    /// stream per request.
    pub fn has_control_stream(self) -> bool {
        self <= Self::D16
    }
}

impl Wire for Draft {
    fn flavor(self) -> Flavor {
        match self {
            Self::D14 | Self::D15 | Self::D16 => Flavor::Quic,
            Self::D17 => Flavor::LeadingOnesDraft17,
            _ => Flavor::LeadingOnes,
        }
    }
}

/// A control message's length is two raw bytes on every draft: a body is at most 65 535 bytes.
impl Framing for Draft {
    fn peek_len(self, buf: &[u8]) -> Result<Option<(u64, usize)>, DecodeError> {
        Ok(buf
            .get(..2)
            .map(|b| (u64::from(u16::from_be_bytes([b[0], b[1]])), 2)))
    }

    fn write_len(self, len: usize, out: &mut BytesMut) -> Result<(), EncodeError> {
        let len = u16::try_from(len).map_err(|_| EncodeError::TooLarge {
            len: len as u64,
            max: u64::from(u16::MAX),
        })?;
        out.put_u16(len);
        Ok(())
    }
}

impl fmt::Display for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(Draft::ALL.len(), 9);
        for &draft in Draft::ALL {
            assert_eq!(Draft::from_alpn(draft.alpn()), Some(draft));
            assert_eq!(Draft::from_name(draft.name()), Some(draft));
            assert_eq!(Draft::from_code(draft.code()), Some(draft));
            assert_eq!(draft.to_string(), draft.name());
        }
        assert_eq!(Draft::D14.code(), 0xff00000e);
        assert_eq!(Draft::D22.code(), 0xff000016);
        assert_eq!(Draft::from_alpn("moqt-14"), None);
        assert_eq!(Draft::from_alpn("MOQT-20"), None);
        assert!(Draft::D17 > Draft::D16 && Draft::D16.has_control_stream());
        assert!(!Draft::D17.has_control_stream());
        assert_eq!(Draft::D17.qmux_versions(), &["qmux-01", "qmux-00"]);
        assert_eq!(Draft::D18.qmux_versions(), &["qmux-01"]);
        assert_eq!(Draft::D16.flavor(), Flavor::Quic);
        assert_eq!(Draft::D17.flavor(), Flavor::LeadingOnesDraft17);
        assert_eq!(Draft::D22.flavor(), Flavor::LeadingOnes);
    }
}
