//! The per-connection receive budget: bytes held in incomplete messages and frames.
//!
//! Every stream reader charges the bytes it buffers (a header or payload not yet whole) to its
//! connection's budget and releases them once the unit completes. Nothing is evicted while the
//! budget has room. When a charge would overflow it, the lowest-ranked reader holding bytes is
//! evicted (docs/design.md rule 5): control streams rank highest; data streams whose header is not
//! yet decoded rank lowest; the rest rank by subscription priority, then by group sequence, so
//! the group that would be delivered last (the oldest, as newest groups go first) goes first.
//! An evicted reader stops its stream with EVICTED and its bytes return to the budget at once.
//! Among equals, the reader asking for room is the one evicted, except between header-less
//! streams: there the oldest goes, so a fresh stream whose header is still in its first chunk
//! is not refused by streams that never completed theirs.
//!
//! A budget may also draw on the relay-wide [`ReceivePool`]: then every charge is a charge on
//! the pool too, the connection's transport window is granted by the pool (grown as the
//! readers consume, shrunk by the pool's reclaim passes, applied through the sink the session
//! installs), and the pool may evict this connection's units past its window to keep the
//! relay-wide total (`pool.rs`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Now, by tokio's clock (a simulation's paused one advances it), as the pool reads time.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

use parking_lot::Mutex;
use starling_proto::StreamCode;

use crate::pool::{Borrower, Candidate, ReceivePool};
use crate::rank::Rank;
use crate::stop::Stop;

#[derive(Debug)]
struct Member {
    rank: Rank,
    charged: usize,
    evict: Arc<Stop>,
}

#[derive(Debug, Default)]
struct State {
    used: usize,
    /// The most `used` has been.
    peak: usize,
    next_id: u64,
    members: HashMap<u64, Member, BuildHasherDefault<IdHasher>>,
}

/// Member ids are a counter: a multiply spreads them over the table (SipHash, the default,
/// costs more than the rest of a charge).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Applies a connection's receive window to its transport.
pub type WindowSink = Box<dyn Fn(u64) + Send + Sync>;

/// A budget's share of the relay-wide pool.
struct Pooled {
    pool: ReceivePool,
    /// The transport window the pool granted.
    window: AtomicUsize,
    /// Bytes the readers consumed (handed on, not held).
    consumed: AtomicU64,
    /// `consumed` when growth was last tried.
    tried_at: AtomicU64,
    /// Serializes applying the window, so the transport always ends with the latest.
    sink: Mutex<Option<WindowSink>>,
    /// What the stream credit granted past the initial costs, taken from the pool's
    /// windows' half (see [`RecvBudget::stream_gate`]).
    streams: AtomicUsize,
}

impl Pooled {
    fn apply(&self) {
        if let Some(sink) = &*self.sink.lock() {
            sink(self.window.load(Ordering::Acquire) as u64);
        }
    }
}

struct Inner {
    limit: usize,
    state: Mutex<State>,
    evictions: AtomicU64,
    pooled: Option<Pooled>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBudget")
            .field("limit", &self.limit)
            .field("pooled", &self.pooled.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(pooled) = &self.pooled {
            pooled.pool.leave(
                pooled.window.load(Ordering::Acquire) + pooled.streams.load(Ordering::Acquire),
            );
        }
    }
}

impl Borrower for Inner {
    fn borrowed(&self, owner: usize, out: &mut Vec<Candidate>) -> usize {
        let window = self
            .pooled
            .as_ref()
            .map_or(usize::MAX, |p| p.window.load(Ordering::Acquire));
        let state = self.state.lock();
        if state.used <= window {
            return 0;
        }
        out.extend(
            state
                .members
                .iter()
                .filter(|(_, m)| m.charged > 0)
                .map(|(id, m)| Candidate {
                    rank: m.rank,
                    id: *id,
                    owner,
                }),
        );
        state.used - window
    }

    fn evict(&self, id: u64) -> usize {
        let mut state = self.state.lock();
        let Some(member) = state.members.remove(&id) else {
            return 0;
        };
        state.used -= member.charged;
        drop(state);
        if let Some(pooled) = &self.pooled {
            pooled.pool.release(member.charged);
        }
        self.evictions.fetch_add(1, Ordering::Relaxed);
        member.evict.stop(StreamCode::Evicted);
        member.charged
    }

    fn consumed(&self) -> u64 {
        self.pooled
            .as_ref()
            .map_or(0, |p| p.consumed.load(Ordering::Relaxed))
    }

    fn window(&self) -> usize {
        self.pooled
            .as_ref()
            .map_or(0, |p| p.window.load(Ordering::Acquire))
    }

