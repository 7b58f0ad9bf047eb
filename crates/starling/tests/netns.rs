//! A cluster across hosts: one `starling relay` process per network namespace, joined by veth
//! links, with the clients (and a UDP link emulator for delay and loss) in the test's own
//! namespace. Relay A serves the publisher; B dials A; C dials B (cost 1) and, in the
//! triangle, A directly through the emulated link (cost 10, 5 ms each way, 1 % loss); the B–C
//! link is held to 20 Mbit/s by `tc tbf`. Two subscribers on C read the publisher's track
//! through B. The plain chain A–B–C is checked on its own first.
//!
//! Each test breaks the mesh one way — B killed with SIGKILL, the B–C link taken down and
//! brought back, B removed from C's connect_api file — and checks that the subscribers carry
//! on through the direct route within 3 s with every frame exactly once and intact, that each
//! relay pulls the track once, and that the routes converge without a loop.
//!
//! Needs root with the right to create network namespaces; elsewhere (another user, a
//! container without CAP_NET_ADMIN) the tests say so and pass without running.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use bytes::Bytes;
use parking_lot::Mutex;
use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, StartAt, TrackInfo, TrackProducer,
};
use starling_net::{Client, ClientConfig, QuicTransport, TlsVerify};
use starling_netsim::{Shape, UdpLink};
use starling_proto::{Path, Role, Version};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

mod lab;
use lab::{cannot_build_namespaces, Lab, Link};

const BIN: &str = env!("CARGO_BIN_EXE_starling");
const BROADCAST: &str = "room/alice";
const TRACK: &str = "video";
const FRAMES_PER_GROUP: u64 = 10;
const FRAME_INTERVAL: Duration = Duration::from_millis(20);
const PAYLOAD: usize = 64;
/// The longest a subscriber may go without a frame while the mesh repairs itself.
const MAX_GAP: Duration = Duration::from_secs(3);
/// Bound on any one wait.
const STEP: Duration = Duration::from_secs(20);

/// A `starling relay` process in its namespace.
struct RelayProcess {
    name: &'static str,
    child: Child,
    /// Its address on the link to the test's namespace.
    ip: Ipv4Addr,
    log: PathBuf,
}

