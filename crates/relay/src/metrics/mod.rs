//! Prometheus metrics for operators, served on the internal listener (`/metrics`, `/health`).
//!
//! Event counters (sessions accepted, rejected, closed) are kept as they happen. Data counters
//! (groups, frames and bytes in and out, slow-subscriber skips, stream errors) live in each
//! session's own atomics on the hot path; a scrape sums the live sessions and adds what ended
//! sessions left behind, so the hot path never touches a shared metric. Gauges (sessions,
//! broadcasts, interests, subscriptions, cache bytes) are read from the registry and the
//! origin at scrape time. Cost per scrape is linear in sessions plus tracks.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use starling_model::{CacheBudget, Origin};
use starling_net::{Admission, HttpCounters};
use starling_proto::{Protocol, SessionCode, StreamCode};
use starling_session::{LedgerStats, PoolStats, ReceivePool, SessionStats, StateLedger};

mod auth;
mod internal;

pub use internal::{internal_router, serve_internal};

use crate::auth::AuthStats;
use crate::registry::{SessionRegistry, SessionTransport};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SessionLabels {
    transport: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PeerLabels {
    peer: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: String,
}

/// Why a connection did not become a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// No common moq-lite version.
    Version,
    /// No valid SETUP in time.
    Handshake,
    /// Refused by admission (auth, path).
    Unauthorized,
    /// The auth server could not be asked.
    AuthUnavailable,
}

impl Rejection {
    pub const ALL: [Rejection; 4] = [
        Rejection::Version,
        Rejection::Handshake,
        Rejection::Unauthorized,
        Rejection::AuthUnavailable,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Rejection::Version => "version",
            Rejection::Handshake => "handshake",
            Rejection::Unauthorized => "unauthorized",
            Rejection::AuthUnavailable => "auth_unavailable",
        }
    }
}

/// What ended sessions counted.
#[derive(Default, Debug)]
struct Totals {
    groups_sent: u64,
    frames_sent: u64,
    bytes_sent: u64,
    groups_received: u64,
    frames_received: u64,
    bytes_received: u64,
    groups_skipped: u64,
    budget_evictions: u64,
    stream_errors: BTreeMap<u32, u64>,
}

impl Totals {
    fn add(&mut self, stats: &SessionStats, evictions: u64) {
        self.groups_sent += stats.groups_sent.load(Ordering::Relaxed);
        self.frames_sent += stats.frames_sent.load(Ordering::Relaxed);
        self.bytes_sent += stats.bytes_sent.load(Ordering::Relaxed);
        self.groups_received += stats.groups_received.load(Ordering::Relaxed);
        self.frames_received += stats.frames_received.load(Ordering::Relaxed);
        self.bytes_received += stats.bytes_received.load(Ordering::Relaxed);
        self.groups_skipped += stats.groups_skipped.load(Ordering::Relaxed);
        self.budget_evictions += evictions;
        for (code, count) in stats.stream_errors() {
            *self.stream_errors.entry(code).or_default() += count;
        }
    }
}

/// The relay as a whole at one instant, for the status page's series: cumulative counters
/// (data and refusals, which the reader differences into rates) and gauges. Reading it costs
/// one pass over the live sessions, like a scrape, without encoding anything.
#[derive(Clone, Debug, Default)]
pub struct Pulse {
    pub sessions: usize,
    /// Track subscriptions served to peers now.
    pub subscriptions: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    /// Connections and requests refused since start, by reason (admission bounds, handshake
    /// rejections, the HTTP connection bound).
    pub refused: Vec<(&'static str, u64)>,
    /// Windows plus incomplete units, of the relay-wide receive budget (when there is one).
    pub receive_used: usize,
    pub receive_total: usize,
    pub cache_used: usize,
    pub cache_total: usize,
    /// How late the runtime runs a timer now, when measured.
    pub lag: Option<std::time::Duration>,
}

/// The relay's metrics; cheap to clone.
#[derive(Clone, Default)]
pub struct RelayMetrics {
    /// Shared with every session, so the tracks they pull count their cache drops here.
    cache: Arc<CacheBudget>,
    /// The listeners' admission gate (its refusals are counted there).
    admission: Option<Arc<Admission>>,
    /// The relay-wide receive budget every session draws on.
    receive_pool: Option<ReceivePool>,
    /// The relay-wide bound on untrusted sessions' control state.
    state_ledger: Option<StateLedger>,
    /// The HTTP server's open and refused connections.
    http: Arc<HttpCounters>,
    accepted: Family<SessionLabels, Counter>,
    rejected: Family<ReasonLabels, Counter>,
    closed: Family<CodeLabels, Counter>,
    ended: Arc<Mutex<Totals>>,
    /// Cluster links redialed after their session ended or a dial failed.
    redials: Counter,
}

impl RelayMetrics {
    /// Metrics for a relay whose tracks share a cache budget of `cache_budget` bytes and whose
    /// listeners admit through `admission`.
    pub fn new(cache_budget: usize, admission: Arc<Admission>) -> Self {
        RelayMetrics {
            cache: Arc::new(CacheBudget::new(cache_budget)),
            admission: Some(admission),
            ..RelayMetrics::default()
        }
    }