    fn halve(&self, floor: usize) -> usize {
        let Some(pooled) = &self.pooled else {
            return 0;
        };
        let before = pooled
            .window
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let smaller = (w / 2).max(floor);
                (smaller < w).then_some(smaller)
            });
        match before {
            Ok(window) => {
                pooled.apply();
                window - (window / 2).max(floor)
            }
            Err(_) => 0,
        }
    }
}

/// One connection's receive budget, read for metrics and status pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Bytes held in incomplete units now.
    pub held: usize,
    /// The budget.
    pub limit: usize,
    /// The most ever held at once.
    pub peak: usize,
    /// Streams evicted to make room.
    pub evicted: u64,
    /// The transport window the relay-wide pool granted (0 without a pool).
    pub window: usize,
}

impl BudgetStats {
    /// Room left before a charge evicts.
    pub fn available(&self) -> usize {
        self.limit.saturating_sub(self.held)
    }
}

/// Shared by every reader of one connection.
#[derive(Clone, Debug)]
pub struct RecvBudget(Arc<Inner>);

impl RecvBudget {
    pub fn new(limit: usize) -> Self {
        RecvBudget(Arc::new(Inner {
            limit,
            state: Mutex::new(State::default()),
            evictions: AtomicU64::new(0),
            pooled: None,
        }))
    }

    /// A budget of `limit` that also draws on `pool`, joining it with the pool's initial
    /// window.
    pub fn pooled(limit: usize, pool: &ReceivePool) -> Self {
        let inner = Arc::new(Inner {
            limit,
            state: Mutex::new(State::default()),
            evictions: AtomicU64::new(0),
            pooled: Some(Pooled {
                pool: pool.clone(),
                window: AtomicUsize::new(0),
                consumed: AtomicU64::new(0),
                tried_at: AtomicU64::new(0),
                sink: Mutex::new(None),
                streams: AtomicUsize::new(0),
            }),
        });
        let weak: Weak<Inner> = Arc::downgrade(&inner);
        let window = pool.join(weak);
        if let Some(pooled) = &inner.pooled {
            pooled.window.store(window, Ordering::Release);
        }
        RecvBudget(inner)
    }

    /// Apply the pool's window to the transport through `sink`: once now, then whenever it
    /// changes. Without a pool, nothing.
    pub fn on_window(&self, sink: impl Fn(u64) + Send + Sync + 'static) {
        if let Some(pooled) = &self.0.pooled {
            *pooled.sink.lock() = Some(Box::new(sink));
            pooled.apply();
        }
    }

    /// The gate for the transport's stream credit (`Transport::set_stream_gate`): each
    /// growth by `more` streams is granted out of the pool's windows' half at
    /// [`STREAM_CREDIT_COST`] a stream, as a window's growth is, until the connection ends;
    /// refused when there is no room even after a reclaim pass. Without a pool, none: the
    /// credit grows as the transport's own rule says.
    pub fn stream_gate(&self) -> Option<starling_transport::StreamGate> {
        self.0.pooled.as_ref()?;
        let budget = Arc::downgrade(&self.0);
        Some(Box::new(move |more| {
            let Some(inner) = budget.upgrade() else {
                return false;
            };
            let Some(pooled) = &inner.pooled else {
                return false;
            };
            let bytes = usize::try_from(more)
                .unwrap_or(usize::MAX)
                .saturating_mul(STREAM_CREDIT_COST);
            let granted = pooled.pool.grant_streams(bytes, now());
            if granted {
                pooled.streams.fetch_add(bytes, Ordering::AcqRel);
            }
            granted
        }))
    }

    /// Readers handed on `bytes` (a unit completed, or a piece of a large frame passed
    /// through). With a pool, a connection that consumed half its window since growth was
    /// last tried asks the pool for twice the window.
    pub fn consume(&self, bytes: usize) {
        self.consume_at(bytes, now);
    }

