//! `churn`: groups through short-lived tracks, publishers and subscribers coming and going,
//! for as long as asked. The soak runs it for hours (issue 25: no retention per group).
//!
//! Each broadcast `<prefix>/<n>` is one publisher session with `tracks` tracks. A worker's
//! subscriber session (replaced every `subscriber_lifetime` broadcasts) hears it and
//! subscribes to every track; each track carries `groups` single-frame groups, each written
//! once the subscriber has read the one before (its first is the prime group every
//! publication writes); then the publisher leaves and the next broadcast comes.
//! `concurrency` workers run side by side. Recorded: sessions dialed and ready, each group's
//! time from written to read (`delivery`), groups carried, and errors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use starling_model::{Frame, Origin, StartAt, TrackConsumer, TrackInfo, TrackProducer};
use starling_net::AnyTransport;
use starling_proto::{Path, Role, SessionCode};
use starling_session::{Session, SessionConfig};
use url::Url;

use crate::clock::Clock;
use crate::connect::{ConnectArgs, Dialer};
use crate::error::LoadError;
use crate::publisher::{connect_publisher, track_name, Publication};
use crate::recorder::Recorder;
use crate::report::ChurnReport;
use crate::run::{announced, interruptible, unix_ms, RunOptions, Stop};
use crate::summary::Summary;
use crate::usage::UsageProbes;

#[derive(Args, Clone, Debug)]
pub struct ChurnArgs {
    /// Relay URL for every session (the schemes `fanout` takes).
    #[arg(long)]
    pub url: Url,
    /// Tracks per broadcast.
    #[arg(long, default_value_t = 10)]
    pub tracks: usize,
    /// Groups each track carries, its prime group included.
    #[arg(long, default_value_t = 10)]
    pub groups: u64,
    /// Broadcasts in flight at once (one worker each).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// A worker's subscriber session is replaced after this many broadcasts.
    #[arg(long, default_value_t = 10)]
    pub subscriber_lifetime: usize,
    /// How long to churn.
    #[arg(long, default_value_t = 60.0)]
    pub duration_secs: f64,
    /// Broadcast paths are `<prefix>/<n>`.
    #[arg(long, default_value = "churn")]
    pub prefix: String,
    /// How long any one step (a dial, an announce, a group) may take before it counts as an
    /// error and the broadcast is abandoned.
    #[arg(long, default_value_t = 10.0)]
    pub step_secs: f64,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl ChurnArgs {
    /// Defaults for everything but the URL.
    pub fn new(url: Url) -> Self {
        ChurnArgs {
            url,
            tracks: 10,
            groups: 10,
            concurrency: 4,
            subscriber_lifetime: 10,
            duration_secs: 60.0,
            prefix: "churn".into(),
            step_secs: 10.0,
            connect: ConnectArgs::default(),
        }
    }

    fn validate(&self) -> Result<(), LoadError> {
        let fail = |m: &str| Err(LoadError::Config(m.to_string()));
        if self.tracks == 0 || self.groups == 0 || self.concurrency == 0 {
            return fail("--tracks, --groups and --concurrency must be at least 1");
        }
        if self.subscriber_lifetime == 0 {
            return fail("--subscriber-lifetime must be at least 1");
        }
        if !(self.duration_secs.is_finite() && self.step_secs > 0.0) {
            return fail("--duration-secs must be finite and --step-secs positive");
        }
        Ok(())
    }
}

/// What every worker shares.
struct Plan {
    args: ChurnArgs,
    dialer: Dialer,
    recorder: Recorder,
    clock: Clock,
    next: AtomicUsize,
    broadcasts: AtomicUsize,
    step: Duration,
    stop: Stop,
}

/// Run the churn; `interrupt` (Ctrl-C) ends it early with a report.
pub async fn run(
    args: &ChurnArgs,
    options: &RunOptions,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Summary, LoadError> {
    args.validate()?;
    interruptible(interrupt, |stop| run_until(args, options, stop)).await
}

async fn run_until(
    args: &ChurnArgs,
    options: &RunOptions,
    stop: Stop,
) -> Result<Summary, LoadError> {
    let started_unix_ms = unix_ms();
    let plan = Arc::new(Plan {
        args: args.clone(),
        dialer: Dialer::new(&args.connect)?,
        recorder: Recorder::new(),
        clock: Clock::new(),
        next: AtomicUsize::new(0),
        broadcasts: AtomicUsize::new(0),
        step: Duration::from_secs_f64(args.step_secs),
        stop: stop.clone(),
    });
    let probes = UsageProbes::start(&options.relay_pids);
    let window = std::time::Instant::now();
    let workers: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(worker(plan.clone())))
        .collect();
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs_f64(args.duration_secs.max(0.0))) => stop.stop(),
        _ = stop.stopped() => {}
    }
    for worker in workers {
        if worker.await.is_err() {
            plan.recorder.errors.count("worker_failed");
        }
    }
    let elapsed = window.elapsed().as_secs_f64();
    let (relays, failures) = probes.finish();
    plan.dialer.close().await;

    let mut summary = Summary::new("churn", started_unix_ms, &[&plan.recorder]);
    summary.elapsed_secs = elapsed;
    summary.relays = relays;
    summary.notes.extend(failures);
    summary.config = serde_json::json!({
        "url": args.url.as_str(),
        "tracks": args.tracks,
        "groups": args.groups,
        "concurrency": args.concurrency,
        "subscriber_lifetime": args.subscriber_lifetime,
        "duration_secs": args.duration_secs,
    });
    let broadcasts = plan.broadcasts.load(Ordering::Relaxed) as u64;
    let report = ChurnReport {
        broadcasts,
        tracks: broadcasts * args.tracks as u64,
        groups_per_second: summary.frames.groups as f64 / elapsed.max(1e-9),
    };
    summary.notes.push(format!(
        "churn: {} broadcasts, {} tracks and {} groups carried in {elapsed:.1} s ({:.0} groups/s)",
        report.broadcasts, report.tracks, summary.frames.groups, report.groups_per_second
    ));
    summary.churn = Some(report);
    Ok(summary)
}