    /// Report the relay-wide receive budget too.
    pub fn with_receive_pool(mut self, pool: ReceivePool) -> Self {
        self.receive_pool = Some(pool);
        self
    }

    /// Report the relay-wide state ledger too.
    pub fn with_state_ledger(mut self, ledger: StateLedger) -> Self {
        self.state_ledger = Some(ledger);
        self
    }

    /// The relay-wide state ledger's counters, when the relay has one.
    pub fn state_ledger(&self) -> Option<LedgerStats> {
        self.state_ledger.as_ref().map(StateLedger::stats)
    }

    /// The relay-wide receive budget's counters, when the relay has one.
    pub fn receive_pool(&self) -> Option<PoolStats> {
        self.receive_pool.as_ref().map(ReceivePool::stats)
    }

    /// Where the HTTP server counts its connections.
    pub fn http_counters(&self) -> Arc<HttpCounters> {
        self.http.clone()
    }

    /// The relay-wide cache budget every session's tracks charge and count their drops in.
    pub fn cache_budget(&self) -> Arc<CacheBudget> {
        self.cache.clone()
    }

    pub fn accepted(&self, transport: SessionTransport, version: Protocol) {
        self.accepted
            .get_or_create(&SessionLabels {
                transport: transport.as_str().to_string(),
                version: version.to_string(),
            })
            .inc();
    }

    /// A cluster link is about to dial again.
    pub fn redialed(&self) {
        self.redials.inc();
    }

