//! What the relay is configured with.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::time::Duration;

pub use crate::auth::AuthConfig;
use crate::cluster::ClusterConfig;
use starling_model::Limits;
use starling_net::{AdmissionLimits, HttpLimits, ReceiveWindows};
use starling_proto::{Path, Protocol};
use starling_session::SessionLimits;

/// Where the relay's certificate comes from.
#[derive(Clone, Debug)]
pub enum TlsSource {
    /// PEM certificate chain and private key files.
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed certificate for these hostnames (valid ≤ 14 days).
    Generate(Vec<String>),
}

#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// UDP (QUIC + WebTransport) address; TCP (HTTP) binds the same port number.
    pub bind: SocketAddr,
    pub tls: TlsSource,
    /// Versions served, most preferred first.
    pub versions: Vec<Protocol>,
    pub session_limits: SessionLimits,
    /// Cache and group bounds for every track the relay holds.
    pub model_limits: Limits,
    /// What every track's cache may hold together (`--cache-budget`).
    pub cache_budget: MemoryShare,
    /// What every connection together may make the relay hold before units are complete:
    /// their transport windows plus incomplete headers and frames (`--receive-budget`).
    pub receive_budget: MemoryShare,
    /// What the control state every untrusted session together holds may cost: announced
    /// broadcasts, served subscriptions and announce interests, each weighed in entries of
    /// [`STATE_ENTRY_BYTES`] (`starling_session::Held`; `--state-budget`).
    pub state_budget: MemoryShare,
    /// Sessions relay-wide and per source, and handshakes per second per source.
    pub admission: AdmissionLimits,
    /// Every connection's receive windows (QUIC, WebTransport, QMux alike); the connection
    /// window is also the session's budget for incomplete units, replacing
    /// `session_limits.recv_budget`. Connections start at `initial` (default
    /// [`INITIAL_RECEIVE_WINDOW`]) and the receive budget grows them up to `connection`.
    pub receive_windows: ReceiveWindows,
    /// Serve HTTP on the TCP port with the same number.
    pub http: bool,
    /// The HTTP API and status page on that port.
    pub http_api: HttpConfig,
    /// How long sessions get to leave after GOAWAY when the relay shuts down.
    pub drain_timeout: Duration,
    /// The internal listener for `/metrics` and `/health`; off unless set.
    pub internal_listen: Option<SocketAddr>,
    /// Plaintext QMux over TCP (`tcp://`), for trusted local workers; off by default.
    pub listen_tcp: Option<SocketAddr>,
    /// Token authentication and public (anonymous) grants; empty: the relay is open.
    pub auth: AuthConfig,
    /// This relay's place in a cluster: its hop id and the peers it dials.
    pub cluster: ClusterConfig,
    /// CA certificates (PEM) a client certificate must chain to (`--listen-tls-root`): a
    /// session presenting a verified one is a cluster peer. Clients without one still connect.
    pub listen_tls_root: Option<std::path::PathBuf>,
    /// Where the relay reads wall time (token lifetimes, session start times): the system's,
    /// or a simulation's. Handed to auth and to every session.
    pub clock: starling_session::Clock,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            bind: "[::]:4443".parse().expect("valid default bind"),
            tls: TlsSource::Generate(vec!["localhost".to_string()]),
            versions: Protocol::SUPPORTED.to_vec(),
            session_limits: SessionLimits::default(),
            model_limits: Limits::default(),
            cache_budget: MemoryShare::default(),
            receive_budget: MemoryShare::default(),
            state_budget: MemoryShare::Percent(DEFAULT_STATE_SHARE),
            admission: AdmissionLimits::default(),
            receive_windows: ReceiveWindows::default(),
            http: true,
            http_api: HttpConfig::default(),
            listen_tcp: None,
            auth: AuthConfig::default(),
            drain_timeout: Duration::from_secs(5),
            internal_listen: None,
            cluster: ClusterConfig::default(),
            listen_tls_root: None,
            clock: starling_session::Clock::system(),
        }
    }
}

/// A relay-wide memory bound (the cache budget, the receive budget): a byte count, or a
/// share of the memory the host grants the process (its cgroup limit, else the machine's
/// memory; see [`crate::memory_limit`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryShare {
    Bytes(u64),
    /// Per cent of the memory limit, in (0, 100].
    Percent(f64),
}

impl Default for MemoryShare {
    /// A quarter of the memory limit: 1 GiB on a 4 GiB host, room for sessions and buffers.
    fn default() -> Self {
        MemoryShare::Percent(25.0)
    }
}

/// Why a `--cache-budget` value was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "{0:?}: expected bytes (with an optional KiB/MiB/GiB suffix) or a per cent of memory (\"25%\")"
)]
pub struct MemoryShareError(String);

impl std::str::FromStr for MemoryShare {
    type Err = MemoryShareError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = || MemoryShareError(text.to_owned());
        let trimmed = text.trim();
        if let Some(percent) = trimmed.strip_suffix('%') {
            let value: f64 = percent.trim().parse().map_err(|_| refuse())?;
            if !(value > 0.0 && value <= 100.0) {
                return Err(refuse());
            }
            return Ok(MemoryShare::Percent(value));
        }
        parse_size(trimmed)
            .filter(|bytes| *bytes > 0)
            .map(MemoryShare::Bytes)
            .ok_or_else(refuse)
    }
}

