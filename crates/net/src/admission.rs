//! Admission: how many sessions the relay holds, how many each source may hold and open
//! per second, and how many may be setting up at once ([`crate::setup`], the limit that
//! finds the host's knee from the runtime's lag). Sans-IO: the caller passes the time;
//! listeners refuse before any handshake work (QUIC CONNECTION_REFUSED, HTTP 503 with
//! Retry-After).
//!
//! A [`Ticket`] is one admitted connection, from its first packet (or HTTP upgrade) to the
//! session's end; dropping it gives the slot back. It holds a setup slot too until the
//! session is [established](Ticket::established). Sources are IPv4 addresses and IPv6 /64
//! prefixes (one host usually holds a whole /64). The per-source table holds sources with a
//! session plus those seen within the last second, and never more than [`MAX_SOURCES`]:
//! sources flooding from spoofed addresses age out instead of growing it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::overload::{self, Lag};
use crate::setup::{Pressure, SetupFull, SetupLimit, SetupStats};

/// The default lag bound: past it only [`crate::setup::SETUP_FLOOR`] connections set up at
/// once, and past a quarter of it the setup limit shrinks.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(100);

/// Most sources tracked at once; past it, new sources are refused until idle ones age out.
pub const MAX_SOURCES: usize = 65_536;

/// How long an idle source is remembered (its handshake bucket refills in that time).
const SOURCE_MEMORY: Duration = Duration::from_secs(1);

/// The bounds admission enforces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionLimits {
    /// Sessions (and handshakes in progress) relay-wide.
    pub max_sessions: usize,
    /// Sessions one source may hold.
    pub max_sessions_per_source: usize,
    /// Connections one source may open per second (a bucket holding one second's worth).
    pub handshakes_per_second_per_source: u32,
    /// Loopback sources skip the per-source bounds and the setup limit (local load
    /// generators, sidecars, tests); the relay-wide session and receive bounds still apply.
    pub exempt_loopback: bool,
    /// The runtime's lag bound ([`crate::overload`]): past a quarter of it the setup
    /// limit shrinks, past it only the limit's floor may set up at once. `None`: the lag is
    /// not measured and the setup limit only grows.
    pub max_lag: Option<Duration>,
}

impl Default for AdmissionLimits {
    /// Sized for a 2-core, 4 GiB host: 16 384 sessions at under 100 KiB each idle is well
    /// within it; one address gets 256 sessions and opens at most 64 per second.
    fn default() -> Self {
        AdmissionLimits {
            max_sessions: 16_384,
            max_sessions_per_source: 256,
            handshakes_per_second_per_source: 64,
            exempt_loopback: true,
            max_lag: Some(DEFAULT_MAX_LAG),
        }
    }
}

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The relay holds `max_sessions` already.
    Sessions,
    /// The source holds `max_sessions_per_source` already.
    SourceSessions,
    /// The source opened `handshakes_per_second_per_source` in the last second.
    SourceRate,
    /// The source table is full of live sources.
    Sources,
    /// The runtime runs later than `max_lag` and the setup limit's floor is setting up:
    /// the host is overloaded.
    Overload,
    /// The relay-wide receive budget has no window left for one more connection.
    ReceiveBudget,
    /// The adaptive setup limit is reached: as many connections are setting up as the
    /// host's recent lag allows.
    Setup,
}

impl Refusal {
    pub const ALL: [Refusal; 7] = [
        Refusal::Sessions,
        Refusal::SourceSessions,
        Refusal::SourceRate,
        Refusal::Sources,
        Refusal::Overload,
        Refusal::ReceiveBudget,
        Refusal::Setup,
    ];

