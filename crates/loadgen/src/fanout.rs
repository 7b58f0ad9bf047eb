//! `fanout`: one publisher connection and N subscriber connections to one relay URL.
//!
//! The publisher primes `tracks` tracks, every subscriber connects, hears the announcement and
//! subscribes to every track; once every subscription has delivered its prime frame, the
//! publisher writes `fps` frames a second of `frame_size` bytes for `duration_secs`. Each
//! subscriber tracks each track's frames by sequence (loss counts from frame 0, since every
//! subscription was live before it) and ends once every group through the last one sent has
//! ended at its end, or after the drain time.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures::FutureExt;
use starling_model::{Origin, StartAt, TrackInfo};
use starling_proto::{Path, Role, SessionCode};
use starling_session::SessionConfig;
use tokio::sync::{watch, Semaphore};
use url::Url;

use crate::clock::Clock;
use crate::connect::{ConnectArgs, Dialer};
use crate::countdown::Countdown;
use crate::error::LoadError;
use crate::frame::HEADER_LEN;
use crate::loss::LossCounts;
use crate::progress::Progress;
use crate::publisher::{connect_publisher, run_schedule, track_name, Publication, Schedule};
use crate::reader::{read_track, ReadContext, TrackRead};
use crate::recorder::Recorder;
use crate::run::{announced, interruptible, stopped_or_closed, unix_ms, RunOptions, Stop};
use crate::summary::Summary;
use crate::usage::UsageProbes;