/// A byte count: digits with an optional `B`, `KiB`, `MiB` or `GiB` suffix (`512MiB`,
/// `2 GiB`); `None` when it is not one or overflows.
pub fn parse_size(text: &str) -> Option<u64> {
    let trimmed = text.trim();
    let (number, unit) = match trimmed.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => trimmed.split_at(at),
        None => (trimmed, ""),
    };
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(scale)
}

impl MemoryShare {
    /// The budget in bytes, given the host's memory limit (unknown: 4 GiB is assumed).
    pub fn resolve(self, memory: Option<u64>) -> usize {
        let bytes = match self {
            MemoryShare::Bytes(bytes) => bytes,
            MemoryShare::Percent(percent) => {
                (memory.unwrap_or(4 << 30) as f64 * percent / 100.0) as u64
            }
        };
        usize::try_from(bytes).unwrap_or(usize::MAX)
    }
}

/// The state budget's default share of the memory limit, in per cent: 512 MiB on a 4 GiB host.
pub const DEFAULT_STATE_SHARE: f64 = 12.5;

/// What one entry of the state ledger is counted at. Measured through a relay process (the
/// fleets in `crates/starling/tests/hostile_fleet.rs`): an announced broadcast (its route,
/// broadcast and serving task, with the session's own bookkeeping) costs about 1.5 KiB of RSS
/// held and 2.4 KiB when sessions are shed and replaced, and weighs one entry; an announce
/// interest about 6.2 KiB (three entries) and a served subscription about 9.4 KiB (five),
/// each being a stream of its own.
pub const STATE_ENTRY_BYTES: usize = 2048;

/// The receive window a connection starts with; it grows as the connection uses it.
pub const INITIAL_RECEIVE_WINDOW: u64 = 64 << 10;

impl RelayConfig {
    /// The connection window must hold the largest unit the relay buffers whole before
    /// handing it on (a control message, or a frame small enough to be read whole; larger
    /// frames go to their group piece by piece), or such a unit could never complete:
    /// refused at start, naming the setting.
    pub fn check_receive_window(&self) -> Result<(), crate::RelayError> {
        // A frame header: the type-less size and timestamp varints, at most 16 bytes.
        let frame = starling_session::WHOLE_FRAME_BYTES as u64 + 16;
        let control = self.session_limits.max_control_message as u64 + 16;
        let window = self.receive_windows.connection;
        for (unit, largest) in [("a frame", frame), ("a control message", control)] {
            if window < largest {
                return Err(crate::RelayError::ReceiveWindow {
                    window,
                    unit,
                    largest,
                });
            }
        }
        Ok(())
    }
}

/// The HTTP API (`/announced`, `/fetch`) and the status page (`/`, `/events`, `/status.json`).
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Connections, the request-head deadline and HTTP/2 streams.
    pub server: HttpLimits,
    /// `/events` streams open at once; one more is answered 503 with Retry-After.
    pub max_event_clients: usize,
    /// `/fetch` requests served at once; one more is answered 503 with Retry-After.
    pub max_fetches: usize,
    /// The root every HTTP request is scoped to: request paths must lie under it (anonymous
    /// access for now; authentication will decide a root per request). Empty: everything.
    pub root: Path,
    /// How long `/fetch` waits for a route, a group and its frames (moq-relay: 30 s); past
    /// it, a request still waiting for its group gets 504.
    pub fetch_timeout: Duration,
    /// How often `/events` pushes a status snapshot; rates are averaged over this window,
    /// and the status page's series take one point per interval.
    pub status_interval: Duration,
    /// How much of the relay's series the status page can draw (`/history.json`): the last
    /// this long, one point per `status_interval`.
    pub status_history: Duration,
    /// At most this many broadcasts and this many sessions are listed in a snapshot (totals
    /// are always exact), so a snapshot stays small on a busy relay.
    pub status_max_items: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            root: Path::empty(),
            fetch_timeout: Duration::from_secs(30),
            status_interval: Duration::from_secs(1),
            status_history: Duration::from_secs(600),
            status_max_items: 1000,
            server: HttpLimits::default(),
            max_event_clients: 256,
            // One per HTTP connection (a fetch holds a task and a group's reader, a few
            // KiB). 256 refused a tenth of 1 000 agents' fetches while 10 000 members burst
            // in and every fetch waited on a saturated machine.
            max_fetches: 4096,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_limits_parse_as_bytes_or_a_share() {
        assert_eq!(
            "1048576".parse::<MemoryShare>().unwrap(),
            MemoryShare::Bytes(1 << 20)
        );
        assert_eq!(
            "512MiB".parse::<MemoryShare>().unwrap(),
            MemoryShare::Bytes(512 << 20)
        );
        assert_eq!(
            "2 GiB".parse::<MemoryShare>().unwrap(),
            MemoryShare::Bytes(2 << 30)
        );
        assert_eq!(
            "25%".parse::<MemoryShare>().unwrap(),
            MemoryShare::Percent(25.0)
        );
        for bad in [
            "0",
            "0%",
            "101%",
            "12XB",
            "",
            "-1",
            "99999999999999999999GiB",
        ] {
            assert!(bad.parse::<MemoryShare>().is_err(), "{bad:?}");
        }
        assert_eq!(MemoryShare::Percent(25.0).resolve(Some(4 << 30)), 1 << 30);
        assert_eq!(MemoryShare::Bytes(7).resolve(Some(4 << 30)), 7);
    }
}
