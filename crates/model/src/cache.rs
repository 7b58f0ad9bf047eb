//! The relay-wide cache budget: every track given it charges what its cache holds here, and
//! when the total passes the budget, groups of the tracks holding more than an even share of
//! it leave first, then the stalest groups relay-wide.
//!
//! A track's own bounds (bytes, groups, age) stay as they are; this one caps the sum over all
//! tracks, so many tracks each within their own bounds cannot together exhaust the process.
//! Groups are stamped in arrival order across every member track, and the budget keeps each
//! track under the stamp of its oldest cached group: the first entry is the stalest group
//! relay-wide. Under pressure, a track holding more than an even share (the budget over the
//! tracks in it) gives up its groups first: the track whose charge went over (its oldest
//! other than its latest; see `TrackShared::give_up_own_oldest`), then any among the
//! [`FAIR_SCAN`] stalest entries (its oldest). Only when none of those holds more than its share
//! does the stalest group relay-wide leave (the latest group of its track too, when it is
//! the stalest: a track keeps its latest group only while the total fits). So a flood of
//! fresh groups, or of frames declared large and never sent, on a few tracks sheds its own
//! groups before it pushes out an honest track's older, smaller ones.
//!
//! Lock order: the shrinker's lock, a track's state, then the index. The index is never held
//! while a track is locked from here, and nobody shrinks with a track locked, so none of them
//! waits on another in a cycle.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

/// How many of the stalest entries a shrink looks through for a track over its share before
/// it falls back to stalest-first (bounding what one shrink costs with many tracks).
pub(crate) const FAIR_SCAN: usize = 64;

/// What one cached frame costs besides its payload (the frame record and its `Bytes` handle).
pub(crate) const FRAME_OVERHEAD: usize = 64;
/// What one cached group costs before its first frame (the group, its entry and indexes).
pub(crate) const GROUP_OVERHEAD: usize = 256;

/// What the budget asks of a member track when it is over: what the track holds, and to give
/// up its stalest group. Named here, so the budget knows nothing of tracks.
pub(crate) trait CacheMember: Send + Sync {
    /// What the member's cached groups are charged.
    fn cost(&self) -> usize;
    /// The member, which charged last, holds more than `share`: give up its oldest group
    /// (see `TrackShared::give_up_own_oldest`); `false` when nothing was given up.
    fn give_up_own_oldest(&self, share: usize) -> bool;
    /// The member was registered under `stamp`: give up its oldest group if it is that one.
    fn give_up_stalest(&self, stamp: u64);
}

/// The relay's cache account, shared by every track of the broadcasts given it: its budget,
/// what is held, and the groups dropped and why (counted as it happens, so the totals survive
/// the tracks).
#[derive(Debug)]
pub struct CacheBudget {
    limit: usize,
    used: AtomicUsize,
    next_stamp: AtomicU64,
    next_track: AtomicU64,
    /// Each member track with cached groups, under the stamp of its oldest one (or an older
    /// stamp: a track's own policy may have dropped that group since; the entry is corrected
    /// when it comes up).
    index: Mutex<BTreeMap<(u64, u64), Weak<dyn CacheMember>>>,
    /// Held by the one thread shrinking (see [`Self::shrink`]).
    shrinking: Mutex<()>,
    /// Groups evicted because a track's byte or group budget was full.
    pub evicted: AtomicU64,
    /// Groups that aged out (older than the track's max age behind the newest).
    pub aged: AtomicU64,
    /// Groups dropped because the relay-wide budget was full.
    pub pressed: AtomicU64,
}

impl Default for CacheBudget {
    /// No relay-wide limit: only the counters.
    fn default() -> Self {
        CacheBudget::new(usize::MAX)
    }
}

