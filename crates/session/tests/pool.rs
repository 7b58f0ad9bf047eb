//! The relay-wide receive pool (issue 25 item 1): windows granted out of half the total and
//! grown as they are consumed, reclaimed from idle connections, holdings past a
//! connection's window evicted relay-wide lowest rank first, and an entitled asker always
//! served. The last test runs random operations against a plain model of those rules.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use starling_session::{Rank, ReceivePool, RecvBudget, WindowRange};

const KIB: usize = 1024;

fn pool(total: usize, initial: usize, max: usize) -> ReceivePool {
    ReceivePool::new(total, WindowRange { initial, max })
}

/// The windows applied to a connection's transport, in order.
type Applied = Arc<Mutex<Vec<u64>>>;

/// A pooled budget whose applied windows are recorded.
fn connection(pool: &ReceivePool, limit: usize) -> (RecvBudget, Applied) {
    let budget = RecvBudget::pooled(limit, pool);
    let applied = Arc::new(Mutex::new(Vec::new()));
    let log = applied.clone();
    budget.on_window(move |w| log.lock().unwrap().push(w));
    (budget, applied)
}

#[test]
fn a_window_doubles_each_time_half_of_it_is_consumed_up_to_the_maximum() {
    let pool = pool(64 * KIB * 16, 4 * KIB, 32 * KIB);
    let (budget, applied) = connection(&pool, 64 * KIB);
    let now = Instant::now();
    assert_eq!(budget.stats().window, 4 * KIB);
    assert_eq!(pool.stats().windows, 4 * KIB);
    budget.consume_at(2 * KIB - 1, || now);
    assert_eq!(budget.stats().window, 4 * KIB, "not yet half");
    budget.consume_at(1, || now);
    assert_eq!(budget.stats().window, 8 * KIB);
    for _ in 0..10 {
        budget.consume_at(32 * KIB, || now);
    }
    assert_eq!(budget.stats().window, 32 * KIB, "capped at the maximum");
    assert_eq!(pool.stats().windows, 32 * KIB);
    assert_eq!(
        *applied.lock().unwrap(),
        [4, 8, 16, 32].map(|k| (k * KIB) as u64),
        "every change reached the transport, in order"
    );
    drop(budget);
    assert_eq!(
        pool.stats().windows,
        0,
        "the window went back with the connection"
    );
}

#[test]
fn held_bytes_are_not_consumption_so_a_stuck_peer_never_grows() {
    let pool = pool(1 << 20, 4 * KIB, 1 << 20);
    let (budget, _) = connection(&pool, 64 * KIB);
    let stuck = budget.account(Rank::Unknown);
    for _ in 0..16 {
        assert!(stuck.try_charge(KIB));
    }
    assert_eq!(budget.stats().window, 4 * KIB);
    assert_eq!(pool.stats().held, 16 * KIB);
    drop(stuck);
    assert_eq!(pool.stats().held, 0);
}

#[test]
fn growth_stops_at_half_the_total_and_a_reclaim_pass_takes_back_idle_windows() {
    // 56 KiB of window room: an idle connection at 32 KiB and a flowing one.
    let pool = pool(112 * KIB, 4 * KIB, 64 * KIB);
    let t0 = Instant::now();
    let (idle, _) = connection(&pool, 64 * KIB);
    let (flowing, _) = connection(&pool, 64 * KIB);
    for _ in 0..3 {
        idle.consume_at(idle.stats().window, || t0);
    }
    assert_eq!(idle.stats().window, 32 * KIB);
    // The flowing one grows to 16 KiB, then finds no room for 32 (32 + 32 of 56); the
    // first reclaim pass runs, but both consumed half their windows since joining, so
    // neither gives any back.
    flowing.consume_at(4 * KIB, || t0);
    flowing.consume_at(8 * KIB, || t0);
    assert_eq!(flowing.stats().window, 16 * KIB);
    flowing.consume_at(16 * KIB, || t0);
    assert_eq!(
        (flowing.stats().window, idle.stats().window),
        (16 * KIB, 32 * KIB),
        "32 KiB + 32 KiB would pass the 56 KiB room"
    );
    assert_eq!(pool.stats().starved, 1);
    // Later the idle one has not moved; the flowing one has: the next pass halves only
    // the idle one, and the growth goes through.
    let later = t0 + Duration::from_millis(150);
    flowing.consume_at(16 * KIB, || later);
    assert_eq!(idle.stats().window, 16 * KIB);
    assert_eq!(flowing.stats().window, 32 * KIB);
    assert_eq!(pool.stats().windows, 48 * KIB);
    assert!(pool.stats().shrunk >= 1);
}

