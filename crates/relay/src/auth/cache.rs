//! Access decisions shared by every session presenting the same credential.
//!
//! A decision is computed once and reused for at most the configured maximum age (or the
//! server's `revalidate` cadence, or the grant's expiry, whichever comes first). Concurrent
//! cold lookups for one credential wait on the single decision in flight. While sessions
//! hold a credential's decision, a refresher re-decides it each time it goes stale, so a
//! revoked grant reaches live sessions within the maximum age (plus the decider's own
//! latency). A decider that can tell when its answers may have changed (local keys: a key
//! file replaced or removed) is instead swept once per maximum age by one task for the
//! whole table, and held decisions are made again only after a sweep reports a change: the
//! half of every re-check that all credentials share is done once. The table is bounded:
//! past its capacity the oldest credential is forgotten (sessions holding it keep their
//! entry; new lookups start cold).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use starling_auth::contract::SessionRequest;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::auth::decision::{CredentialKey, Decide, Moment, Refusal, SessionFacts, Verdict};

/// Lookup and refresh counts, read by the metrics scrape.
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Answered from a fresh decision.
    pub hits: AtomicU64,
    /// No decision for the credential yet (or it was forgotten).
    pub misses_cold: AtomicU64,
    /// A decision existed but was older than the maximum age.
    pub misses_stale: AtomicU64,
    /// Waited on a decision another lookup had already started.
    pub coalesced: AtomicU64,
    /// Credentials forgotten because the table was full.
    pub evictions: AtomicU64,
    /// Decisions re-made for credentials that live sessions hold.
    pub revalidations: AtomicU64,
}

/// One credential's decision as sessions see it.
#[derive(Clone)]
struct Snapshot {
    /// The standing answer (a grant or a definitive refusal); what live sessions go by.
    pub verdict: Option<Verdict>,
    /// Until when `verdict` may be reused without asking again.
    fresh_until: Option<Instant>,
    /// A decision is being made.
    inflight: bool,
    /// The last attempt failed for want of the decider (an outage); the standing verdict
    /// is kept for live sessions, but new sessions are refused with this.
    failure: Option<Arc<Refusal>>,
    /// The sweep count when the standing verdict was decided (a sweeping decider's).
    swept: u64,
}

/// One credential in the table.
pub(crate) struct Entry {
    state: watch::Sender<Snapshot>,
    /// Bumped only when the standing verdict changes. Live sessions wait on this rather
    /// than on `state`, so a re-check that decides the same grant again (nearly all of
    /// them) wakes nothing but its refresher.
    verdicts: watch::Sender<()>,
    /// Live sessions admitted on this entry.
    holders: AtomicUsize,
    /// A refresher task is running.
    refreshing: AtomicBool,
    /// Wakes the refresher when the last holder leaves (a swept entry's refresher has no
    /// timer of its own to notice that).
    released: Notify,
    /// The facts and contract request of the session that first presented the credential;
    /// re-checks are made in its name.
    facts: SessionFacts,
    request: SessionRequest,
}

impl Entry {
    /// Told whenever the standing verdict changes.
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.verdicts.subscribe()
    }

    /// The standing verdict.
    pub fn verdict(&self) -> Option<Verdict> {
        self.state.borrow().verdict.clone()
    }
}

struct Table {
    entries: HashMap<CredentialKey, Arc<Entry>>,
    /// Insertion order, for forgetting the oldest credential first.
    order: VecDeque<CredentialKey>,
}

/// The table of decisions, with the decider that fills it.
pub(crate) struct DecisionCache {
    /// Where expiry times are read against.
    pub(crate) clock: starling_session::Clock,
    decider: Arc<dyn Decide>,
    max_age: Duration,
    capacity: usize,
    table: Mutex<Table>,
    counters: Arc<CacheCounters>,
    /// Sweeps of the decider that reported a change; `None` for a decider that does not
    /// sweep.
    swept: Option<watch::Sender<u64>>,
    /// The sweeper task is running.
    sweeping: AtomicBool,
}

