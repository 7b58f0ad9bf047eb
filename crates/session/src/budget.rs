//! The per-connection receive budget: bytes held in incomplete messages and frames.
//!
//! Every stream reader charges the bytes it buffers (a header or payload not yet whole) to its
//! connection's budget and releases them once the unit completes. Nothing is evicted while the
//! budget has room. When a charge would overflow it, the lowest-ranked reader holding bytes is
//! evicted (docs/design.md rule 5): control streams rank highest; data streams whose header is not
//! yet decoded rank lowest; the rest rank by subscription priority, then by group sequence, so
//! the group that would be delivered last (the oldest, as newest groups go first) goes first.
//! An evicted reader stops its stream with EVICTED and its bytes return to the budget at once.
//! Among equals, the reader asking for room is the one evicted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// How much a reader's buffered bytes are worth keeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    /// A data stream whose header has not been decoded yet.
    Unknown,
    /// A group of a subscription with this priority.
    Data { priority: u8, sequence: u64 },
    /// A control or request stream.
    Control,
}

#[derive(Debug)]
struct Member {
    rank: Rank,
    charged: usize,
    evict: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    used: usize,
    next_id: u64,
    members: HashMap<u64, Member>,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    state: Mutex<State>,
    evictions: AtomicU64,
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
        }))
    }

    /// A new reader's account, starting at `rank`.
    pub fn account(&self, rank: Rank) -> Account {
        let evict = CancellationToken::new();
        let mut state = self.0.state.lock();
        let id = state.next_id;
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

    /// Readers evicted so far.
    pub fn evictions(&self) -> u64 {
        self.0.evictions.load(Ordering::Relaxed)
    }
}

/// One reader's share of the budget.
#[derive(Debug)]
pub struct Account {
    budget: RecvBudget,
    id: u64,
    evict: CancellationToken,
}

impl Account {
    /// Charge `bytes`, evicting lower-ranked readers if needed; false (nothing charged) when
    /// this reader is itself the one to evict.
    pub fn try_charge(&self, bytes: usize) -> bool {
        let inner = &self.budget.0;
        let mut state = inner.state.lock();
        loop {
            // An evicted reader (its pending read can still win a race with the eviction)
            // charges nothing: with no member entry, those bytes would never come back.
            let Some(my_rank) = state.members.get(&self.id).map(|m| m.rank) else {
                return false;
            };
            if state.used + bytes <= inner.limit {
                state.used += bytes;
                if let Some(me) = state.members.get_mut(&self.id) {
                    me.charged += bytes;
                }
                return true;
            }
            let victim = state
                .members
                .iter()
                .filter(|(id, m)| **id != self.id && m.charged > 0 && m.rank < my_rank)
                .min_by_key(|(id, m)| (m.rank, **id))
                .map(|(id, _)| *id);
            inner.evictions.fetch_add(1, Ordering::Relaxed);
            let Some(victim) = victim else {
                return false;
            };
            let member = state.members.remove(&victim).expect("victim is a member");
            state.used -= member.charged;
            member.evict.cancel();
        }
    }

    /// Return `bytes` to the budget.
    pub fn release(&self, bytes: usize) {
        let mut state = self.budget.0.state.lock();
        if let Some(me) = state.members.get_mut(&self.id) {
            let bytes = bytes.min(me.charged);
            me.charged -= bytes;
            state.used -= bytes;
        }
    }

    pub fn set_rank(&self, rank: Rank) {
        if let Some(me) = self.budget.0.state.lock().members.get_mut(&self.id) {
            me.rank = rank;
        }
    }

    /// Resolves once another reader's charge evicted this one.
    pub async fn evicted(&self) {
        self.evict.cancelled().await
    }

    pub fn is_evicted(&self) -> bool {
        self.evict.is_cancelled()
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let mut state = self.budget.0.state.lock();
        if let Some(me) = state.members.remove(&self.id) {
            state.used -= me.charged;
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
}