#[test]
fn admission_needs_room_for_one_more_initial_window() {
    let pool = pool(32 * KIB, 4 * KIB, 16 * KIB);
    let now = Instant::now();
    let mut held = Vec::new();
    while pool.admits(now) {
        held.push(connection(&pool, 16 * KIB).0);
        assert!(held.len() <= 4, "16 KiB of room holds four 4 KiB windows");
    }
    assert_eq!(held.len(), 4);
    held.pop();
    assert!(pool.admits(now));
}

#[test]
fn a_full_pool_evicts_units_held_past_a_window_lowest_rank_and_oldest_first() {
    // Total 64 KiB; windows 4 KiB each. A hostile connection holds 40 KiB of stuck
    // headers (36 KiB past its window); an honest one then needs 24 KiB for control.
    let pool = pool(64 * KIB, 4 * KIB, 64 * KIB);
    let (hostile, _) = connection(&pool, 64 * KIB);
    let (honest, _) = connection(&pool, 64 * KIB);
    let stuck: Vec<_> = (0..10).map(|_| hostile.account(Rank::Unknown)).collect();
    for account in &stuck {
        assert!(account.try_charge(4 * KIB));
    }
    assert_eq!(pool.stats().held, 40 * KIB);
    let control = honest.account(Rank::Control);
    assert!(control.try_charge(16 * KIB));
    // 8 + 40 + 16 = 64: it fit without eviction.
    assert!(stuck.iter().all(|a| !a.is_evicted()));
    let data = honest.account(Rank::Data {
        priority: 0,
        sequence: 1,
    });
    assert!(data.try_charge(8 * KIB), "data outranks header-less units");
    // Room for 8 KiB plus a sixteenth of the total: the three oldest stuck units went.
    let evicted: Vec<bool> = stuck.iter().map(|a| a.is_evicted()).collect();
    assert_eq!(evicted[..3], [true, true, true]);
    assert!(evicted[3..].iter().all(|e| !e));
    assert_eq!(pool.stats().evictions, 3);
    assert_eq!(hostile.stats().evicted, 3);
    assert!(pool.stats().windows + pool.stats().held <= 64 * KIB - 4 * KIB);
}

#[test]
fn relay_wide_eviction_never_takes_a_connection_below_its_window() {
    let pool = pool(40 * KIB, 8 * KIB, 64 * KIB);
    let (a, _) = connection(&pool, 64 * KIB);
    let (b, _) = connection(&pool, 64 * KIB);
    // a holds within its 8 KiB window; b holds 12 KiB, 4 past it.
    let a_unit = a.account(Rank::Unknown);
    assert!(a_unit.try_charge(8 * KIB));
    let b_units: Vec<_> = (0..3).map(|_| b.account(Rank::Unknown)).collect();
    for unit in &b_units {
        assert!(unit.try_charge(4 * KIB));
    }
    assert_eq!(pool.stats().windows + pool.stats().held, 36 * KIB);
    // A newer header-less unit on b needs 8 KiB: b's oldest unit (older, the same rank)
    // goes, which brings b down to its window; a's older unit stays, and so do b's others.
    let newer = b.account(Rank::Unknown);
    assert!(newer.try_charge(8 * KIB));
    assert!(!a_unit.is_evicted());
    assert_eq!(
        b_units.iter().map(|u| u.is_evicted()).collect::<Vec<_>>(),
        [true, false, false]
    );
    assert_eq!(pool.stats().evictions, 1);
    assert_eq!(pool.stats().windows + pool.stats().held, 40 * KIB);
}

