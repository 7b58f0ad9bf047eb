//! `burst`: N clients connecting as fast as a concurrency limit allows, each waiting for its
//! first frame, while this tool also runs the publisher.
//!
//! Clients are QUIC (the `--url`: `https://` WebTransport or `moql://` raw QUIC), WebSocket
//! (QMux over `ws://`/`wss://`) or HTTP (`GET /fetch/{broadcast}/{track}`, the latest group)
//! agents, interleaved by the configured weights. A client holds its concurrency slot from
//! dialing to its first frame (or fetched group body); with `--hold-secs` it then stays
//! subscribed that long, measuring delivery latency and loss, without holding the slot.

mod client;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures::FutureExt;
use starling_model::TrackInfo;
use starling_proto::{Path, SessionCode};
use tokio::sync::Semaphore;
use url::Url;

use crate::clock::Clock;
use crate::connect::{with_scheme, ConnectArgs, Dialer};
use crate::error::LoadError;
use crate::frame::HEADER_LEN;
use crate::http_fetch;
use crate::loss::LossCounts;
use crate::progress::Progress;
use crate::publisher::{connect_publisher, run_schedule, Publication, Schedule};
use crate::recorder::Recorder;
use crate::run::{interruptible, unix_ms, RunOptions, Stop};
use crate::summary::{KindSummary, Summary};
use crate::usage::UsageProbes;

/// How a client reaches the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentKind {
    /// The `--url`: WebTransport or raw QUIC.
    Quic,
    /// QMux over WebSocket.
    WebSocket,
    /// `GET /fetch/…` of the latest group.
    Http,
}

impl AgentKind {
    pub const ALL: [AgentKind; 3] = [AgentKind::Quic, AgentKind::WebSocket, AgentKind::Http];

    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Quic => "quic",
            AgentKind::WebSocket => "websocket",
            AgentKind::Http => "http",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[derive(Args, Clone, Debug)]
pub struct BurstArgs {
    /// Relay URL for the publisher and the QUIC agents: https:// (WebTransport), http://
    /// (WebTransport with the certificate pinned), moql:// or moqt:// (raw QUIC).
    #[arg(long)]
    pub url: Url,
    /// URL for the WebSocket agents [default: ws:// on the URL's host, port and path].
    #[arg(long)]
    pub ws_url: Option<Url>,
    /// Base URL of the relay's HTTP API [default: http:// on the URL's host and port].
    #[arg(long)]
    pub http_url: Option<Url>,
    /// Clients in the burst.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Clients connecting at once (each holds a slot until its first frame).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Share of QUIC agents.
    #[arg(long, default_value_t = 1)]
    pub quic_weight: u32,
    /// Share of WebSocket agents.
    #[arg(long, default_value_t = 1)]
    pub ws_weight: u32,
    /// Share of HTTP fetch agents.
    #[arg(long, default_value_t = 1)]
    pub http_weight: u32,
    /// Keep each QUIC/WebSocket client subscribed this long after its first frame, measuring
    /// delivery latency and loss (0: leave at once).
    #[arg(long, default_value_t = 0.0)]
    pub hold_secs: f64,
    /// Per-client deadline for connecting and receiving its first frame.
    #[arg(long, default_value_t = 10.0)]
    pub timeout_secs: f64,
    /// Tracks published; client i reads track i mod tracks.
    #[arg(long, default_value_t = 1)]
    pub tracks: usize,
    /// Frames per second per track.
    #[arg(long, default_value_t = 30.0)]
    pub fps: f64,
    /// Bytes per frame (at least the 20-byte header).
    #[arg(long, default_value_t = 1200)]
    pub frame_size: usize,
    /// Frames per group.
    #[arg(long, default_value_t = 1)]
    pub group_frames: u64,
    /// Broadcast path, relative to the URL's path.
    #[arg(long, default_value = "loadgen")]
    pub broadcast: String,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl BurstArgs {
    /// Defaults for everything but the URL.
    pub fn new(url: Url) -> Self {
        BurstArgs {
            url,
            ws_url: None,
            http_url: None,
            clients: 100,
            concurrency: 32,
            quic_weight: 1,
            ws_weight: 1,
            http_weight: 1,
            hold_secs: 0.0,
            timeout_secs: 10.0,
            tracks: 1,
            fps: 30.0,
            frame_size: 1200,
            group_frames: 1,
            broadcast: "loadgen".into(),
            connect: ConnectArgs::default(),
        }
    }

    /// The kind of each client, in the order they start: the weights interleaved.
    pub fn mix(&self) -> Vec<AgentKind> {
        let weights = [self.quic_weight, self.ws_weight, self.http_weight];
        AgentKind::ALL
            .iter()
            .zip(weights)
            .flat_map(|(&kind, weight)| std::iter::repeat_n(kind, weight as usize))
            .collect()
    }

    fn validate(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::Config(m.to_string()));
        if self.mix().is_empty() {
            return fail(
                "at least one of --quic-weight, --ws-weight, --http-weight must be positive",
            );
        }
        if self.tracks == 0 {
            return fail("--tracks must be at least 1");
        }
        if self.fps.is_nan() || self.fps <= 0.0 {
            return fail("--fps must be positive");
        }
        if self.frame_size < HEADER_LEN {
            return fail("--frame-size must be at least 20 (the frame header)");
        }
        if self.group_frames == 0 {
            return fail("--group-frames must be at least 1");
        }
        Ok(())
    }

