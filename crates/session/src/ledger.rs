//! The relay-wide state ledger: one bound on the control state every peer together can make
//! the relay hold, beside the per-session bounds.
//!
//! Each thing a session makes the relay hold is charged to the session's account while it
//! lives, in entries of about 2 KiB of the relay's memory each ([`Held`]): an announced
//! broadcast (its route, broadcast and the task serving it) is one, an announce interest three
//! and a served subscription five, as measured through a relay process (issue 25: 1.5, 6.2
//! and 9.4 KiB of RSS each; a request is a stream of its own, with its transport state and
//! task). The per-session bounds (65 536 announces, 4 096 subscriptions, 1 024 interests)
//! keep one peer from taking everything, but many sessions from many addresses could each
//! stay within them and together hold gigabytes; the ledger bounds the sum.
//!
//! When an entry finds the ledger full, the heaviest account (the session holding the most
//! entries) is shed: its session is closed, and its entries go with it. Until the shed
//! sessions have let go, entries are taken from an overdraft of an eighth of the limit, so
//! an honest session's request is not refused because an attacker filled the ledger. An
//! entry whose own session is the heaviest (or ties it) is refused instead: a flood stops at
//! its source. Sessions the relay trusts (cluster peers) hold no account.
//!
//! Sans-IO: charging never waits; a shed session learns it from [`StateAccount::shed`].

use starling_model::entropy::Map;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// What an entry pays for; each weighs what it costs the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// An announced broadcast.
    Route,
    /// An announce interest (a request stream and the task answering it).
    Interest,
    /// A served subscription (a request stream, its task and its group streams).
    Subscription,
}

impl Held {
    /// Its weight, in entries.
    pub fn entries(self) -> usize {
        match self {
            Held::Route => 1,
            Held::Interest => 3,
            Held::Subscription => 5,
        }
    }
}

/// The ledger's counters, read at once for metrics and the status page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LedgerStats {
    /// The bound, in entries.
    pub limit: usize,
    /// Entries held now.
    pub held: usize,
    /// The most ever held at once.
    pub peak: usize,
    /// Sessions shed because the ledger was full.
    pub shed: u64,
    /// Entries refused (the session's request refused, or its announce stream ended).
    pub refused: u64,
}

/// The relay-wide bound. Cheap to clone; every clone is the same ledger.
#[derive(Clone)]
pub struct StateLedger {
    shared: Arc<Ledger>,
}

impl std::fmt::Debug for StateLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateLedger")
            .field("stats", &self.stats())
            .finish()
    }
}

struct Ledger {
    limit: usize,
    held: AtomicUsize,
    peak: AtomicUsize,
    shed: AtomicU64,
    refused: AtomicU64,
    /// Accounts shed whose sessions have not ended yet: while any is, a full ledger lends
    /// from the overdraft instead of shedding another.
    shedding: AtomicUsize,
    next_id: AtomicU64,
    accounts: Mutex<Map<u64, Arc<Holder>>>,
}

/// One session's side of the ledger.
struct Holder {
    held: AtomicUsize,
    shed: CancellationToken,
    counted_shed: AtomicBool,
}

impl StateLedger {
    /// A ledger of `limit` entries (at least 1).
    pub fn new(limit: usize) -> Self {
        StateLedger {
            shared: Arc::new(Ledger {
                limit: limit.max(1),
                held: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                shed: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                shedding: AtomicUsize::new(0),
                next_id: AtomicU64::new(0),
                accounts: Mutex::new(Map::default()),
            }),
        }
    }

    /// The bound, in entries.
    pub fn limit(&self) -> usize {
        self.shared.limit
    }

    /// The account of a new session; closed (and forgotten) when dropped.
    pub fn open(&self) -> StateAccount {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let holder = Arc::new(Holder {
            held: AtomicUsize::new(0),
            shed: CancellationToken::new(),
            counted_shed: AtomicBool::new(false),
        });
        self.shared.accounts.lock().insert(id, holder.clone());
        StateAccount {
            ledger: self.shared.clone(),
            holder,
            id,
        }
    }