#[test]
fn an_asker_within_its_window_is_served_whatever_the_rank_of_what_is_borrowed() {
    let pool = pool(64 * KIB, 8 * KIB, 64 * KIB);
    let (greedy, _) = connection(&pool, 64 * KIB);
    let (entitled, _) = connection(&pool, 64 * KIB);
    // The greedy connection fills the total with control units (the highest rank).
    let units: Vec<_> = (0..12).map(|_| greedy.account(Rank::Control)).collect();
    for unit in &units {
        assert!(unit.try_charge(4 * KIB));
    }
    assert_eq!(pool.stats().windows + pool.stats().held, 64 * KIB);
    // A header-less unit within its own 8 KiB window still gets its bytes.
    let small = entitled.account(Rank::Unknown);
    assert!(small.try_charge(8 * KIB));
    assert!(units.iter().any(|u| u.is_evicted()));
    // Past its window it is refused: nothing borrowed ranks below it.
    let more = entitled.account(Rank::Unknown);
    assert!(!more.try_charge(8 * KIB));
    assert!(!small.is_evicted());
}

/// Connections on loopback are admitted without asking the pool for room, so windows can
/// fill the whole total; a unit within its own window is still served (the window is what
/// the transport promised the peer), and the bytes are counted past the total.
#[test]
fn an_asker_within_its_window_is_served_even_when_the_windows_fill_the_total() {
    let pool = pool(32 * KIB, 16 * KIB, 64 * KIB);
    let conns: Vec<_> = (0..3).map(|_| connection(&pool, 64 * KIB).0).collect();
    assert_eq!(pool.stats().windows, 48 * KIB);
    let unit = conns[0].account(Rank::Data {
        priority: 0,
        sequence: 1,
    });
    assert!(unit.try_charge(4 * KIB), "within its 16 KiB window");
    assert_eq!(pool.stats().held, 4 * KIB);
    assert_eq!(pool.stats().peak, 52 * KIB);
    // Past its window it is refused: nothing is borrowed anywhere.
    let more = conns[0].account(Rank::Control);
    assert!(!more.try_charge(13 * KIB));
    assert_eq!(pool.stats().held, 4 * KIB);
}

/// Stream credit past the initial is granted out of the windows' half at what a held
/// stream costs, refused when the half is full, and given back with the connection.
#[test]
fn stream_credit_grows_out_of_the_windows_half_and_goes_back_with_the_connection() {
    use starling_session::STREAM_CREDIT_COST;
    // 64 streams' worth of window room; 4 KiB of it is the connection's initial window.
    let pool = pool(128 * STREAM_CREDIT_COST, 4 * KIB, 64 * KIB);
    let (budget, _) = connection(&pool, 64 * KIB);
    let gate = budget
        .stream_gate()
        .expect("a pooled budget gates its credit");
    assert!(gate(32));
    assert_eq!(pool.stats().windows, 4 * KIB + 32 * STREAM_CREDIT_COST);
    assert!(!gate(32), "32 more streams would pass the windows' half");
    assert_eq!(pool.stats().starved, 1);
    assert!(gate(16));
    assert_eq!(pool.stats().grown, 2);
    drop(budget);
    assert_eq!(pool.stats().windows, 0, "credit and window went back");
    assert!(!gate(1), "the connection is gone");
    assert!(RecvBudget::new(KIB).stream_gate().is_none());
}

