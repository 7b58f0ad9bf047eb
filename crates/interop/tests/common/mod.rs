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

mod moq;
mod relays;
mod starling;

// Each test binary uses a different subset of the helpers.
#[allow(unused_imports)]
pub use moq::*;
#[allow(unused_imports)]
pub use relays::*;
#[allow(unused_imports)]
pub use starling::*;

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