    /// The label metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Sessions => "max_sessions",
            Refusal::SourceSessions => "source_sessions",
            Refusal::SourceRate => "source_rate",
            Refusal::Sources => "sources",
            Refusal::Overload => "lag",
            Refusal::ReceiveBudget => "receive_budget",
            Refusal::Setup => "setup",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A source: an IPv4 address or an IPv6 /64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SourceKey {
    V4(u32),
    V6(u64),
}

impl SourceKey {
    fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => SourceKey::V4(v4.into()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => SourceKey::V4(v4.into()),
                None => SourceKey::V6((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

#[derive(Debug)]
struct Source {
    sessions: usize,
    /// Handshakes the source may still open now (refills at the per-second rate).
    tokens: f64,
    refreshed: Instant,
}

#[derive(Debug, Default)]
struct State {
    sessions: usize,
    sources: HashMap<SourceKey, Source>,
    /// When the full table was last swept for idle sources (at most every [`SWEEP_EVERY`],
    /// so a flood of new sources costs one sweep per interval, not one per packet).
    swept: Option<Instant>,
}

const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// Whether the relay has room for one more connection's memory at a given time (the
/// relay-wide receive budget's window for it).
pub type RoomCheck = Box<dyn Fn(Instant) -> bool + Send + Sync>;

/// The relay's admission gate, shared by every listener.
pub struct Admission {
    limits: AdmissionLimits,
    state: Mutex<State>,
    refused: [AtomicU64; Refusal::ALL.len()],
    lag: Arc<Lag>,
    setup: SetupLimit,
    /// QUIC Initials answered with a Retry while setups were strained.
    retries: AtomicU64,
    room: std::sync::OnceLock<RoomCheck>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("limits", &self.limits)
            .field("room", &self.room.get().is_some())
            .finish_non_exhaustive()
    }
}

impl Admission {
    pub fn new(limits: AdmissionLimits) -> Arc<Self> {
        Arc::new(Admission {
            limits,
            state: Mutex::new(State::default()),
            refused: Default::default(),
            lag: Arc::new(Lag::new(Instant::now())),
            setup: SetupLimit::default(),
            retries: AtomicU64::new(0),
            room: std::sync::OnceLock::new(),
        })
    }

    /// Refuse connections, from every source, while `room` says the relay has no memory
    /// for one more (counted `receive_budget`). Set once; later calls are ignored.
    pub fn set_room(&self, room: RoomCheck) {
        let _ = self.room.set(room);
    }

    /// Start measuring the runtime's lag when a bound on it is set (on the current runtime,
    /// until the admission is dropped).
    pub fn start_lag_probe(&self) {
        if self.limits.max_lag.is_some() {
            overload::spawn_probe(Arc::downgrade(&self.lag));
        }
    }

    /// The runtime's lag at `now`, as the probe last measured it.
    pub fn lag(&self, now: Instant) -> Duration {
        self.lag.at(now)
    }

    /// The host's pressure at `now`: the lag against its bound.
    pub fn pressure(&self, now: Instant) -> Pressure {
        Pressure::of(self.lag.at(now), self.limits.max_lag)
    }

    /// The setup limit's state.
    pub fn setup(&self) -> SetupStats {
        self.setup.stats()
    }

    /// Whether a QUIC listener should ask an address it has not validated for a Retry
    /// before any handshake work (counted when `retry` is true): half the setup limit is in
    /// use, or the runtime runs late.
    pub fn wants_retry(&self, now: Instant) -> bool {
        self.setup.strained(self.pressure(now))
    }

    /// Count a QUIC Retry sent.
    pub fn count_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// QUIC Retries sent so far.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Admit a request that sets up nothing lasting (an HTTP API request) from `ip` at
    /// `now`, or refuse it while the runtime runs past its lag bound (counted `lag`). Exempt
    /// loopback sources are always admitted.
    pub fn admit_request(&self, ip: Option<IpAddr>, now: Instant) -> Result<(), Refusal> {
        if self.limits.exempt_loopback && ip.is_some_and(|ip| ip.is_loopback()) {
            return Ok(());
        }
        if self.pressure(now) == Pressure::Overloaded {
            self.refused[Refusal::Overload.index()].fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::Overload);
        }
        Ok(())
    }

    /// The lag as the probe feeds it, for tests to feed by hand.
    #[cfg(test)]
    fn lag_gauge(&self) -> &Lag {
        &self.lag
    }

    pub fn limits(&self) -> AdmissionLimits {
        self.limits
    }

    /// Admit a connection from `ip` at `now`, or say why not (and count it).
    pub fn admit(self: &Arc<Self>, ip: IpAddr, now: Instant) -> Result<Ticket, Refusal> {
        let result = self.try_admit(ip, now);
        if let Err(refusal) = result {
            self.refused[refusal.index()].fetch_add(1, Ordering::Relaxed);
        }
        result.map(|source| Ticket {
            admission: self.clone(),
            // Exempt loopback sources hold no setup slot either.
            setting_up: source.is_some(),
            source,
        })
    }

    /// `None`: an exempt loopback source (no source entry, no setup slot); `Some(key)`: a
    /// source under the bounds, now holding a setup slot.
    fn try_admit(&self, ip: IpAddr, now: Instant) -> Result<Option<SourceKey>, Refusal> {
        let limits = &self.limits;
        if self.room.get().is_some_and(|room| !room(now)) {
            return Err(Refusal::ReceiveBudget);
        }
        let mut state = self.state.lock();
        if state.sessions >= limits.max_sessions {
            return Err(Refusal::Sessions);
        }
        if limits.exempt_loopback && ip.is_loopback() {
            state.sessions += 1;
            return Ok(None);
        }
        let key = SourceKey::of(ip);
        if !state.sources.contains_key(&key) && state.sources.len() >= MAX_SOURCES {
            if state
                .swept
                .is_none_or(|at| now.saturating_duration_since(at) >= SWEEP_EVERY)
            {
                state.swept = Some(now);
                state.sources.retain(|_, s| {
                    s.sessions > 0 || now.saturating_duration_since(s.refreshed) < SOURCE_MEMORY
                });
            }
            if state.sources.len() >= MAX_SOURCES {
                return Err(Refusal::Sources);
            }
        }
        let rate = f64::from(limits.handshakes_per_second_per_source);
        let source = state.sources.entry(key).or_insert(Source {
            sessions: 0,
            tokens: rate,
            refreshed: now,
        });
        let elapsed = now
            .saturating_duration_since(source.refreshed)
            .as_secs_f64();
        source.tokens = (source.tokens + elapsed * rate).min(rate);
        source.refreshed = now;
        if source.sessions >= limits.max_sessions_per_source {
            return Err(Refusal::SourceSessions);
        }
        if source.tokens < 1.0 {
            return Err(Refusal::SourceRate);
        }
        self.begin_setup(now)?;
        source.tokens -= 1.0;
        source.sessions += 1;
        state.sessions += 1;
        Ok(Some(key))
    }

    /// Take a setup slot, last: a connection another bound refuses takes none.
    fn begin_setup(&self, now: Instant) -> Result<(), Refusal> {
        self.setup
            .try_begin(now, self.pressure(now))
            .map_err(|full| match full {
                SetupFull::Limit => Refusal::Setup,
                SetupFull::Overloaded => Refusal::Overload,
            })
    }

    fn end_setup(&self, completed: bool) {
        let now = Instant::now();
        self.setup.end(now, self.pressure(now), completed);
    }

    fn release(&self, source: Option<SourceKey>) {
        let mut state = self.state.lock();
        state.sessions -= 1;
        if let Some(key) = source {
            if let Some(entry) = state.sources.get_mut(&key) {
                entry.sessions -= 1;
            }
        }
    }

    /// Connections admitted and not yet released.
    pub fn sessions(&self) -> usize {
        self.state.lock().sessions
    }

    /// Sources tracked now.
    pub fn sources(&self) -> usize {
        self.state.lock().sources.len()
    }

    /// Refusals so far, by reason.
    pub fn refused(&self) -> [(Refusal, u64); Refusal::ALL.len()] {
        Refusal::ALL.map(|r| (r, self.refused[r.index()].load(Ordering::Relaxed)))
    }
}

/// One admitted connection; dropping it frees the slot (and its setup slot, if its session
/// was never established).
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    source: Option<SourceKey>,
    setting_up: bool,
}

impl Ticket {
    /// The connection's session is established: its setup slot is free, and counts as a
    /// setup completed (which grows the limit while the host is calm).
    pub fn established(&mut self) {
        if std::mem::take(&mut self.setting_up) {
            self.admission.end_setup(true);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.setting_up {
            self.admission.end_setup(false);
        }
        self.admission.release(self.source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> AdmissionLimits {
        AdmissionLimits {
            max_sessions: 10,
            max_sessions_per_source: 3,
            handshakes_per_second_per_source: 4,
            exempt_loopback: true,
            max_lag: None,
        }
    }

    /// The bounds on loopback too, with room for any number of its connections.
    fn unbounded_sources() -> AdmissionLimits {
        AdmissionLimits {
            max_sessions: 10_000,
            max_sessions_per_source: 10_000,
            handshakes_per_second_per_source: 10_000,
            exempt_loopback: false,
            ..limits()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn exempt_loopback_holds_no_setup_slot() {
        let gate = Admission::new(limits());
        let now = Instant::now();
        let mut ticket = gate.admit(ip("127.0.0.1"), now).unwrap();
        assert_eq!(gate.setup().in_setup, 0);
        ticket.established();
        drop(ticket);
        assert_eq!(
            gate.setup(),
            crate::setup::SetupStats {
                limit: 64,
                ..Default::default()
            }
        );
    }

    #[test]
    fn a_source_holds_at_most_its_sessions() {
        let gate = Admission::new(limits());
        let now = Instant::now();
        let held: Vec<_> = (0..3)
            .map(|_| gate.admit(ip("192.0.2.1"), now).unwrap())
            .collect();
        assert_eq!(
            gate.admit(ip("192.0.2.1"), now).unwrap_err(),
            Refusal::SourceSessions
        );
        // Another source is not affected, and a freed slot is usable again.
        assert!(gate.admit(ip("192.0.2.2"), now).is_ok());
        drop(held);
        assert!(gate.admit(ip("192.0.2.1"), now).is_ok());
        assert_eq!(gate.refused()[1], (Refusal::SourceSessions, 1));
    }

    #[test]
    fn handshakes_per_source_refill_over_time() {
        let gate = Admission::new(limits());
        let start = Instant::now();
        for _ in 0..4 {
            drop(gate.admit(ip("198.51.100.7"), start).unwrap());
        }
        assert_eq!(
            gate.admit(ip("198.51.100.7"), start).unwrap_err(),
            Refusal::SourceRate
        );
        // A quarter second refills one.
        let later = start + Duration::from_millis(250);
        assert!(gate.admit(ip("198.51.100.7"), later).is_ok());
        assert_eq!(
            gate.admit(ip("198.51.100.7"), later).unwrap_err(),
            Refusal::SourceRate
        );
    }

    #[test]
    fn the_relay_holds_at_most_its_sessions_and_loopback_skips_source_bounds() {
        let gate = Admission::new(limits());
        let now = Instant::now();
        let held: Vec<_> = (0..10)
            .map(|_| gate.admit(ip("127.0.0.1"), now).unwrap())
            .collect();
        assert_eq!(gate.sessions(), 10);
        assert_eq!(gate.admit(ip("::1"), now).unwrap_err(), Refusal::Sessions);
        assert_eq!(
            gate.admit(ip("203.0.113.9"), now).unwrap_err(),
            Refusal::Sessions
        );
        drop(held);
        assert_eq!(gate.sessions(), 0);
    }

    #[test]
    fn an_ipv6_host_is_its_slash_64_and_mapped_v4_is_v4() {
        let gate = Admission::new(limits());
        let now = Instant::now();
        let _a = gate.admit(ip("2001:db8::1"), now).unwrap();
        let _b = gate.admit(ip("2001:db8::ffff:2"), now).unwrap();
        let _c = gate.admit(ip("2001:db8:0:0:1::3"), now).unwrap();
        assert_eq!(
            gate.admit(ip("2001:db8::9"), now).unwrap_err(),
            Refusal::SourceSessions
        );
        assert!(
            gate.admit(ip("2001:db8:0:1::1"), now).is_ok(),
            "another /64"
        );
        let _d = gate.admit(ip("192.0.2.5"), now).unwrap();
        assert_eq!(
            SourceKey::of(ip("::ffff:192.0.2.5")),
            SourceKey::of(ip("192.0.2.5"))
        );
    }

    #[test]
    fn a_lagging_runtime_lets_only_the_setup_floor_in_until_the_lag_decays() {
        use crate::setup::SETUP_FLOOR;
        let gate = Admission::new(AdmissionLimits {
            max_lag: Some(Duration::from_millis(200)),
            ..unbounded_sources()
        });
        let start = Instant::now();
        gate.lag_gauge().expect(start);
        gate.lag_gauge().fired(start + Duration::from_millis(500));
        let busy = start + Duration::from_millis(500);
        let mut setting_up: Vec<_> = (0..SETUP_FLOOR)
            .map(|_| gate.admit(ip("127.0.0.1"), busy).unwrap())
            .collect();
        assert_eq!(
            gate.admit(ip("127.0.0.1"), busy).unwrap_err(),
            Refusal::Overload,
            "loopback is not exempt from the host's own load"
        );
        assert_eq!(gate.refused()[4], (Refusal::Overload, 1));
        assert!(gate.wants_retry(busy));
        // A session established frees its setup slot, not its session slot.
        setting_up[0].established();
        assert_eq!(gate.setup().in_setup, SETUP_FLOOR - 1);
        assert_eq!(gate.sessions(), SETUP_FLOOR);
        let _one_more = gate.admit(ip("127.0.0.1"), busy).unwrap();
        drop(setting_up);
        // Two half-lives on, 125 ms: past a quarter of the bound, so busy, but the limit
        // (shrunk to its floor at most) admits again.
        assert!(gate
            .admit(ip("127.0.0.1"), busy + Duration::from_millis(500))
            .is_ok());
        // Without a bound, lag never refuses.
        let open = Admission::new(AdmissionLimits {
            max_lag: None,
            ..unbounded_sources()
        });
        open.lag_gauge().expect(start);
        open.lag_gauge().fired(busy);
        let _held: Vec<_> = (0..SETUP_FLOOR + 1)
            .map(|_| open.admit(ip("127.0.0.1"), busy).unwrap())
            .collect();
    }

    #[test]
    fn api_requests_are_refused_only_past_the_lag_bound() {
        let gate = Admission::new(AdmissionLimits {
            max_lag: Some(Duration::from_millis(200)),
            ..limits()
        });
        let start = Instant::now();
        let remote = Some(ip("192.0.2.8"));
        assert_eq!(gate.admit_request(remote, start), Ok(()));
        gate.lag_gauge().expect(start);
        gate.lag_gauge().fired(start + Duration::from_millis(300));
        let busy = start + Duration::from_millis(300);
        assert_eq!(gate.admit_request(remote, busy), Err(Refusal::Overload));
        assert_eq!(gate.refused()[4], (Refusal::Overload, 1));
        // Loopback is exempt unless the bounds apply to it.
        assert_eq!(gate.admit_request(Some(ip("127.0.0.1")), busy), Ok(()));
        let strict = Admission::new(AdmissionLimits {
            max_lag: Some(Duration::from_millis(200)),
            exempt_loopback: false,
            ..limits()
        });
        strict.lag_gauge().expect(start);
        strict.lag_gauge().fired(busy);
        assert_eq!(
            strict.admit_request(Some(ip("127.0.0.1")), busy),
            Err(Refusal::Overload)
        );
    }

    #[test]
    fn a_busy_host_refuses_connections_past_the_setup_limit() {
        let gate = Admission::new(AdmissionLimits {
            max_lag: Some(Duration::from_millis(200)),
            ..unbounded_sources()
        });
        let start = Instant::now();
        // Calm: a burst past the limit is admitted (nothing says the host is short of CPU).
        let calm: Vec<_> = (0..crate::setup::SETUP_INITIAL + 1)
            .map(|_| gate.admit(ip("127.0.0.1"), start).unwrap())
            .collect();
        drop(calm);
        // 100 ms late is past a quarter of the bound: the limit shrinks to 48 and binds.
        gate.lag_gauge().expect(start);
        gate.lag_gauge().fired(start + Duration::from_millis(100));
        let busy = start + Duration::from_millis(100);
        let held: Vec<_> = (0..48)
            .map(|_| gate.admit(ip("127.0.0.1"), busy).unwrap())
            .collect();
        assert_eq!(
            gate.admit(ip("127.0.0.1"), busy).unwrap_err(),
            Refusal::Setup
        );
        assert_eq!(gate.refused()[6], (Refusal::Setup, 1));
        assert_eq!(gate.setup().limit, 48);
        assert_eq!(gate.setup().in_setup, 48);
        drop(held);
        assert_eq!(gate.setup().in_setup, 0);
        assert_eq!(
            gate.setup().abandoned,
            crate::setup::SETUP_INITIAL as u64 + 1 + 48
        );
    }

    #[test]
    fn idle_sources_age_out_of_a_full_table() {
        let gate = Admission::new(AdmissionLimits {
            max_sessions: usize::MAX,
            ..limits()
        });
        let start = Instant::now();
        for i in 0..MAX_SOURCES as u32 {
            drop(
                gate.admit(IpAddr::V4((0x0a00_0000 + i).into()), start)
                    .unwrap(),
            );
        }
        assert_eq!(gate.sources(), MAX_SOURCES);
        let fresh = IpAddr::V4(0xc000_0201.into());
        assert_eq!(gate.admit(fresh, start).unwrap_err(), Refusal::Sources);
        // A second on, the idle ones are forgotten and the table has room again.
        let later = start + SOURCE_MEMORY;
        assert!(gate.admit(fresh, later).is_ok());
        assert_eq!(gate.sources(), 1);
    }
}
