//! The moq-lite version table and its feature gates (docs/wire.md §1.1 and §5).

use std::fmt;
use std::str::FromStr;

/// A moq-lite version that negotiates by ALPN / WebTransport protocol.
///
/// lite-01/02 (legacy in-band SETUP over `moql`) and the IETF drafts are out of scope.
/// The codec is fully implemented for [`Version::Lite05`] and [`Version::Lite06`]; the
/// other variants exist so the gates and the ALPN table are complete, and their codecs
/// report `Unsupported` wherever their layout differs (see [`Version::is_implemented`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    Lite03,
    Lite04,
    Lite05,
    Lite06,
    /// `moq-lite-07-wip`: opt-in only, leading-ones varints everywhere (not implemented).
    Lite07Wip,
}

/// A string that names no known version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown moq-lite version {0:?}")]
pub struct UnknownVersion(pub String);

impl Version {
    /// The versions Starling speaks, most preferred first.
    pub const SUPPORTED: &'static [Version] = &[Version::Lite06, Version::Lite05];

    /// Every version in this table, newest first.
    pub const ALL: &'static [Version] = &[
        Version::Lite07Wip,
        Version::Lite06,
        Version::Lite05,
        Version::Lite04,
        Version::Lite03,
    ];

    /// ALPN, WebTransport protocol and `Display` name.
    pub const fn alpn(self) -> &'static str {
        match self {
            Self::Lite03 => "moq-lite-03",
            Self::Lite04 => "moq-lite-04",
            Self::Lite05 => "moq-lite-05",
            Self::Lite06 => "moq-lite-06",
            Self::Lite07Wip => "moq-lite-07-wip",
        }
    }

    /// The version an ALPN names; `None` for anything else (including `moq-lite-06-wip`,
    /// `moq-lite-07` and the shared legacy `moql`).
    pub fn from_alpn(alpn: &str) -> Option<Version> {
        Self::ALL.iter().copied().find(|v| v.alpn() == alpn)
    }

    /// The SETUP version code (`0xff0dad0N`; not on the wire for ALPN-negotiated versions).
    pub const fn code(self) -> u64 {
        match self {
            Self::Lite03 => 0xff0d_ad03,
            Self::Lite04 => 0xff0d_ad04,
            Self::Lite05 => 0xff0d_ad05,
            Self::Lite06 => 0xff0d_ad06,
            Self::Lite07Wip => 0xff0d_ad07,
        }
    }

    /// The version a SETUP code names.
    pub fn from_code(code: u64) -> Option<Version> {
        Self::ALL.iter().copied().find(|v| v.code() == code)
    }

    /// Whether this crate encodes and decodes every message of this version.
    pub const fn is_implemented(self) -> bool {
        matches!(self, Self::Lite05 | Self::Lite06 | Self::Lite07Wip)
    }

    /// Whether this version's integers are QUIC varints (every version before 07).
    pub const fn has_quic_varints(self) -> bool {
        !matches!(self, Self::Lite07Wip)
    }

    /// The wire form of this version's integers.
    pub const fn varint(self) -> crate::varint::Flavor {
        if self.has_quic_varints() {
            crate::varint::Flavor::Quic
        } else {
            crate::varint::Flavor::LeadingOnes
        }
    }

    /// PROBE carries the RTT field (04+).
    pub const fn has_probe_rtt(self) -> bool {
        !matches!(self, Self::Lite03)
    }

    /// The GOAWAY stream (bidi 0x5) exists (04+).
    pub const fn has_goaway(self) -> bool {
        !matches!(self, Self::Lite03)
    }

    /// Each side opens a uni SETUP stream; the server blocks on the client's (05+).
    pub const fn has_setup_stream(self) -> bool {
        !matches!(self, Self::Lite03 | Self::Lite04)
    }

    /// TRACK/TRACK_INFO, FETCH served, SUBSCRIBE_START/END, per-frame timestamps (05+).
    pub const fn has_track_stream(self) -> bool {
        !matches!(self, Self::Lite03 | Self::Lite04)
    }

    /// FRAME headers carry a ZigZag timestamp delta (05+).
    pub const fn has_frame_timestamps(self) -> bool {
        self.has_track_stream()
    }

    /// DATAGRAM bodies exist (05+).
    pub const fn has_datagrams(self) -> bool {
        !matches!(self, Self::Lite03 | Self::Lite04)
    }

    /// ANNOUNCE_OK is the publisher's first message on an announce stream (05+).
    pub const fn has_announce_ok(self) -> bool {
        !matches!(self, Self::Lite03 | Self::Lite04)
    }

    /// lite-05 ANNOUNCE status 2 (restart) is accepted (05+; 06+ uses UPDATE instead).
    pub const fn restart_supported(self) -> bool {
        !matches!(self, Self::Lite03 | Self::Lite04)
    }

    /// SUBSCRIBE carries Max Age (03+; always true in this table).
    pub const fn carries_max_age(self) -> bool {
        true
    }

    /// ANNOUNCE_REQUEST carries Exclude Hop (04 and 05 only).
    pub const fn has_exclude_hop(self) -> bool {
        matches!(self, Self::Lite04 | Self::Lite05)
    }

    /// The retired `Ordered` byte in SUBSCRIBE, SUBSCRIBE_UPDATE and TRACK_INFO (≤ 05).
    pub const fn has_group_order(self) -> bool {
        matches!(self, Self::Lite03 | Self::Lite04 | Self::Lite05)
    }

    /// Typed announcements with implicit ids (06+).
    pub const fn has_announce_id(self) -> bool {
        matches!(self, Self::Lite06 | Self::Lite07Wip)
    }

    /// Warm/cold route cost on ANNOUNCE_START/UPDATE (06+).
    pub const fn has_route_cost(self) -> bool {
        matches!(self, Self::Lite06 | Self::Lite07Wip)
    }

    /// Frame Start/End on SUBSCRIBE, SUBSCRIBE_UPDATE, FETCH; Frame Start on GROUP (06+).
    pub const fn has_frame_bounds(self) -> bool {
        matches!(self, Self::Lite06 | Self::Lite07Wip)
    }

    /// Group Start is a raw floor resolved from Max Age (06+); before, `n+1` with 0 = latest.
    pub const fn resolves_start(self) -> bool {
        matches!(self, Self::Lite06 | Self::Lite07Wip)
    }

    /// ANNOUNCE_REQUEST carries the `Hidden` flag (07+).
    pub const fn has_hidden(self) -> bool {
        matches!(self, Self::Lite07Wip)
    }

    /// Path-head / hop-tail compression in ANNOUNCE_START/UPDATE (07+).
    pub const fn has_announce_compression(self) -> bool {
        matches!(self, Self::Lite07Wip)
    }

    /// SUBSCRIBE_END carries a stream count and SUBSCRIBE_DROP is gone (07+).
    pub const fn has_stream_count(self) -> bool {
        matches!(self, Self::Lite07Wip)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.alpn())
    }
}