/// One worker: broadcasts one after another until the run stops, its subscriber session
/// replaced every `subscriber_lifetime` of them.
async fn worker(plan: Arc<Plan>) {
    let mut subscriber: Option<(Session<AnyTransport>, Origin)> = None;
    let mut carried = 0usize;
    while !plan.stop.is_stopped() {
        if carried.is_multiple_of(plan.args.subscriber_lifetime) {
            if let Some((old, _)) = subscriber.take() {
                old.close(SessionCode::NoError, "done");
            }
        }
        if subscriber.is_none() {
            subscriber = connect_subscriber(&plan).await;
            if subscriber.is_none() {
                continue;
            }
        }
        let (session, origin) = subscriber.as_ref().expect("connected above");
        let n = plan.next.fetch_add(1, Ordering::Relaxed);
        let outcome = tokio::select! {
            outcome = broadcast(&plan, origin, n) => outcome,
            _ = session.closed() => Err("subscriber_session_closed"),
            _ = plan.stop.stopped() => Ok(()),
        };
        match outcome {
            Ok(()) => {
                carried += 1;
            }
            Err(kind) => {
                plan.recorder.errors.count(kind);
                // A subscriber that failed a broadcast is not trusted with the next.
                if let Some((old, _)) = subscriber.take() {
                    old.close(SessionCode::NoError, "done");
                }
                carried = 0;
            }
        }
    }
    if let Some((session, _)) = subscriber {
        session.close(SessionCode::NoError, "done");
    }
}

