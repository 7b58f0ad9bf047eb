//! Shared interop harness: test cases, payload plans, in-process Starling and moq-dev peers, relays.
//!
//! Every scenario follows one protocol so that late-join semantics never decide the outcome:
//! the publisher writes a one-frame "sync" group 0, waits until every subscriber has been handed
//! group 0 (a subscriber starting at the live edge gets the latest group first, and group 0 stays
//! the latest until group 1 exists), then writes data groups 1..=N. Before writing group g+1 it
//! waits until every subscriber has read group g to its end, so every subscriber must see groups
//! 1..=N, each intact, in exactly that order, whatever its Max Age (a live-edge subscriber may
//! legitimately abandon a group once a newer one starts). All waits are on events, each bounded
//! by [`STEP`].

#![allow(dead_code)] // each test binary uses a different subset of the helpers

use std::future::Future;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context};
use bytes::Bytes;
use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, StartAt, TrackInfo, TrackProducer,
};
use starling_net::{Client, ClientConfig, QuicTransport, TlsVerify};
use starling_proto::{Path, Protocol, Role, SessionCode, Version};
use starling_relay::{Relay, RelayConfig, TlsSource};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use starling_transport::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use url::Url;

/// The broadcast every scenario publishes.
pub const BROADCAST: &str = "interop/test";
/// The track every scenario publishes.
pub const TRACK: &str = "data";
/// Bound on any single awaited event (connect, announcement, group, frame, readiness).
pub const STEP: Duration = Duration::from_secs(10);
/// Bound on a whole test: longer than the steps on any path through it, so a stuck step fails
/// with its own message (and the relay logs) before the budget does.
pub const BUDGET: Duration = Duration::from_secs(60);
/// Publisher max age and subscriber max age: far beyond the test's media time span.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// Payload of the sync group's only frame.
pub const SYNC: &[u8] = b"sync";

/// Which session binding a test dials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// Raw QUIC with the moq-lite ALPN (`moqt://`).
    Quic,
    /// WebTransport over HTTP/3 (`https://`).
    WebTransport,
}

/// One cell of the {version} x {binding} matrix.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub version: Protocol,
    pub binding: Binding,
}

impl Case {
    pub fn new(version: impl Into<Protocol>, binding: Binding) -> Self {
        Case {
            version: version.into(),
            binding,
        }
    }

    /// Whether frame timestamps survive this protocol: lite from 05, the drafts from 17
    /// (which declare a timescale; before, moq-net stamps objects on arrival).
    pub fn carries_timestamps(&self) -> bool {
        match self.version {
            Protocol::Lite(v) => v.has_frame_timestamps(),
            Protocol::Ietf(d) => d.writes_track_properties(),
        }
    }

    /// The URL a client dials for a relay on `port` of 127.0.0.1.
    pub fn url(&self, port: u16) -> Url {
        let scheme = match self.binding {
            Binding::Quic => "moqt",
            Binding::WebTransport => "https",
        };
        Url::parse(&format!("{scheme}://127.0.0.1:{port}/")).expect("valid url")
    }

    /// The same version in moq-net's terms.
    pub fn moq_version(&self) -> moq_net::Version {
        self.version
            .name()
            .parse()
            .expect("moq-net knows every version Starling speaks")
    }
}

/// Logs of the in-process relays to the test's output (shown when it fails), filtered by
/// `RUST_LOG` (default `warn`).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// Run one scenario under the whole-test budget; panics with the error chain on failure.
pub async fn run<F: Future<Output = anyhow::Result<()>>>(case: Case, scenario: F) {
    init_tracing();
    let started = Instant::now();
    match tokio::time::timeout(BUDGET, scenario).await {
        Ok(Ok(())) => {
            tracing::info!(?case, elapsed = ?started.elapsed(), "scenario passed");
        }
        Ok(Err(err)) => panic!("{case:?} failed after {:?}: {err:#}", started.elapsed()),
        Err(_) => panic!("{case:?} exceeded the {BUDGET:?} test budget"),
    }
}

/// Dial with `attempt` for at most [`STEP`]: a clean refusal by the relay's admission
/// (`refusal` tells it apart, with the wait the relay asked for) is retried after that wait,
/// as clients do; any other error is returned.
pub async fn admitted<T, E, F>(
    what: &str,
    mut attempt: impl FnMut() -> F,
    refusal: impl Fn(&E) -> Option<Duration>,
) -> anyhow::Result<Result<T, E>>
where
    F: Future<Output = Result<T, E>>,
{
    step(what, async {
        loop {
            match attempt().await {
                Err(err) => match refusal(&err) {
                    // The wait is the relay's answer, not a stand-in for an event.
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return Err(err),
                },
                done => return done,
            }
        }
    })
    .await
}

/// Await `fut` for at most [`STEP`], naming the event on timeout.
pub async fn step<T>(what: &str, fut: impl Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(STEP, fut)
        .await
        .map_err(|_| anyhow!("timed out after {STEP:?} waiting for {what}"))
}

