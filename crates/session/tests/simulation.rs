//! Deterministic simulation of a relay mesh: seeded topologies, link costs and link delays,
//! and random churn (publishers coming and going, relays crashing and restarting, links
//! partitioned and healed), all over the in-memory transport on a paused clock.
//!
//! After every event the mesh is left to settle, then checked:
//! - no route anywhere names a hop twice or the relay holding it (no loop);
//! - every live broadcast is routed at every relay connected to its publisher, and at no
//!   other relay (nothing stale survives a crash or a partition);
//! - each relay's route table equals a reference computed from scratch (a path-vector
//!   fixpoint of the same ranking: cost, then hop count, then the FNV key);
//! - every relay reads every broadcast it can reach, with exactly one upstream subscription
//!   per broadcast (its readers and the peers pulling through it share it), and a group
//!   published after the event reaches every one of them.
//!
//! `SIM_SEEDS` sets how many seeds run (default 3000) and `SIM_SEED` replays one; a failure
//! names its seed and the event log that led to it.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use starling_model::{
    fnv_key, BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, StartAt, TrackConsumer,
    TrackInfo, TrackProducer,
};
use starling_proto::{Path, RouteCost, SessionCode, Version};
use starling_session::{Accepting, ClientSetup, Session, SessionConfig};
use starling_transport::mem::{pair, MemRecv, MemSend, MemTransport};
use starling_transport::{RecvStream, Transport, TransportError};

const TRACK: &str = "t";

/// Route tables: for each (relay, path), its learned routes as (chain, cost).
type Table = BTreeMap<(usize, String), BTreeSet<(Vec<u64>, RouteCost)>>;
/// Long enough for every hold, redial-free handshake and delayed read to finish.
const SETTLE: Duration = Duration::from_secs(5);

// ------------------------------------------------------------------ a transport with delay

/// The in-memory transport with a one-way delay on every read.
#[derive(Clone)]
struct Laggy {
    inner: MemTransport,
    delay: Duration,
}

struct LaggyRecv {
    inner: MemRecv,
    delay: Duration,
}

impl RecvStream for LaggyRecv {
    async fn read(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        let chunk = self.inner.read(max).await;
        tokio::time::sleep(self.delay).await;
        chunk
    }

    fn stop(&mut self, code: u32) {
        self.inner.stop(code)
    }
}

impl Laggy {
    fn recv(&self, inner: MemRecv) -> LaggyRecv {
        LaggyRecv {
            inner,
            delay: self.delay,
        }
    }
}

impl Transport for Laggy {
    type Send = MemSend;
    type Recv = LaggyRecv;

    async fn open_bi(&self) -> Result<(MemSend, LaggyRecv), TransportError> {
        let (send, recv) = self.inner.open_bi().await?;
        Ok((send, self.recv(recv)))
    }

    async fn open_uni(&self) -> Result<MemSend, TransportError> {
        self.inner.open_uni().await
    }

    // Accepting must stay cancel-safe (sessions select over both accepts), so the delay
    // falls on the stream's reads, never on the accept.
    async fn accept_bi(&self) -> Result<(MemSend, LaggyRecv), TransportError> {
        let (send, recv) = self.inner.accept_bi().await?;
        Ok((send, self.recv(recv)))
    }

    async fn accept_uni(&self) -> Result<LaggyRecv, TransportError> {
        let recv = self.inner.accept_uni().await?;
        Ok(self.recv(recv))
    }

    fn close(&self, code: u32, reason: &str) {
        self.inner.close(code, reason)
    }

    fn closed(&self) -> impl Future<Output = TransportError> + Send {
        self.inner.closed()
    }
}

// --------------------------------------------------------------------------------- the mesh

struct Publisher {
    _broadcast: BroadcastProducer,
    _route: RouteHandle,
    track: TrackProducer,
}

struct Node {
    hop: u64,
    origin: Origin,
    alive: bool,
    publishers: BTreeMap<String, Publisher>,
    readers: BTreeMap<String, TrackConsumer>,
}