#[test]
fn bytes_released_return_to_the_pool_and_peak_is_kept() {
    let pool = pool(64 * KIB, 4 * KIB, 64 * KIB);
    let (budget, _) = connection(&pool, 64 * KIB);
    let a = budget.account(Rank::Control);
    assert!(a.try_charge(10 * KIB));
    a.release(4 * KIB);
    assert_eq!(pool.stats().held, 6 * KIB);
    drop(a);
    assert_eq!(pool.stats().held, 0);
    assert_eq!(pool.stats().peak, 14 * KIB);
}

mod against_a_reference {
    //! Random operations on pooled budgets and on a plain model of the pool's rules: both
    //! agree on every charge's answer, every eviction, every window, and the pool never
    //! holds more than its total.
    use super::*;
    use proptest::prelude::*;
    use starling_session::{Account, RECLAIM_EVERY};

    const TOTAL: usize = 256;
    const INITIAL: usize = 16;
    const MAX: usize = 64;
    const LIMIT: usize = 96;

    #[derive(Clone, Debug)]
    enum Op {
        Connect,
        Open(usize, Rank),
        Charge(usize, usize),
        Release(usize, usize),
        Consume(usize, usize),
        DropUnit(usize),
        Disconnect(usize),
        Tick(u64),
    }

    fn rank() -> impl Strategy<Value = Rank> {
        prop_oneof![
            Just(Rank::Unknown),
            Just(Rank::Control),
            (0u8..2, 0u64..3).prop_map(|(priority, sequence)| Rank::Data { priority, sequence }),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            1 => Just(Op::Connect),
            3 => (0usize..6, rank()).prop_map(|(c, r)| Op::Open(c, r)),
            6 => (0usize..24, 1usize..48).prop_map(|(u, n)| Op::Charge(u, n)),
            2 => (0usize..24, 1usize..48).prop_map(|(u, n)| Op::Release(u, n)),
            3 => (0usize..6, 1usize..64).prop_map(|(c, n)| Op::Consume(c, n)),
            1 => (0usize..24).prop_map(Op::DropUnit),
            1 => (0usize..6).prop_map(Op::Disconnect),
            1 => (0u64..250).prop_map(Op::Tick),
        ]
    }

    #[derive(Clone, Debug)]
    struct Conn {
        window: usize,
        consumed: u64,
        tried_at: u64,
        at_pass: u64,
    }

    #[derive(Clone, Debug)]
    struct Unit {
        conn: usize,
        rank: Rank,
        held: usize,
        evicted: bool,
    }

    #[derive(Default, Debug)]
    struct Model {
        conns: Vec<Option<Conn>>,
        units: Vec<Option<Unit>>,
        last_pass: Option<u64>,
        evictions: u64,
    }

    fn outranked(rank: Rank, id: usize, asker: Rank, asker_id: usize) -> bool {
        rank < asker || (rank == Rank::Unknown && asker == Rank::Unknown && id < asker_id)
    }

    impl Model {
        fn windows(&self) -> usize {
            self.conns.iter().flatten().map(|c| c.window).sum()
        }
        fn held(&self) -> usize {
            self.units
                .iter()
                .flatten()
                .filter(|u| !u.evicted)
                .map(|u| u.held)
                .sum()
        }
        fn conn_used(&self, conn: usize) -> usize {
            self.units
                .iter()
                .flatten()
                .filter(|u| u.conn == conn && !u.evicted)
                .map(|u| u.held)
                .sum()
        }
        fn evict(&mut self, id: usize) -> usize {
            let unit = self.units[id].as_mut().unwrap();
            let freed = unit.held;
            unit.held = 0;
            unit.evicted = true;
            freed
        }