    fn ws_url(&self) -> Result<Url, LoadError> {
        // The relay serves WebSocket on its (plaintext) TCP port with the same number.
        self.ws_url
            .clone()
            .or_else(|| with_scheme(&self.url, "ws"))
            .ok_or_else(|| LoadError::Config("cannot derive a WebSocket URL; pass --ws-url".into()))
    }

    fn http_url(&self) -> Result<Url, LoadError> {
        self.http_url
            .clone()
            .or_else(|| {
                let mut url = with_scheme(&self.url, "http")?;
                url.set_path("/");
                url.set_query(None);
                Some(url)
            })
            .ok_or_else(|| LoadError::Config("cannot derive the HTTP URL; pass --http-url".into()))
    }
}

/// What every client task shares.
struct Plan {
    urls: [Url; 2],
    http_base: Url,
    broadcast: String,
    path: Path,
    tracks: usize,
    mix: Vec<AgentKind>,
    dialer: Arc<Dialer>,
    http: reqwest::Client,
    recorders: [Recorder; 3],
    clock: Clock,
    timeout: Duration,
    hold: Duration,
    stop: Stop,
    done: AtomicU64,
}

/// Run a connection burst; `interrupt` (Ctrl-C) ends it early with a report.
pub async fn run(
    args: &BurstArgs,
    options: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Summary, LoadError> {
    args.validate()?;
    interruptible(interrupt, |stop| run_until(args, options, stop)).await
}

async fn run_until(
    args: &BurstArgs,
    options: &RunOptions,
    stop: Stop,
) -> Result<Summary, LoadError> {
    let started_unix_ms = unix_ms();
    let clock = Clock::new();
    let dialer = Arc::new(Dialer::new(&args.connect)?);
    let path = Path::new(&args.broadcast)?;
    let publication = Publication::new(
        path.clone(),
        args.tracks,
        TrackInfo::default(),
        args.frame_size,
        &clock,
    )?;
    let connecting = Instant::now();
    let publisher = connect_publisher(&dialer, &args.url, publication.origin(), false).await?;
    let publisher_connect = connecting.elapsed();

    let plan = Arc::new(Plan {
        urls: [args.url.clone(), args.ws_url()?],
        http_base: args.http_url()?,
        broadcast: args.broadcast.clone(),
        path,
        tracks: args.tracks,
        mix: args.mix(),
        dialer: dialer.clone(),
        http: http_fetch::client()?,
        recorders: Default::default(),
        clock,
        timeout: Duration::from_secs_f64(args.timeout_secs.max(0.0)),
        hold: Duration::from_secs_f64(args.hold_secs.max(0.0)),
        stop: stop.clone(),
        done: AtomicU64::new(0),
    });

    let probes = UsageProbes::start(&options.relay_pids);
    let window = Instant::now();
    let progress = {
        let plan = plan.clone();
        let clients = args.clients;
        Progress::start(options.progress, move || {
            let errors: u64 = plan.recorders.iter().map(|r| r.errors.total()).sum();
            let connected: u64 = plan
                .recorders
                .iter()
                .map(|r| Recorder::load(&r.connected))
                .sum();
            format!(
                "burst {:.1} s  done {}/{clients}  connected {connected}  errors {errors}",
                window.elapsed().as_secs_f64(),
                Recorder::load(&plan.done),
            )
        })
    };

    let written = AtomicU64::new(0);
    let publishing_done = Stop::new();
    let schedule = Schedule {
        fps: args.fps,
        frame_size: args.frame_size,
        group_frames: args.group_frames,
        frames: None,
    };
    let tracks: Vec<_> = publication.tracks().iter().collect();
    let publishing = run_schedule(
        &tracks,
        schedule,
        &plan.clock,
        plan.clock.now_ns(),
        &written,
        publishing_done.stopped(),
    );
    let clients = async {
        let permits = Arc::new(Semaphore::new(args.concurrency.max(1)));
        let mut handles = Vec::with_capacity(args.clients);
        for i in 0..args.clients {
            let permit = tokio::select! {
                permit = permits.clone().acquire_owned() => permit.ok(),
                _ = stop.stopped() => None,
            };
            let Some(permit) = permit else { break };
            handles.push(tokio::spawn(client::client(i, plan.clone(), permit)));
        }
        let outcomes = futures::future::join_all(handles).await;
        publishing_done.stop();
        outcomes
    };
    let (sent, outcomes) = tokio::join!(publishing, clients);
    let sent = sent?;
    let elapsed = window.elapsed().as_secs_f64();
    progress.finish().await;
    let (relays, relay_failures) = probes.finish();

    if publisher.closed().now_or_never().is_some() {
        plan.recorders[0].errors.count("publisher_session_closed");
    }
    publisher.close(SessionCode::NoError, "done");
    dialer.close().await;

    let mut loss = LossCounts::default();
    for outcome in outcomes {
        match outcome {
            Ok(counts) => loss.add(&counts),
            Err(_) => plan.recorders[0].errors.count("client_task_failed"),
        }
    }
    let recorders: Vec<&Recorder> = plan.recorders.iter().collect();
    let mut summary = Summary::new("burst", started_unix_ms, &recorders);
    summary.elapsed_secs = elapsed;
    summary.frames.loss = loss;
    for kind in AgentKind::ALL {
        let recorder = &plan.recorders[kind.index()];
        if Recorder::load(&recorder.attempted) > 0 {
            summary
                .by_kind
                .insert(kind.name().to_string(), KindSummary::of(recorder));
        }
    }
    summary.relays = relays;
    summary.notes = relay_failures;
    summary.notes.push(format!(
        "publisher connected in {:.3} ms; wrote {} frames per track",
        publisher_connect.as_secs_f64() * 1e3,
        sent.frames
    ));
    summary.config = serde_json::json!({
        "url": args.url.as_str(),
        "ws_url": plan.urls[1].as_str(),
        "http_url": plan.http_base.as_str(),
        "clients": args.clients,
        "concurrency": args.concurrency,
        "weights": {"quic": args.quic_weight, "websocket": args.ws_weight, "http": args.http_weight},
        "hold_secs": args.hold_secs,
        "timeout_secs": args.timeout_secs,
        "tracks": args.tracks,
        "fps": args.fps,
        "frame_size": args.frame_size,
        "group_frames": args.group_frames,
        "broadcast": args.broadcast,
    });
    Ok(summary)
}
