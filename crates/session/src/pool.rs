//! The relay-wide receive pool: one total for what every connection together can make the
//! relay hold before a unit is complete.
//!
//! A connection costs the pool two things: its receive window (the credit its transport
//! grants the peer, which the peer may fill with bytes the relay has not read yet) and its
//! holdings (bytes read into headers, control messages and small frames not yet whole,
//! charged by each connection's [`RecvBudget`](crate::RecvBudget)). The pool keeps
//! `windows + held <= total`:
//!
//! * **Windows** are granted out of half the total. A connection joins with a modest
//!   initial window and doubles it each time half of it was consumed (read and handed on,
//!   not held), up to the per-connection maximum, while the half has room. When it has
//!   none, a reclaim pass (at most one per [`RECLAIM_EVERY`]) halves the window of every
//!   connection that did not consume half of its window since the previous pass, down to
//!   the initial window: honest connections that flow keep their windows, idle and hostile
//!   ones give theirs back. A connection holding incomplete units consumes nothing, so a
//!   peer that never completes a unit never grows past the initial window.
//! * **Stream credit** comes out of the same half: quinn keeps every stream a peer opened
//!   until the peer ends it, even once the relay stopped it and let go, so the credit past
//!   a connection's initial streams is granted at what a held stream costs
//!   (`STREAM_CREDIT_COST`) and given back with the connection. A peer that holds its
//!   streams open grows its credit only while the half has room.
//! * **Holdings** up to a connection's own window are its entitlement. Past it they are
//!   borrowed from the rest of the total. When a charge finds the total full, the pool
//!   evicts borrowed units relay-wide, lowest rank first (the per-connection order:
//!   header-less streams, then data by priority and group, then control), oldest first
//!   among equals, until a sixteenth of the total is free again, never taking a
//!   connection below its entitlement. An asker within its own entitlement is always
//!   served: with every borrowed byte gone, entitled holdings fit in the half of the total
//!   the windows leave. An asker past its entitlement evicts only units ranked below its
//!   own, as within one connection. Other connections' charges can take the room a pass
//!   made before the entitled asker holds it (or, on loopback, which admission does not
//!   refuse, windows alone can fill the total): after a second pass the entitled asker
//!   holds anyway, past the total by at most what it asked.
//!
//! Sans-IO: time is passed in; the pool never sleeps or spawns. Connections register as
//! [`Borrower`]s; the pool holds them weakly and forgets the dead on its next pass.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::rank::Rank;

/// Reclaim passes are at least this far apart.
pub const RECLAIM_EVERY: Duration = Duration::from_millis(100);

/// One incomplete unit a connection holds past its entitlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub rank: Rank,
    /// Relay-wide age: smaller is older.
    pub id: u64,
    /// Which borrower (an index into the pass's list).
    pub owner: usize,
}

/// A connection as the pool sees it (implemented by the per-connection budget).
pub(crate) trait Borrower: Send + Sync {
    /// Push the units held past this connection's window; returns how many bytes that is.
    fn borrowed(&self, owner: usize, out: &mut Vec<Candidate>) -> usize;
    /// Evict unit `id`; the bytes it held (0 when it is gone already).
    fn evict(&self, id: u64) -> usize;
    /// Bytes consumed so far (read and handed on).
    fn consumed(&self) -> u64;
    /// The window now.
    fn window(&self) -> usize;
    /// Halve the window, not below `floor`; the bytes given back.
    fn halve(&self, floor: usize) -> usize;
}

/// The window range a pooled connection moves in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowRange {
    /// What a connection starts with, and the least it is shrunk to.
    pub initial: usize,
    /// The most it grows to.
    pub max: usize,
}