#[derive(Args, Clone, Debug)]
pub struct FanoutArgs {
    /// Relay URL for the publisher and every subscriber: https:// (WebTransport), http://
    /// (WebTransport, certificate pinned from /certificate.sha256), moql:// or moqt:// (raw
    /// QUIC), ws:// or wss:// (WebSocket), tcp:// (plaintext QMux).
    #[arg(long)]
    pub url: Url,
    /// The subscribers' relay, when not --url's (the far end of a relay chain, the publisher
    /// on --url); the broadcast path is the same on both.
    #[arg(long)]
    pub subscriber_url: Option<Url>,
    /// Subscriber connections.
    #[arg(long, default_value_t = 10)]
    pub subscribers: usize,
    /// Tracks in the broadcast; every subscriber reads all of them.
    #[arg(long, default_value_t = 1)]
    pub tracks: usize,
    /// Frames per second per track.
    #[arg(long, default_value_t = 30.0)]
    pub fps: f64,
    /// Bytes per frame (at least the 20-byte header).
    #[arg(long, default_value_t = 1200)]
    pub frame_size: usize,
    /// Frames per group.
    #[arg(long, default_value_t = 30)]
    pub group_frames: u64,
    /// How long the publisher writes.
    #[arg(long, default_value_t = 10.0)]
    pub duration_secs: f64,
    /// Broadcast path, relative to the URL's path.
    #[arg(long, default_value = "loadgen")]
    pub broadcast: String,
    /// Subscriber connections dialing at once while they connect.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
    /// How long to wait for every subscription to be live before starting anyway.
    #[arg(long, default_value_t = 30.0)]
    pub ready_timeout_secs: f64,
    /// After the last frame, how long subscribers get to receive what is still in flight.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,
    /// Before writing, hold every subscription live and idle this long, then report each
    /// relay's resident memory per session against its baseline (needs --relay-pid).
    #[arg(long, default_value_t = 0.0)]
    pub idle_secs: f64,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl FanoutArgs {
    /// Defaults for everything but the URL.
    pub fn new(url: Url) -> Self {
        FanoutArgs {
            url,
            subscriber_url: None,
            subscribers: 10,
            tracks: 1,
            fps: 30.0,
            frame_size: 1200,
            group_frames: 30,
            duration_secs: 10.0,
            broadcast: "loadgen".into(),
            connect_concurrency: 64,
            ready_timeout_secs: 30.0,
            drain_ms: 2000,
            idle_secs: 0.0,
            connect: ConnectArgs::default(),
        }
    }

    fn validate(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::Config(m.to_string()));
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

    /// Frames per track the run writes.
    pub fn frames(&self) -> u64 {
        (self.duration_secs.max(0.0) * self.fps).round() as u64
    }
}

/// Bytes of each track's prime frame (at most the measured frame size).
const PRIME_SIZE: usize = 1200;

/// What every subscriber task shares.
struct Plan {
    url: Url,
    path: Path,
    tracks: usize,
    dialer: Arc<Dialer>,
    recorder: Arc<Recorder>,
    clock: Clock,
    ready: Countdown,
    last_group: watch::Receiver<Option<u64>>,
    stop: Stop,
    permits: Semaphore,
}

/// Run a fan-out test; `interrupt` (Ctrl-C) ends it early with a report.
pub async fn run(
    args: &FanoutArgs,
    options: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Summary, LoadError> {
    args.validate()?;
    interruptible(interrupt, |stop| run_until(args, options, stop)).await
}

async fn run_until(
    args: &FanoutArgs,
    options: &RunOptions,
    stop: Stop,
) -> Result<Summary, LoadError> {
    let started_unix_ms = unix_ms();
    let clock = Clock::new();
    let recorder = Arc::new(Recorder::new());
    let dialer = Arc::new(Dialer::new(&args.connect)?);
    let path = Path::new(&args.broadcast)?;
    // The prime frame only proves a subscription live: small, whatever the measured size.
    let publication = Publication::new(
        path.clone(),
        args.tracks,
        TrackInfo::default(),
        args.frame_size.min(PRIME_SIZE),
        &clock,
    )?;
    let connecting = Instant::now();
    let publisher = connect_publisher(&dialer, &args.url, publication.origin(), false).await?;
    let publisher_connect = connecting.elapsed();
    // Resident memory before any subscriber, for the idle measurement.
    let baselines: Vec<(u32, u64)> = if args.idle_secs > 0.0 {
        options
            .relay_pids
            .iter()
            .filter_map(|&pid| {
                crate::proc::read_memory(pid)
                    .ok()
                    .map(|m| (pid, m.rss_bytes))
            })
            .collect()
    } else {
        Vec::new()
    };

    let (last_tx, last_rx) = watch::channel(None::<u64>);
    let plan = Arc::new(Plan {
        url: args
            .subscriber_url
            .clone()
            .unwrap_or_else(|| args.url.clone()),
        path,
        tracks: args.tracks,
        dialer: dialer.clone(),
        recorder: recorder.clone(),
        clock,
        ready: Countdown::new(args.subscribers * args.tracks),
        last_group: last_rx,
        stop: stop.clone(),
        permits: Semaphore::new(args.connect_concurrency.max(1)),
    });
    let subscribers: Vec<_> = (0..args.subscribers)
        .map(|_| tokio::spawn(subscriber(plan.clone())))
        .collect();

    // Start once every subscription is live (or the wait is over).
    let ready_wait = Duration::from_secs_f64(args.ready_timeout_secs.max(0.0));
    tokio::select! {
        _ = tokio::time::timeout(ready_wait, plan.ready.wait()) => {}
        _ = stop.stopped() => {}
    }
    let not_ready = plan.ready.remaining();

    // Idle: every subscription live, nothing flowing; what does each session cost?
    let mut idle = Vec::new();
    if !baselines.is_empty() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(args.idle_secs)) => {}
            _ = stop.stopped() => {}
        }
        let sessions = Recorder::load(&recorder.connected);
        for (pid, baseline) in baselines {
            if let Ok(memory) = crate::proc::read_memory(pid) {
                idle.push(crate::summary::IdleMemory::new(
                    pid,
                    sessions,
                    baseline,
                    memory.rss_bytes,
                ));
            }
        }
    }

    let probes = UsageProbes::start(&options.relay_pids);
    let window = Instant::now();
    let written = Arc::new(AtomicU64::new(0));
    let frames = args.frames();
    let progress = {
        let recorder = recorder.clone();
        let written = written.clone();
        let expected = frames * (args.subscribers * args.tracks) as u64;
        let duration = args.duration_secs;
        Progress::start(options.progress, move || {
            format!(
                "fanout {:.1}/{duration:.1} s  sent {}/{frames}  delivered {}/{expected}  errors {}",
                window.elapsed().as_secs_f64(),
                Recorder::load(&written),
                recorder.frames(),
                recorder.errors.total()
            )
        })
    };
    let schedule = Schedule {
        fps: args.fps,
        frame_size: args.frame_size,
        group_frames: args.group_frames,
        frames: Some(frames),
    };
    let tracks: Vec<_> = publication.tracks().iter().collect();
    let schedule_start = clock.now_ns();
    let sent = run_schedule(
        &tracks,
        schedule,
        &clock,
        schedule_start,
        &written,
        stop.stopped(),
    )
    .await?;
    last_tx.send_replace(sent.last_group);
    if sent.last_group.is_none() {
        stop.stop();
    }

    // Drain: every subscriber ends once it has everything, or at the deadline.
    let joined = futures::future::join_all(subscribers);
    tokio::pin!(joined);
    let drain = Duration::from_millis(args.drain_ms);
    let joined = match tokio::time::timeout(drain, &mut joined).await {
        Ok(joined) => joined,
        Err(_) => {
            stop.stop();
            joined.await
        }
    };
    let elapsed = window.elapsed().as_secs_f64();
    progress.finish().await;
    let (relays, relay_failures) = probes.finish();

    if publisher.closed().now_or_never().is_some() {
        recorder.errors.count("publisher_session_closed");
    }
    publisher.close(SessionCode::NoError, "done");
    dialer.close().await;

    let mut loss = LossCounts::default();
    for reads in joined.into_iter() {
        match reads {
            Ok(reads) => {
                for read in reads {
                    loss.add(&read.frames.counts(sent.last_frame()));
                }
            }
            Err(_) => recorder.errors.count("subscriber_task_failed"),
        }
    }
    let mut summary = Summary::new("fanout", started_unix_ms, &[&recorder]);
    summary.elapsed_secs = elapsed;
    summary.frames.loss = loss;
    summary.relays = relays;
    summary.idle = idle;
    let last = Recorder::load(&recorder.last_delivery_ns);
    if last > schedule_start {
        let secs = (last - schedule_start) as f64 / 1e9;
        summary.throughput_mib_s = Some(summary.frames.bytes as f64 / secs / (1 << 20) as f64);
    }
    summary.notes = relay_failures;
    summary.notes.push(format!(
        "publisher connected in {:.3} ms; wrote {} frames per track ({} groups)",
        publisher_connect.as_secs_f64() * 1e3,
        sent.frames,
        sent.last_group.unwrap_or(0)
    ));
    if not_ready > 0 {
        summary.notes.push(format!(
            "{not_ready} track subscriptions were not live when the run started"
        ));
    }
    summary.config = serde_json::json!({
        "url": args.url.as_str(),
        "subscriber_url": args.subscriber_url.as_ref().map(Url::as_str),
        "subscribers": args.subscribers,
        "tracks": args.tracks,
        "fps": args.fps,
        "frame_size": args.frame_size,
        "group_frames": args.group_frames,
        "duration_secs": args.duration_secs,
        "broadcast": args.broadcast,
        "drain_ms": args.drain_ms,
        "idle_secs": args.idle_secs,
        "frames_per_track": frames,
    });
    Ok(summary)
}