    pub fn stats(&self) -> LedgerStats {
        let shared = &self.shared;
        LedgerStats {
            limit: shared.limit,
            held: shared.held.load(Ordering::Relaxed),
            peak: shared.peak.load(Ordering::Relaxed),
            shed: shared.shed.load(Ordering::Relaxed),
            refused: shared.refused.load(Ordering::Relaxed),
        }
    }
}

/// A session's account: what it holds, and whether the ledger shed it.
pub struct StateAccount {
    ledger: Arc<Ledger>,
    holder: Arc<Holder>,
    id: u64,
}

impl std::fmt::Debug for StateAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateAccount")
            .field("held", &self.held())
            .field("shed", &self.is_shed())
            .finish()
    }
}

impl StateAccount {
    /// Charge what `held` weighs, held until the returned guard drops; `None` when refused.
    pub fn charge(&self, held: Held) -> Option<StateEntry> {
        let ledger = &*self.ledger;
        if self.holder.shed.is_cancelled() {
            ledger.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let weight = held.entries();
        let after = ledger.held.fetch_add(weight, Ordering::AcqRel) + weight;
        let admitted = after <= ledger.limit || {
            let overdraft = after <= ledger.limit + ledger.limit / 8;
            overdraft && (ledger.shedding.load(Ordering::Acquire) > 0 || self.shed_heavier())
        };
        if !admitted {
            ledger.held.fetch_sub(weight, Ordering::AcqRel);
            ledger.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        ledger.peak.fetch_max(after, Ordering::Relaxed);
        self.holder.held.fetch_add(weight, Ordering::AcqRel);
        Some(StateEntry {
            ledger: self.ledger.clone(),
            holder: self.holder.clone(),
            weight,
        })
    }

    /// Shed the heaviest other account, when it holds more than this one; whether one was.
    fn shed_heavier(&self) -> bool {
        let mine = self.holder.held.load(Ordering::Acquire);
        let accounts = self.ledger.accounts.lock();
        let heaviest = accounts
            .iter()
            .filter(|(&id, holder)| id != self.id && !holder.shed.is_cancelled())
            .max_by_key(|(_, holder)| holder.held.load(Ordering::Acquire))
            .map(|(_, holder)| holder);
        match heaviest {
            Some(victim) if victim.held.load(Ordering::Acquire) > mine => {
                if !victim.counted_shed.swap(true, Ordering::AcqRel) {
                    self.ledger.shedding.fetch_add(1, Ordering::AcqRel);
                    self.ledger.shed.fetch_add(1, Ordering::Relaxed);
                }
                victim.shed.cancel();
                true
            }
            _ => false,
        }
    }

    /// Entries this session holds now.
    pub fn held(&self) -> usize {
        self.holder.held.load(Ordering::Acquire)
    }

    /// Whether the ledger shed this session.
    pub fn is_shed(&self) -> bool {
        self.holder.shed.is_cancelled()
    }

    /// Resolves once the ledger sheds this session.
    pub async fn shed(&self) {
        self.holder.shed.cancelled().await
    }
}

impl Drop for StateAccount {
    fn drop(&mut self) {
        self.ledger.accounts.lock().remove(&self.id);
        if self.holder.counted_shed.load(Ordering::Acquire) {
            self.ledger.shedding.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What one charge holds; released when dropped.
pub struct StateEntry {
    ledger: Arc<Ledger>,
    holder: Arc<Holder>,
    weight: usize,
}

impl Drop for StateEntry {
    fn drop(&mut self) {
        self.holder.held.fetch_sub(self.weight, Ordering::AcqRel);
        self.ledger.held.fetch_sub(self.weight, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for StateEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateEntry")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charge_n(account: &StateAccount, n: usize) -> Vec<StateEntry> {
        (0..n)
            .map(|_| account.charge(Held::Route).expect("admitted"))
            .collect()
    }

    #[test]
    fn entries_are_held_until_dropped() {
        let ledger = StateLedger::new(10);
        let account = ledger.open();
        let entries = charge_n(&account, 4);
        assert_eq!((ledger.stats().held, account.held()), (4, 4));
        drop(entries);
        assert_eq!((ledger.stats().held, account.held()), (0, 0));
        assert_eq!(ledger.stats().peak, 4);
    }

    #[test]
    fn each_charge_weighs_what_it_holds() {
        let ledger = StateLedger::new(8);
        let account = ledger.open();
        let subscription = account.charge(Held::Subscription).expect("room");
        let interest = account.charge(Held::Interest).expect("room");
        assert_eq!((ledger.stats().held, account.held()), (8, 8));
        drop(subscription);
        assert_eq!(ledger.stats().held, 3);
        // A charge that would take the ledger past its limit is not admitted on what is
        // left below it: with 3 held, a subscription needs 8 of 8 and fits; another does not.
        let again = account.charge(Held::Subscription).expect("fits exactly");
        assert!(
            account.charge(Held::Route).is_none(),
            "full, and the only account"
        );
        drop((interest, again));
        assert_eq!((ledger.stats().held, ledger.stats().peak), (0, 8));
    }

    #[test]
    fn a_full_ledger_sheds_the_heaviest_and_lends_to_the_lighter() {
        let ledger = StateLedger::new(16);
        let flood = ledger.open();
        let honest = ledger.open();
        let _held = charge_n(&flood, 15);
        let _mine = honest.charge(Held::Route).expect("room left");
        // Full: the flood is heavier than the honest session, so it is shed and the
        // honest entry comes from the overdraft.
        let lent = honest.charge(Held::Route).expect("lent from the overdraft");
        assert!(flood.is_shed() && !honest.is_shed());
        assert_eq!(ledger.stats().shed, 1);
        // A shed session takes nothing more.
        assert!(flood.charge(Held::Route).is_none());
        // While it closes, lighter sessions borrow without shedding anyone else.
        let other = ledger.open();
        let _borrowed = other
            .charge(Held::Route)
            .expect("lent while the shed session closes");
        assert_eq!(ledger.stats().shed, 1);
        drop(lent);
    }

    #[test]
    fn the_heaviest_session_is_refused_not_another() {
        let ledger = StateLedger::new(8);
        let light = ledger.open();
        let heavy = ledger.open();
        let _light = charge_n(&light, 2);
        let _heavy = charge_n(&heavy, 6);
        assert!(
            heavy.charge(Held::Route).is_none(),
            "the flood stops at its source"
        );
        assert!(!light.is_shed() && !heavy.is_shed());
        assert_eq!(ledger.stats().refused, 1);
    }

    #[test]
    fn a_tie_is_refused_too() {
        // Shedding an equal would only move the flood from one session to another.
        let ledger = StateLedger::new(4);
        let (a, b) = (ledger.open(), ledger.open());
        let _held = (charge_n(&a, 2), charge_n(&b, 2));
        assert!(b.charge(Held::Route).is_none());
        assert!(!a.is_shed() && !b.is_shed());
    }

    #[test]
    fn the_overdraft_is_bounded_and_room_returns_when_the_shed_session_ends() {
        let ledger = StateLedger::new(64);
        let flood = ledger.open();
        let held = charge_n(&flood, 64);
        let honest = ledger.open();
        let lent: Vec<_> = std::iter::from_fn(|| honest.charge(Held::Route))
            .take(100)
            .collect();
        assert_eq!(lent.len(), 8, "an eighth of the limit is lent, no more");
        assert!(flood.is_shed());
        // The shed session ends: its entries and its account go.
        drop(held);
        drop(flood);
        let more = charge_n(&honest, 56);
        assert_eq!(ledger.stats().held, 64);
        assert!(
            honest.charge(Held::Route).is_none(),
            "full again, and the only account is the heaviest"
        );
        drop((lent, more));
        assert_eq!(ledger.stats().held, 0);
    }
}
