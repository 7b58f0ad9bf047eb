//! Random operations on an origin (publish, update, unpublish, interests, lookups with split
//! horizon) against a brute-force reference model, checked after every step.

mod common;

use common::origin::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Context;

use futures::task::noop_waker;
use proptest::prelude::*;
use starling_model::{BroadcastConsumer, BroadcastProducer, Interest, Origin, Route};
use starling_proto::Path;

const PATHS: &[&str] = &[
    "a", "a/b", "a/bc", "a/b/c", "ab", "room", "roomy/a", "room/x", "z/y/x",
];
const PREFIXES: &[&str] = &["", "a", "a/b", "ab", "room", "roo", "z/y", "a/b/c/d"];
const BROADCASTS: usize = 4;
const HOP_IDS: u64 = 4;

#[derive(Clone, Debug)]
enum Op {
    Publish {
        path: usize,
        broadcast: usize,
        warm: u64,
        cold: u64,
        hops: Vec<u64>,
    },
    Unpublish(usize),
    UnpublishAll(Vec<usize>),
    Update {
        handle: usize,
        warm: u64,
        cold: u64,
        hops: Vec<u64>,
    },
    /// Close a broadcast (a fresh one takes its slot) and touch the paths it was published at.
    Close(usize),
    Touch(usize),
    NewInterest(usize),
    DropInterest(usize),
    Drain(usize),
}

fn hops() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(1..=HOP_IDS, 0..3)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..PATHS.len(), 0..BROADCASTS, 0..3u64, 0..3u64, hops()).prop_map(
            |(path, broadcast, warm, cold, hops)| Op::Publish { path, broadcast, warm, cold, hops }
        ),
        3 => any::<usize>().prop_map(Op::Unpublish),
        1 => proptest::collection::vec(any::<usize>(), 0..4).prop_map(Op::UnpublishAll),
        3 => (any::<usize>(), 0..3u64, 0..3u64, hops()).prop_map(
            |(handle, warm, cold, hops)| Op::Update { handle, warm, cold, hops }
        ),
        1 => (0..BROADCASTS).prop_map(Op::Close),
        1 => (0..PATHS.len()).prop_map(Op::Touch),
        2 => (0..PREFIXES.len()).prop_map(Op::NewInterest),
        1 => any::<usize>().prop_map(Op::DropInterest),
        3 => any::<usize>().prop_map(Op::Drain),
    ]
}

struct RefRoute {
    /// Publish order: higher is newer.
    order: u64,
    path: Path,
    broadcast: BroadcastConsumer,
    closed: Arc<AtomicBool>,
    route: Route,
}

struct RefInterest {
    prefix: Path,
    pending: BTreeSet<Path>,
    real: Interest,
}

struct Model {
    origin: Origin,
    /// Live broadcast per slot, with its reference "closed" flag.
    broadcasts: Vec<(BroadcastProducer, Arc<AtomicBool>)>,
    /// Producers of closed broadcasts are kept so nothing else changes under us.
    retired: Vec<BroadcastProducer>,
    /// Handles in the same order as `routes`.
    handles: Vec<starling_model::RouteHandle>,
    routes: Vec<RefRoute>,
    interests: Vec<RefInterest>,
    next_order: u64,
}

impl Model {
    fn new() -> Self {
        Model {
            origin: Origin::new(),
            broadcasts: (0..BROADCASTS)
                .map(|_| (broadcast(), Arc::new(AtomicBool::new(false))))
                .collect(),
            retired: Vec::new(),
            handles: Vec::new(),
            routes: Vec::new(),
            interests: Vec::new(),
            next_order: 0,
        }
    }

    fn changed(&mut self, path: &Path) {
        for interest in &mut self.interests {
            if path.has_prefix(&interest.prefix) {
                interest.pending.insert(path.clone());
            }
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Publish {
                path,
                broadcast,
                warm,
                cold,
                hops,
            } => {
                let path = p(PATHS[path]);
                let (producer, closed) = &self.broadcasts[broadcast];
                let r = route(warm, cold, &hops);
                let handle = self
                    .origin
                    .publish(path.clone(), producer.consume(), r.clone())
                    .unwrap();
                self.handles.push(handle);
                self.routes.push(RefRoute {
                    order: self.next_order,
                    path: path.clone(),
                    broadcast: producer.consume(),
                    closed: closed.clone(),
                    route: r,
                });
                self.next_order += 1;
                self.changed(&path);
            }
            Op::Unpublish(i) => {
                if self.handles.is_empty() {
                    return;
                }
                let i = i % self.handles.len();
                drop(self.handles.remove(i));
                let gone = self.routes.remove(i);
                self.changed(&gone.path);
            }
            Op::UnpublishAll(picks) => {
                let mut idx: Vec<usize> = if self.handles.is_empty() {
                    Vec::new()
                } else {
                    picks.iter().map(|i| i % self.handles.len()).collect()
                };
                idx.sort_unstable();
                idx.dedup();
                let mut batch = Vec::new();
                for &i in idx.iter().rev() {
                    batch.push(self.handles.remove(i));
                    let gone = self.routes.remove(i);
                    self.changed(&gone.path);
                }
                self.origin.unpublish_all(batch);
            }
            Op::Update {
                handle,
                warm,
                cold,
                hops,
            } => {
                if self.handles.is_empty() {
                    return;
                }
                let i = handle % self.handles.len();
                let r = route(warm, cold, &hops);
                self.origin.update_route(&self.handles[i], r.clone());
                self.routes[i].route = r;
                let path = self.routes[i].path.clone();
                self.changed(&path);
            }
            Op::Close(slot) => {
                let fresh = (broadcast(), Arc::new(AtomicBool::new(false)));
                let (old, closed) = std::mem::replace(&mut self.broadcasts[slot], fresh);
                old.close();
                closed.store(true, Ordering::SeqCst);
                let paths: BTreeSet<Path> = self
                    .routes
                    .iter()
                    .filter(|r| r.broadcast.same(&old.consume()))
                    .map(|r| r.path.clone())
                    .collect();
                for path in paths {
                    self.origin.touch(&path);
                    self.changed(&path);
                }
                self.retired.push(old);
            }
            Op::Touch(path) => {
                let path = p(PATHS[path]);
                self.origin.touch(&path);
                self.changed(&path);
            }
            Op::NewInterest(prefix) => {
                let prefix = p(PREFIXES[prefix]);
                let real = self.origin.interest(prefix.clone()).unwrap();
                self.interests.push(RefInterest {
                    prefix,
                    pending: BTreeSet::new(),
                    real,
                });
            }
            Op::DropInterest(i) => {
                if !self.interests.is_empty() {
                    let i = i % self.interests.len();
                    self.interests.remove(i);
                }
            }
            Op::Drain(i) => {
                if self.interests.is_empty() {
                    return;
                }
                let i = i % self.interests.len();
                self.check_drain(i);
            }
        }
    }