    /// As [`consume`](Self::consume), reading the time (for the pool's reclaim pass) from
    /// `now` only when growth is tried.
    pub fn consume_at(&self, bytes: usize, now: impl FnOnce() -> Instant) {
        let Some(pooled) = &self.0.pooled else {
            return;
        };
        let consumed = pooled.consumed.fetch_add(bytes as u64, Ordering::Relaxed) + bytes as u64;
        let tried = pooled.tried_at.load(Ordering::Relaxed);
        let window = pooled.window.load(Ordering::Acquire);
        if consumed.saturating_sub(tried) * 2 < window as u64
            || window >= pooled.pool.range().max
            || pooled
                .tried_at
                .compare_exchange(tried, consumed, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let Some(grown) = pooled.pool.grow(window, now()) else {
            return;
        };
        if pooled
            .window
            .compare_exchange(window, grown, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            pooled.apply();
        } else {
            // A reclaim pass halved it meanwhile: give back what was taken for the growth.
            pooled.pool.leave(grown - window);
        }
    }

    /// A new reader's account, starting at `rank`.
    pub fn account(&self, rank: Rank) -> Account {
        let evict = Arc::new(Stop::default());
        let pool_id = self.0.pooled.as_ref().map(|p| p.pool.next_id());
        let mut state = self.0.state.lock();
        let id = pool_id.unwrap_or(state.next_id);
        state.next_id += 1;
        state.members.insert(
            id,
            Member {
                rank,
                charged: 0,
                evict: evict.clone(),
            },
        );
        Account {
            budget: self.clone(),
            id,
            evict,
        }
    }

    /// Bytes currently charged.
    pub fn used(&self) -> usize {
        self.0.state.lock().used
    }

    /// Held, limit, peak, evictions and window, read at once.
    pub fn stats(&self) -> BudgetStats {
        let state = self.0.state.lock();
        BudgetStats {
            held: state.used,
            limit: self.0.limit,
            peak: state.peak,
            evicted: self.0.evictions.load(Ordering::Relaxed),
            window: Borrower::window(&*self.0),
        }
    }

    /// Readers evicted so far.
    pub fn evictions(&self) -> u64 {
        self.0.evictions.load(Ordering::Relaxed)
    }
}

/// What one unit of stream credit costs the relay: quinn keeps a stream the peer opened
/// until the peer ends it, even once we stopped it and let go, so a peer that never resets
/// what the relay stops holds its whole credit that way (measured: 400 000 such one-byte
/// streams grew the relay by 573 MiB, about 1.5 KiB each).
pub const STREAM_CREDIT_COST: usize = 1536;

/// Eviction passes an entitled charge runs before it holds past the relay-wide total.
const ENTITLED_PASSES: u32 = 2;

/// One reader's share of the budget.
#[derive(Debug)]
pub struct Account {
    budget: RecvBudget,
    id: u64,
    evict: Arc<Stop>,
}

impl Account {
    /// Charge `bytes`, evicting lower-ranked readers if needed (on this connection, then,
    /// with a pool, relay-wide); false (nothing charged) when this reader is itself the one
    /// to evict.
    pub fn try_charge(&self, bytes: usize) -> bool {
        let inner = &self.budget.0;
        let mut passes = 0;
        loop {
            let mut state = inner.state.lock();
            // An evicted reader (its pending read can still win a race with the eviction)
            // charges nothing: with no member entry, those bytes would never come back.
            let Some(my_rank) = state.members.get(&self.id).map(|m| m.rank) else {
                return false;
            };
            if state.used + bytes > inner.limit {
                let victim = state
                    .members
                    .iter()
                    .filter(|(id, m)| {
                        **id != self.id
                            && m.charged > 0
                            && crate::pool::outranked(m.rank, **id, my_rank, self.id)
                    })
                    .min_by_key(|(id, m)| (m.rank, **id))
                    .map(|(id, _)| *id);
                inner.evictions.fetch_add(1, Ordering::Relaxed);
                let Some(victim) = victim else {
                    return false;
                };
                let member = state.members.remove(&victim).expect("victim is a member");
                state.used -= member.charged;
                if let Some(pooled) = &inner.pooled {
                    pooled.pool.release(member.charged);
                }
                member.evict.stop(StreamCode::Evicted);
                continue;
            }
            if let Some(pooled) = &inner.pooled {
                if !pooled.pool.try_hold(bytes) {
                    // The relay-wide total is full. Within its own window the asker is
                    // entitled: other connections' charges can take the room a pass made
                    // before this one holds it, so after a second pass an entitled asker
                    // holds anyway (past the total by at most what it asked).
                    let entitled = state.used + bytes <= pooled.window.load(Ordering::Acquire);
                    if entitled && passes == ENTITLED_PASSES {
                        pooled.pool.force_hold(bytes);
                    } else if passes == 0 || entitled {
                        drop(state);
                        pooled.pool.make_room(bytes, my_rank, self.id, entitled);
                        passes += 1;
                        continue;
                    } else {
                        inner.evictions.fetch_add(1, Ordering::Relaxed);
                        pooled.pool.count_refusal();
                        return false;
                    }
                }
            }
            state.used += bytes;
            state.peak = state.peak.max(state.used);
            if let Some(me) = state.members.get_mut(&self.id) {
                me.charged += bytes;
            }
            return true;
        }
    }

