//! The moq-lite version table and its feature gates (docs/wire.md §1.1 and §5).

use std::fmt;
use std::str::FromStr;

/// A moq-lite version.
///
/// lite-03 and later negotiate by ALPN (WebTransport protocol, WebSocket subprotocol): the
/// protocol names the version. lite-01 and lite-02 share the ALPN `moql` and are chosen in band,
/// by a legacy SETUP exchange on the first bidi stream (`proto::legacy`). Every version's codec
/// is complete except where [`Version::is_implemented`] says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    Lite01,
    Lite02,
    Lite03,
    Lite04,
    Lite05,
    Lite06,
    /// `moq-lite-07-wip`: opt-in only, leading-ones varints everywhere.
    Lite07Wip,
}

/// A string that names no known version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown moq-lite version {0:?}")]
pub struct UnknownVersion(pub String);

/// The ALPN lite-01 and lite-02 share; the version is then chosen in band.
pub const LEGACY_ALPN: &str = "moql";

impl Version {
    /// The versions a Starling relay serves and a Starling client offers by default, most
    /// preferred first: moq-relay 0.17.10's order (lite-07-wip only when named).
    pub const SUPPORTED: &'static [Version] = &[
        Version::Lite06,
        Version::Lite05,
        Version::Lite04,
        Version::Lite03,
        Version::Lite02,
        Version::Lite01,
    ];

    /// Every version in this table, newest first.
    pub const ALL: &'static [Version] = &[
        Version::Lite07Wip,
        Version::Lite06,
        Version::Lite05,
        Version::Lite04,
        Version::Lite03,
        Version::Lite02,
        Version::Lite01,
    ];

    /// The name (`Display`, `FromStr`, `--listen-version`), as moq-dev spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Lite01 => "moq-lite-01",
            Self::Lite02 => "moq-lite-02",
            Self::Lite03 => "moq-lite-03",
            Self::Lite04 => "moq-lite-04",
            Self::Lite05 => "moq-lite-05",
            Self::Lite06 => "moq-lite-06",
            Self::Lite07Wip => "moq-lite-07-wip",
        }
    }

    /// The ALPN and WebTransport protocol: the name from lite-03 on, `moql` for 01 and 02.
    pub const fn alpn(self) -> &'static str {
        match self {
            Self::Lite01 | Self::Lite02 => LEGACY_ALPN,
            other => other.name(),
        }
    }

    /// The version an ALPN names; `None` for anything else, including the shared `moql`
    /// (whose version is chosen in band), `moq-lite-06-wip` and `moq-lite-07`.
    pub fn from_alpn(alpn: &str) -> Option<Version> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| !v.negotiates_in_band() && v.alpn() == alpn)
    }

    /// The version a name names.
    pub fn from_name(name: &str) -> Option<Version> {
        Self::ALL.iter().copied().find(|v| v.name() == name)
    }

    /// The deduplicated ALPNs of `versions`, in their order (`moql` once, where the first of
    /// lite-01/02 sits).
    pub fn alpns(versions: &[Version]) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::with_capacity(versions.len());
        for version in versions {
            if !out.contains(&version.alpn()) {
                out.push(version.alpn());
            }
        }
        out
    }

    /// The SETUP code (`0xff0dad0N`; on the wire only in the legacy in-band SETUP of 01/02).
    pub const fn code(self) -> u64 {
        match self {
            Self::Lite01 => 0xff0d_ad01,
            Self::Lite02 => 0xff0d_ad02,
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
        true
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

    /// Chosen by the legacy SETUP exchange over `moql` (01 and 02).
    pub const fn negotiates_in_band(self) -> bool {
        matches!(self, Self::Lite01 | Self::Lite02)
    }

    /// The legacy SETUP stream stays open as the session stream, carrying SESSION_INFO (01/02).
    pub const fn has_session_stream(self) -> bool {
        self.negotiates_in_band()
    }

    /// PROBE exists (03+).
    pub const fn has_probe(self) -> bool {
        !self.negotiates_in_band()
    }

    /// PROBE carries the RTT field (04+).
    pub const fn has_probe_rtt(self) -> bool {
        !matches!(self, Self::Lite01 | Self::Lite02 | Self::Lite03)
    }

    /// The GOAWAY stream (bidi 0x5) exists (04+).
    pub const fn has_goaway(self) -> bool {
        self.has_probe_rtt()
    }

    /// Each side opens a uni SETUP stream; the server blocks on the client's (05+).
    pub const fn has_setup_stream(self) -> bool {
        !matches!(
            self,
            Self::Lite01 | Self::Lite02 | Self::Lite03 | Self::Lite04
        )
    }

    /// TRACK/TRACK_INFO, FETCH served, SUBSCRIBE_START/END, per-frame timestamps (05+).
    pub const fn has_track_stream(self) -> bool {
        self.has_setup_stream()
    }

    /// ANNOUNCE_INIT opens the announce stream (01/02).
    pub const fn has_announce_init(self) -> bool {
        self.negotiates_in_band()
    }

    /// Announcements carry a hop chain: a count on 03, a list from 04 (none on 01/02).
    pub const fn has_hops(self) -> bool {
        !self.negotiates_in_band()
    }

    /// The hop chain travels as a list of ids (04+; 03 sends only its length).
    pub const fn has_hop_list(self) -> bool {
        self.has_hops() && !matches!(self, Self::Lite03)
    }

    /// The sender appends its own hop to each chain it sends (03/04; from 05 the receiver
    /// appends the hop the ANNOUNCE_OK named).
    pub const fn sender_appends_hop(self) -> bool {
        self.has_hops() && !self.has_announce_ok()
    }

    /// Subscribe responses are typed `Type, Len, body` (03+; 01/02 send one untyped OK).
    pub const fn has_typed_responses(self) -> bool {
        !self.negotiates_in_band()
    }

    /// SUBSCRIBE_UPDATE exists (03+).
    pub const fn has_subscribe_update(self) -> bool {
        !self.negotiates_in_band()
    }

    /// FRAME headers carry a ZigZag timestamp delta (05+).
    pub const fn has_frame_timestamps(self) -> bool {
        self.has_track_stream()
    }

    /// DATAGRAM bodies exist (05+).
    pub const fn has_datagrams(self) -> bool {
        self.has_setup_stream()
    }

    /// ANNOUNCE_OK is the publisher's first message on an announce stream (05+).
    pub const fn has_announce_ok(self) -> bool {
        self.has_setup_stream()
    }

    /// lite-05 ANNOUNCE status 2 (restart) is accepted (05+; 06+ uses UPDATE instead).
    pub const fn restart_supported(self) -> bool {
        self.has_setup_stream()
    }

    /// SUBSCRIBE carries priority's tail: Max Age and the group bounds (03+; 01/02 send
    /// only the id, path, track and priority).
    pub const fn carries_max_age(self) -> bool {
        !self.negotiates_in_band()
    }

    /// ANNOUNCE_REQUEST carries Exclude Hop (04 and 05 only).
    pub const fn has_exclude_hop(self) -> bool {
        matches!(self, Self::Lite04 | Self::Lite05)
    }

    /// The retired `Ordered` byte in SUBSCRIBE, SUBSCRIBE_UPDATE, SUBSCRIBE_OK and TRACK_INFO
    /// (03 to 05; 01/02 end their SUBSCRIBE before it).
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

impl crate::coding::Wire for Version {
    fn flavor(self) -> crate::varint::Flavor {
        self.varint()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Version {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s).ok_or_else(|| UnknownVersion(s.to_string()))
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
            let by_alpn = if v.negotiates_in_band() {
                None
            } else {
                Some(*v)
            };
            assert_eq!(Version::from_alpn(v.alpn()), by_alpn);
            assert_eq!(v.name().parse::<Version>(), Ok(*v));
        }
        assert_eq!(Version::Lite01.alpn(), "moql");
        assert_eq!(Version::Lite02.to_string(), "moq-lite-02");
        assert_eq!("moql".parse::<Version>().ok(), None);
        use Version::*;
        assert_eq!(
            Version::alpns(&[Lite06, Lite05, Lite04, Lite03, Lite02, Lite01]),
            [
                "moq-lite-06",
                "moq-lite-05",
                "moq-lite-04",
                "moq-lite-03",
                "moql"
            ]
        );
        assert_eq!(Version::SUPPORTED[..2], [Version::Lite06, Version::Lite05]);
        assert!(!Version::SUPPORTED.contains(&Version::Lite07Wip));
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
