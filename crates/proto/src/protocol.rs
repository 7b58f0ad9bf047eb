//! Every protocol a session may speak: a moq-lite [`Version`] or an IETF moq-transport
//! [`Draft`], under one name space (`--listen-version`, `--version`), one ALPN list and one
//! preference order, as moq-dev's version table has them (docs/wire-ietf.md §1).

use std::fmt;
use std::str::FromStr;

use crate::ietf::Draft;
use crate::version::{UnknownVersion, Version};

/// A moq-lite version or an IETF draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Lite(Version),
    Ietf(Draft),
}

impl Protocol {
    /// What a Starling relay serves and a client offers by default, most preferred first:
    /// moq-relay 0.17.10's order, every lite version before every draft, the drafts newest
    /// first (lite-07-wip only when named).
    pub const SUPPORTED: &'static [Protocol] = &[
        Protocol::Lite(Version::Lite06),
        Protocol::Lite(Version::Lite05),
        Protocol::Lite(Version::Lite04),
        Protocol::Lite(Version::Lite03),
        Protocol::Lite(Version::Lite02),
        Protocol::Lite(Version::Lite01),
        Protocol::Ietf(Draft::D22),
        Protocol::Ietf(Draft::D21),
        Protocol::Ietf(Draft::D20),
        Protocol::Ietf(Draft::D19),
        Protocol::Ietf(Draft::D18),
        Protocol::Ietf(Draft::D17),
        Protocol::Ietf(Draft::D16),
        Protocol::Ietf(Draft::D15),
        Protocol::Ietf(Draft::D14),
    ];

    /// The name, as moq-dev spells it (`moq-lite-06`, `moq-transport-17`).
    pub const fn name(self) -> &'static str {
        match self {
            Protocol::Lite(v) => v.name(),
            Protocol::Ietf(d) => d.name(),
        }
    }

    /// The ALPN and WebTransport protocol (`moql` for lite-01 and lite-02).
    pub const fn alpn(self) -> &'static str {
        match self {
            Protocol::Lite(v) => v.alpn(),
            Protocol::Ietf(d) => d.alpn(),
        }
    }

    /// The protocol an ALPN names; `None` for `moql` (chosen in band) and anything unknown.
    pub fn from_alpn(alpn: &str) -> Option<Protocol> {
        Version::from_alpn(alpn)
            .map(Protocol::Lite)
            .or_else(|| Draft::from_alpn(alpn).map(Protocol::Ietf))
    }

    /// The deduplicated ALPNs of `protocols`, in their order.
    pub fn alpns(protocols: &[Protocol]) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::with_capacity(protocols.len());
        for protocol in protocols {
            if !out.contains(&protocol.alpn()) {
                out.push(protocol.alpn());
            }
        }
        out
    }

    /// The lite versions of `protocols`, in their order.
    pub fn lite(protocols: &[Protocol]) -> Vec<Version> {
        protocols
            .iter()
            .filter_map(|p| match p {
                Protocol::Lite(v) => Some(*v),
                Protocol::Ietf(_) => None,
            })
            .collect()
    }

    /// The QMux versions a WebSocket subprotocol may pair with this protocol's ALPN.
    pub const fn qmux_versions(self) -> &'static [&'static str] {
        match self {
            Protocol::Lite(_) => &["qmux-01", "qmux-00"],
            Protocol::Ietf(d) => d.qmux_versions(),
        }
    }
}

impl From<Version> for Protocol {
    fn from(version: Version) -> Self {
        Protocol::Lite(version)
    }
}

impl From<Draft> for Protocol {
    fn from(draft: Draft) -> Self {
        Protocol::Ietf(draft)
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Protocol {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::from_name(s)
            .map(Protocol::Lite)
            .or_else(|| Draft::from_name(s).map(Protocol::Ietf))
            .ok_or_else(|| UnknownVersion(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// moq-net 0.3.18's ALPN list, most preferred first (its `ALPNS` constant).
    #[test]
    fn default_order_is_moq_relays() {
        assert_eq!(
            Protocol::alpns(Protocol::SUPPORTED),
            [
                "moq-lite-06",
                "moq-lite-05",
                "moq-lite-04",
                "moq-lite-03",
                "moql",
                "moqt-22",
                "moqt-21",
                "moqt-20",
                "moqt-19",
                "moqt-18",
                "moqt-17",
                "moqt-16",
                "moqt-15",
                "moq-00"
            ]
        );
    }

    #[test]
    fn names_and_alpns_round_trip() {
        for protocol in Protocol::SUPPORTED
            .iter()
            .copied()
            .chain([Protocol::Lite(Version::Lite07Wip)])
        {
            assert_eq!(protocol.name().parse::<Protocol>(), Ok(protocol));
            if protocol.alpn() != crate::LEGACY_ALPN {
                assert_eq!(Protocol::from_alpn(protocol.alpn()), Some(protocol));
            }
        }
        assert_eq!(Protocol::from_alpn("moqt-14"), None);
        assert!("moq-transport-13".parse::<Protocol>().is_err());
        assert_eq!(
            Protocol::Ietf(Draft::D18).qmux_versions(),
            ["qmux-01"].as_slice()
        );
    }
}