impl CacheBudget {
    /// A budget of `limit` bytes (payload plus a fixed per-frame and per-group overhead).
    pub fn new(limit: usize) -> Self {
        CacheBudget {
            limit,
            used: AtomicUsize::new(0),
            next_stamp: AtomicU64::new(0),
            next_track: AtomicU64::new(0),
            index: Mutex::new(BTreeMap::new()),
            shrinking: Mutex::new(()),
            evicted: AtomicU64::new(0),
            aged: AtomicU64::new(0),
            pressed: AtomicU64::new(0),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes charged now, over every member track.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Member tracks with cached groups (a dropped track leaves the index as it goes).
    pub fn tracks(&self) -> usize {
        self.index.lock().len()
    }

    /// The next group's stamp: arrival order across every member track.
    pub(crate) fn stamp(&self) -> u64 {
        self.next_stamp.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn track_id(&self) -> u64 {
        self.next_track.fetch_add(1, Ordering::Relaxed)
    }

    /// Charge `bytes`; true when the total is now over the budget (call [`Self::shrink`]
    /// once no track lock is held).
    pub(crate) fn charge(&self, bytes: usize) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        before.saturating_add(bytes) > self.limit
    }

    pub(crate) fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Register a track (under its lock) whose oldest cached group has `stamp`.
    pub(crate) fn enter(&self, stamp: u64, track: u64, shared: Weak<dyn CacheMember>) {
        self.index.lock().insert((stamp, track), shared);
    }

    pub(crate) fn leave(&self, stamp: u64, track: u64) {
        self.index.lock().remove(&(stamp, track));
    }

    /// Drop groups until the total fits: first of tracks over an even share (`charging`, the
    /// track whose charge went over, then any among the [`FAIR_SCAN`] stalest entries), then
    /// the stalest relay-wide. Call it with no track locked.
    ///
    /// One thread shrinks at a time: while a shrinker has a track's entry out of the index,
    /// a second one would take the next entry instead, a fresher group, and stalest-first
    /// would no longer hold. A caller finding a shrinker at work leaves the overage to it;
    /// the shrinker looks again after letting go, so no overage is left behind.
    pub(crate) fn shrink(&self, charging: Option<&dyn CacheMember>) {
        loop {
            let Some(shrinking) = self.shrinking.try_lock() else {
                return;
            };
            while self.used() > self.limit {
                let share = self.limit / self.tracks().max(1);
                if charging.is_some_and(|track| track.give_up_own_oldest(share)) {
                    continue;
                }
                if self.shed_over_share(share) {
                    continue;
                }
                let Some(((stamp, _), track)) = self.index.lock().pop_first() else {
                    return;
                };
                if let Some(track) = track.upgrade() {
                    track.give_up_stalest(stamp);
                }
            }
            drop(shrinking);
            if self.used() <= self.limit {
                return;
            }
        }
    }

    /// Among the [`FAIR_SCAN`] stalest entries, the first track holding more than `share`
    /// gives up its oldest group; `false` when none does. Entries looked at and passed over
    /// go back as they were.
    fn shed_over_share(&self, share: usize) -> bool {
        let mut passed = Vec::new();
        let mut shed = false;
        while passed.len() < FAIR_SCAN {
            let Some(((stamp, id), weak)) = self.index.lock().pop_first() else {
                break;
            };
            let Some(track) = weak.upgrade() else {
                continue;
            };
            if track.cost() > share {
                track.give_up_stalest(stamp);
                shed = true;
                break;
            }
            passed.push(((stamp, id), weak));
        }
        self.index.lock().extend(passed);
        shed
    }

    /// Count a group one of `self`'s tracks dropped, by why.
    pub(crate) fn count(&self, why: Leave) {
        let counter = match why {
            Leave::Evicted => &self.evicted,
            Leave::Aged => &self.aged,
            Leave::Pressed => &self.pressed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a cached group left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leave {
    /// The track's own byte or group bound.
    Evicted,
    /// Older than the track's max age.
    Aged,
    /// The relay-wide budget.
    Pressed,
}

/// A track's membership: the budget and the track's id in its index.
#[derive(Debug)]
pub(crate) struct Membership {
    pub(crate) budget: Arc<CacheBudget>,
    pub(crate) id: u64,
}
