//! `dash`: the stats-aggregator shape against real relay processes.
//!
//! Every node publishes, on its relay, one hidden broadcast `.stats/p<project>/node/n<node>`
//! per project with `tracks` tracks; a single dash client on relay 0 asks for announcements
//! under `.stats`, follows every node's broadcast as it is announced and reads every track.
//! Each tick (every `tick_ms`) every track gets one single-frame group of `frame_size` bytes;
//! a tick is complete once the dash has that tick's frame from every track, and its
//! completion latency runs from the tick's scheduled time to the last of them. With one relay
//! URL the nodes publish on it; with several, node i publishes on relay `1 + i mod (M - 1)`
//! and only a cluster carries its stats to relay 0.

mod follow;
mod ticks;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures::FutureExt;
use starling_model::{Origin, TrackInfo};
use starling_proto::{Path, Role, SessionCode};
use starling_session::{SessionConfig, SessionLimits};
use tokio::sync::watch;
use url::Url;

use crate::clock::Clock;
use crate::connect::{ConnectArgs, Dialer};
use crate::countdown::Countdown;
use crate::error::LoadError;
use crate::frame::{FrameHeader, HEADER_LEN};
use crate::loss::LossCounts;
use crate::progress::Progress;
use crate::publisher::{connect_publisher, run_schedule, Publication, Schedule};
use crate::reader::ReadContext;
use crate::recorder::Recorder;
use crate::run::{interruptible, unix_ms, RunOptions, Stop};
use crate::summary::{Summary, TickResult};
use crate::usage::UsageProbes;
use follow::Follow;
use ticks::TickBoard;

#[derive(Args, Clone, Debug)]
pub struct DashArgs {
    /// A relay of the cluster (repeatable); the dash client connects to the first.
    #[arg(long = "relay", required = true)]
    pub relays: Vec<Url>,
    /// Nodes publishing stats [default: one per relay after the first; one with one relay].
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Stats broadcasts per node (one per project).
    #[arg(long, default_value_t = 1)]
    pub projects: usize,
    /// Tracks per stats broadcast.
    #[arg(long, default_value_t = 8)]
    pub tracks: usize,
    /// Ticks to run.
    #[arg(long, default_value_t = 10)]
    pub ticks: u64,
    /// Milliseconds between ticks.
    #[arg(long, default_value_t = 1000)]
    pub tick_ms: u64,
    /// Bytes per stats frame.
    #[arg(long, default_value_t = 128)]
    pub frame_size: usize,
    /// How long to wait for the dash to follow every track before starting anyway.
    #[arg(long, default_value_t = 30.0)]
    pub ready_timeout_secs: f64,
    /// After the last tick, how long the dash gets to receive what is still in flight.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl DashArgs {
    /// Defaults for everything but the relays.
    pub fn new(relays: Vec<Url>) -> Self {
        DashArgs {
            relays,
            nodes: None,
            projects: 1,
            tracks: 8,
            ticks: 10,
            tick_ms: 1000,
            frame_size: 128,
            ready_timeout_secs: 30.0,
            drain_ms: 2000,
            connect: ConnectArgs::default(),
        }
    }

    pub fn node_count(&self) -> usize {
        self.nodes
            .unwrap_or_else(|| self.relays.len().saturating_sub(1).max(1))
    }

    /// The relay node `node` publishes on.
    pub fn relay_of(&self, node: usize) -> &Url {
        if self.relays.len() == 1 {
            &self.relays[0]
        } else {
            &self.relays[1 + node % (self.relays.len() - 1)]
        }
    }

    /// The stats broadcast of `node` for `project`.
    pub fn path(project: usize, node: usize) -> String {
        format!(".stats/p{project}/node/n{node}")
    }

