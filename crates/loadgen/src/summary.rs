//! A run's report: the JSON summary (`--json FILE`) and the same numbers as text.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::histogram::Snapshot;
use crate::loss::LossCounts;
use crate::recorder::Recorder;
use crate::usage::ProcessUsage;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding the summary: {0}")]
    Json(#[from] serde_json::Error),
}

/// Write `contents` to `path`.
pub fn write_file(path: &Path, contents: &[u8]) -> Result<(), OutputError> {
    std::fs::write(path, contents).map_err(|source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// One latency distribution, in milliseconds (`None` when nothing was recorded).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub mean_ms: Option<f64>,
}

impl LatencyStats {
    pub fn of(snapshot: &Snapshot) -> Self {
        LatencyStats {
            count: snapshot.count(),
            p50_ms: snapshot.percentile(0.5).map(ms),
            p99_ms: snapshot.percentile(0.99).map(ms),
            max_ms: snapshot.max().map(ms),
            min_ms: snapshot.min().map(ms),
            mean_ms: snapshot.mean().map(|ns| ns / 1e6),
        }
    }
}

/// Connections attempted and made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Connections {
    pub attempted: u64,
    pub connected: u64,
}

/// Frames by sequence (expected, received, lost, …) plus what arrived on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Frames {
    #[serde(flatten)]
    pub loss: LossCounts,
    /// Measured frames received, every copy counted.
    pub delivered: u64,
    pub bytes: u64,
    pub groups: u64,
    /// Groups that were reset or held a frame that did not decode (counted, then skipped).
    pub groups_failed: u64,
}

/// One kind of agent's share of a burst.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindSummary {
    pub connections: Connections,
    pub latency: BTreeMap<String, LatencyStats>,
}

/// One dashboard tick.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TickResult {
    pub tick: u64,
    /// Tracks whose group for this tick arrived, of those expected.
    pub received: u64,
    pub expected: u64,
    /// From the tick's scheduled time to its last track's group; `None` if incomplete.
    pub completion_ms: Option<f64>,
}

/// One relay's resident memory with idle subscribed sessions, against its baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IdleMemory {
    pub pid: u32,
    /// Sessions connected and subscribed during the measurement.
    pub sessions: u64,
    /// `VmRSS` before the subscribers connected (the publisher connected, nothing flowing).
    pub baseline_rss_bytes: u64,
    /// `VmRSS` after every subscription was live and the hold passed with nothing flowing.
    pub idle_rss_bytes: u64,
    /// `(idle - baseline) / sessions`.
    pub bytes_per_session: u64,
}

impl IdleMemory {
    pub fn new(pid: u32, sessions: u64, baseline_rss_bytes: u64, idle_rss_bytes: u64) -> Self {
        IdleMemory {
            pid,
            sessions,
            baseline_rss_bytes,
            idle_rss_bytes,
            bytes_per_session: idle_rss_bytes.saturating_sub(baseline_rss_bytes) / sessions.max(1),
        }
    }
}

/// Everything a run reports.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub mode: &'static str,
    pub started_unix_ms: u64,
    pub elapsed_secs: f64,
    pub config: serde_json::Value,
    pub connections: Connections,
    pub latency: BTreeMap<String, LatencyStats>,
    pub frames: Frames,
    pub errors: BTreeMap<String, u64>,
    /// Relay processes watched over the measured window (`--relay-pid`).
    pub relays: Vec<ProcessUsage>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_kind: BTreeMap<String, KindSummary>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ticks: Vec<TickResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Measured payload delivered per second, from the schedule's start to the last measured
    /// frame's arrival (`fanout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_mib_s: Option<f64>,
    /// What idle subscribed sessions cost each relay (`fanout --idle-secs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<IdleMemory>,
    /// What a `community` run adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub community: Option<crate::report::CommunityReport>,
    /// What a `churn` run adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub churn: Option<crate::report::ChurnReport>,
    /// The distributions behind `latency`, in display order (for the text and the CDF).
    #[serde(skip)]
    pub distributions: Vec<(String, Snapshot)>,
}