    pub fn rejected(&self, reason: Rejection) {
        self.rejected
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_string(),
            })
            .inc();
    }

    /// A session ended with `code`; keep what it counted.
    pub fn ended(&self, stats: &SessionStats, code: SessionCode, evictions: u64) {
        self.closed
            .get_or_create(&CodeLabels {
                code: format!("{:#x}", code.to_code()),
            })
            .inc();
        self.ended
            .lock()
            .expect("metrics lock")
            .add(stats, evictions);
    }

    /// Add what ended sessions left behind to `totals`.
    fn add_ended(&self, totals: &mut Totals) {
        let ended = self.ended.lock().expect("metrics lock");
        totals.groups_sent += ended.groups_sent;
        totals.frames_sent += ended.frames_sent;
        totals.bytes_sent += ended.bytes_sent;
        totals.groups_received += ended.groups_received;
        totals.frames_received += ended.frames_received;
        totals.bytes_received += ended.bytes_received;
        totals.groups_skipped += ended.groups_skipped;
        totals.budget_evictions += ended.budget_evictions;
        for (code, count) in &ended.stream_errors {
            *totals.stream_errors.entry(*code).or_default() += count;
        }
    }

    /// The relay as a whole now ([`Pulse`]).
    pub fn pulse(&self, sessions: &SessionRegistry) -> Pulse {
        let mut totals = Totals::default();
        let entries = sessions.list();
        let mut subscriptions = 0u64;
        for entry in &entries {
            subscriptions += entry.session.load().0 as u64;
            totals.add(entry.session.stats(), 0);
        }
        self.add_ended(&mut totals);
        let mut refused: Vec<(&'static str, u64)> = Vec::new();
        if let Some(admission) = &self.admission {
            refused.extend(admission.refused().map(|(r, n)| (r.as_str(), n)));
        }
        for reason in Rejection::ALL {
            let count = self
                .rejected
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str().to_string(),
                })
                .get();
            refused.push((reason.as_str(), count));
        }
        refused.push((
            "http_connections",
            self.http.refused.load(Ordering::Relaxed),
        ));
        let pool = self.receive_pool();
        Pulse {
            sessions: entries.len(),
            subscriptions,
            bytes_in: totals.bytes_received,
            bytes_out: totals.bytes_sent,
            frames_in: totals.frames_received,
            frames_out: totals.frames_sent,
            refused,
            receive_used: pool.as_ref().map_or(0, |p| p.windows + p.held),
            receive_total: pool.as_ref().map_or(0, |p| p.total),
            cache_used: self.cache.used(),
            cache_total: self.cache.limit(),
            lag: self
                .admission
                .as_ref()
                .filter(|a| a.limits().max_lag.is_some())
                .map(|a| a.lag(std::time::Instant::now())),
        }
    }

    /// The Prometheus text exposition of everything, now.
    pub fn render(&self, sessions: &SessionRegistry, origin: &Origin, auth: &AuthStats) -> String {
        let mut registry = Registry::with_prefix("starling");
        registry.register(
            "sessions_accepted",
            "Sessions admitted, by transport and version",
            self.accepted.clone(),
        );
        registry.register(
            "sessions_rejected",
            "Connections refused before becoming a session, by reason",
            self.rejected.clone(),
        );
        registry.register(
            "sessions_closed",
            "Sessions ended, by session close code",
            self.closed.clone(),
        );
        let http_open: Gauge = Gauge::default();
        http_open.set(self.http.open.load(Ordering::Relaxed) as i64);
        registry.register("http_connections", "HTTP connections open", http_open);
        let http_refused: Counter = Counter::default();
        http_refused.inc_by(self.http.refused.load(Ordering::Relaxed));
        registry.register(
            "http_connections_refused",
            "HTTP connections answered 503 because the connection bound was reached",
            http_refused,
        );
        if let Some(admission) = &self.admission {
            let refused: Family<ReasonLabels, Counter> = Family::default();
            for (refusal, count) in admission.refused() {
                refused
                    .get_or_create(&ReasonLabels {
                        reason: refusal.as_str().into(),
                    })
                    .inc_by(count);
            }
            registry.register(
                "connections_refused",
                "Connections refused by admission before any handshake work (QUIC CONNECTION_REFUSED, HTTP 503), by bound",
                refused,
            );
            let admitted: Gauge = Gauge::default();
            admitted.set(admission.sessions() as i64);
            registry.register(
                "admitted_connections",
                "Connections holding an admission slot (sessions and handshakes in progress)",
                admitted,
            );
            if admission.limits().max_lag.is_some() {
                let lag: Gauge = Gauge::default();
                lag.set(admission.lag(std::time::Instant::now()).as_micros() as i64);
                registry.register(
                    "runtime_lag_microseconds",
                    "How late the runtime runs a timer now (measured unless --max-lag-ms 0)",
                    lag,
                );
            }
            let setup = admission.setup();
            let gauge = |value: usize| {
                let g: Gauge = Gauge::default();
                g.set(i64::try_from(value).unwrap_or(i64::MAX));
                g
            };
            registry.register(
                "setup_limit",
                "Connections that may be setting up at once (adapts to the runtime's lag)",
                gauge(setup.limit),
            );
            registry.register(
                "setting_up_connections",
                "Connections admitted whose session is not established yet",
                gauge(setup.in_setup),
            );
            let retries: Counter = Counter::default();
            retries.inc_by(admission.retries());
            registry.register(
                "quic_retries",
                "QUIC Initials answered with a stateless Retry while setups were strained",
                retries,
            );
        }

        // Live sessions: gauges by transport and version, and their data counters.
        let live: Family<SessionLabels, Gauge> = Family::default();
        for transport in SessionTransport::ALL {
            for version in Protocol::SUPPORTED {
                let _ = live.get_or_create(&SessionLabels {
                    transport: transport.as_str().to_string(),
                    version: version.to_string(),
                });
            }
        }
        let mut totals = Totals::default();
        let (mut subscriptions, mut interests, mut upstream) = (0i64, 0i64, 0i64);
        let mut peers = 0i64;
        let (mut receive_held, mut receive_peak) = (0i64, 0i64);
        let peer_routes: Family<PeerLabels, Gauge> = Family::default();
        for entry in sessions.list() {
            if let Some(peer) = &entry.info.peer {
                peer_routes
                    .get_or_create(&PeerLabels { peer: peer.clone() })
                    .inc_by(entry.session.stats().routes.load(Ordering::Relaxed) as i64);
            }
            live.get_or_create(&SessionLabels {
                transport: entry.info.transport.as_str().to_string(),
                version: entry.info.version.to_string(),
            })
            .inc();
            let (served, listening) = entry.session.load();
            let budget = entry.session.budget();
            let evictions = budget.evicted;
            receive_held += budget.held as i64;
            receive_peak = receive_peak.max(budget.peak as i64);
            upstream += entry.session.upstream() as i64;
            peers += entry.info.peer.is_some() as i64;
            subscriptions += served as i64;
            interests += listening as i64;
            totals.add(entry.session.stats(), evictions);
        }
        self.add_ended(&mut totals);
        registry.register("sessions", "Live sessions, by transport and version", live);

        let directed =
            |name: &str, help: &str, sent: u64, received: u64, registry: &mut Registry| {
                let family: Family<DirectionLabels, Counter> = Family::default();
                family
                    .get_or_create(&DirectionLabels {
                        direction: "out".into(),
                    })
                    .inc_by(sent);
                family
                    .get_or_create(&DirectionLabels {
                        direction: "in".into(),
                    })
                    .inc_by(received);
                registry.register(name, help, family);
            };
        directed(
            "groups",
            "Groups sent to (out) and received from (in) peers",
            totals.groups_sent,
            totals.groups_received,
            &mut registry,
        );
        directed(
            "frames",
            "Frames sent to (out) and received from (in) peers",
            totals.frames_sent,
            totals.frames_received,
            &mut registry,
        );
        directed(
            "bytes",
            "Payload bytes sent to (out) and received from (in) peers",
            totals.bytes_sent,
            totals.bytes_received,
            &mut registry,
        );
        let counter = |value: u64| {
            let counter: Counter = Counter::default();
            counter.inc_by(value);
            counter
        };
        registry.register(
            "slow_subscriber_skips",
            "Group streams reset TOO_FAR_BEHIND because a subscriber fell behind",
            counter(totals.groups_skipped),
        );
        registry.register(
            "receive_budget_evictions",
            "Streams evicted because a connection's receive budget was full",
            counter(totals.budget_evictions),
        );
        let errors: Family<CodeLabels, Counter> = Family::default();
        for (code, count) in &totals.stream_errors {
            errors
                .get_or_create(&CodeLabels {
                    code: format!("{:#x}", StreamCode::from_code(*code).to_code()),
                })
                .inc_by(*count);
        }
        registry.register(
            "stream_errors",
            "Streams reset or stopped because of a peer's input (decode errors and bounds), by stream code",
            errors,
        );

        let gauge = |value: i64| {
            let gauge: Gauge = Gauge::default();
            gauge.set(value);
            gauge
        };
        let mut cache_bytes = 0i64;
        let mut tracks = 0i64;
        for announced in origin.announced(&starling_proto::Path::empty(), None) {
            for track in announced.broadcast.tracks() {
                tracks += 1;
                cache_bytes += track.stats.cached_bytes as i64;
            }
        }
        registry.register(
            "broadcasts",
            "Broadcast paths with a route",
            gauge(origin.len() as i64),
        );
        registry.register("tracks", "Tracks held in the cache", gauge(tracks));
        registry.register(
            "cache_bytes",
            "Bytes held in track caches",
            gauge(cache_bytes),
        );
        registry.register(
            "receive_budget_held_bytes",
            "Bytes live sessions hold in incomplete messages and frames, summed",
            gauge(receive_held),
        );
        registry.register(
            "receive_budget_peak_bytes",
            "The most one live session has held in incomplete units at once",
            gauge(receive_peak),
        );
        if let Some(pool) = self.receive_pool() {
            let bytes = |value: usize| gauge(value.min(i64::MAX as usize) as i64);
            registry.register(
                "receive_pool_bytes",
                "The relay-wide receive budget: every connection's window plus incomplete units",
                bytes(pool.total),
            );
            registry.register(
                "receive_pool_windows_bytes",
                "Receive windows granted to connections now, relay-wide",
                bytes(pool.windows),
            );
            registry.register(
                "receive_pool_held_bytes",
                "Bytes held in incomplete units now, relay-wide",
                bytes(pool.held),
            );
            registry.register(
                "receive_pool_peak_bytes",
                "The most windows plus incomplete units have been at once",
                bytes(pool.peak),
            );
            registry.register(
                "receive_pool_evictions",
                "Incomplete units evicted (or refused) to keep the relay-wide receive budget",
                counter(pool.evictions),
            );
            let windows: Family<ReasonLabels, Counter> = Family::default();
            for (reason, count) in [
                ("grown", pool.grown),
                ("shrunk", pool.shrunk),
                ("starved", pool.starved),
            ] {
                windows
                    .get_or_create(&ReasonLabels {
                        reason: reason.into(),
                    })
                    .inc_by(count);
            }
            registry.register(
                "receive_pool_window_changes",
                "Connection windows grown, shrunk by reclaim passes, or refused growth for want of room",
                windows,
            );
        }
        if let Some(ledger) = self.state_ledger() {
            let entries = |value: usize| gauge(value.min(i64::MAX as usize) as i64);
            registry.register(
                "state_ledger_limit_entries",
                "The relay-wide state ledger's bound, in entries of 2 KiB: an announced broadcast weighs 1, an announce interest 3, a served subscription 5 (untrusted sessions only)",
                entries(ledger.limit),
            );
            registry.register(
                "state_ledger_entries",
                "Entries the state ledger holds now",
                entries(ledger.held),
            );
            registry.register(
                "state_ledger_peak_entries",
                "The most entries the state ledger has held at once",
                entries(ledger.peak),
            );
            registry.register(
                "state_ledger_shed_sessions",
                "Sessions closed because they held the most when the state ledger was full",
                counter(ledger.shed),
            );
            registry.register(
                "state_ledger_refusals",
                "Entries refused because the state ledger was full and their session held the most",
                counter(ledger.refused),
            );
        }
        registry.register(
            "cache_budget_bytes",
            "The relay-wide cache budget",
            gauge(self.cache.limit().min(i64::MAX as usize) as i64),
        );
        registry.register(
            "cache_charged_bytes",
            "Bytes charged to the relay-wide cache budget (payload plus per-frame and per-group overhead)",
            gauge(self.cache.used() as i64),
        );
        let drops: Family<ReasonLabels, Counter> = Family::default();
        for (reason, count) in [
            ("budget", self.cache.evicted.load(Ordering::Relaxed)),
            ("age", self.cache.aged.load(Ordering::Relaxed)),
            ("pressure", self.cache.pressed.load(Ordering::Relaxed)),
        ] {
            drops
                .get_or_create(&ReasonLabels {
                    reason: reason.into(),
                })
                .inc_by(count);
        }
        registry.register(
            "cache_evictions",
            "Groups dropped from track caches: a track's byte or group budget was full, they aged out, or the relay-wide budget was full",
            drops,
        );
        registry.register(
            "subscriptions",
            "Subscriptions peers hold with the relay",
            gauge(subscriptions),
        );
        registry.register(
            "upstream_subscriptions",
            "Tracks the relay pulls from its peers and publishers (one subscription each)",
            gauge(upstream),
        );
        let failovers: Counter = Counter::default();
        failovers.inc_by(origin.failovers());
        registry.register(
            "failovers",
            "Tracks handed to another route with the same publisher after the session serving them was lost",
            failovers,
        );
        registry.register(
            "cluster_peer_routes",
            "Routes each dialed cluster peer's announcements hold here, by peer",
            peer_routes,
        );
        registry.register(
            "cluster_redials",
            "Cluster links dialed again after their session ended or a dial failed",
            self.redials.clone(),
        );
        registry.register(
            "cluster_peer_links",
            "Cluster peer links this relay dialed that are up",
            gauge(peers),
        );
        registry.register(
            "announce_interests",
            "Announce interests peers listen on",
            gauge(interests),
        );

        auth::register(&mut registry, auth);

        let mut out = String::new();
        if encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}