struct Edge {
    a: usize,
    b: usize,
    cost: u64,
    delay: Duration,
    up: bool,
    /// A's dialing session and B's accepting one, while connected.
    sessions: Option<(Session<Laggy>, Session<Laggy>)>,
}

struct Mesh {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    next_broadcast: u32,
    /// Group sequence the next check publishes.
    round: u64,
    log: Vec<String>,
}

fn node(i: usize) -> Node {
    Node {
        hop: 1000 + i as u64,
        origin: Origin::new(),
        alive: true,
        publishers: BTreeMap::new(),
        readers: BTreeMap::new(),
    }
}

fn peer_config(node: &Node, cost: u64) -> SessionConfig {
    let mut config = SessionConfig::new(node.hop);
    config.publish = Some(node.origin.clone());
    config.consume = Some(node.origin.clone());
    config.cluster_peer = true;
    config.link_cost = Some(cost);
    config
}

impl Mesh {
    /// A connected random topology of 3 to 6 relays, with one to three publishers.
    async fn build(rng: &mut StdRng) -> Mesh {
        let n = rng.gen_range(3..=6);
        let mut mesh = Mesh {
            nodes: (0..n).map(node).collect(),
            edges: Vec::new(),
            next_broadcast: 0,
            round: 0,
            log: Vec::new(),
        };
        let mut pairs = BTreeSet::new();
        for b in 1..n {
            pairs.insert((rng.gen_range(0..b), b)); // a spanning tree
        }
        for _ in 0..rng.gen_range(0..n) {
            let (a, b) = (rng.gen_range(0..n), rng.gen_range(0..n));
            if a != b {
                pairs.insert((a.min(b), a.max(b)));
            }
        }
        for (a, b) in pairs {
            mesh.edges.push(Edge {
                a,
                b,
                cost: rng.gen_range(1..=4),
                delay: Duration::from_millis(rng.gen_range(0..=40)),
                up: true,
                sessions: None,
            });
        }
        mesh.log.push(format!(
            "{n} relays, links {:?}",
            mesh.edges
                .iter()
                .map(|e| (e.a, e.b, e.cost))
                .collect::<Vec<_>>()
        ));
        for e in 0..mesh.edges.len() {
            mesh.connect(e).await;
        }
        for _ in 0..rng.gen_range(1..=3) {
            let at = rng.gen_range(0..n);
            mesh.publish(at);
        }
        mesh
    }

    async fn connect(&mut self, e: usize) {
        let edge = &self.edges[e];
        let (a, b) = (&self.nodes[edge.a], &self.nodes[edge.b]);
        if !(edge.up && a.alive && b.alive) || edge.sessions.is_some() {
            return;
        }
        let (dial, accept) = pair();
        let dial = Laggy {
            inner: dial,
            delay: edge.delay,
        };
        let accept = Laggy {
            inner: accept,
            delay: edge.delay,
        };
        let (a_config, b_config) = (peer_config(a, edge.cost), peer_config(b, edge.cost));
        let accepting = tokio::spawn(async move {
            let accepting = Accepting::new(accept, Version::Lite06, SETTLE).await?;
            accepting.start(b_config).await
        });
        let dialed =
            Session::connect(dial, Version::Lite06, ClientSetup::default(), a_config).await;
        let accepted = accepting.await.expect("accept task");
        match (dialed, accepted) {
            (Ok(dialed), Ok(accepted)) => self.edges[e].sessions = Some((dialed, accepted)),
            (dialed, accepted) => panic!(
                "link {e} did not connect: {:?} / {:?}",
                dialed.err(),
                accepted.err()
            ),
        }
    }

    fn disconnect(&mut self, e: usize) {
        if let Some((dialed, _accepted)) = self.edges[e].sessions.take() {
            dialed.close(SessionCode::Internal, "simulated failure");
        }
    }