impl FromStr for Version {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_alpn(s).ok_or_else(|| UnknownVersion(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(Version::Lite06.alpn(), "moq-lite-06");
        assert_eq!(Version::Lite06.code(), 0xff0dad06);
        assert_eq!(Version::Lite07Wip.to_string(), "moq-lite-07-wip");
        assert_eq!("moq-lite-05".parse::<Version>(), Ok(Version::Lite05));
        assert_eq!(Version::from_alpn("moq-lite-06-wip"), None);
        assert_eq!(Version::from_alpn("moq-lite-07"), None);
        assert_eq!(Version::from_alpn("moql"), None);
        assert_eq!(Version::from_code(0xff0dad05), Some(Version::Lite05));
        for v in Version::ALL {
            assert_eq!(Version::from_alpn(v.alpn()), Some(*v));
        }
        assert_eq!(Version::SUPPORTED, &[Version::Lite06, Version::Lite05]);
        assert!(Version::SUPPORTED.iter().all(|v| v.is_implemented()));
    }

    #[test]
    fn gates() {
        use Version::*;
        assert!(Lite05.has_exclude_hop() && Lite04.has_exclude_hop() && !Lite06.has_exclude_hop());
        assert!(Lite05.has_group_order() && !Lite06.has_group_order());
        assert!(!Lite05.has_announce_id() && Lite06.has_announce_id());
        assert!(!Lite05.has_frame_bounds() && Lite06.has_frame_bounds());
        assert!(!Lite05.resolves_start() && Lite06.resolves_start());
        assert!(Lite05.has_setup_stream() && !Lite04.has_setup_stream());
        assert!(Lite04.has_goaway() && !Lite03.has_goaway());
        assert!(Lite04.has_probe_rtt() && !Lite03.has_probe_rtt());
        assert!(Lite07Wip.has_stream_count() && !Lite06.has_stream_count());
    }
}