impl DecisionCache {
    pub fn new(
        decider: Arc<dyn Decide>,
        max_age: Duration,
        capacity: usize,
        clock: starling_session::Clock,
    ) -> Arc<Self> {
        Arc::new(DecisionCache {
            clock,
            max_age,
            capacity: capacity.max(1),
            table: Mutex::new(Table {
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
            counters: Arc::default(),
            // A first look (at nothing read yet) tells whether the decider sweeps at all.
            swept: decider.sweep().map(|_| watch::Sender::new(0)),
            sweeping: AtomicBool::new(false),
            decider,
        })
    }

    pub fn counters(&self) -> &Arc<CacheCounters> {
        &self.counters
    }

    pub fn decider_name(&self) -> &'static str {
        self.decider.name()
    }

    /// Credentials in the table.
    pub fn len(&self) -> usize {
        self.table.lock().expect("auth cache lock").entries.len()
    }

    /// The decision for `facts`: fresh from the table, or made now (once, however many
    /// sessions ask at the same time). `request` names the session asking, in case the
    /// decision has to be made in its name.
    pub async fn lookup(
        self: &Arc<Self>,
        facts: &SessionFacts,
        request: &SessionRequest,
    ) -> (Arc<Entry>, Verdict) {
        let entry = self.entry(facts, request);
        let mut watcher = entry.state.subscribe();
        let now = Instant::now();
        let (mut hit, mut started, mut cold) = (None, false, false);
        entry.state.send_if_modified(|state| {
            if let (Some(verdict), Some(until)) = (&state.verdict, state.fresh_until) {
                if now < until && state.failure.is_none() {
                    hit = Some(verdict.clone());
                    return false;
                }
            }
            if !state.inflight {
                state.inflight = true;
                started = true;
                cold = state.verdict.is_none();
            }
            false
        });
        if let Some(verdict) = hit {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return (entry, verdict);
        }
        if started {
            let counter = if cold {
                &self.counters.misses_cold
            } else {
                &self.counters.misses_stale
            };
            counter.fetch_add(1, Ordering::Relaxed);
            // Its own task, so the decision completes for every waiter even if the session
            // that started it goes away, and a verification (tens of microseconds for ES256)
            // can run on another worker while this one goes on accepting.
            let (cache, held) = (self.clone(), entry.clone());
            tokio::spawn(async move { cache.decide(&held, Moment::Connect).await });
        } else {
            self.counters.coalesced.fetch_add(1, Ordering::Relaxed);
        }
        let verdict = match watcher.wait_for(|state| !state.inflight).await {
            Ok(state) => match (&state.failure, &state.verdict) {
                (Some(failure), _) => Err(failure.clone()),
                (None, Some(verdict)) => verdict.clone(),
                (None, None) => Err(Arc::new(Refusal::Unavailable("no decision".into()))),
            },
            Err(_) => Err(Arc::new(Refusal::Unavailable("decider gone".into()))),
        };
        (entry, verdict)
    }

    /// The table entry for `facts`, created (and the oldest forgotten) when absent.
    fn entry(&self, facts: &SessionFacts, request: &SessionRequest) -> Arc<Entry> {
        let key = facts.key();
        let mut table = self.table.lock().expect("auth cache lock");
        if let Some(entry) = table.entries.get(&key) {
            return entry.clone();
        }
        while table.entries.len() >= self.capacity {
            let Some(oldest) = table.order.pop_front() else {
                break;
            };
            if table.entries.remove(&oldest).is_some() {
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        let (state, _) = watch::channel(Snapshot {
            verdict: None,
            fresh_until: None,
            inflight: false,
            failure: None,
            swept: 0,
        });
        let entry = Arc::new(Entry {
            state,
            verdicts: watch::Sender::new(()),
            holders: AtomicUsize::new(0),
            refreshing: AtomicBool::new(false),
            released: Notify::new(),
            facts: facts.clone(),
            request: request.clone(),
        });
        table.entries.insert(key.clone(), entry.clone());
        table.order.push_back(key);
        entry
    }

    /// Make a decision for `entry` (whose `inflight` the caller set) and publish it.
    async fn decide(&self, entry: &Entry, moment: Moment) {
        // Cleared even if the decider panics, so waiters are never left hanging.
        struct Publish<'a> {
            entry: &'a Entry,
            outcome: Option<Result<crate::auth::Decision, Refusal>>,
            max_age: Duration,
            swept: u64,
            clock: starling_session::Clock,
        }
        impl Drop for Publish<'_> {
            fn drop(&mut self) {
                let outcome = self
                    .outcome
                    .take()
                    .unwrap_or_else(|| Err(Refusal::Unavailable("the decider failed".into())));
                let (max_age, swept, clock) = (self.max_age, self.swept, self.clock);
                let mut changed = false;
                self.entry.state.send_modify(|state| {
                    state.inflight = false;
                    state.swept = swept;
                    let now = Instant::now();
                    match outcome {
                        Err(refusal) if refusal.is_outage() => {
                            state.failure = Some(Arc::new(refusal));
                        }
                        Err(refusal) => {
                            state.failure = None;
                            state.verdict = Some(Err(Arc::new(refusal)));
                            state.fresh_until = Some(now + max_age);
                            changed = true;
                        }
                        Ok(decision) => {
                            let mut age = max_age;
                            if let Some(cadence) = decision.revalidate {
                                age = age.min(cadence);
                            }
                            if let Some(expires) = decision.expires {
                                age = age.min(
                                    expires
                                        .duration_since(clock.wall())
                                        .unwrap_or_default(),
                                );
                            }
                            state.failure = None;
                            // The same grant again keeps its standing value, so holders
                            // see no change.
                            if !matches!(&state.verdict, Some(Ok(standing)) if **standing == decision)
                            {
                                state.verdict = Some(Ok(Arc::new(decision)));
                                changed = true;
                            }
                            state.fresh_until = Some(now + age);
                        }
                    }
                });
                if changed {
                    self.entry.verdicts.send_replace(());
                }
            }
        }
        let mut publish = Publish {
            entry,
            outcome: None,
            max_age: self.max_age,
            clock: self.clock,
            // Read before deciding: a change swept while the decision is made is not missed.
            swept: self.swept.as_ref().map_or(0, |swept| *swept.borrow()),
        };
        publish.outcome = Some(
            self.decider
                .decide(&entry.facts, &entry.request, moment)
                .await,
        );
    }

    /// Count a live session on `entry`, starting its refresher if none runs.
    pub fn hold(self: &Arc<Self>, entry: &Arc<Entry>) {
        entry.holders.fetch_add(1, Ordering::AcqRel);
        if !entry.refreshing.swap(true, Ordering::AcqRel) {
            let (cache, entry) = (self.clone(), entry.clone());
            tokio::spawn(async move { cache.refresh(entry).await });
        }
        if self.swept.is_some() && !self.sweeping.swap(true, Ordering::AcqRel) {
            let cache = Arc::downgrade(self);
            tokio::spawn(Self::sweep(cache, self.max_age));
        }
    }

    /// A live session on `entry` ended.
    pub fn release(&self, entry: &Entry) {
        if entry.holders.fetch_sub(1, Ordering::AcqRel) == 1 {
            entry.released.notify_one();
        }
    }

    /// Sweep the decider once per `period` for as long as the cache lives.
    async fn sweep(cache: Weak<Self>, period: Duration) {
        let mut ticks = tokio::time::interval_at(Instant::now() + period, period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(cache) = cache.upgrade() else {
                return;
            };
            if cache.decider.sweep() == Some(true) {
                if let Some(swept) = &cache.swept {
                    swept.send_modify(|count| *count += 1);
                }
            }
        }
    }

    /// Until a sweep after the one `entry`'s verdict was decided under reports a change.
    async fn changed_since(&self, entry: &Entry) {
        let Some(swept) = &self.swept else {
            return std::future::pending().await;
        };
        let decided = entry.state.borrow().swept;
        let mut sweeps = swept.subscribe();
        let _ = sweeps.wait_for(|count| *count != decided).await;
    }

    /// Re-decide `entry` whenever it goes stale, while sessions hold it.
    async fn refresh(self: Arc<Self>, entry: Arc<Entry>) {
        let mut failures = 0u32;
        let mut retry_at: Option<Instant> = None;
        loop {
            let wake = {
                let state = entry.state.borrow();
                if matches!(state.verdict, Some(Err(_))) {
                    // Refused: the holders end themselves; nothing left to re-check.
                    break;
                }
                retry_at.or(state.fresh_until)
            };
            match (wake, self.swept.is_some() && retry_at.is_none()) {
                // Swept: the verdict stands until a sweep reports a change, or nobody
                // holds it.
                (_, true) => {
                    tokio::select! {
                        () = self.changed_since(&entry) => {}
                        () = entry.released.notified() => {}
                    }
                }
                (Some(at), false) => tokio::time::sleep_until(at).await,
                (None, false) => {}
            }
            if entry.holders.load(Ordering::Acquire) == 0 {
                entry.refreshing.store(false, Ordering::Release);
                // A session may have arrived between the check and the store.
                if entry.holders.load(Ordering::Acquire) == 0
                    || entry.refreshing.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
            let mut claimed = false;
            entry.state.send_if_modified(|state| {
                if !state.inflight {
                    state.inflight = true;
                    claimed = true;
                }
                false
            });
            if claimed {
                self.counters.revalidations.fetch_add(1, Ordering::Relaxed);
                self.decide(&entry, Moment::Revalidate).await;
            } else {
                let mut watcher = entry.state.subscribe();
                let _ = watcher.wait_for(|state| !state.inflight).await;
            }
            let outage = entry.state.borrow().failure.is_some();
            if outage {
                // Evidence of nothing: the standing grant holds until it expires; ask
                // again after a backoff bounded by the maximum age.
                failures += 1;
                let backoff = Duration::from_millis(250)
                    .saturating_mul(1 << failures.min(8))
                    .min(self.max_age);
                retry_at = Some(Instant::now() + backoff);
            } else {
                failures = 0;
                retry_at = None;
            }
        }
        entry.refreshing.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::decision::Deciding;
    use crate::auth::Decision;
    use starling_auth::contract::TransportKind;
    use starling_auth::Permissions;

    /// A decider that answers from a script and counts what it was asked.
    struct Scripted {
        asked: AtomicU64,
        allow: AtomicBool,
        gate: Arc<tokio::sync::Semaphore>,
        /// Sweeps, reporting (once) a change when `changed` is set.
        sweeps: bool,
        changed: AtomicBool,
    }

    impl Decide for Scripted {
        fn decide(&self, _: &SessionFacts, _: &SessionRequest, _: Moment) -> Deciding {
            self.asked.fetch_add(1, Ordering::SeqCst);
            let allow = self.allow.load(Ordering::SeqCst);
            let gate = self.gate.clone();
            Box::pin(async move {
                gate.acquire().await.expect("open").forget();
                if allow {
                    Ok(Decision {
                        permissions: Permissions {
                            root: "room".into(),
                            publish: Default::default(),
                            subscribe: ["**".parse().unwrap()].into_iter().collect(),
                        },
                        expires: None,
                        revalidate: None,
                        peer: false,
                    })
                } else {
                    Err(Refusal::Server)
                }
            })
        }

        fn name(&self) -> &'static str {
            "scripted"
        }

        fn sweep(&self) -> Option<bool> {
            self.sweeps
                .then(|| self.changed.swap(false, Ordering::SeqCst))
        }
    }

    fn facts(target: &str) -> SessionFacts {
        SessionFacts::new(TransportKind::Quic, target)
    }

    fn request(facts: &SessionFacts) -> SessionRequest {
        facts.request("test")
    }

    fn scripted(permits: usize) -> Arc<Scripted> {
        Arc::new(Scripted {
            asked: AtomicU64::new(0),
            allow: AtomicBool::new(true),
            gate: Arc::new(tokio::sync::Semaphore::new(permits)),
            sweeps: false,
            changed: AtomicBool::new(false),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_cold_lookups_share_one_decision() {
        let decider = scripted(0);
        let cache = DecisionCache::new(
            decider.clone(),
            Duration::from_secs(1),
            16,
            Default::default(),
        );
        let f = facts("/room?jwt=t");
        let lookups: Vec<_> = (0..100)
            .map(|_| {
                let (cache, f) = (cache.clone(), f.clone());
                tokio::spawn(async move { cache.lookup(&f, &request(&f)).await.1.is_ok() })
            })
            .collect();
        // Every lookup is parked on the one decision before it is answered.
        while cache.counters.coalesced.load(Ordering::SeqCst) < 99 {
            tokio::task::yield_now().await;
        }
        decider.gate.add_permits(1000);
        for lookup in lookups {
            assert!(lookup.await.unwrap());
        }
        assert_eq!(decider.asked.load(Ordering::SeqCst), 1);
        assert_eq!(cache.counters.misses_cold.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_decision_is_reused_only_within_the_maximum_age() {
        let decider = scripted(1000);
        let cache = DecisionCache::new(
            decider.clone(),
            Duration::from_secs(1),
            16,
            Default::default(),
        );
        let f = facts("/room?jwt=t");
        assert!(cache.lookup(&f, &request(&f)).await.1.is_ok());
        decider.allow.store(false, Ordering::SeqCst);
        tokio::time::advance(Duration::from_millis(900)).await;
        assert!(
            cache.lookup(&f, &request(&f)).await.1.is_ok(),
            "inside the age"
        );
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(cache.lookup(&f, &request(&f)).await.1.is_err(), "past it");
        assert_eq!(decider.asked.load(Ordering::SeqCst), 2);
        assert_eq!(cache.counters.hits.load(Ordering::SeqCst), 1);
        assert_eq!(cache.counters.misses_stale.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn held_decisions_are_rechecked_and_revocation_reaches_holders() {
        let decider = scripted(1000);
        let cache = DecisionCache::new(
            decider.clone(),
            Duration::from_secs(1),
            16,
            Default::default(),
        );
        let f = facts("/room?jwt=t");
        let (entry, verdict) = cache.lookup(&f, &request(&f)).await;
        let admitted = verdict.unwrap();
        cache.hold(&entry);
        let mut watcher = entry.subscribe();
        for _ in 0..3 {
            tokio::time::advance(Duration::from_millis(1100)).await;
            tokio::task::yield_now().await;
        }
        assert_eq!(cache.counters.revalidations.load(Ordering::SeqCst), 3);
        // The same grant each time: the holder is not woken, and keeps the admitted value.
        assert!(!watcher.has_changed().unwrap());
        assert!(matches!(entry.verdict(), Some(Ok(standing)) if Arc::ptr_eq(&standing, &admitted)));
        decider.allow.store(false, Ordering::SeqCst);
        let started = Instant::now();
        watcher.changed().await.unwrap();
        assert!(matches!(entry.verdict(), Some(Err(_))));
        assert!(started.elapsed() <= Duration::from_secs(1));
        cache.release(&entry);
    }

    #[tokio::test(start_paused = true)]
    async fn a_swept_decider_is_asked_again_only_after_a_sweep_reports_a_change() {
        let decider = Arc::new(Scripted {
            sweeps: true,
            ..Arc::into_inner(scripted(1000)).unwrap()
        });
        let cache = DecisionCache::new(
            decider.clone(),
            Duration::from_secs(1),
            16,
            Default::default(),
        );
        let f = facts("/room?jwt=t");
        let (entry, verdict) = cache.lookup(&f, &request(&f)).await;
        assert!(verdict.is_ok());
        cache.hold(&entry);
        let mut watcher = entry.subscribe();
        for _ in 0..5 {
            tokio::time::advance(Duration::from_millis(1100)).await;
            tokio::task::yield_now().await;
        }
        assert_eq!(decider.asked.load(Ordering::SeqCst), 1, "nothing changed");
        assert_eq!(cache.counters.revalidations.load(Ordering::SeqCst), 0);
        // A change is swept within the maximum age and the held decision made again.
        decider.allow.store(false, Ordering::SeqCst);
        decider.changed.store(true, Ordering::SeqCst);
        let started = Instant::now();
        watcher.changed().await.unwrap();
        assert!(matches!(entry.verdict(), Some(Err(_))));
        assert!(started.elapsed() <= Duration::from_secs(1));
        assert_eq!(cache.counters.revalidations.load(Ordering::SeqCst), 1);
        cache.release(&entry);
        // The last holder gone, a granted entry's refresher ends without a sweep.
        decider.allow.store(true, Ordering::SeqCst);
        tokio::time::advance(Duration::from_millis(1100)).await;
        let (entry, verdict) = cache.lookup(&f, &request(&f)).await;
        assert!(verdict.is_ok());
        cache.hold(&entry);
        tokio::task::yield_now().await;
        assert!(entry.refreshing.load(Ordering::SeqCst));
        cache.release(&entry);
        while entry.refreshing.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_forgets_its_oldest_credential_when_full() {
        let decider = scripted(1000);
        let cache = DecisionCache::new(
            decider.clone(),
            Duration::from_secs(60),
            2,
            Default::default(),
        );
        for token in ["a", "b", "c"] {
            let f = facts(&format!("/room?jwt={token}"));
            assert!(cache.lookup(&f, &request(&f)).await.1.is_ok());
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.counters.evictions.load(Ordering::SeqCst), 1);
        let a = facts("/room?jwt=a");
        assert!(cache.lookup(&a, &request(&a)).await.1.is_ok());
        assert_eq!(cache.counters.misses_cold.load(Ordering::SeqCst), 4);
    }
}