    fn publish(&mut self, at: usize) {
        let name = format!("b{}", self.next_broadcast);
        self.next_broadcast += 1;
        let node = &mut self.nodes[at];
        let broadcast = BroadcastProducer::new(Limits::default());
        let track = broadcast.create_track(TRACK, TrackInfo::default());
        let route = node
            .origin
            .publish(
                Path::new(&name).unwrap(),
                broadcast.consume(),
                Route::local(),
            )
            .unwrap();
        node.publishers.insert(
            name.clone(),
            Publisher {
                _broadcast: broadcast,
                _route: route,
                track,
            },
        );
        self.log.push(format!("publish {name} at {at}"));
    }

    /// One random event.
    async fn churn(&mut self, rng: &mut StdRng) {
        let n = self.nodes.len();
        match rng.gen_range(0..6) {
            0 => self.publish(rng.gen_range(0..n)),
            1 => {
                let live: Vec<(usize, String)> = self
                    .nodes
                    .iter()
                    .enumerate()
                    .flat_map(|(i, node)| node.publishers.keys().map(move |k| (i, k.clone())))
                    .collect();
                if !live.is_empty() {
                    let (at, name) = live[rng.gen_range(0..live.len())].clone();
                    self.nodes[at].publishers.remove(&name);
                    self.log.push(format!("unpublish {name} at {at}"));
                }
            }
            2 => {
                let at = rng.gen_range(0..n);
                if self.nodes[at].alive {
                    for e in 0..self.edges.len() {
                        if self.edges[e].a == at || self.edges[e].b == at {
                            self.disconnect(e);
                        }
                    }
                    // Its memory is gone: routes, caches, publishers and readers.
                    self.nodes[at] = Node {
                        alive: false,
                        ..node(at)
                    };
                    self.log.push(format!("crash {at}"));
                }
            }
            3 => {
                let at = rng.gen_range(0..n);
                if !self.nodes[at].alive {
                    self.nodes[at].alive = true;
                    self.log.push(format!("restart {at}"));
                    for e in 0..self.edges.len() {
                        if self.edges[e].a == at || self.edges[e].b == at {
                            self.connect(e).await;
                        }
                    }
                }
            }
            4 => {
                let e = rng.gen_range(0..self.edges.len());
                if self.edges[e].up {
                    self.edges[e].up = false;
                    self.disconnect(e);
                    self.log.push(format!("partition link {e}"));
                }
            }
            _ => {
                let e = rng.gen_range(0..self.edges.len());
                if !self.edges[e].up {
                    self.edges[e].up = true;
                    self.log.push(format!("heal link {e}"));
                    self.connect(e).await;
                }
            }
        }
    }

    /// Relays connected to `from` through live links (itself included).
    fn component(&self, from: usize) -> BTreeSet<usize> {
        let mut seen = BTreeSet::from([from]);
        let mut stack = vec![from];
        while let Some(at) = stack.pop() {
            for edge in self.edges.iter().filter(|e| e.sessions.is_some()) {
                for (x, y) in [(edge.a, edge.b), (edge.b, edge.a)] {
                    if x == at && seen.insert(y) {
                        stack.push(y);
                    }
                }
            }
        }
        seen
    }