impl RelayProcess {
    fn start(
        lab: &Lab,
        host: usize,
        name: &'static str,
        ip: Ipv4Addr,
        id: u64,
        extra: &[String],
    ) -> anyhow::Result<RelayProcess> {
        let log = lab.file(&format!("{name}.log"));
        let out = std::fs::File::create(&log)?;
        let mut args: Vec<String> = [
            "netns",
            "exec",
            lab.ns(host),
            BIN,
            "relay",
            "--bind",
            "0.0.0.0:4443",
            "--internal-listen",
            "0.0.0.0:9090",
            "--connect-tls-insecure",
            "--log",
            "info,starling_relay=debug",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push("--cluster-id".into());
        args.push(id.to_string());
        args.extend(extra.iter().cloned());
        let child = Command::new("ip")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()?;
        Ok(RelayProcess {
            name,
            child,
            ip,
            log,
        })
    }

    fn url(&self) -> Url {
        Url::parse(&format!("moqt://{}:4443/", self.ip)).unwrap()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn get(&self, port: u16, path: &str) -> anyhow::Result<String> {
        let url = format!("http://{}:{port}{path}", self.ip);
        let response = reqwest::Client::new()
            .get(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await?;
        ensure!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        Ok(response.text().await?)
    }

    /// A Prometheus sample (`series` with its labels, exactly as exposed).
    async fn metric(&self, series: &str) -> Option<f64> {
        let text = self.get(9090, "/metrics").await.ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The hop chains of every route this relay's status page lists for `path`.
    async fn chains(&self, path: &str) -> anyhow::Result<Vec<Vec<u64>>> {
        let json: serde_json::Value = serde_json::from_str(&self.get(4443, "/status.json").await?)?;
        let list = json["broadcasts"]["list"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(list
            .iter()
            .filter(|b| b["path"] == path)
            .map(|b| {
                b["chain"]
                    .as_array()
                    .map(|c| c.iter().filter_map(|h| h.as_u64()).collect())
                    .unwrap_or_default()
            })
            .collect())
    }

    /// Wait until the relay answers on its internal listener.
    async fn ready(&self) -> anyhow::Result<()> {
        self.until("ready", || async {
            self.get(9090, "/health").await.is_ok()
        })
        .await
    }

    /// Poll `check` (every 50 ms) until it holds, for at most [`STEP`].
    async fn until<F, Fut>(&self, what: &str, mut check: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + STEP;
        while !check().await {
            if Instant::now() > deadline {
                bail!(
                    "relay {}: {what} not reached; log:\n{}",
                    self.name,
                    self.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    async fn metric_is(&self, series: &str, value: f64) -> anyhow::Result<()> {
        self.until(&format!("{series} = {value}"), || async {
            self.metric(series).await == Some(value)
        })
        .await
    }

    fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn connect(
    url: &Url,
    role: Role,
    config: SessionConfig,
) -> anyhow::Result<Session<QuicTransport>> {
    let version = Version::Lite06;
    let client = Client::new(
        ClientConfig::default()
            .with_alpns(&[version.alpn()])
            .with_tls(TlsVerify::Disabled),
    )?;
    let transport = tokio::time::timeout(STEP, client.connect(url))
        .await
        .context("dial timed out")??
        .transport;
    let setup = ClientSetup {
        role: Some(role),
        ..Default::default()
    };
    Ok(
        tokio::time::timeout(STEP, Session::connect(transport, version, setup, config))
            .await
            .context("setup timed out")??,
    )
}

fn payload(group: u64, frame: u64) -> Bytes {
    let mut out = Vec::with_capacity(PAYLOAD);
    out.extend_from_slice(&group.to_be_bytes());
    out.extend_from_slice(&frame.to_be_bytes());
    while out.len() < PAYLOAD {
        out.push((group.wrapping_mul(131) + frame * 7 + out.len() as u64) as u8);
    }
    Bytes::from(out)
}

/// The publisher on A: a group of [`FRAMES_PER_GROUP`] frames every 200 ms until dropped.
struct Publisher {
    _session: Session<QuicTransport>,
    _route: RouteHandle,
    _broadcast: BroadcastProducer,
    task: tokio::task::JoinHandle<()>,
}

impl Publisher {
    async fn start(url: &Url) -> anyhow::Result<Publisher> {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new(Limits::default());
        let track: TrackProducer = broadcast.create_track(TRACK, TrackInfo::default());
        let route = origin.publish(Path::new(BROADCAST)?, broadcast.consume(), Route::local())?;
        let mut config = SessionConfig::new(random_hop());
        config.publish = Some(origin);
        let session = connect(url, Role::Publisher, config).await?;
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(FRAME_INTERVAL);
            for group in 0u64.. {
                let Ok(mut producer) = track.create_group(group) else {
                    return;
                };
                for frame in 0..FRAMES_PER_GROUP {
                    tick.tick().await;
                    let timestamp = (group * FRAMES_PER_GROUP + frame) * 20;
                    if producer
                        .write_frame(Frame {
                            timestamp,
                            payload: payload(group, frame),
                        })
                        .is_err()
                    {
                        return;
                    }
                }
                producer.finish();
            }
        });
        Ok(Publisher {
            _session: session,
            _route: route,
            _broadcast: broadcast,
            task,
        })
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What one subscriber received: frames by (group, frame), how often each came, and the
/// longest silence between two frames.
#[derive(Default)]
struct Received {
    frames: BTreeMap<(u64, u64), u32>,
    corrupt: u64,
    last: Option<Instant>,
    longest_gap: Duration,
}

/// A subscriber on C reading the track from the cache's reach (10 s back).
struct Subscriber {
    _session: Session<QuicTransport>,
    received: Arc<Mutex<Received>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Subscriber {
    async fn start(url: &Url) -> anyhow::Result<Subscriber> {
        let origin = Origin::new();
        let mut config = SessionConfig::new(random_hop());
        config.consume = Some(origin.clone());
        let session = connect(url, Role::Subscriber, config).await?;
        let path = Path::new(BROADCAST)?;
        let interest = origin.interest(Path::empty())?;
        let mut changed = Vec::new();
        let broadcast = loop {
            if let Some(broadcast) = origin.consume(&path, None) {
                break broadcast;
            }
            tokio::time::timeout(STEP, interest.changed(&mut changed))
                .await
                .context("the broadcast is announced on C")?;
        };
        let mut track = broadcast
            .subscribe_track(
                TRACK,
                StartAt {
                    max_age_ms: 10_000,
                    ..Default::default()
                },
            )
            .map_err(|code| anyhow::anyhow!("subscribe: {code:?}"))?;
        let received = Arc::new(Mutex::new(Received::default()));
        let sink = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let group = track.next_group().await;
                let Some(mut group) = group.map_err(|c| anyhow::anyhow!("track ended: {c:?}"))?
                else {
                    return Ok(());
                };
                let sequence = group.sequence();
                let mut index = 0u64;
                while let Some(frame) = group.next_frame().await.map_err(|c| {
                    anyhow::anyhow!("group {sequence} ended at frame {index}: {c:?}")
                })? {
                    let now = Instant::now();
                    let mut r = sink.lock();
                    if frame.payload != payload(sequence, index) {
                        r.corrupt += 1;
                    }
                    *r.frames.entry((sequence, index)).or_default() += 1;
                    if let Some(last) = r.last {
                        r.longest_gap = r.longest_gap.max(now - last);
                    }
                    r.last = Some(now);
                    index += 1;
                }
            }
        });
        Ok(Subscriber {
            _session: session,
            received,
            task,
        })
    }

    fn frames(&self) -> usize {
        self.received.lock().frames.len()
    }

    /// Wait until `more` frames beyond `seen` arrived.
    async fn receives(&self, seen: usize, more: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + STEP;
        while self.frames() < seen + more {
            if self.task.is_finished() {
                bail!("the subscriber stopped after {} frames", self.frames());
            }
            ensure!(
                Instant::now() < deadline,
                "only {} of {} frames arrived",
                self.frames(),
                seen + more
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Every frame from the first received to the last, each exactly once and intact, and
    /// no silence longer than [`MAX_GAP`].
    fn verify(&self, who: &str) -> anyhow::Result<()> {
        let r = self.received.lock();
        ensure!(r.corrupt == 0, "{who}: {} corrupt frames", r.corrupt);
        let duplicated: Vec<_> = r.frames.iter().filter(|(_, n)| **n > 1).collect();
        ensure!(
            duplicated.is_empty(),
            "{who}: duplicated frames {duplicated:?}"
        );
        let (Some(first), Some(last)) = (r.frames.keys().next(), r.frames.keys().last()) else {
            bail!("{who}: nothing received");
        };
        let position = |(g, f): (u64, u64)| g * FRAMES_PER_GROUP + f;
        let expected = position(*last) - position(*first) + 1;
        let missing: Vec<_> = (position(*first)..=position(*last))
            .map(|p| (p / FRAMES_PER_GROUP, p % FRAMES_PER_GROUP))
            .filter(|key| !r.frames.contains_key(key))
            .take(10)
            .collect();
        ensure!(
            missing.is_empty(),
            "{who}: {} of {expected} frames from {first:?} to {last:?}; missing {missing:?}…",
            r.frames.len()
        );
        eprintln!(
            "{who}: {} frames {first:?}..={last:?}, longest silence {:?}",
            r.frames.len(),
            r.longest_gap
        );
        ensure!(
            r.longest_gap < MAX_GAP,
            "{who}: {:?} without a frame",
            r.longest_gap
        );
        Ok(())
    }
}

/// The mesh of one test.
struct Mesh {
    lab: Lab,
    a: RelayProcess,
    b: RelayProcess,
    c: RelayProcess,
    bc: Link,
    _direct: UdpLink,
    publisher: Publisher,
    subscribers: Vec<Subscriber>,
}

const A_ID: u64 = 101;
const B_ID: u64 = 102;
const C_ID: u64 = 103;

/// How C finds its peers.
#[derive(Clone, Copy, PartialEq)]
enum CPeers {
    /// B and the direct route to A, as flags.
    Flags,
    /// The same two, from a connect_api file.
    Api,
    /// B only: a plain chain A–B–C.
    Chain,
}

impl Mesh {
    /// Build the mesh with C's peers found as `peers` says. Waits until both subscribers
    /// receive through B.
    async fn start(peers: CPeers) -> anyhow::Result<Mesh> {
        let mut lab = Lab::new(3)?;
        let ra = lab.link(None, 0)?;
        let rb = lab.link(None, 1)?;
        let rc = lab.link(None, 2)?;
        let ab = lab.link(Some(0), 1)?;
        let bc = lab.link(Some(1), 2)?;
        bc.limit("20mbit")?;
        // C's direct path to A runs through the emulator in this namespace.
        let direct = UdpLink::start(
            SocketAddr::new(IpAddr::V4(rc.a_ip), 0),
            SocketAddr::new(IpAddr::V4(ra.b_ip), 4443),
            7,
        )
        .await?;
        let shape = Shape {
            delay: Duration::from_millis(5),
            loss: 0.01,
        };
        direct.shape(shape, shape);

        let a = RelayProcess::start(&lab, 0, "A", ra.b_ip, A_ID, &[])?;
        let b = RelayProcess::start(
            &lab,
            1,
            "B",
            rb.b_ip,
            B_ID,
            &[
                "--cluster-connect".into(),
                format!("moqt://{}:4443/", ab.a_ip),
            ],
        )?;
        let to_b = format!("moqt://{}:4443/", bc.a_ip);
        let to_a = format!("moqt://{}/?cost=10", direct.local_addr());
        let c_args = match peers {
            CPeers::Api => {
                let file = lab.file("peers.json");
                std::fs::write(&file, serde_json::to_string(&[&to_b, &to_a])?)?;
                vec!["--cluster-connect-api".into(), file.display().to_string()]
            }
            CPeers::Flags => vec![
                "--cluster-connect".into(),
                to_b,
                "--cluster-connect".into(),
                to_a,
            ],
            CPeers::Chain => vec!["--cluster-connect".into(), to_b],
        };
        let links = if peers == CPeers::Chain { 1.0 } else { 2.0 };
        let c = RelayProcess::start(&lab, 2, "C", rc.b_ip, C_ID, &c_args)?;
        for relay in [&a, &b, &c] {
            relay.ready().await?;
        }
        c.metric_is("starling_cluster_peer_links", links).await?;
        b.metric_is("starling_cluster_peer_links", 1.0).await?;

        let publisher = Publisher::start(&a.url()).await?;
        // C's best route is through B: cost 2 against 10.
        c.until("a route through B", || async {
            c.chains(BROADCAST).await.is_ok_and(|chains| {
                chains
                    .first()
                    .is_some_and(|chain| chain.ends_with(&[A_ID, B_ID]))
            })
        })
        .await?;
        let subscribers = vec![
            Subscriber::start(&c.url()).await?,
            Subscriber::start(&c.url()).await?,
        ];
        for subscriber in &subscribers {
            subscriber
                .receives(0, 2 * FRAMES_PER_GROUP as usize)
                .await?;
        }
        Ok(Mesh {
            lab,
            a,
            b,
            c,
            bc,
            _direct: direct,
            publisher,
            subscribers,
        })
    }

    /// One upstream subscription per relay for the one track, however many readers.
    async fn one_upstream_each(&self, relays: &[&RelayProcess]) -> anyhow::Result<()> {
        for relay in relays {
            relay
                .metric_is("starling_upstream_subscriptions", 1.0)
                .await?;
        }
        Ok(())
    }

    /// The subscribers go on: more frames arrive, all of them exactly once and intact.
    async fn subscribers_continue(&self) -> anyhow::Result<()> {
        for subscriber in &self.subscribers {
            let seen = subscriber.frames();
            subscriber
                .receives(seen, 2 * FRAMES_PER_GROUP as usize)
                .await?;
        }
        for (i, subscriber) in self.subscribers.iter().enumerate() {
            subscriber.verify(&format!("subscriber {i}"))?;
        }
        Ok(())
    }

    /// C serves the broadcast through the direct route to A.
    async fn c_routes_direct(&self) -> anyhow::Result<()> {
        self.c
            .until("the direct route only", || async {
                self.c.chains(BROADCAST).await.is_ok_and(|chains| {
                    chains.len() == 1 && chains[0].ends_with(&[A_ID]) && !chains[0].contains(&B_ID)
                })
            })
            .await
    }
}

/// No chain on any relay names a hop twice, or the relay itself.
async fn no_loops(relays: &[(&RelayProcess, u64)]) -> anyhow::Result<()> {
    for (relay, id) in relays {
        for chain in relay.chains(BROADCAST).await? {
            let mut seen = chain.clone();
            seen.sort_unstable();
            seen.dedup();
            ensure!(
                seen.len() == chain.len() && !chain.contains(id),
                "relay {}: looping chain {chain:?}",
                relay.name
            );
        }
    }
    Ok(())
}

/// One mesh at a time: nine relay processes on two cores would time each other out.
static ONE_MESH: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

macro_rules! root_only {
    () => {
        if let Some(why) = cannot_build_namespaces() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

async fn report(result: anyhow::Result<()>, mesh_logs: impl FnOnce() -> String) {
    if let Err(err) = result {
        panic!("{err:#}\n{}", mesh_logs());
    }
}

fn logs(relays: &[&RelayProcess]) -> String {
    relays
        .iter()
        .map(|r| {
            let text = r.log_text();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            format!(
                "--- relay {} (last lines) ---\n{}",
                r.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_relay_chain_carries_the_track_with_one_upstream_per_relay() {
    root_only!();
    let _one = ONE_MESH.lock().await;
    let mesh = Mesh::start(CPeers::Chain).await.expect("mesh");
    let result = async {
        // C's only route names the publisher, then A and B.
        let chains = mesh.c.chains(BROADCAST).await?;
        ensure!(
            chains.len() == 1 && chains[0].ends_with(&[A_ID, B_ID]) && chains[0].len() == 3,
            "C's routes {chains:?}"
        );
        mesh.one_upstream_each(&[&mesh.a, &mesh.b, &mesh.c]).await?;
        mesh.subscribers_continue().await?;
        no_loops(&[(&mesh.a, A_ID), (&mesh.b, B_ID), (&mesh.c, C_ID)]).await
    }
    .await;
    report(result, || logs(&[&mesh.a, &mesh.b, &mesh.c])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_middle_relay_fails_over_to_the_other_route() {
    root_only!();
    let _one = ONE_MESH.lock().await;
    let mut mesh = Mesh::start(CPeers::Flags).await.expect("mesh");
    let result = async {
        mesh.one_upstream_each(&[&mesh.a, &mesh.b, &mesh.c]).await?;
        mesh.b.kill();
        mesh.c_routes_direct().await?;
        mesh.subscribers_continue().await?;
        mesh.one_upstream_each(&[&mesh.a, &mesh.c]).await?;
        mesh.c.metric_is("starling_failovers_total", 1.0).await?;
        no_loops(&[(&mesh.a, A_ID), (&mesh.c, C_ID)]).await
    }
    .await;
    report(result, || logs(&[&mesh.a, &mesh.b, &mesh.c])).await;
    drop(mesh.publisher);
    drop(mesh.lab);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_link_heals_and_routes_converge() {
    root_only!();
    let _one = ONE_MESH.lock().await;
    let mesh = Mesh::start(CPeers::Flags).await.expect("mesh");
    let result = async {
        mesh.bc.set_up(false)?;
        mesh.c_routes_direct().await?;
        mesh.subscribers_continue().await?;
        no_loops(&[(&mesh.a, A_ID), (&mesh.b, B_ID), (&mesh.c, C_ID)]).await?;
        mesh.bc.set_up(true)?;
        // C redials B and the cheaper route through it is the best again.
        mesh.c.metric_is("starling_cluster_peer_links", 2.0).await?;
        mesh.c
            .until("the route through B again", || async {
                mesh.c.chains(BROADCAST).await.is_ok_and(|chains| {
                    chains
                        .first()
                        .is_some_and(|chain| chain.ends_with(&[A_ID, B_ID]))
                })
            })
            .await?;
        mesh.subscribers_continue().await?;
        mesh.one_upstream_each(&[&mesh.a, &mesh.c]).await?;
        no_loops(&[(&mesh.a, A_ID), (&mesh.b, B_ID), (&mesh.c, C_ID)]).await
    }
    .await;
    report(result, || logs(&[&mesh.a, &mesh.b, &mesh.c])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_removed_from_the_connect_api_file_is_dropped() {
    root_only!();
    let _one = ONE_MESH.lock().await;
    let mesh = Mesh::start(CPeers::Api).await.expect("mesh");
    let result = async {
        let file = mesh.lab.file("peers.json");
        let remaining = std::fs::read_to_string(&file)?;
        let peers: Vec<String> = serde_json::from_str(&remaining)?;
        std::fs::write(&file, serde_json::to_string(&peers[1..])?)?;
        mesh.c.metric_is("starling_cluster_peer_links", 1.0).await?;
        mesh.c_routes_direct().await?;
        mesh.subscribers_continue().await?;
        mesh.one_upstream_each(&[&mesh.a, &mesh.c]).await
    }
    .await;
    report(result, || logs(&[&mesh.a, &mesh.b, &mesh.c])).await;
}