    fn check_drain(&mut self, i: usize) {
        let interest = &mut self.interests[i];
        let w = noop_waker();
        let mut cx = Context::from_waker(&w);
        let mut out = Vec::new();
        let ready = interest.real.poll_changed(&mut cx, &mut out).is_ready();
        let expected = std::mem::take(&mut interest.pending);
        assert_eq!(
            ready,
            !expected.is_empty(),
            "interest {:?}: ready={ready} but expected {expected:?}",
            interest.prefix
        );
        let got: BTreeSet<Path> = out.iter().cloned().collect();
        assert_eq!(got.len(), out.len(), "duplicate paths reported: {out:?}");
        assert_eq!(got, expected, "interest {:?}", interest.prefix);
    }

    fn ref_best(&self, path: &Path, exclude: Option<u64>) -> Option<&RefRoute> {
        self.routes
            .iter()
            .filter(|r| &r.path == path)
            .filter(|r| match exclude {
                Some(h) if h != 0 => !r.route.hops.contains(&h),
                _ => true,
            })
            .filter(|r| !r.closed.load(Ordering::SeqCst))
            .min_by_key(|r| {
                (
                    r.route.hops.contains(&0),
                    r.route.cost.warm,
                    r.route.cost.cold,
                    r.route.hops.len(),
                    std::cmp::Reverse(r.order),
                )
            })
    }

    fn check_tables(&self) {
        let excludes = std::iter::once(None).chain((0..=HOP_IDS).map(Some));
        let distinct: BTreeSet<&Path> = self.routes.iter().map(|r| &r.path).collect();
        assert_eq!(self.origin.len(), distinct.len());
        for exclude in excludes {
            for path in PATHS {
                let path = p(path);
                let got = self.origin.route(&path, exclude);
                let want = self.ref_best(&path, exclude);
                match (got, want) {
                    (None, None) => {}
                    (Some(got), Some(want)) => {
                        assert_eq!(got.path, path);
                        assert!(got.broadcast.same(&want.broadcast), "{path:?} {exclude:?}");
                        assert_eq!(got.route.cost, want.route.cost, "{path:?} {exclude:?}");
                        assert_eq!(got.route.hops, want.route.hops, "{path:?} {exclude:?}");
                    }
                    (got, want) => panic!(
                        "route({path:?}, {exclude:?}): got {:?}, want {:?}",
                        got.map(|a| a.route),
                        want.map(|r| r.route.clone())
                    ),
                }
                let consumed = self.origin.consume(&path, exclude);
                assert_eq!(
                    consumed.map(|c| want.is_some_and(|w| c.same(&w.broadcast))),
                    want.map(|_| true)
                );
            }
            for prefix in PREFIXES {
                let prefix = p(prefix);
                let got = self.origin.announced(&prefix, exclude);
                let want: Vec<&RefRoute> = distinct
                    .iter()
                    .filter(|path| path.has_prefix(&prefix))
                    .filter_map(|path| self.ref_best(path, exclude))
                    .collect();
                assert_eq!(
                    got.iter().map(|a| &a.path).collect::<Vec<_>>(),
                    want.iter().map(|r| &r.path).collect::<Vec<_>>(),
                    "announced({prefix:?}, {exclude:?})"
                );
                for (g, w) in got.iter().zip(&want) {
                    assert!(g.broadcast.same(&w.broadcast));
                    assert_eq!(g.route.cost, w.route.cost);
                    assert_eq!(g.route.hops, w.route.hops);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn route_table_matches_reference(ops in proptest::collection::vec(op(), 1..60)) {
        let mut model = Model::new();
        for op in ops {
            model.apply(op);
            model.check_tables();
        }
        // Every interest still holds exactly what changed under it since its last drain.
        for i in 0..model.interests.len() {
            model.check_drain(i);
        }
        // Dropping every handle empties the table.
        model.handles.clear();
        model.routes.clear();
        prop_assert!(model.origin.is_empty());
        model.check_tables();
    }
}