/// One subscriber connection: connect, follow the announcement, read every track.
async fn subscriber(plan: Arc<Plan>) -> Vec<TrackRead> {
    let unread = || (0..plan.tracks).map(|_| TrackRead::from_start()).collect();
    let recorder = &plan.recorder;
    let permit = tokio::select! {
        permit = plan.permits.acquire() => permit.ok(),
        _ = plan.stop.stopped() => None,
    };
    let Some(permit) = permit else {
        plan.ready.count_down_by(plan.tracks);
        return unread();
    };
    Recorder::bump(&recorder.attempted, 1);
    let started = plan.clock.now_ns();
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![plan.path.clone()];
    let session = match plan
        .dialer
        .connect(&plan.url, Role::Subscriber, config)
        .await
    {
        Ok(session) => session,
        Err(err) => {
            recorder.errors.count(&err.kind());
            plan.ready.count_down_by(plan.tracks);
            return unread();
        }
    };
    recorder.connect.record(plan.clock.now_ns() - started);
    Recorder::bump(&recorder.connected, 1);
    drop(permit);

    let broadcast = tokio::select! {
        broadcast = announced(&origin, &plan.path) => broadcast.ok(),
        _ = stopped_or_closed(&plan.stop, &session) => None,
    };
    let Some(broadcast) = broadcast else {
        recorder.errors.count("not_announced");
        plan.ready.count_down_by(plan.tracks);
        session.close(SessionCode::NoError, "done");
        return unread();
    };
    let ctx = ReadContext {
        clock: &plan.clock,
        recorder,
        ready: Some(&plan.ready),
        on_frame: None,
    };
    let plan = &plan;
    let reads = futures::future::join_all((0..plan.tracks).map(|i| {
        let ctx = &ctx;
        let broadcast = &broadcast;
        let session = &session;
        async move {
            match broadcast.subscribe_track(&track_name(i), StartAt::default()) {
                Ok(track) => {
                    read_track(
                        track,
                        ctx,
                        TrackRead::from_start(),
                        plan.last_group.clone(),
                        stopped_or_closed(&plan.stop, session),
                    )
                    .await
                }
                Err(code) => {
                    recorder
                        .errors
                        .count(&format!("subscribe_refused:{code:?}"));
                    plan.ready.count_down();
                    TrackRead::from_start()
                }
            }
        }
    }))
    .await;
    if let Some(first) = reads.iter().filter_map(|r| r.first_frame_ns).min() {
        recorder.first_frame.record(first.saturating_sub(started));
    }
    if session.closed().now_or_never().is_some() {
        recorder.errors.count("session_closed");
    }
    session.close(SessionCode::NoError, "done");
    reads
}