impl Summary {
    /// A summary of the recorders' measurements, merged; the caller fills in loss, relays and
    /// the rest.
    pub fn new(mode: &'static str, started_unix_ms: u64, recorders: &[&Recorder]) -> Self {
        let merged = |pick: fn(&Recorder) -> Snapshot| {
            let mut all = Snapshot::default();
            for recorder in recorders {
                all.merge(&pick(recorder));
            }
            all
        };
        let sum = |pick: fn(&Recorder) -> &std::sync::atomic::AtomicU64| {
            recorders
                .iter()
                .map(|r| Recorder::load(pick(r)))
                .sum::<u64>()
        };
        let mut errors = BTreeMap::new();
        for recorder in recorders {
            for (kind, n) in recorder.errors.snapshot() {
                *errors.entry(kind).or_insert(0) += n;
            }
        }
        let mut summary = Summary {
            mode,
            started_unix_ms,
            elapsed_secs: 0.0,
            config: serde_json::Value::Null,
            connections: Connections {
                attempted: sum(|r| &r.attempted),
                connected: sum(|r| &r.connected),
            },
            latency: BTreeMap::new(),
            frames: Frames {
                loss: LossCounts::default(),
                delivered: sum(|r| &r.frames),
                bytes: sum(|r| &r.bytes),
                groups: sum(|r| &r.groups),
                groups_failed: sum(|r| &r.groups_failed),
            },
            errors,
            relays: Vec::new(),
            throughput_mib_s: None,
            idle: Vec::new(),
            community: None,
            churn: None,
            by_kind: BTreeMap::new(),
            ticks: Vec::new(),
            notes: Vec::new(),
            distributions: Vec::new(),
        };
        summary.add_distribution("connect", merged(|r| r.connect.snapshot()));
        summary.add_distribution("first_frame", merged(|r| r.first_frame.snapshot()));
        summary.add_distribution("delivery", merged(|r| r.delivery.snapshot()));
        summary
    }

    /// Report one more latency distribution.
    pub fn add_distribution(&mut self, name: &str, snapshot: Snapshot) {
        self.latency
            .insert(name.to_string(), LatencyStats::of(&snapshot));
        self.distributions.push((name.to_string(), snapshot));
    }

