//! QMux wire versions and the `qmux-0N.<alpn>` WebSocket subprotocol strings that select them (docs/wire.md §8.1, §1.4).

/// The QMux wire format a connection speaks.
///
/// The legacy `webtransport` format (no flow control, no transport parameters) is deliberately
/// not supported: it can only carry pre-lite-03 moq versions, which Starling does not speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireVersion {
    /// draft-00: bare frames (one per WebSocket message, self-delimiting on byte streams);
    /// no records, QX_PING, PADDING or datagrams.
    Qmux00,
    /// draft-01: records, QX_PING, PADDING, DATAGRAM, `max_idle_timeout`, `max_record_size`.
    Qmux01,
    /// draft-02: draft-01 plus "QX_TRANSPORT_PARAMETERS first and once", RESET_STREAM_AT,
    /// strictly increasing QX_PING sequences.
    Qmux02,
}

impl WireVersion {
    /// Every version, newest first.
    pub const ALL: [WireVersion; 3] = [Self::Qmux02, Self::Qmux01, Self::Qmux00];

    /// Whether records (and everything introduced with them) exist on this version.
    pub fn uses_records(self) -> bool {
        !matches!(self, Self::Qmux00)
    }

    /// The bare identifier, e.g. `qmux-01`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Qmux00 => "qmux-00",
            Self::Qmux01 => "qmux-01",
            Self::Qmux02 => "qmux-02",
        }
    }

    /// The WebSocket subprotocol pairing this version with a moq ALPN: `qmux-01.moq-lite-06`.
    pub fn subprotocol(self, alpn: &str) -> String {
        format!("{}.{alpn}", self.as_str())
    }

    /// Split `qmux-0N.<alpn>` into its version and ALPN; `None` for bare or foreign strings.
    pub fn parse_subprotocol(value: &str) -> Option<(WireVersion, &str)> {
        Self::ALL.iter().find_map(|v| {
            value
                .strip_prefix(v.as_str())
                .and_then(|rest| rest.strip_prefix('.'))
                .filter(|alpn| !alpn.is_empty())
                .map(|alpn| (*v, alpn))
        })
    }
}

impl std::fmt::Display for WireVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which end of the connection we are; it decides stream id parity (QUIC's initiator bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    /// The other end.
    pub fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// Stream direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Bi,
    Uni,
}

impl Dir {
    pub(crate) fn index(self) -> usize {
        match self {
            Dir::Bi => 0,
            Dir::Uni => 1,
        }
    }
}

/// A QUIC-style stream id: `index << 2 | uni << 1 | server`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The id of the `index`-th stream of direction `dir` opened by `initiator`.
    pub fn new(index: u64, dir: Dir, initiator: Side) -> Self {
        let uni = u64::from(dir == Dir::Uni) << 1;
        let server = u64::from(initiator == Side::Server);
        StreamId(index << 2 | uni | server)
    }

    pub fn initiator(self) -> Side {
        if self.0 & 1 == 1 {
            Side::Server
        } else {
            Side::Client
        }
    }

    pub fn dir(self) -> Dir {
        if self.0 & 2 == 2 {
            Dir::Uni
        } else {
            Dir::Bi
        }
    }

    pub fn index(self) -> u64 {
        self.0 >> 2
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subprotocols() {
        assert_eq!(
            WireVersion::Qmux01.subprotocol("moq-lite-06"),
            "qmux-01.moq-lite-06"
        );
        assert_eq!(
            WireVersion::parse_subprotocol("qmux-00.moq-lite-05"),
            Some((WireVersion::Qmux00, "moq-lite-05"))
        );
        assert_eq!(WireVersion::parse_subprotocol("qmux-01"), None);
        assert_eq!(WireVersion::parse_subprotocol("qmux-01."), None);
        assert_eq!(WireVersion::parse_subprotocol("webtransport"), None);
    }

    #[test]
    fn stream_ids_follow_quic() {
        assert_eq!(StreamId::new(0, Dir::Bi, Side::Client).0, 0);
        assert_eq!(StreamId::new(1, Dir::Bi, Side::Server).0, 5);
        assert_eq!(StreamId::new(0, Dir::Uni, Side::Client).0, 2);
        let id = StreamId(7);
        assert_eq!(
            (id.index(), id.dir(), id.initiator()),
            (1, Dir::Uni, Side::Server)
        );
    }
}
