//! The status snapshot: what the relay is doing right now (sessions by transport and version,
//! live broadcasts and their tracks with subscribers and throughput), as one JSON document.
//!
//! One pass over the session table and one over the origin's broadcasts and their tracks:
//! linear in broadcasts + tracks + sessions, reading counters only (never subscribing, never
//! pulling). Rates are differences of cumulative counters over the window between two
//! committed samples, at least one interval long, so every reader of the page sees the same
//! numbers however often it asks.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use starling_model::Origin;
use starling_proto::Path;

use crate::http::history::{History, Point};
use crate::registry::{SessionRegistry, SessionTransport};

/// Everything the status page shows.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// The relay's crate version.
    pub version: &'static str,
    /// Unix time of this snapshot, in milliseconds.
    pub time_ms: u64,
    pub uptime_ms: u64,
    /// The window rates are averaged over, in milliseconds (0 before a first window).
    pub window_ms: u64,
    pub sessions: Sessions,
    pub broadcasts: Broadcasts,
    /// The relay-wide receive budget, when the relay has one.
    pub receive: Option<ReceiveStatus>,
    /// The newest point of the relay's series (`/history.json`), when it keeps one.
    pub point: Option<Point>,
}

/// The relay-wide receive budget: connections' windows plus incomplete units, of a total.
#[derive(Clone, Debug, Serialize)]
pub struct ReceiveStatus {
    pub total: usize,
    pub windows: usize,
    pub held: usize,
    pub peak: usize,
    /// Units evicted (or refused) relay-wide to keep the total.
    pub evictions: u64,
    /// Windows grown, shrunk by reclaim passes, and refused growth.
    pub grown: u64,
    pub shrunk: u64,
    pub starved: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sessions {
    pub total: usize,
    /// `quic`, `webtransport`, `websocket` → live sessions (every transport listed).
    pub by_transport: BTreeMap<&'static str, usize>,
    /// Negotiated version (ALPN name) → live sessions.
    pub by_version: BTreeMap<String, usize>,
    /// The first `status_max_items` sessions by id.
    pub list: Vec<SessionStatus>,
    pub truncated: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SessionStatus {
    pub id: u64,
    pub remote: String,
    pub transport: &'static str,
    pub version: String,
    pub root: String,
    pub publish: bool,
    pub subscribe: bool,
    pub server_name: Option<String>,
    pub age_ms: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    pub groups_in: u64,
    pub groups_out: u64,
    pub bytes_in_per_sec: f64,
    pub bytes_out_per_sec: f64,
    /// The connection's receive budget: bytes held in incomplete units, the most held at
    /// once, the budget, and streams evicted for it.
    pub receive_held: usize,
    pub receive_peak: usize,
    pub receive_limit: usize,
    pub receive_evicted: u64,
    /// The transport window the relay-wide receive budget granted it.
    pub receive_window: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Broadcasts {
    pub total: usize,
    /// The first `status_max_items` broadcasts by path.
    pub list: Vec<BroadcastStatus>,
    pub truncated: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct BroadcastStatus {
    pub path: String,
    /// Origins on the route, publisher first (0: published in this process; 1: by a
    /// directly connected client).
    pub hops: usize,
    /// The route's hop ids, publisher first: a mesh's path to the broadcast (a repeated id
    /// would be a loop).
    pub chain: Vec<u64>,
    pub cost_warm: u64,
    pub cost_cold: u64,
    /// Announced over a cluster peer link (the last hop of `chain` is that peer's id), not
    /// by a client session of this relay.
    pub peer: bool,
    /// Learned from a peer (tracks pulled on demand) rather than published in process.
    pub dynamic: bool,
    pub tracks: Vec<TrackStatus>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TrackStatus {
    pub name: String,
    pub subscribers: usize,
    pub priority: Option<u8>,
    pub max_age_ms: Option<u64>,
    pub latest_group: Option<u64>,
    pub groups: u64,
    pub frames: u64,
    pub bytes: u64,
    pub cached_groups: usize,
    pub cached_bytes: usize,
    pub bytes_per_sec: f64,
    pub frames_per_sec: f64,
}

/// Counters of one sample, kept to difference against the next.
#[derive(Default)]
struct Window {
    at: Option<Instant>,
    length: Duration,
    /// (bytes, frames) per track, and the rates computed when this window closed.
    tracks: HashMap<(Path, String), (u64, u64)>,
    track_rates: HashMap<(Path, String), (f64, f64)>,
    /// (bytes in, bytes out) per session id, and their rates.
    sessions: HashMap<u64, (u64, u64)>,
    session_rates: HashMap<u64, (f64, f64)>,
}

/// Takes snapshots and keeps the previous window's counters for rates.
pub(crate) struct Sampler {
    origin: Origin,
    sessions: SessionRegistry,
    started: Instant,
    interval: Duration,
    max_items: usize,
    window: Window,
    receive_pool: Option<starling_session::ReceivePool>,
    history: Option<Arc<History>>,
}

fn rate(now: u64, before: Option<u64>, seconds: f64) -> f64 {
    match before {
        Some(before) if seconds > 0.0 => now.saturating_sub(before) as f64 / seconds,
        _ => 0.0,
    }
}

impl Sampler {
    pub fn new(
        origin: Origin,
        sessions: SessionRegistry,
        interval: Duration,
        max_items: usize,
        receive_pool: Option<starling_session::ReceivePool>,
        history: Option<Arc<History>>,
    ) -> Self {
        Sampler {
            origin,
            sessions,
            started: Instant::now(),
            interval,
            max_items,
            window: Window::default(),
            receive_pool,
            history,
        }
    }

    /// A snapshot now. When the current window is at least one interval old it closes: the
    /// rates are recomputed over it and a new window starts.
    pub fn sample(&mut self) -> Snapshot {
        let now = Instant::now();
        let commit = self
            .window
            .at
            .is_none_or(|at| now.duration_since(at) >= self.interval);
        let seconds = self
            .window
            .at
            .map(|at| now.duration_since(at).as_secs_f64())
            .unwrap_or(0.0);
        let mut next = Window::default();

        let sessions = self.sessions(now, commit, seconds, &mut next);
        let broadcasts = self.broadcasts(commit, seconds, &mut next);

        if commit {
            next.at = Some(now);
            next.length = self
                .window
                .at
                .map(|at| now.duration_since(at))
                .unwrap_or_default();
            self.window = next;
        }
        Snapshot {
            version: env!("CARGO_PKG_VERSION"),
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            uptime_ms: now.duration_since(self.started).as_millis() as u64,
            window_ms: self.window.length.as_millis() as u64,
            sessions,
            broadcasts,
            receive: self.receive_pool.as_ref().map(|pool| {
                let stats = pool.stats();
                ReceiveStatus {
                    total: stats.total,
                    windows: stats.windows,
                    held: stats.held,
                    peak: stats.peak,
                    evictions: stats.evictions,
                    grown: stats.grown,
                    shrunk: stats.shrunk,
                    starved: stats.starved,
                }
            }),
            point: self.history.as_ref().and_then(|history| history.latest()),
        }
    }

    fn sessions(&self, now: Instant, commit: bool, seconds: f64, next: &mut Window) -> Sessions {
        let entries = self.sessions.list();
        let mut by_transport: BTreeMap<&'static str, usize> = SessionTransport::ALL
            .iter()
            .map(|t| (t.as_str(), 0))
            .collect();
        let mut by_version = BTreeMap::new();
        let mut list = Vec::new();
        for entry in &entries {
            let info = &entry.info;
            *by_transport.entry(info.transport.as_str()).or_default() += 1;
            *by_version.entry(info.version.to_string()).or_default() += 1;
            if list.len() >= self.max_items {
                continue;
            }
            let stats = entry.session.stats();
            let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
            let (bytes_in, bytes_out) = (load(&stats.bytes_received), load(&stats.bytes_sent));
            let (rate_in, rate_out) = if commit {
                let before = self.window.sessions.get(&info.id);
                let rates = (
                    rate(bytes_in, before.map(|b| b.0), seconds),
                    rate(bytes_out, before.map(|b| b.1), seconds),
                );
                next.sessions.insert(info.id, (bytes_in, bytes_out));
                next.session_rates.insert(info.id, rates);
                rates
            } else {
                self.window
                    .session_rates
                    .get(&info.id)
                    .copied()
                    .unwrap_or_default()
            };
            let budget = entry.session.budget();
            list.push(SessionStatus {
                id: info.id,
                remote: info.remote.to_string(),
                transport: info.transport.as_str(),
                version: info.version.to_string(),
                root: info.root.as_str().to_string(),
                publish: info.publish,
                subscribe: info.subscribe,
                server_name: info.server_name.clone(),
                age_ms: now.duration_since(info.started).as_millis() as u64,
                bytes_in,
                bytes_out,
                frames_in: load(&stats.frames_received),
                frames_out: load(&stats.frames_sent),
                groups_in: load(&stats.groups_received),
                groups_out: load(&stats.groups_sent),
                bytes_in_per_sec: rate_in,
                bytes_out_per_sec: rate_out,
                receive_held: budget.held,
                receive_peak: budget.peak,
                receive_limit: budget.limit,
                receive_evicted: budget.evicted,
                receive_window: budget.window,
            });
        }
        Sessions {
            total: entries.len(),
            by_transport,
            by_version,
            truncated: list.len() < entries.len(),
            list,
        }
    }

    fn broadcasts(&self, commit: bool, seconds: f64, next: &mut Window) -> Broadcasts {
        let announced = self.origin.announced(&Path::empty(), None);
        let mut list = Vec::with_capacity(announced.len().min(self.max_items));
        for entry in announced.iter().take(self.max_items) {
            let tracks = entry
                .broadcast
                .tracks()
                .into_iter()
                .map(|track| {
                    let stats = track.stats;
                    let key = (entry.path.clone(), track.name.clone());
                    let (bytes_per_sec, frames_per_sec) = if commit {
                        let before = self.window.tracks.get(&key);
                        let rates = (
                            rate(stats.bytes, before.map(|b| b.0), seconds),
                            rate(stats.frames, before.map(|b| b.1), seconds),
                        );
                        next.tracks.insert(key.clone(), (stats.bytes, stats.frames));
                        next.track_rates.insert(key, rates);
                        rates
                    } else {
                        self.window
                            .track_rates
                            .get(&key)
                            .copied()
                            .unwrap_or_default()
                    };
                    TrackStatus {
                        name: track.name,
                        subscribers: stats.consumers,
                        priority: track.info.map(|info| info.priority),
                        max_age_ms: track.info.map(|info| info.max_age_ms),
                        latest_group: stats.latest_sequence,
                        groups: stats.groups,
                        frames: stats.frames,
                        bytes: stats.bytes,
                        cached_groups: stats.cached_groups,
                        cached_bytes: stats.cached_bytes,
                        bytes_per_sec,
                        frames_per_sec,
                    }
                })
                .collect();
            list.push(BroadcastStatus {
                path: entry.path.as_str().to_string(),
                hops: entry.route.hops.len(),
                chain: entry.route.hops.to_vec(),
                cost_warm: entry.route.cost.warm,
                cost_cold: entry.route.cost.cold,
                peer: entry.route.peer,
                dynamic: entry.broadcast.is_dynamic(),
                tracks,
            });
        }
        Broadcasts {
            total: announced.len(),
            truncated: list.len() < announced.len(),
            list,
        }
    }
}