    /// Errors of every kind.
    pub fn error_total(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn to_json(&self) -> Result<String, OutputError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    pub fn write_json(&self, path: &Path) -> Result<(), OutputError> {
        let mut json = self.to_json()?;
        json.push('\n');
        write_file(path, json.as_bytes())
    }
}

fn opt(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} run: {:.2} s", self.mode, self.elapsed_secs)?;
        writeln!(
            f,
            "connections    {}/{} connected",
            self.connections.connected, self.connections.attempted
        )?;
        writeln!(
            f,
            "{:<18}{:>9}{:>11}{:>11}{:>11}",
            "latency (ms)", "count", "p50", "p99", "max"
        )?;
        for (name, _) in &self.distributions {
            if let Some(stats) = self.latency.get(name) {
                writeln!(
                    f,
                    "  {:<16}{:>9}{:>11}{:>11}{:>11}",
                    name,
                    stats.count,
                    opt(stats.p50_ms),
                    opt(stats.p99_ms),
                    opt(stats.max_ms)
                )?;
            }
        }
        for (kind, part) in &self.by_kind {
            writeln!(
                f,
                "  [{kind}] {}/{} connected",
                part.connections.connected, part.connections.attempted
            )?;
            let ordered = ["connect", "first_frame", "delivery"]
                .into_iter()
                .filter_map(|name| part.latency.get(name).map(|stats| (name, stats)));
            for (name, stats) in ordered {
                writeln!(
                    f,
                    "    {:<14}{:>9}{:>11}{:>11}{:>11}",
                    name,
                    stats.count,
                    opt(stats.p50_ms),
                    opt(stats.p99_ms),
                    opt(stats.max_ms)
                )?;
            }
        }
        let frames = &self.frames;
        writeln!(
            f,
            "frames         expected {} received {} lost {} (duplicates {}, out of order {}, stale {})",
            frames.loss.expected,
            frames.loss.received,
            frames.loss.lost,
            frames.loss.duplicates,
            frames.loss.out_of_order,
            frames.loss.stale
        )?;
        writeln!(
            f,
            "               delivered {} ({:.2} MiB), groups {} ({} failed)",
            frames.delivered,
            mib(frames.bytes),
            frames.groups,
            frames.groups_failed
        )?;
        if let Some(throughput) = self.throughput_mib_s {
            writeln!(f, "throughput     {throughput:.2} MiB/s")?;
        }
        if !self.ticks.is_empty() {
            let complete = self
                .ticks
                .iter()
                .filter(|t| t.completion_ms.is_some())
                .count();
            writeln!(f, "ticks          {complete}/{} complete", self.ticks.len())?;
        }
        if self.errors.is_empty() {
            writeln!(f, "errors         none")?;
        } else {
            let list: Vec<String> = self
                .errors
                .iter()
                .map(|(kind, n)| format!("{kind}={n}"))
                .collect();
            writeln!(f, "errors         {}", list.join(" "))?;
        }
        for idle in &self.idle {
            writeln!(
                f,
                "idle pid {}     {} sessions: RSS {:.1} -> {:.1} MiB, {:.1} KiB per session",
                idle.pid,
                idle.sessions,
                mib(idle.baseline_rss_bytes),
                mib(idle.idle_rss_bytes),
                idle.bytes_per_session as f64 / 1024.0
            )?;
        }
        if let Some(community) = &self.community {
            writeln!(
                f,
                "community      {} members, {} agents, {} channels; history {}/{} complete ({} older messages); removed {} closed and {} refused of {}",
                community.members,
                community.agents,
                community.channels,
                community.history_complete,
                community.history_owed,
                community.history_older,
                community.removed_closed,
                community.removed_refused,
                community.removed
            )?;
            writeln!(
                f,
                "admission      {} clean refusals retried; {} members admitted after one, {} never admitted; all admitted within {}; {} API requests refused (503 + Retry-After) and waited out",
                community.refusals,
                community.admitted_after_refusal,
                community.never_admitted,
                community
                    .admission_span_secs
                    .map_or("-".to_string(), |s| format!("{s:.2} s")),
                community.http_refusals
            )?;
            if let (Some(mean), Some(peak)) =
                (community.relay_cores_mean, community.relay_cores_peak)
            {
                writeln!(f, "relay cores    mean {mean:.2}, busiest second {peak:.2}")?;
            }
            if let (Some(mean), Some(peak)) = (community.load_cores_mean, community.load_cores_peak)
            {
                writeln!(
                    f,
                    "load cores     mean {mean:.2}, busiest second {peak:.2} (this generator)"
                )?;
            }
            if let Some(bytes) = community.relay_rss_per_client_bytes {
                writeln!(
                    f,
                    "relay RSS      {:.1} KiB per client",
                    bytes as f64 / 1024.0
                )?;
            }
            for (series, rate) in &community.access_per_second {
                writeln!(f, "access         {series} {rate:.1}/s")?;
            }
        }
        for relay in &self.relays {
            writeln!(
                f,
                "relay pid {}   cpu {:.2} s ({:.1}% of {:.1} s), peak RSS {:.1} MiB (VmHWM), max sampled RSS {:.1} MiB",
                relay.pid,
                relay.cpu_seconds,
                relay.cpu_percent,
                relay.window_seconds,
                mib(relay.peak_rss_bytes),
                mib(relay.max_sampled_rss_bytes)
            )?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        Ok(())
    }
}

impl KindSummary {
    /// One agent kind's connections and latencies.
    pub fn of(recorder: &Recorder) -> Self {
        let mut latency = BTreeMap::new();
        latency.insert(
            "connect".to_string(),
            LatencyStats::of(&recorder.connect.snapshot()),
        );
        latency.insert(
            "first_frame".to_string(),
            LatencyStats::of(&recorder.first_frame.snapshot()),
        );
        latency.insert(
            "delivery".to_string(),
            LatencyStats::of(&recorder.delivery.snapshot()),
        );
        KindSummary {
            connections: Connections {
                attempted: Recorder::load(&recorder.attempted),
                connected: Recorder::load(&recorder.connected),
            },
            latency,
        }
    }
}