    /// Return `bytes` to the budget.
    pub fn release(&self, bytes: usize) {
        let inner = &self.budget.0;
        let mut state = inner.state.lock();
        if let Some(me) = state.members.get_mut(&self.id) {
            let bytes = bytes.min(me.charged);
            me.charged -= bytes;
            state.used -= bytes;
            if let Some(pooled) = &inner.pooled {
                pooled.pool.release(bytes);
            }
        }
    }

    /// This reader handed on `bytes` (see [`RecvBudget::consume`]).
    pub fn consume(&self, bytes: usize) {
        self.budget.consume(bytes);
    }

    pub fn set_rank(&self, rank: Rank) {
        if let Some(me) = self.budget.0.state.lock().members.get_mut(&self.id) {
            me.rank = rank;
        }
    }

    /// Resolves once another reader's charge evicted this one.
    pub async fn evicted(&self) {
        self.evict.stopped().await;
    }

    pub fn is_evicted(&self) -> bool {
        self.evict.code().is_some()
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let inner = &self.budget.0;
        let mut state = inner.state.lock();
        if let Some(me) = state.members.remove(&self.id) {
            state.used -= me.charged;
            if let Some(pooled) = &inner.pooled {
                pooled.pool.release(me.charged);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_evicted_while_there_is_room() {
        let budget = RecvBudget::new(100);
        let a = budget.account(Rank::Unknown);
        let b = budget.account(Rank::Control);
        assert!(a.try_charge(60));
        assert!(b.try_charge(40));
        assert_eq!(budget.used(), 100);
        assert!(!a.is_evicted() && !b.is_evicted());
        assert_eq!(budget.evictions(), 0);
    }

    #[test]
    fn the_lowest_ranked_reader_is_evicted_first() {
        let budget = RecvBudget::new(100);
        let unknown = budget.account(Rank::Unknown);
        let old = budget.account(Rank::Data {
            priority: 1,
            sequence: 5,
        });
        let new = budget.account(Rank::Data {
            priority: 1,
            sequence: 6,
        });
        let control = budget.account(Rank::Control);
        assert!(unknown.try_charge(30));
        assert!(old.try_charge(30));
        assert!(new.try_charge(30));
        // Control needs 30: the header-less stream goes first, then the older group.
        assert!(control.try_charge(30));
        assert!(unknown.is_evicted() && !old.is_evicted());
        assert!(control.try_charge(30));
        assert!(old.is_evicted() && !new.is_evicted());
        assert_eq!(budget.used(), 90);
        assert_eq!(budget.evictions(), 2);
    }

    /// Issue 10 item 1: an evicted reader whose read still charges must not take budget
    /// that nothing would ever release.
    #[test]
    fn an_evicted_reader_charges_nothing() {
        let budget = RecvBudget::new(100);
        let low = budget.account(Rank::Unknown);
        let control = budget.account(Rank::Control);
        assert!(low.try_charge(60));
        assert!(control.try_charge(60));
        assert!(low.is_evicted());
        assert!(!low.try_charge(10), "evicted: refused even with room");
        assert_eq!(budget.used(), 60);
        drop(low);
        drop(control);
        assert_eq!(budget.used(), 0, "every byte came back");
    }

    #[test]
    fn an_older_header_less_stream_makes_room_for_a_newer_one() {
        let budget = RecvBudget::new(20);
        let stuck = budget.account(Rank::Unknown);
        let fresh = budget.account(Rank::Unknown);
        assert!(stuck.try_charge(15));
        assert!(fresh.try_charge(10));
        assert!(stuck.is_evicted() && !fresh.is_evicted());
        // Control is never evicted for a header-less stream; the older header-less one is.
        let control = budget.account(Rank::Control);
        assert!(control.try_charge(10));
        let newest = budget.account(Rank::Unknown);
        assert!(newest.try_charge(5));
        assert!(fresh.is_evicted() && !control.is_evicted());
        assert_eq!(budget.used(), 15);
    }

    #[test]
    fn a_reader_that_is_lowest_evicts_itself() {
        let budget = RecvBudget::new(50);
        let high = budget.account(Rank::Data {
            priority: 9,
            sequence: 0,
        });
        let low = budget.account(Rank::Data {
            priority: 1,
            sequence: 0,
        });
        assert!(high.try_charge(40));
        assert!(!low.try_charge(20));
        assert!(!high.is_evicted());
        drop(high);
        assert_eq!(budget.used(), 0);
        assert!(low.try_charge(20));
    }

    mod against_a_reference {
        //! Random operations on the budget and on a plain model of its rules: both agree on
        //! who is evicted and how much is held, and the budget never exceeds its limit.
        use super::*;
        use proptest::prelude::*;

        const LIMIT: usize = 64;

        #[derive(Clone, Debug)]
        enum Op {
            Open(Rank),
            Charge(usize, usize),
            Release(usize, usize),
            SetRank(usize, Rank),
            Drop(usize),
        }

        fn rank() -> impl Strategy<Value = Rank> {
            prop_oneof![
                Just(Rank::Unknown),
                Just(Rank::Control),
                (0u8..3, 0u64..4)
                    .prop_map(|(priority, sequence)| Rank::Data { priority, sequence }),
            ]
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                rank().prop_map(Op::Open),
                (0usize..8, 1usize..40).prop_map(|(i, n)| Op::Charge(i, n)),
                (0usize..8, 1usize..40).prop_map(|(i, n)| Op::Release(i, n)),
                (0usize..8, rank()).prop_map(|(i, r)| Op::SetRank(i, r)),
                (0usize..8).prop_map(Op::Drop),
            ]
        }

        /// One reader in the reference: its rank, bytes held, and whether it was evicted.
        #[derive(Clone, Debug)]
        struct Model {
            rank: Rank,
            held: usize,
            evicted: bool,
        }

        /// The rules, written out plainly: evict the lowest-ranked, oldest reader that holds
        /// bytes and ranks below the asker (or, between header-less readers, is older).
        fn model_charge(readers: &mut [Option<Model>], me: usize, bytes: usize) -> bool {
            loop {
                let mine = match &readers[me] {
                    Some(m) if !m.evicted => m.rank,
                    _ => return false,
                };
                let used: usize = readers
                    .iter()
                    .flatten()
                    .filter(|m| !m.evicted)
                    .map(|m| m.held)
                    .sum();
                if used + bytes <= LIMIT {
                    readers[me].as_mut().unwrap().held += bytes;
                    return true;
                }
                let victim = (0..readers.len())
                    .filter(|&i| i != me)
                    .filter(|&i| match &readers[i] {
                        Some(m) => {
                            !m.evicted
                                && m.held > 0
                                && (m.rank < mine
                                    || (m.rank == Rank::Unknown && mine == Rank::Unknown && i < me))
                        }
                        None => false,
                    })
                    .min_by_key(|&i| (readers[i].as_ref().unwrap().rank, i));
                match victim {
                    Some(i) => {
                        let m = readers[i].as_mut().unwrap();
                        m.evicted = true;
                        m.held = 0;
                    }
                    None => return false,
                }
            }
        }

        proptest! {
            #[test]
            fn the_budget_follows_its_rules(ops in proptest::collection::vec(op(), 1..80)) {
                let budget = RecvBudget::new(LIMIT);
                let mut accounts: Vec<Option<Account>> = Vec::new();
                let mut model: Vec<Option<Model>> = Vec::new();
                for op in ops {
                    match op {
                        Op::Open(rank) => {
                            accounts.push(Some(budget.account(rank)));
                            model.push(Some(Model { rank, held: 0, evicted: false }));
                        }
                        Op::Charge(i, n) if i < accounts.len() => {
                            if let Some(account) = &accounts[i] {
                                let expected = model_charge(&mut model, i, n);
                                prop_assert_eq!(account.try_charge(n), expected);
                            }
                        }
                        Op::Release(i, n) if i < accounts.len() => {
                            if let (Some(account), Some(m)) = (&accounts[i], &mut model[i]) {
                                account.release(n);
                                m.held -= n.min(m.held);
                            }
                        }
                        Op::SetRank(i, rank) if i < accounts.len() => {
                            if let (Some(account), Some(m)) = (&accounts[i], &mut model[i]) {
                                account.set_rank(rank);
                                if !m.evicted {
                                    m.rank = rank;
                                }
                            }
                        }
                        Op::Drop(i) if i < accounts.len() => {
                            accounts[i] = None;
                            model[i] = None;
                        }
                        _ => {}
                    }
                    let held: usize = model.iter().flatten().filter(|m| !m.evicted).map(|m| m.held).sum();
                    prop_assert_eq!(budget.used(), held);
                    prop_assert!(budget.used() <= LIMIT);
                    for (account, m) in accounts.iter().zip(&model) {
                        if let (Some(account), Some(m)) = (account, m) {
                            prop_assert_eq!(account.is_evicted(), m.evicted);
                        }
                    }
                }
            }
        }
    }
}