        fn make_room(&mut self, bytes: usize, rank: Rank, id: usize, entitled: bool) {
            if self.windows() + self.held() + bytes <= TOTAL {
                return;
            }
            let target = TOTAL - TOTAL / 16;
            let mut borrowed = vec![0usize; self.conns.len()];
            for (c, conn) in self.conns.iter().enumerate() {
                if let Some(conn) = conn {
                    borrowed[c] = self.conn_used(c).saturating_sub(conn.window);
                }
            }
            let mut candidates: Vec<(Rank, usize)> = self
                .units
                .iter()
                .enumerate()
                .filter_map(|(i, u)| u.as_ref().map(|u| (i, u)))
                .filter(|(_, u)| !u.evicted && u.held > 0 && borrowed[u.conn] > 0)
                .filter(|(i, u)| entitled || outranked(u.rank, *i, rank, id))
                .map(|(i, u)| (u.rank, i))
                .collect();
            candidates.sort();
            for (_, victim) in candidates {
                if self.windows() + self.held() + bytes <= target {
                    break;
                }
                let owner = self.units[victim].as_ref().unwrap().conn;
                if borrowed[owner] == 0 {
                    continue;
                }
                let freed = self.evict(victim);
                borrowed[owner] = borrowed[owner].saturating_sub(freed);
                self.evictions += 1;
            }
        }

        fn charge(&mut self, id: usize, bytes: usize) -> bool {
            let mut made_room = false;
            loop {
                let (conn, my_rank) = match &self.units[id] {
                    Some(u) if !u.evicted => (u.conn, u.rank),
                    _ => return false,
                };
                let used = self.conn_used(conn);
                if used + bytes > LIMIT {
                    let victim = self
                        .units
                        .iter()
                        .enumerate()
                        .filter_map(|(i, u)| u.as_ref().map(|u| (i, u)))
                        .filter(|(i, u)| {
                            *i != id
                                && u.conn == conn
                                && !u.evicted
                                && u.held > 0
                                && outranked(u.rank, *i, my_rank, id)
                        })
                        .min_by_key(|(i, u)| (u.rank, *i))
                        .map(|(i, _)| i);
                    match victim {
                        Some(v) => {
                            self.evict(v);
                            continue;
                        }
                        None => return false,
                    }
                }
                let window = self.conns[conn].as_ref().unwrap().window;
                let entitled = used + bytes <= window;
                // Within its window an asker holds even past the total once a pass ran.
                if self.windows() + self.held() + bytes <= TOTAL || (made_room && entitled) {
                    self.units[id].as_mut().unwrap().held += bytes;
                    return true;
                }
                if made_room {
                    self.evictions += 1;
                    return false;
                }
                self.make_room(bytes, my_rank, id, entitled);
                made_room = true;
            }
        }

        fn reclaim(&mut self, now: u64) -> bool {
            let every = RECLAIM_EVERY.as_millis() as u64;
            if self
                .last_pass
                .is_some_and(|at| now.saturating_sub(at) < every)
            {
                return false;
            }
            self.last_pass = Some(now);
            let mut returned = 0;
            for conn in self.conns.iter_mut().flatten() {
                let progress = conn.consumed - conn.at_pass;
                conn.at_pass = conn.consumed;
                if progress < (conn.window / 2) as u64 && conn.window > INITIAL {
                    let smaller = (conn.window / 2).max(INITIAL);
                    returned += conn.window - smaller;
                    conn.window = smaller;
                }
            }
            returned > 0
        }

        fn consume(&mut self, c: usize, bytes: usize, now: u64) {
            let conn = self.conns[c].as_mut().unwrap();
            conn.consumed += bytes as u64;
            let window = conn.window;
            if (conn.consumed - conn.tried_at) * 2 < window as u64 || window >= MAX {
                return;
            }
            conn.tried_at = conn.consumed;
            let next = (window * 2).min(MAX);
            let more = next - window;
            let fits = |m: &Model| {
                let w = m.windows();
                w + more <= TOTAL / 2 && w + more + m.held() <= TOTAL
            };
            if !fits(self) {
                self.reclaim(now);
                self.make_room(more, Rank::Control, usize::MAX, true);
                if !fits(self) {
                    return;
                }
            }
            // A reclaim pass inside may have halved this very window: the grant is then
            // given back (the real pool's compare-and-swap fails the same way).
            let conn = self.conns[c].as_mut().unwrap();
            if conn.window == window {
                conn.window = next;
            }
        }
    }