/// The pool's counters, read at once for metrics and the status page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The total.
    pub total: usize,
    /// Windows and stream credit granted now.
    pub windows: usize,
    /// Incomplete units held now, relay-wide.
    pub held: usize,
    /// The most `windows + held` has been.
    pub peak: usize,
    /// Units evicted relay-wide to keep the total.
    pub evictions: u64,
    /// Windows and stream credit grown, and windows shrunk by reclaim passes.
    pub grown: u64,
    pub shrunk: u64,
    /// Growth refused for want of room.
    pub starved: u64,
    /// Connections registered now (live).
    pub connections: usize,
}

struct Entry {
    borrower: Weak<dyn Borrower>,
    /// What it had consumed at the last reclaim pass.
    consumed_at_pass: u64,
}

#[derive(Default)]
struct Registry {
    entries: Vec<Entry>,
    /// Live entries after the last prune (the list is pruned when it doubles past this).
    live: usize,
    last_pass: Option<Instant>,
}

struct Inner {
    total: usize,
    range: WindowRange,
    windows: AtomicUsize,
    held: AtomicUsize,
    peak: AtomicUsize,
    next_id: AtomicU64,
    evictions: AtomicU64,
    grown: AtomicU64,
    shrunk: AtomicU64,
    starved: AtomicU64,
    /// Also serializes eviction and reclaim passes: one at a time relay-wide.
    registry: Mutex<Registry>,
}

/// The relay-wide receive pool; cheap to clone (all clones are the same pool).
#[derive(Clone)]
pub struct ReceivePool(Arc<Inner>);

impl std::fmt::Debug for ReceivePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivePool")
            .field("total", &self.0.total)
            .field("range", &self.0.range)
            .finish_non_exhaustive()
    }
}

impl ReceivePool {
    /// A pool of `total` bytes whose connections' windows move in `range` (the initial
    /// window is clamped into `1..=max`).
    pub fn new(total: usize, range: WindowRange) -> Self {
        let max = range.max.max(1);
        ReceivePool(Arc::new(Inner {
            total,
            range: WindowRange {
                initial: range.initial.clamp(1, max),
                max,
            },
            windows: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            grown: AtomicU64::new(0),
            shrunk: AtomicU64::new(0),
            starved: AtomicU64::new(0),
            registry: Mutex::new(Registry::default()),
        }))
    }

    pub fn total(&self) -> usize {
        self.0.total
    }

    pub fn range(&self) -> WindowRange {
        self.0.range
    }

    /// The part of the total windows may take.
    fn window_room(&self) -> usize {
        self.0.total / 2
    }

    pub fn stats(&self) -> PoolStats {
        let inner = &self.0;
        let connections = {
            let registry = inner.registry.lock();
            registry
                .entries
                .iter()
                .filter(|e| e.borrower.strong_count() > 0)
                .count()
        };
        PoolStats {
            total: inner.total,
            windows: inner.windows.load(Ordering::Relaxed),
            held: inner.held.load(Ordering::Relaxed),
            peak: inner.peak.load(Ordering::Relaxed),
            evictions: inner.evictions.load(Ordering::Relaxed),
            grown: inner.grown.load(Ordering::Relaxed),
            shrunk: inner.shrunk.load(Ordering::Relaxed),
            starved: inner.starved.load(Ordering::Relaxed),
            connections,
        }
    }

    /// Whether one more connection's initial window fits (after a reclaim pass if it did
    /// not): admission refuses a connection the pool has no window for.
    pub fn admits(&self, now: Instant) -> bool {
        let fits = |pool: &Self| {
            pool.0.windows.load(Ordering::Relaxed) + pool.0.range.initial <= pool.window_room()
        };
        fits(self) || {
            self.reclaim(now);
            fits(self)
        }
    }