    /// Every live broadcast and the relay publishing it.
    fn live(&self) -> Vec<(String, usize)> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.alive)
            .flat_map(|(i, node)| node.publishers.keys().map(move |k| (k.clone(), i)))
            .collect()
    }

    /// Every path any relay has ever been told of.
    fn all_paths(&self) -> Vec<String> {
        (0..self.next_broadcast).map(|i| format!("b{i}")).collect()
    }

    // ------------------------------------------------------------------------ reference

    /// The converged route tables, from scratch: for each relay and path, the routes its
    /// neighbours announce (each neighbour's best route that avoids the relay), as (chain,
    /// cost), iterated to the fixpoint.
    fn reference(&self) -> Table {
        let live = self.live();
        let up: Vec<&Edge> = self.edges.iter().filter(|e| e.sessions.is_some()).collect();
        let mut table: Table = BTreeMap::new();
        let best_avoiding = |table: &Table, at: usize, path: &str, avoid: u64| {
            if self.nodes[at].publishers.contains_key(path) {
                return Some((Vec::new(), RouteCost { warm: 0, cold: 0 }));
            }
            table
                .get(&(at, path.to_string()))?
                .iter()
                .filter(|(chain, _)| !chain.contains(&avoid))
                .min_by_key(|(chain, cost)| rank(path, chain, *cost))
                .cloned()
        };
        for _ in 0..64 {
            let mut next: Table = BTreeMap::new();
            for (path, _) in &live {
                for edge in &up {
                    for (at, from) in [(edge.a, edge.b), (edge.b, edge.a)] {
                        let me = self.nodes[at].hop;
                        let Some((mut chain, cost)) = best_avoiding(&table, from, path, me) else {
                            continue;
                        };
                        chain.push(self.nodes[from].hop);
                        if chain.contains(&me) || chain.len() > starling_proto::limits::MAX_HOPS {
                            continue;
                        }
                        next.entry((at, path.clone()))
                            .or_default()
                            .insert((chain, cost.charged(edge.cost)));
                    }
                }
            }
            if next == table {
                return table;
            }
            table = next;
        }
        panic!("the reference did not converge");
    }

    // ---------------------------------------------------------------------------- checks

    /// Give every relay a reader of every broadcast it can reach (replacing ended ones).
    fn read_everything(&mut self) {
        let live = self.live();
        for at in 0..self.nodes.len() {
            if !self.nodes[at].alive {
                continue;
            }
            let reach = self.component(at);
            let node = &mut self.nodes[at];
            node.readers
                .retain(|name, track| !track.is_closed() && live.iter().any(|(n, _)| n == name));
            for (name, publisher) in &live {
                if *publisher == at || !reach.contains(publisher) {
                    continue;
                }
                if node.readers.contains_key(name) {
                    continue;
                }
                let path = Path::new(name).unwrap();
                let Some(broadcast) = node.origin.consume(&path, None) else {
                    continue; // checked below
                };
                if let Ok(track) = broadcast.subscribe_track(TRACK, StartAt::default()) {
                    node.readers.insert(name.clone(), track);
                }
            }
        }
    }

    fn check(&self) -> Result<(), String> {
        let live = self.live();
        let reference = self.reference();
        for (at, node) in self.nodes.iter().enumerate() {
            if !node.alive {
                continue;
            }
            let reach = self.component(at);
            for path in self.all_paths() {
                let routes = node.origin.routes(&Path::new(&path).unwrap());
                for route in &routes {
                    let mut hops = route.hops.to_vec();
                    hops.sort_unstable();
                    hops.dedup();
                    if hops.len() != route.hops.len() || route.hops.contains(&node.hop) {
                        return Err(format!(
                            "relay {at}: {path} has a looping chain {:?}",
                            route.hops
                        ));
                    }
                }
                let publisher = live.iter().find(|(n, _)| *n == path).map(|(_, p)| *p);
                let reachable = publisher.is_some_and(|p| reach.contains(&p));
                let routed = node
                    .origin
                    .route(&Path::new(&path).unwrap(), None)
                    .is_some();
                if reachable != routed {
                    return Err(format!(
                        "relay {at}: {path} routed {routed}, reachable {reachable} (publisher {publisher:?})"
                    ));
                }
                let learned: BTreeSet<(Vec<u64>, RouteCost)> = routes
                    .iter()
                    .filter(|r| !r.hops.is_empty())
                    .map(|r| (r.hops.to_vec(), r.cost))
                    .collect();
                let expected = reference
                    .get(&(at, path.clone()))
                    .cloned()
                    .unwrap_or_default();
                if learned != expected {
                    return Err(format!(
                        "relay {at}: {path} routes {learned:?}, reference {expected:?}"
                    ));
                }
            }
            // One upstream per broadcast read here, shared by local readers and peers.
            let upstream: usize = self
                .edges
                .iter()
                .filter_map(|e| {
                    let (dialed, accepted) = e.sessions.as_ref()?;
                    Some(
                        if e.a == at { dialed.upstream() } else { 0 }
                            + if e.b == at { accepted.upstream() } else { 0 },
                    )
                })
                .sum();
            let remote = live
                .iter()
                .filter(|(_, p)| *p != at && reach.contains(p))
                .count();
            if upstream != remote || node.readers.len() != remote {
                let readers: Vec<String> = node
                    .readers
                    .iter()
                    .map(|(name, track)| format!("{name}: {:?}", track.stats()))
                    .collect();
                return Err(format!(
                    "relay {at}: {upstream} upstream subscriptions and {} readers for {remote} reachable broadcasts; readers {readers:?}",
                    node.readers.len()
                ));
            }
        }
        Ok(())
    }

    /// Publish one group on every live broadcast.
    fn write_round(&mut self) {
        let round = self.round;
        self.round += 1;
        for node in self.nodes.iter().filter(|n| n.alive) {
            for publisher in node.publishers.values() {
                // A publisher that came later starts at a later group; sequence it by round.
                if let Ok(mut group) = publisher.track.create_group(round) {
                    let _ = group.write_frame(Frame {
                        timestamp: round * 1000,
                        payload: Bytes::from(format!("r{round}")),
                    });
                    group.finish();
                }
            }
        }
    }

    /// The group of the last round reached every reader.
    fn check_delivery(&self) -> Result<(), String> {
        let round = self.round - 1;
        for (at, node) in self.nodes.iter().enumerate() {
            for (name, track) in &node.readers {
                if track.latest_sequence() != Some(round) {
                    return Err(format!(
                        "relay {at}: {name} has group {:?}, not {round}",
                        track.latest_sequence()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Settle, read everything, settle, check tables, publish, settle, check delivery.
    async fn settle_and_check(&mut self) -> Result<(), String> {
        tokio::time::sleep(SETTLE).await;
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!("STEP {:?}", self.log.last());
        }
        self.read_everything();
        tokio::time::sleep(SETTLE).await;
        self.check()?;
        self.write_round();
        tokio::time::sleep(SETTLE).await;
        self.check_delivery()
    }
}

/// The ranking the relays use, as a sortable key (published-here routes never reach it).
fn rank(path: &str, chain: &[u64], cost: RouteCost) -> (bool, u64, u64, usize, u64) {
    (
        chain.contains(&0),
        cost.warm,
        cost.cold,
        chain.len(),
        fnv_key(&Path::new(path).unwrap(), chain),
    )
}

fn run_seed(seed: u64) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut mesh = Mesh::build(&mut rng).await;
        let result = async {
            mesh.settle_and_check().await?;
            for _ in 0..rng.gen_range(4..=8) {
                mesh.churn(&mut rng).await;
                mesh.settle_and_check().await?;
            }
            Ok(())
        }
        .await;
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!("events: {}", mesh.log.join("; "));
            for (i, n) in mesh.nodes.iter().enumerate() {
                eprintln!(
                    "relay {i}: alive {}, reading {:?}, round {}",
                    n.alive,
                    n.readers.keys().collect::<Vec<_>>(),
                    mesh.round
                );
            }
        }
        result.map_err(|err: String| format!("{err}\nevents: {}", mesh.log.join("; ")))
    })
}

#[test]
fn seeded_meshes_converge_loop_free_with_one_upstream_per_track() {
    if let Ok(seed) = std::env::var("SIM_SEED") {
        let seed: u64 = seed.parse().expect("SIM_SEED is a number");
        if let Err(err) = run_seed(seed) {
            panic!("seed {seed}: {err}");
        }
        return;
    }
    let seeds: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    for seed in 0..seeds {
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!("SEED {seed}");
        }
        if let Err(err) = run_seed(seed) {
            panic!("seed {seed} failed (replay: SIM_SEED={seed}): {err}");
        }
    }
}