/// A subscriber session hearing every broadcast under the prefix, or `None` (counted) when
/// it could not be had.
async fn connect_subscriber(plan: &Plan) -> Option<(Session<AnyTransport>, Origin)> {
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![Path::new(&plan.args.prefix).ok()?];
    Recorder::bump(&plan.recorder.attempted, 1);
    let started = plan.clock.now_ns();
    let dialed = tokio::select! {
        dialed = tokio::time::timeout(plan.step, plan.dialer.connect(&plan.args.url, Role::Subscriber, config)) => dialed,
        _ = plan.stop.stopped() => return None,
    };
    match dialed {
        Ok(Ok(session)) => {
            plan.recorder
                .connect
                .record(plan.clock.now_ns().saturating_sub(started));
            Recorder::bump(&plan.recorder.connected, 1);
            Some((session, origin))
        }
        Ok(Err(err)) => {
            plan.recorder.errors.count(&err.kind());
            // Past a refusal, come back after the wait the relay asked for.
            if let Some(wait) = err.refusal() {
                tokio::time::sleep(wait).await;
            }
            None
        }
        Err(_) => {
            plan.recorder.errors.count("connect_timeout");
            None
        }
    }
}

/// One broadcast's life: a publisher comes, every track carries its groups to the
/// subscriber, the publisher goes. `Err` names what failed.
async fn broadcast(plan: &Plan, subscriber: &Origin, n: usize) -> Result<(), &'static str> {
    let args = &plan.args;
    let path = Path::new(&format!("{}/{n}", args.prefix)).map_err(|_| "path")?;
    let publication = Publication::new(
        path.clone(),
        args.tracks,
        TrackInfo::default(),
        crate::frame::HEADER_LEN,
        &plan.clock,
    )
    .map_err(|_| "publication")?;
    Recorder::bump(&plan.recorder.attempted, 1);
    let publisher = tokio::time::timeout(
        plan.step,
        connect_publisher(&plan.dialer, &args.url, publication.origin(), false),
    )
    .await
    .map_err(|_| "connect_timeout")?
    .map_err(|_| "publisher_connect")?;
    Recorder::bump(&plan.recorder.connected, 1);
    let carried = async {
        let broadcast = tokio::time::timeout(plan.step, announced(subscriber, &path))
            .await
            .map_err(|_| "announce_timeout")?
            .map_err(|_| "announce")?;
        let mut readers = Vec::with_capacity(args.tracks);
        for i in 0..args.tracks {
            readers.push(
                broadcast
                    .subscribe_track(&track_name(i), StartAt::default())
                    .map_err(|_| "subscribe")?,
            );
        }
        let carried = futures::future::join_all(
            publication
                .tracks()
                .iter()
                .zip(readers)
                .map(|(track, reader)| carry(plan, track, reader)),
        )
        .await;
        carried
            .into_iter()
            .collect::<Result<Vec<()>, _>>()
            .map(|_| ())
    }
    .await;
    publisher.close(SessionCode::NoError, "done");
    if carried.is_ok() {
        plan.broadcasts.fetch_add(1, Ordering::Relaxed);
    }
    carried
}

/// One track's life: the prime group (sequence 0), then groups 1.. each written once the one
/// before was read.
async fn carry(
    plan: &Plan,
    track: &TrackProducer,
    mut reader: TrackConsumer,
) -> Result<(), &'static str> {
    let mut written_ns = plan.clock.now_ns();
    for sequence in 0..plan.args.groups {
        if sequence > 0 {
            written_ns = plan.clock.now_ns();
            let mut group = track.create_group(sequence).map_err(|_| "create_group")?;
            group
                .write_frame(Frame {
                    timestamp: sequence,
                    payload: bytes::Bytes::from_static(b"churn"),
                })
                .map_err(|_| "write_frame")?;
            group.finish();
        }
        let mut group = tokio::time::timeout(plan.step, reader.next_group())
            .await
            .map_err(|_| "group_timeout")?
            .map_err(|_| "track_failed")?
            .ok_or("track_ended")?;
        if group.sequence() != sequence {
            return Err("group_out_of_order");
        }
        let frame = tokio::time::timeout(plan.step, group.next_frame())
            .await
            .map_err(|_| "frame_timeout")?
            .map_err(|_| "group_failed")?
            .ok_or("group_empty")?;
        Recorder::bump(&plan.recorder.frames, 1);
        Recorder::bump(&plan.recorder.bytes, frame.payload.len() as u64);
        Recorder::bump(&plan.recorder.groups, 1);
        plan.recorder
            .delivery
            .record(plan.clock.now_ns().saturating_sub(written_ns));
    }
    Ok(())
}