/// Expands to `mod $name` holding the six {lite-06, lite-05, lite-07-wip} x {raw QUIC,
/// WebTransport} tests of a scenario `async fn(Case) -> anyhow::Result<()>` defined beside the
/// invocation. Leading attributes (say `#[ignore = "…"]`) are put on each of the tests.
#[allow(unused_macros)]
macro_rules! version_binding_matrix {
    ($(#[$attr:meta])* $name:ident => $scenario:ident) => {
        mod $name {
            use crate::common::{run, Binding, Case};
            use starling_proto::Version;

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lite06_raw_quic() {
                let case = Case::new(Version::Lite06, Binding::Quic);
                run(case, super::$scenario(case)).await;
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lite06_webtransport() {
                let case = Case::new(Version::Lite06, Binding::WebTransport);
                run(case, super::$scenario(case)).await;
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lite05_raw_quic() {
                let case = Case::new(Version::Lite05, Binding::Quic);
                run(case, super::$scenario(case)).await;
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lite05_webtransport() {
                let case = Case::new(Version::Lite05, Binding::WebTransport);
                run(case, super::$scenario(case)).await;
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lite07_raw_quic() {
                let case = Case::new(Version::Lite07Wip, Binding::Quic);
                run(case, super::$scenario(case)).await;
            }

            $(#[$attr])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn lite07_webtransport() {
                let case = Case::new(Version::Lite07Wip, Binding::WebTransport);
                run(case, super::$scenario(case)).await;
            }
        }
    };
}

/// Expands to `mod $name` holding the eight {lite-04, lite-03, lite-02, lite-01 (the last two
/// over `moql`)} x {raw QUIC, WebTransport} tests of a scenario, beside
/// `version_binding_matrix!` for the versions moq-dev peers still default to.
/// Expands to `mod $name` holding the eighteen {IETF drafts 14 to 22} x {raw QUIC,
/// WebTransport} tests of a scenario.
#[allow(unused_macros)]
macro_rules! ietf_binding_matrix {
    ($(#[$attr:meta])* $name:ident => $scenario:ident) => {
        mod $name {
            use crate::common::{run, Binding, Case};
            use starling_proto::ietf::Draft;

            ietf_binding_matrix!(@cell $(#[$attr])* draft14_raw_quic, D14, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft14_webtransport, D14, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft15_raw_quic, D15, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft15_webtransport, D15, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft16_raw_quic, D16, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft16_webtransport, D16, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft17_raw_quic, D17, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft17_webtransport, D17, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft18_raw_quic, D18, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft18_webtransport, D18, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft19_raw_quic, D19, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft19_webtransport, D19, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft20_raw_quic, D20, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft20_webtransport, D20, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft21_raw_quic, D21, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft21_webtransport, D21, WebTransport, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft22_raw_quic, D22, Quic, $scenario);
            ietf_binding_matrix!(@cell $(#[$attr])* draft22_webtransport, D22, WebTransport, $scenario);
        }
    };
    (@cell $(#[$attr:meta])* $test:ident, $draft:ident, $binding:ident, $scenario:ident) => {
        $(#[$attr])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let case = Case::new(Draft::$draft, Binding::$binding);
            run(case, super::$scenario(case)).await;
        }
    };
}

#[allow(unused_macros)]
macro_rules! legacy_binding_matrix {
    ($(#[$attr:meta])* $name:ident => $scenario:ident) => {
        mod $name {
            use crate::common::{run, Binding, Case};
            use starling_proto::Version;

            legacy_binding_matrix!(@cell $(#[$attr])* lite04_raw_quic, Lite04, Quic, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite04_webtransport, Lite04, WebTransport, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite03_raw_quic, Lite03, Quic, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite03_webtransport, Lite03, WebTransport, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite02_moql_raw_quic, Lite02, Quic, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite02_moql_webtransport, Lite02, WebTransport, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite01_moql_raw_quic, Lite01, Quic, $scenario);
            legacy_binding_matrix!(@cell $(#[$attr])* lite01_moql_webtransport, Lite01, WebTransport, $scenario);
        }
    };
    (@cell $(#[$attr:meta])* $test:ident, $version:ident, $binding:ident, $scenario:ident) => {
        $(#[$attr])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let case = Case::new(Version::$version, Binding::$binding);
            run(case, super::$scenario(case)).await;
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Payload plan and verification
// ---------------------------------------------------------------------------------------------

/// What the publisher writes after the sync group: groups `1..=groups`, each of `sizes.len()`
/// frames whose payload sizes are `sizes` and whose bytes are a function of (group, frame).
#[derive(Clone, Debug)]
pub struct Plan {
    pub groups: u64,
    pub sizes: Vec<usize>,
    /// Whether frame timestamps survive the trip: not through a version before lite-05,
    /// whose frames carry none (the receiver stamps them on arrival).
    pub timestamps: bool,
}

impl Plan {
    /// Several groups of several frames, one frame far larger than a QUIC packet, one empty.
    pub fn standard() -> Self {
        Plan {
            groups: 6,
            sizes: vec![1, 0, 700, 1500, 40_000, 33],
            timestamps: true,
        }
    }

    /// The same plan through `cases`' versions: timestamps are checked only if every one
    /// carries them.
    pub fn through(mut self, cases: &[Case]) -> Self {
        self.timestamps = cases.iter().all(Case::carries_timestamps);
        self
    }

    /// Smaller frames for the fan-out scenario (every byte is sent once per subscriber).
    pub fn fanout() -> Self {
        Plan {
            groups: 5,
            sizes: vec![16, 1200, 4000, 1],
            timestamps: true,
        }
    }

    /// Frame `frame` of data group `group`: a tag then a (group, frame)-dependent byte pattern.
    pub fn payload(&self, group: u64, frame: usize) -> Bytes {
        let size = self.sizes[frame];
        let tag = format!("g{group}f{frame}:");
        let mut out: Vec<u8> = tag.into_bytes();
        let mut i = 0u64;
        while out.len() < size {
            out.push((group * 31 + frame as u64 * 7 + i * 13) as u8);
            i += 1;
        }
        out.truncate(size);
        Bytes::from(out)
    }

    /// Presentation timestamp (ms) of frame `frame` of data group `group`.
    pub fn timestamp_ms(&self, group: u64, frame: usize) -> u64 {
        group * 100 + frame as u64
    }

    /// Like [`Plan::verify`], but groups may have arrived in any order (each exactly once).
    pub fn verify_any_order(&self, who: &str, received: &Received) -> anyhow::Result<()> {
        let mut sorted = received.clone();
        sorted.groups.sort_by_key(|g| g.sequence);
        self.verify(who, &sorted)
    }

    /// Check what one subscriber received: exactly groups 1..=N in order, every frame intact.
    pub fn verify(&self, who: &str, received: &Received) -> anyhow::Result<()> {
        let sequences: Vec<u64> = received.groups.iter().map(|g| g.sequence).collect();
        let expected: Vec<u64> = (1..=self.groups).collect();
        ensure!(
            sequences == expected,
            "{who}: received data groups {sequences:?}, expected {expected:?} in that order"
        );
        for group in &received.groups {
            if let Some(err) = &group.error {
                bail!("{who}: group {} ended with error {err}", group.sequence);
            }
            ensure!(
                group.frames.len() == self.sizes.len(),
                "{who}: group {} has {} frames, expected {}",
                group.sequence,
                group.frames.len(),
                self.sizes.len()
            );
            for (i, frame) in group.frames.iter().enumerate() {
                let want = self.payload(group.sequence, i);
                ensure!(
                    frame.payload == want,
                    "{who}: group {} frame {i}: payload of {} bytes differs from the {} bytes sent \
                     (first bytes {:?} vs {:?})",
                    group.sequence,
                    frame.payload.len(),
                    want.len(),
                    &frame.payload[..frame.payload.len().min(12)],
                    &want[..want.len().min(12)]
                );
                let want_ts = self.timestamp_ms(group.sequence, i);
                ensure!(
                    !self.timestamps || frame.timestamp_ms == want_ts,
                    "{who}: group {} frame {i}: timestamp {} ms, expected {want_ts} ms",
                    group.sequence,
                    frame.timestamp_ms
                );
            }
        }
        Ok(())
    }
}

/// How the publisher paces data groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Write group g+1 only once every subscriber read group g to its end: one group in
    /// flight, so arrival order is the publishing order.
    Lockstep,
    /// Write every data group back to back once the sync group was read: all groups in flight
    /// at once (subscribers need a Max Age covering them; arrival order is not guaranteed).
    Burst,
}

/// One received frame, normalised to milliseconds.
#[derive(Clone, Debug)]
pub struct RecvFrame {
    pub timestamp_ms: u64,
    pub payload: Bytes,
}

/// One received group.
#[derive(Clone, Debug)]
pub struct RecvGroup {
    pub sequence: u64,
    pub frames: Vec<RecvFrame>,
    /// Set when the group ended with an error instead of its FIN.
    pub error: Option<String>,
}

/// Everything one subscriber received after the sync group.
#[derive(Clone, Debug, Default)]
pub struct Received {
    pub groups: Vec<RecvGroup>,
}

impl Received {
    /// Which data groups arrived so far, with frame counts and errors.
    pub fn summary(&self) -> String {
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|g| match &g.error {
                Some(err) => format!("{}({} frames, {err})", g.sequence, g.frames.len()),
                None => format!("{}({} frames)", g.sequence, g.frames.len()),
            })
            .collect();
        format!("data groups received so far: [{}]", groups.join(", "))
    }
}

// ---------------------------------------------------------------------------------------------
// Progress: subscribers report each group handed to them; the publisher waits on every report.
// ---------------------------------------------------------------------------------------------

/// A subscriber's side: the highest group sequence it has read to the end so far.
pub type ProgressTx = watch::Sender<Option<u64>>;

/// The publisher's side: waits until every subscriber has read a group to its end.
pub struct Gate {
    subscribers: Vec<watch::Receiver<Option<u64>>>,
}

/// Progress channels for `n` subscribers.
pub fn progress(n: usize) -> (Vec<ProgressTx>, Gate) {
    let (txs, rxs) = (0..n).map(|_| watch::channel(None)).unzip();
    (txs, Gate { subscribers: rxs })
}

impl Gate {
    /// Wait (bounded by [`STEP`]) until every subscriber has read group `sequence` to its end.
    pub async fn all_reached(&mut self, sequence: u64) -> anyhow::Result<()> {
        let wait = async {
            for (i, rx) in self.subscribers.iter_mut().enumerate() {
                rx.wait_for(|seen| seen.is_some_and(|s| s >= sequence))
                    .await
                    .map_err(|_| anyhow!("subscriber {i} ended before it got group {sequence}"))?;
            }
            Ok::<_, anyhow::Error>(())
        };
        match tokio::time::timeout(STEP, wait).await {
            Ok(result) => result,
            Err(_) => {
                let behind: Vec<(usize, Option<u64>)> = self
                    .subscribers
                    .iter()
                    .enumerate()
                    .map(|(i, rx)| (i, *rx.borrow()))
                    .filter(|(_, seen)| !seen.is_some_and(|s| s >= sequence))
                    .take(10)
                    .collect();
                bail!(
                    "timed out after {STEP:?} waiting for every subscriber to get group \
                     {sequence}; (subscriber, last group) still behind: {behind:?}"
                )
            }
        }
    }
}

/// Fail unless the first group a subscriber was handed is the sync group.
fn check_sync_first(sequence: u64) -> anyhow::Result<()> {
    ensure!(
        sequence == 0,
        "the first group handed to the subscriber is {sequence}, expected the sync group 0"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Starling peers (in-process, on Starling's library crates)
// ---------------------------------------------------------------------------------------------

fn pin(fingerprint: &str) -> anyhow::Result<TlsVerify> {
    let pin = starling_net::tls::parse_fingerprint(fingerprint)
        .with_context(|| format!("bad certificate fingerprint {fingerprint:?}"))?;
    Ok(TlsVerify::PinnedSha256(vec![pin]))
}

/// Dial `url` offering only `case.version`, pinning the relay's certificate, and start a session.
pub async fn starling_connect(
    case: Case,
    url: &Url,
    fingerprint: &str,
    role: Role,
    config: SessionConfig,
) -> anyhow::Result<(Client, Session<QuicTransport>)> {
    let client = Client::new(
        ClientConfig::default()
            .with_alpns(&[case.version.alpn()])
            .with_tls(pin(fingerprint)?),
    )?;
    let connected = admitted(
        "Starling client connect",
        || client.connect(url),
        starling_net::ClientError::refusal,
    )
    .await?
    .with_context(|| format!("Starling client connecting to {url}"))?;
    let session = start_session(
        case,
        connected.transport,
        &connected.protocol,
        connected.setup_path.clone(),
        role,
        config,
    )
    .await?;
    Ok((client, session))
}

/// Start a Starling session in `role` over a transport that agreed on `protocol`, which must
/// be `case`'s; the session must run `case`'s version.
pub async fn start_session<T: starling_transport::Transport>(
    case: Case,
    transport: T,
    protocol: &str,
    setup_path: Option<String>,
    role: Role,
    mut config: SessionConfig,
) -> anyhow::Result<Session<T>> {
    ensure!(
        protocol == case.version.alpn(),
        "negotiated {protocol:?}, expected {}",
        case.version.alpn()
    );
    if config.hop == 0 {
        config.hop = random_hop();
    }
    let setup = ClientSetup {
        path: setup_path,
        role: Some(role),
        cost: None,
    };
    let session = step(
        "Starling SETUP exchange",
        Session::connect_negotiated(
            transport,
            protocol,
            &Protocol::lite(&[case.version]),
            setup,
            config,
        ),
    )
    .await?
    .context("Starling MoQ handshake")?;
    ensure!(
        session.protocol() == case.version,
        "session runs {}",
        session.version()
    );
    Ok(session)
}

/// A Starling publisher session serving broadcast [`BROADCAST`] with track [`TRACK`].
pub struct StarlingPublisher {
    pub client: Client,
    pub session: Session<QuicTransport>,
    pub track: TrackProducer,
    _published: Published,
}

/// [`BROADCAST`] with its [`TRACK`] in a local origin, ready for a publisher session.
pub struct Published {
    pub origin: Origin,
    _broadcast: BroadcastProducer,
    _route: RouteHandle,
}

impl Published {
    /// The broadcast, its track (written by the caller) and a session config publishing it.
    pub fn new() -> anyhow::Result<(Published, TrackProducer, SessionConfig)> {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new(Limits::default());
        let info = TrackInfo {
            max_age_ms: MAX_AGE.as_millis() as u64,
            ..TrackInfo::default()
        };
        let track = broadcast.create_track(TRACK, info);
        let route = origin.publish(Path::new(BROADCAST)?, broadcast.consume(), Route::local())?;
        let mut config = SessionConfig::new(0);
        config.publish = Some(origin.clone());
        Ok((
            Published {
                origin,
                _broadcast: broadcast,
                _route: route,
            },
            track,
            config,
        ))
    }
}

impl StarlingPublisher {
    pub async fn connect(case: Case, url: &Url, fingerprint: &str) -> anyhow::Result<Self> {
        let (published, track, config) = Published::new()?;
        let (client, session) =
            starling_connect(case, url, fingerprint, Role::Publisher, config).await?;
        Ok(StarlingPublisher {
            client,
            session,
            track,
            _published: published,
        })
    }

    /// Write the sync group then the plan's data groups, paced by the subscribers' progress.
    pub async fn publish(
        &self,
        plan: &Plan,
        pacing: Pacing,
        gate: &mut Gate,
    ) -> anyhow::Result<()> {
        publish_while_open(&self.session, &self.track, plan, pacing, gate, "Starling").await
    }

    pub fn close(&self) {
        self.session.close(SessionCode::NoError, "done");
    }
}

/// Connect a Starling subscriber, wait for [`BROADCAST`] to be announced, subscribe to [`TRACK`]
/// and read the sync group then `plan.groups` data groups, reporting each group to `progress`.
pub async fn starling_subscribe(
    case: Case,
    url: Url,
    fingerprint: String,
    plan: Plan,
    progress: ProgressTx,
) -> anyhow::Result<Received> {
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    let (_client, session) =
        starling_connect(case, &url, &fingerprint, Role::Subscriber, config).await?;
    read_while_open(session, &origin, &plan, &progress, "Starling").await
}

/// Write the plan on `track` while `session` (`who`'s publisher) stays open.
pub async fn publish_while_open<T: Transport>(
    session: &Session<T>,
    track: &TrackProducer,
    plan: &Plan,
    pacing: Pacing,
    gate: &mut Gate,
    who: &str,
) -> anyhow::Result<()> {
    tokio::select! {
        err = session.closed() => bail!("{who} publisher session closed: {err}"),
        result = write_plan(track, plan, pacing, gate) => result,
    }
}

/// Read the plan from what `session` (`who`'s subscriber) announces into `origin`, then
/// close the session.
pub async fn read_while_open<T: Transport>(
    session: Session<T>,
    origin: &Origin,
    plan: &Plan,
    progress: &ProgressTx,
    who: &str,
) -> anyhow::Result<Received> {
    let result = tokio::select! {
        err = session.closed() => Err(anyhow!("{who} subscriber session closed: {err}")),
        result = starling_read(origin, plan, progress) => result,
    };
    session.close(SessionCode::NoError, "done");
    result
}

async fn starling_read(
    origin: &Origin,
    plan: &Plan,
    progress: &ProgressTx,
) -> anyhow::Result<Received> {
    let path = Path::new(BROADCAST)?;
    let interest = origin.interest(path.clone())?;
    let broadcast = step("the broadcast announcement (Starling subscriber)", async {
        let mut changed = Vec::new();
        loop {
            if let Some(broadcast) = origin.consume(&path, None) {
                return broadcast;
            }
            interest.changed(&mut changed).await;
            changed.clear();
        }
    })
    .await?;
    let mut track = broadcast
        .subscribe_track(TRACK, StartAt::default())
        .map_err(|code| anyhow!("subscribe refused: {code:?}"))?;
    // Timestamps are in the track's timescale (a moq-relay serving IETF declares microseconds).
    let timescale = step("the track info", track.info())
        .await?
        .map_err(|code| anyhow!("track info refused: {code:?}"))?
        .timescale;

    let mut received = Received::default();
    let mut first = true;
    while (received.groups.len() as u64) < plan.groups {
        let what = if first {
            "the sync group"
        } else {
            "the next group"
        };
        let mut group = match step(what, track.next_group())
            .await
            .with_context(|| received.summary())?
        {
            Ok(Some(group)) => group,
            Ok(None) => bail!("track ended after {} data groups", received.groups.len()),
            Err(code) => bail!("track failed with {code:?}"),
        };
        let sequence = group.sequence();
        if first {
            check_sync_first(sequence)?;
        }
        let mut frames = Vec::new();
        let mut error = None;
        loop {
            match step("the next frame", group.next_frame()).await? {
                Ok(Some(frame)) => frames.push(RecvFrame {
                    timestamp_ms: (frame.timestamp as u128 * 1000 / timescale as u128) as u64,
                    payload: frame.payload,
                }),
                Ok(None) => break,
                Err(code) => {
                    error = Some(format!("{code:?}"));
                    break;
                }
            }
        }
        // Reported once the group ended (FIN or error), so the next group is written only
        // after this one is complete here: groups never overlap in flight.
        progress.send_replace(Some(sequence));
        if first {
            first = false;
            ensure!(
                error.is_none() && frames.len() == 1 && frames[0].payload == SYNC,
                "sync group arrived as {frames:?} / {error:?}"
            );
            continue;
        }
        received.groups.push(RecvGroup {
            sequence,
            frames,
            error,
        });
    }
    Ok(received)
}

// ---------------------------------------------------------------------------------------------
// moq-dev peers (moq-net 0.3.18 + moq-tokio 0.19.31, in-process)
// ---------------------------------------------------------------------------------------------

/// A moq-tokio client offering only `case`'s version and pinning `fingerprint`, dialing once.
pub fn moq_client(case: Case, fingerprint: &str) -> anyhow::Result<moq_tokio::Client> {
    let mut config = moq_tokio::connect::Config::default();
    config.version = vec![case.moq_version()];
    config.tls.fingerprint = vec![fingerprint.to_string()];
    config.once = Some(true);
    let client = config
        .init(Default::default())
        .context("building the moq-tokio client")?;
    Ok(client.with_reconnect(false))
}

async fn moq_established(
    case: Case,
    client: moq_tokio::Client,
    url: Url,
) -> anyhow::Result<moq_tokio::Connection> {
    let connection = step(
        "moq-tokio connect",
        client.connect(url.clone()).established(),
    )
    .await?
    .with_context(|| format!("moq-tokio connecting to {url}"))?;
    let version = connection.version();
    ensure!(
        version == Some(case.moq_version()),
        "moq-tokio negotiated {version:?}, expected {}",
        case.version
    );
    Ok(connection)
}

/// A moq-dev publisher session serving broadcast [`BROADCAST`] with track [`TRACK`].
pub struct MoqPublisher {
    pub connection: moq_tokio::Connection,
    pub track: moq_net::track::Producer,
    broadcast: moq_net::broadcast::Producer,
    _origin: moq_net::origin::Producer,
}

impl MoqPublisher {
    pub async fn connect(case: Case, url: Url, fingerprint: &str) -> anyhow::Result<Self> {
        let origin = moq_tokio::origin::spawn();
        let broadcast = origin
            .create_broadcast(BROADCAST)
            .context("create broadcast")?;
        let info = moq_net::track::Info::default().with_max_age(MAX_AGE);
        let track = broadcast
            .create_track(TRACK, info)
            .context("create track")?;
        broadcast
            .announce(Default::default())
            .context("announce broadcast")?;
        let client = moq_client(case, fingerprint)?.with_publisher(&origin);
        let connection = moq_established(case, client, url).await?;
        Ok(MoqPublisher {
            connection,
            track,
            broadcast,
            _origin: origin,
        })
    }

    /// Wait until someone subscribed, then write the sync group and the plan's data groups,
    /// paced by the subscribers' progress.
    pub async fn publish(
        &self,
        plan: &Plan,
        pacing: Pacing,
        gate: &mut Gate,
    ) -> anyhow::Result<()> {
        tokio::select! {
            res = self.connection.closed() => bail!("moq-dev publisher connection closed: {res:?}"),
            result = async {
                step("the relay's subscription to the moq-dev publisher", self.track.used())
                    .await?
                    .context("track used")?;
                let mut sync = self.track.create_group(0u64.into())?;
                sync.write_frame(moq_net::Timestamp::from_millis(0)?, Bytes::from_static(SYNC))?;
                sync.finish()?;
                gate.all_reached(0).await.context("sync group")?;
                for g in 1..=plan.groups {
                    let mut group = self.track.create_group(g.into())?;
                    for i in 0..plan.sizes.len() {
                        group.write_frame(
                            moq_net::Timestamp::from_millis(plan.timestamp_ms(g, i))?,
                            plan.payload(g, i),
                        )?;
                    }
                    group.finish()?;
                    if pacing == Pacing::Lockstep {
                        gate.all_reached(g).await?;
                    }
                }
                Ok(())
            } => result,
        }
    }

    pub fn close(&self) {
        self.broadcast.close();
    }
}

/// A moq-dev subscriber's session and its subscription to [`TRACK`] of [`BROADCAST`].
pub struct MoqSubscription {
    pub connection: moq_tokio::Connection,
    pub track: moq_net::track::Subscriber,
    _origin: moq_net::origin::Producer,
}

impl MoqSubscription {
    /// Connect, wait for [`BROADCAST`] to be announced and subscribe to [`TRACK`].
    pub async fn connect(case: Case, url: Url, fingerprint: &str) -> anyhow::Result<Self> {
        let origin = moq_tokio::origin::spawn();
        let consumer = origin.consume();
        let mut announced = consumer.announced();
        let client = moq_client(case, fingerprint)?.with_subscriber(origin.clone());
        let connection = moq_established(case, client, url).await?;
        let track = tokio::select! {
            res = connection.closed() => Err(anyhow!("moq-dev subscriber connection closed: {res:?}")),
            result = async {
                step("the broadcast announcement (moq-dev subscriber)", async {
                    loop {
                        let update = announced.next().await.context("origin closed")?;
                        if update.prefix.as_str() == BROADCAST && update.kind.is_active() {
                            return Ok::<_, anyhow::Error>(());
                        }
                    }
                })
                .await??;
                let broadcast = step("request_broadcast", consumer.request_broadcast(BROADCAST))
                    .await?
                    .context("request broadcast")?;
                let subscription = moq_net::track::Subscription::default().with_max_age(MAX_AGE);
                step("subscribe", broadcast.track(TRACK)?.subscribe(subscription))
                    .await?
                    .context("subscribe")
            } => result,
        }?;
        Ok(MoqSubscription {
            connection,
            track,
            _origin: origin,
        })
    }
}

/// Connect a moq-dev subscriber, wait for [`BROADCAST`] to be announced, subscribe to [`TRACK`]
/// and read the sync group then `plan.groups` data groups, reporting each group to `progress`.
pub async fn moq_subscribe(
    case: Case,
    url: Url,
    fingerprint: String,
    plan: Plan,
    progress: ProgressTx,
) -> anyhow::Result<Received> {
    let subscription = MoqSubscription::connect(case, url, &fingerprint).await?;
    let MoqSubscription {
        connection,
        track,
        _origin,
    } = subscription;
    let result = tokio::select! {
        res = connection.closed() => Err(anyhow!("moq-dev subscriber connection closed: {res:?}")),
        result = moq_read(track, &plan, &progress) => result,
    };
    drop(connection);
    result
}

async fn moq_read(
    mut track: moq_net::track::Subscriber,
    plan: &Plan,
    progress: &ProgressTx,
) -> anyhow::Result<Received> {
    let mut received = Received::default();
    let mut first = true;
    while (received.groups.len() as u64) < plan.groups {
        let what = if first {
            "the sync group"
        } else {
            "the next group"
        };
        let mut group = match step(what, track.recv_group())
            .await
            .with_context(|| received.summary())?
        {
            Ok(Some(group)) => group,
            Ok(None) => bail!("track ended after {} data groups", received.groups.len()),
            Err(err) => bail!("track failed: {err}"),
        };
        let sequence = group.sequence;
        if first {
            check_sync_first(sequence)?;
        }
        let mut frames = Vec::new();
        let mut error = None;
        loop {
            match step("the next frame", group.read_frame()).await? {
                Ok(Some(frame)) => frames.push(RecvFrame {
                    timestamp_ms: frame.timestamp.as_millis() as u64,
                    payload: frame.payload,
                }),
                Ok(None) => break,
                Err(err) => {
                    error = Some(err.to_string());
                    break;
                }
            }
        }
        progress.send_replace(Some(sequence));
        if first {
            first = false;
            ensure!(
                error.is_none() && frames.len() == 1 && frames[0].payload == SYNC,
                "sync group arrived as {frames:?} / {error:?}"
            );
            continue;
        }
        received.groups.push(RecvGroup {
            sequence,
            frames,
            error,
        });
    }
    Ok(received)
}

// ---------------------------------------------------------------------------------------------
// Relays
// ---------------------------------------------------------------------------------------------

/// An in-process Starling relay on 127.0.0.1, stopped on drop.
pub struct StarlingRelay {
    pub addr: SocketAddr,
    pub fingerprint: String,
    task: tokio::task::JoinHandle<()>,
}

impl StarlingRelay {
    pub async fn start<P: Into<Protocol>>(versions: Vec<P>) -> anyhow::Result<Self> {
        Self::start_with(versions, |_| {}).await
    }

    /// Like [`StarlingRelay::start`], adjusting the configuration first (cluster peers, say).
    pub async fn start_with<P: Into<Protocol>>(
        versions: Vec<P>,
        configure: impl FnOnce(&mut RelayConfig),
    ) -> anyhow::Result<Self> {
        let mut config = RelayConfig {
            bind: "127.0.0.1:0".parse()?,
            tls: TlsSource::Generate(vec!["localhost".into()]),
            versions: versions.into_iter().map(Into::into).collect(),
            ..Default::default()
        };
        configure(&mut config);
        let relay = Relay::bind(config)
            .await
            .context("binding the Starling relay")?;
        let addr = relay.local_addr()?;
        let fingerprint = relay.fingerprint().to_string();
        let task = tokio::spawn(async move {
            if let Err(err) = relay.run().await {
                tracing::error!(%err, "Starling relay stopped");
            }
        });
        Ok(StarlingRelay {
            addr,
            fingerprint,
            task,
        })
    }

    pub fn url(&self, case: Case) -> Url {
        case.url(self.addr.port())
    }
}

impl Drop for StarlingRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The moq-relay 0.17.10 binary: `$STARLING_MOQ_RELAY`, else the install-peers.sh location.
pub fn moq_relay_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("STARLING_MOQ_RELAY").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/starling/moq-relay-0.17.10/bin/moq-relay")
}

/// Where moq-relay ports are picked: below Linux's ephemeral range (32768 and up), so the
/// ports the system hands to other tests' sockets (`:0` binds) cannot take one between the
/// pick and moq-relay's bind.
const MOQ_RELAY_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A port free on 127.0.0.1 for both UDP and TCP (as moq-relay binds both on it).
pub fn free_port() -> anyhow::Result<u16> {
    use rand::Rng;
    let mut rng = rand::thread_rng();
    for _ in 0..200 {
        let port = rng.gen_range(MOQ_RELAY_PORTS);
        let Ok(_udp) = UdpSocket::bind(("127.0.0.1", port)) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no port free for both UDP and TCP on 127.0.0.1")
}

/// Whether moq-relay's log says it bound both listeners on `port` (so whatever answers there
/// is this moq-relay, not another process that took the port first).
fn moq_relay_listening(log: &std::path::Path, port: u16) -> bool {
    let raw = std::fs::read_to_string(log).unwrap_or_default();
    // The log is coloured: drop the ANSI escapes (ESC '[' … 'm') before matching.
    let mut text = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        match (escaped, c) {
            (false, '\u{1b}') => escaped = true,
            (true, 'm') => escaped = false,
            (true, _) => {}
            (false, c) => text.push(c),
        }
    }
    let addr = format!("addr=127.0.0.1:{port}");
    let bound = |kind: &str| {
        text.lines()
            .any(|line| line.contains("listening") && line.contains(&addr) && line.contains(kind))
    };
    bound("kind=\"quic\"") && bound("kind=\"http\"")
}

/// `GET /certificate.sha256` over plain HTTP/1.0; the body when the answer is 200.
async fn fetch_fingerprint(port: u16) -> Option<String> {
    // Bounded: a port that accepts and then says nothing must not hold the readiness loop.
    tokio::time::timeout(Duration::from_secs(2), fetch_fingerprint_once(port))
        .await
        .ok()
        .flatten()
}

async fn fetch_fingerprint_once(port: u16) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream
        .write_all(
            b"GET /certificate.sha256 HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .await
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8(response).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    let body = body.trim();
    (body.len() == 64 && body.bytes().all(|b| b.is_ascii_hexdigit())).then(|| body.to_string())
}

/// moq-relay 0.17.10 as a child process on 127.0.0.1, killed on drop.
pub struct MoqRelay {
    pub port: u16,
    pub fingerprint: String,
    pub log: PathBuf,
    child: tokio::process::Child,
}

impl MoqRelay {
    /// Start moq-relay serving only `version` (raw QUIC and WebTransport on one UDP port, the
    /// HTTP listener on the same TCP port) and wait until its certificate endpoint answers.
    pub async fn start(version: Protocol) -> anyhow::Result<Self> {
        Self::start_with(version, &[]).await
    }

    /// Like [`MoqRelay::start`], with more command-line arguments (cluster flags, say).
    pub async fn start_with(version: Protocol, extra: &[String]) -> anyhow::Result<Self> {
        let binary = moq_relay_binary();
        if !binary.is_file() {
            panic!(
                "moq-relay 0.17.10 not found at {}: run scripts/install-peers.sh \
                 (or set STARLING_MOQ_RELAY to the binary)",
                binary.display()
            );
        }
        let mut last_err = None;
        for _ in 0..3 {
            match Self::try_start(&binary, version, extra).await {
                Ok(relay) => return Ok(relay),
                Err(err) => last_err = Some(err),
            }
        }
        Err(last_err.expect("at least one attempt"))
    }

    async fn try_start(
        binary: &std::path::Path,
        version: Protocol,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let log = std::env::temp_dir().join(format!(
            "starling-interop-moq-relay-{}-{port}.log",
            std::process::id()
        ));
        let log_file = std::fs::File::create(&log)?;
        // lite-07-wip is opt-in on both sides: its cluster dials offer it only when named.
        let connect: &[&str] = if version == Protocol::Lite(Version::Lite07Wip) {
            &["--connect-version", "moq-lite-07-wip"]
        } else {
            &[]
        };
        let mut child = tokio::process::Command::new(binary)
            .args(["--listen", &addr])
            .args(["--listen-tls-generate", "localhost"])
            .args(["--listen-version", version.name()])
            .args(connect)
            .args(["--web-http-listen", &addr])
            .args(["--auth-public", "**"])
            .args(["--log-level", "info"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawning {}", binary.display()))?;
        // Readiness: poll the certificate endpoint, a bounded number of times.
        for _ in 0..400 {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "moq-relay exited with {status} before it was ready; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if !moq_relay_listening(&log, port) {
                tokio::time::sleep(Duration::from_millis(25)).await;
                continue;
            }
            if let Some(fingerprint) = fetch_fingerprint(port).await {
                return Ok(MoqRelay {
                    port,
                    fingerprint,
                    log,
                    child,
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let _ = child.start_kill();
        bail!(
            "moq-relay on {addr} never served /certificate.sha256; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    }

    pub fn url(&self, case: Case) -> Url {
        case.url(self.port)
    }

    /// The relay's log so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for MoqRelay {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Write the sync group, then the plan's data groups, paced by the subscribers' progress.
pub async fn write_plan(
    track: &TrackProducer,
    plan: &Plan,
    pacing: Pacing,
    gate: &mut Gate,
) -> anyhow::Result<()> {
    let mut sync = track.create_group(0)?;
    sync.write_frame(Frame {
        timestamp: 0,
        payload: Bytes::from_static(SYNC),
    })?;
    sync.finish();
    gate.all_reached(0).await.context("sync group")?;
    for g in 1..=plan.groups {
        let mut group = track.create_group(g)?;
        for i in 0..plan.sizes.len() {
            group.write_frame(Frame {
                timestamp: plan.timestamp_ms(g, i),
                payload: plan.payload(g, i),
            })?;
        }
        group.finish();
        if pacing == Pacing::Lockstep {
            gate.all_reached(g).await?;
        }
    }
    Ok(())
}