    struct Real {
        conns: Vec<Option<(RecvBudget, Applied)>>,
        units: Vec<Option<Account>>,
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn the_pool_follows_its_rules(ops in proptest::collection::vec(op(), 1..120)) {
            let pool = pool(TOTAL, INITIAL, MAX);
            let t0 = Instant::now();
            let mut clock = 0u64;
            let mut model = Model::default();
            let mut real = Real { conns: Vec::new(), units: Vec::new() };
            for op in ops {
                let now = t0 + Duration::from_millis(clock);
                match op {
                    Op::Connect => {
                        let admitted = pool.admits(now);
                        let model_admits = model.windows() + INITIAL <= TOTAL / 2
                            || (model.reclaim(clock) && model.windows() + INITIAL <= TOTAL / 2);
                        prop_assert_eq!(admitted, model_admits);
                        if admitted {
                            model.make_room(INITIAL, Rank::Control, usize::MAX, true);
                            real.conns.push(Some(connection(&pool, LIMIT)));
                            model.conns.push(Some(Conn { window: INITIAL, consumed: 0, tried_at: 0, at_pass: 0 }));
                        }
                    }
                    Op::Open(c, rank) => {
                        if let Some(Some((budget, _))) = real.conns.get(c) {
                            real.units.push(Some(budget.account(rank)));
                            model.units.push(Some(Unit { conn: c, rank, held: 0, evicted: false }));
                        }
                    }
                    Op::Charge(u, n) => {
                        if let Some(Some(account)) = real.units.get(u) {
                            let expected = model.charge(u, n);
                            prop_assert_eq!(account.try_charge(n), expected, "charge {} of unit {}", n, u);
                        }
                    }
                    Op::Release(u, n) => {
                        if let Some(Some(account)) = real.units.get(u) {
                            account.release(n);
                            let m = model.units[u].as_mut().unwrap();
                            m.held -= n.min(m.held);
                        }
                    }
                    Op::Consume(c, n) => {
                        if let Some(Some((budget, _))) = real.conns.get(c) {
                            budget.consume_at(n, || now);
                            model.consume(c, n, clock);
                        }
                    }
                    Op::DropUnit(u) => {
                        if u < real.units.len() {
                            real.units[u] = None;
                            model.units[u] = None;
                        }
                    }
                    Op::Disconnect(c) => {
                        if let Some(Some(_)) = real.conns.get(c) {
                            real.conns[c] = None;
                            model.conns[c] = None;
                            for (i, unit) in model.units.iter_mut().enumerate() {
                                if unit.as_ref().is_some_and(|m| m.conn == c) {
                                    *unit = None;
                                    real.units[i] = None;
                                }
                            }
                        }
                    }
                    Op::Tick(ms) => clock += ms,
                }
                let stats = pool.stats();
                prop_assert_eq!(stats.held, model.held());
                prop_assert_eq!(stats.windows, model.windows());
                prop_assert_eq!(stats.evictions, model.evictions);
                prop_assert!(stats.held + stats.windows <= TOTAL, "over the total: {:?}", stats);
                for (c, conn) in real.conns.iter().enumerate() {
                    if let Some((budget, applied)) = conn {
                        let window = model.conns[c].as_ref().unwrap().window;
                        prop_assert_eq!(budget.stats().window, window);
                        prop_assert_eq!(applied.lock().unwrap().last().copied(), Some(window as u64));
                    }
                }
                for (i, unit) in real.units.iter().enumerate() {
                    if let Some(account) = unit {
                        prop_assert_eq!(account.is_evicted(), model.units[i].as_ref().unwrap().evicted, "unit {}", i);
                    }
                }
            }
        }
    }
}