    /// A relay-wide age for a new unit holder.
    pub(crate) fn next_id(&self) -> u64 {
        self.0.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Register a connection with its initial window (granted even past the window room:
    /// admission is what refuses connections the pool has no room for). Borrowed holdings
    /// make room for it first: the new window is entitled, as a growing one is.
    pub(crate) fn join(&self, borrower: Weak<dyn Borrower>) -> usize {
        let initial = self.0.range.initial;
        self.make_room(initial, Rank::Control, u64::MAX, true);
        self.add_windows(initial);
        let consumed_at_pass = borrower.upgrade().map_or(0, |b| b.consumed());
        let mut registry = self.0.registry.lock();
        if registry.entries.len() >= 2 * registry.live + 64 {
            registry.entries.retain(|e| e.borrower.strong_count() > 0);
            registry.live = registry.entries.len();
        }
        registry.entries.push(Entry {
            borrower,
            consumed_at_pass,
        });
        initial
    }

    /// A connection went away with `window` granted, or gives back a grant it could not
    /// apply.
    pub(crate) fn leave(&self, window: usize) {
        self.0.windows.fetch_sub(window, Ordering::Relaxed);
    }

    fn add_windows(&self, bytes: usize) {
        let windows = self.0.windows.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.note_peak(windows + self.0.held.load(Ordering::Relaxed));
    }

    fn note_peak(&self, used: usize) {
        self.0.peak.fetch_max(used, Ordering::Relaxed);
    }

    /// Take `bytes` of holdings if the total has room.
    pub(crate) fn try_hold(&self, bytes: usize) -> bool {
        let inner = &self.0;
        let windows = inner.windows.load(Ordering::Relaxed);
        let mut held = inner.held.load(Ordering::Relaxed);
        loop {
            if windows + held + bytes > inner.total {
                return false;
            }
            match inner.held.compare_exchange_weak(
                held,
                held + bytes,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.note_peak(windows + held + bytes);
                    return true;
                }
                Err(now) => held = now,
            }
        }
    }

    /// Take `bytes` of holdings even past the total: for an asker within its own window
    /// that eviction passes could not make room for (see `Account::try_charge`).
    pub(crate) fn force_hold(&self, bytes: usize) {
        let held = self.0.held.fetch_add(bytes, Ordering::AcqRel) + bytes;
        self.note_peak(self.0.windows.load(Ordering::Relaxed) + held);
    }

    /// An asker past its entitlement was refused for want of room relay-wide.
    pub(crate) fn count_refusal(&self) {
        self.0.evictions.fetch_add(1, Ordering::Relaxed);
    }

    /// Give back `bytes` of holdings.
    pub(crate) fn release(&self, bytes: usize) {
        self.0.held.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Evict borrowed units relay-wide until `bytes` more fit with a sixteenth of the total
    /// to spare, or no unit may go for an asker of `rank` and age `id`. An asker `entitled`
    /// to what it asks (within its own window) may take any borrowed unit.
    pub(crate) fn make_room(&self, bytes: usize, rank: Rank, id: u64, entitled: bool) {
        let inner = &self.0;
        let registry = inner.registry.lock();
        let target = inner.total - inner.total / 16;
        let used = || inner.windows.load(Ordering::Relaxed) + inner.held.load(Ordering::Relaxed);
        if used() + bytes <= inner.total {
            return;
        }
        let borrowers: Vec<Arc<dyn Borrower>> = registry
            .entries
            .iter()
            .filter_map(|e| e.borrower.upgrade())
            .collect();
        drop(registry);
        let mut candidates = Vec::new();
        let mut borrowed: Vec<usize> = borrowers
            .iter()
            .enumerate()
            .map(|(owner, b)| b.borrowed(owner, &mut candidates))
            .collect();
        candidates.retain(|c| entitled || outranked(c.rank, c.id, rank, id));
        candidates.sort_unstable_by_key(|c| (c.rank, c.id));
        for candidate in candidates {
            if used() + bytes <= target {
                break;
            }
            let left = &mut borrowed[candidate.owner];
            if *left == 0 {
                continue;
            }
            let freed = borrowers[candidate.owner].evict(candidate.id);
            if freed > 0 {
                *left = left.saturating_sub(freed);
                inner.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        // The borrowers' strong handles go here, outside the registry lock: the last one
        // may drop a connection, which gives its window back.
        drop(borrowers);
    }

    /// A connection that consumed half its window asks for twice the window: the window
    /// to grant, or `None` when there is no room for it even after a reclaim pass and
    /// evicting borrowed units (a connection flowing within its window is entitled to it).
    pub(crate) fn grow(&self, current: usize, now: Instant) -> Option<usize> {
        let inner = &self.0;
        let next = current.saturating_mul(2).min(inner.range.max);
        if next <= current {
            return None;
        }
        let more = next - current;
        if !self.take_window_room(more) {
            self.reclaim(now);
            self.make_room(more, Rank::Control, u64::MAX, true);
            if !self.take_window_room(more) {
                inner.starved.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        inner.grown.fetch_add(1, Ordering::Relaxed);
        Some(next)
    }

    /// A connection's stream credit would grow by `bytes` worth of held streams: granted
    /// out of the windows' half as a window's growth is (given back with the window when
    /// the connection leaves), or refused, counted starved, when there is no room even
    /// after a reclaim pass. Unlike a window's growth it evicts nothing: a connection
    /// asking for more streams is opening them, not consuming them.
    pub(crate) fn grant_streams(&self, bytes: usize, now: Instant) -> bool {
        let granted =
            self.take_window_room(bytes) || (self.reclaim(now) && self.take_window_room(bytes));
        let counter = if granted {
            &self.0.grown
        } else {
            &self.0.starved
        };
        counter.fetch_add(1, Ordering::Relaxed);
        granted
    }

    /// Take `more` bytes for windows if the windows' half and the total both have room.
    fn take_window_room(&self, more: usize) -> bool {
        let inner = &self.0;
        let room = self.window_room();
        let taken = inner
            .windows
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |w| {
                let fits = w + more <= room
                    && w + more + inner.held.load(Ordering::Relaxed) <= inner.total;
                fits.then_some(w + more)
            })
            .is_ok();
        if taken {
            self.note_peak(
                inner.windows.load(Ordering::Relaxed) + inner.held.load(Ordering::Relaxed),
            );
        }
        taken
    }

    /// Halve the window of every connection that consumed less than half of it since the
    /// previous pass (not below the initial window). At most one pass per
    /// [`RECLAIM_EVERY`]; true when this call ran one that gave something back.
    pub fn reclaim(&self, now: Instant) -> bool {
        let inner = &self.0;
        let mut registry = inner.registry.lock();
        if registry
            .last_pass
            .is_some_and(|at| now.saturating_duration_since(at) < RECLAIM_EVERY)
        {
            return false;
        }
        registry.last_pass = Some(now);
        let mut returned = 0;
        let mut handles = Vec::new();
        registry.entries.retain_mut(|entry| {
            let Some(borrower) = entry.borrower.upgrade() else {
                return false;
            };
            let consumed = borrower.consumed();
            let window = borrower.window();
            let progress = consumed.saturating_sub(entry.consumed_at_pass);
            entry.consumed_at_pass = consumed;
            if progress < (window / 2) as u64 && window > inner.range.initial {
                let back = borrower.halve(inner.range.initial);
                if back > 0 {
                    returned += back;
                    inner.shrunk.fetch_add(1, Ordering::Relaxed);
                }
            }
            handles.push(borrower);
            true
        });
        registry.live = registry.entries.len();
        inner.windows.fetch_sub(returned, Ordering::AcqRel);
        drop(registry);
        // As in make_room: the last handle may drop a connection, outside the lock.
        drop(handles);
        returned > 0
    }
}

/// Whether a unit of `rank` and age `id` may go for an asker of `asker` and age `asker_id`
/// past its entitlement: the per-connection rule, relay-wide.
pub(crate) fn outranked(rank: Rank, id: u64, asker: Rank, asker_id: u64) -> bool {
    rank < asker || (rank == Rank::Unknown && asker == Rank::Unknown && id < asker_id)
}