    fn validate(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::Config(m.to_string()));
        if self.relays.is_empty() {
            return fail("at least one --relay is needed");
        }
        if self.node_count() == 0 || self.projects == 0 || self.tracks == 0 {
            return fail("--nodes, --projects and --tracks must be at least 1");
        }
        if self.tick_ms == 0 {
            return fail("--tick-ms must be at least 1");
        }
        if self.frame_size < HEADER_LEN {
            return fail("--frame-size must be at least 20 (the frame header)");
        }
        Ok(())
    }
}

/// Run the dash shape; `interrupt` (Ctrl-C) ends it early with a report.
pub async fn run(
    args: &DashArgs,
    options: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Summary, LoadError> {
    args.validate()?;
    interruptible(interrupt, |stop| run_until(args, options, stop)).await
}

async fn run_until(
    args: &DashArgs,
    options: &RunOptions,
    stop: Stop,
) -> Result<Summary, LoadError> {
    let started_unix_ms = unix_ms();
    let clock = Clock::new();
    let recorder = Recorder::new();
    let dialer = Dialer::new(&args.connect)?;
    let nodes = args.node_count();

    // Every node's stats, each node on its own publisher session, all dialed at once.
    let mut publications = Vec::with_capacity(nodes);
    let mut expected_paths = HashSet::new();
    for node in 0..nodes {
        let paths = (0..args.projects)
            .map(|project| Path::new(&DashArgs::path(project, node)))
            .collect::<Result<Vec<_>, _>>()?;
        expected_paths.extend(paths.iter().cloned());
        publications.push(Publication::with_broadcasts(
            paths,
            args.tracks,
            TrackInfo::default(),
            args.frame_size,
            &clock,
        )?);
    }
    let connecting = publications.iter().enumerate().map(|(node, publication)| {
        let (dialer, recorder, clock) = (&dialer, &recorder, &clock);
        async move {
            Recorder::bump(&recorder.attempted, 1);
            let started = clock.now_ns();
            match connect_publisher(dialer, args.relay_of(node), publication.origin(), true).await {
                Ok(session) => {
                    recorder.connect.record(clock.now_ns() - started);
                    Recorder::bump(&recorder.connected, 1);
                    Some(session)
                }
                Err(err) => {
                    recorder.errors.count(&format!("node_{}", err.kind()));
                    None
                }
            }
        }
    });
    let publishers: Vec<_> = futures::future::join_all(connecting)
        .await
        .into_iter()
        .flatten()
        .collect();

    // The dash: one session on relay 0 hearing everything under `.stats`.
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![Path::new(".stats")?];
    config.limits = SessionLimits {
        max_requests: 1 << 16,
        max_served_subscriptions: 1 << 16,
        max_upstream_subscriptions: 1 << 16,
        ..SessionLimits::default()
    };
    Recorder::bump(&recorder.attempted, 1);
    let dash_started = clock.now_ns();
    let dash = dialer
        .connect(&args.relays[0], Role::Subscriber, config)
        .await?;
    recorder.connect.record(clock.now_ns() - dash_started);
    Recorder::bump(&recorder.connected, 1);

    let readers = (expected_paths.len() * args.tracks) as u64;
    let board = Arc::new(TickBoard::new(args.ticks, readers));
    let hook = {
        let board = board.clone();
        move |header: &FrameHeader, now: u64| board.on_frame(header, now)
    };
    let ready = Countdown::new(readers as usize);
    let ctx = ReadContext {
        clock: &clock,
        recorder: &recorder,
        ready: Some(&ready),
        on_frame: Some(&hook),
    };
    let (last_tx, last_rx) = watch::channel(None::<u64>);
    let followed = Stop::new();
    let following = Follow {
        ctx: &ctx,
        origin: &origin,
        expected: &expected_paths,
        tracks: args.tracks,
        last_group: last_rx,
        stop: &stop,
        session: &dash,
        done: &followed,
    };
    let schedule = Schedule {
        fps: 1000.0 / args.tick_ms as f64,
        frame_size: args.frame_size,
        group_frames: 1,
        frames: Some(args.ticks),
    };
    let drive = async {
        let ready_wait = Duration::from_secs_f64(args.ready_timeout_secs.max(0.0));
        tokio::select! {
            _ = tokio::time::timeout(ready_wait, ready.wait()) => {}
            _ = stop.stopped() => {}
        }
        let not_ready = ready.remaining();
        let probes = UsageProbes::start(&options.relay_pids);
        let window = Instant::now();
        let progress = Progress::start(options.progress, {
            let board = board.clone();
            let ticks = args.ticks;
            move || {
                format!(
                    "dash {:.1} s  ticks complete {}/{ticks}",
                    window.elapsed().as_secs_f64(),
                    board.complete()
                )
            }
        });
        let tracks: Vec<_> = publications.iter().flat_map(|p| p.tracks()).collect();
        let start_ns = clock.now_ns();
        let written = AtomicU64::new(0);
        let sent = run_schedule(
            &tracks,
            schedule,
            &clock,
            start_ns,
            &written,
            stop.stopped(),
        )
        .await;
        last_tx.send_replace(sent.as_ref().ok().and_then(|s| s.last_group));
        // Drain: the dash ends once it has every group, or at the deadline.
        let drain = Duration::from_millis(args.drain_ms);
        if tokio::time::timeout(drain, followed.stopped())
            .await
            .is_err()
        {
            stop.stop();
        }
        followed.stopped().await;
        progress.finish().await;
        let elapsed = window.elapsed();
        (sent, start_ns, not_ready, probes.finish(), elapsed)
    };
    let (reads, (sent, start_ns, not_ready, (relays, relay_failures), elapsed)) =
        tokio::join!(following.run(), drive);
    let sent = sent?;

    if dash.closed().now_or_never().is_some() {
        recorder.errors.count("session_closed");
    }
    dash.close(SessionCode::NoError, "done");
    for publisher in &publishers {
        if publisher.closed().now_or_never().is_some() {
            recorder.errors.count("node_session_closed");
        }
        publisher.close(SessionCode::NoError, "done");
    }
    dialer.close().await;

    let mut loss = LossCounts::default();
    for read in &reads {
        loss.add(&read.frames.counts(sent.last_frame()));
        // For the dash, first-frame latency is how long after it dialed each track was live.
        if let Some(first) = read.first_frame_ns {
            recorder
                .first_frame
                .record(first.saturating_sub(dash_started));
        }
    }
    let unfollowed = readers.saturating_sub(reads.len() as u64);
    loss.expected += unfollowed * sent.frames;
    loss.lost += unfollowed * sent.frames;

    let mut summary = Summary::new("dash", started_unix_ms, &[&recorder]);
    summary.add_distribution("tick_completion", board.completion.snapshot());
    summary.elapsed_secs = elapsed.as_secs_f64();
    summary.frames.loss = loss;
    let period = schedule.period_ns();
    summary.ticks = (0..sent.frames)
        .map(|tick| {
            let i = tick as usize;
            let completed = board.completed_ns[i].load(Ordering::Acquire);
            let due = start_ns + tick * period;
            TickResult {
                tick,
                received: board.received[i].load(Ordering::Acquire),
                expected: readers,
                completion_ms: (completed != 0).then(|| completed.saturating_sub(due) as f64 / 1e6),
            }
        })
        .collect();
    summary.relays = relays;
    summary.notes = relay_failures;
    if not_ready > 0 || unfollowed > 0 {
        summary.notes.push(format!(
            "{} of {readers} tracks were followed ({not_ready} not live when the ticks started)",
            reads.len()
        ));
    }
    summary.config = serde_json::json!({
        "relays": args.relays.iter().map(Url::as_str).collect::<Vec<_>>(),
        "nodes": nodes,
        "projects": args.projects,
        "tracks": args.tracks,
        "ticks": args.ticks,
        "tick_ms": args.tick_ms,
        "frame_size": args.frame_size,
        "drain_ms": args.drain_ms,
    });
    Ok(summary)
}
