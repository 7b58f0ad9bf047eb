//! A relay process's resource use over a run's measured window: CPU seconds (the
//! `utime + stime` delta), its lifetime peak RSS (`VmHWM`) and the highest RSS sampled
//! during the window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::task::JoinHandle;

use crate::proc::{read_cpu, read_memory, CpuTimes, ProcError};

/// How often RSS and CPU are sampled during the window.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Samples per peak-CPU span (one second).
const PEAK_SPAN: usize = 4;

/// What a relay process used over the window.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcessUsage {
    pub pid: u32,
    /// User plus system CPU time spent during the window.
    pub cpu_seconds: f64,
    pub window_seconds: f64,
    /// `cpu_seconds / window_seconds`, in percent of one core.
    pub cpu_percent: f64,
    /// The busiest second of the window (CPU sampled with the RSS), in percent of one core.
    pub peak_cpu_percent: f64,
    /// `VmHWM` at the end: the peak resident set over the process's whole life.
    pub peak_rss_bytes: u64,
    /// The highest `VmRSS` sampled during the window.
    pub max_sampled_rss_bytes: u64,
}

/// Watches one process from [`UsageProbe::start`] to [`UsageProbe::finish`].
pub struct UsageProbe {
    pid: u32,
    cpu: CpuTimes,
    started: Instant,
    max_rss: Arc<AtomicU64>,
    /// The highest CPU rate over any [`PEAK_SPAN`] samples, as f64 bits (percent of a core).
    peak_cpu: Arc<AtomicU64>,
    sampler: JoinHandle<()>,
}

impl UsageProbe {
    /// Read the process's CPU time now and sample its RSS until `finish`.
    pub fn start(pid: u32) -> Result<Self, ProcError> {
        let cpu = read_cpu(pid)?;
        let max_rss = Arc::new(AtomicU64::new(read_memory(pid)?.rss_bytes));
        let sampled = max_rss.clone();
        let peak_cpu = Arc::new(AtomicU64::new(0f64.to_bits()));
        let peak = peak_cpu.clone();
        let first = cpu;
        let sampler = tokio::spawn(async move {
            let mut every = tokio::time::interval(SAMPLE_EVERY);
            let mut recent = std::collections::VecDeque::from([(Instant::now(), first)]);
            loop {
                every.tick().await;
                match (read_memory(pid), read_cpu(pid)) {
                    (Ok(memory), Ok(cpu)) => {
                        sampled.fetch_max(memory.rss_bytes, Ordering::Relaxed);
                        let now = Instant::now();
                        if recent.len() > PEAK_SPAN {
                            recent.pop_front();
                        }
                        if let Some((at, then)) = recent.front() {
                            let span = now.duration_since(*at).as_secs_f64();
                            if recent.len() == PEAK_SPAN && span > 0.0 {
                                let rate = cpu.seconds_since(then) / span * 100.0;
                                let highest = f64::from_bits(peak.load(Ordering::Relaxed));
                                peak.store(highest.max(rate).to_bits(), Ordering::Relaxed);
                            }
                        }
                        recent.push_back((now, cpu));
                    }
                    _ => return,
                }
            }
        });
        Ok(UsageProbe {
            pid,
            cpu,
            started: Instant::now(),
            max_rss,
            peak_cpu,
            sampler,
        })
    }

    /// Stop sampling and report the window.
    pub fn finish(self) -> Result<ProcessUsage, ProcError> {
        self.sampler.abort();
        let window = self.started.elapsed().as_secs_f64();
        let cpu = read_cpu(self.pid)?.seconds_since(&self.cpu);
        let memory = read_memory(self.pid)?;
        let max_rss = self.max_rss.load(Ordering::Relaxed).max(memory.rss_bytes);
        Ok(ProcessUsage {
            pid: self.pid,
            cpu_seconds: cpu,
            window_seconds: window,
            cpu_percent: if window > 0.0 {
                cpu / window * 100.0
            } else {
                0.0
            },
            peak_cpu_percent: f64::from_bits(self.peak_cpu.load(Ordering::Relaxed)),
            peak_rss_bytes: memory.hwm_bytes,
            max_sampled_rss_bytes: max_rss,
        })
    }
}

/// Probes for several processes; a process that cannot be read is reported as an error.
#[derive(Default)]
pub struct UsageProbes {
    probes: Vec<Result<UsageProbe, (u32, ProcError)>>,
}

impl UsageProbes {
    pub fn start(pids: &[u32]) -> Self {
        UsageProbes {
            probes: pids
                .iter()
                .map(|&pid| UsageProbe::start(pid).map_err(|err| (pid, err)))
                .collect(),
        }
    }

    /// The usage of every process that could be read, and a message for each that could not.
    pub fn finish(self) -> (Vec<ProcessUsage>, Vec<String>) {
        let mut usages = Vec::new();
        let mut failures = Vec::new();
        for probe in self.probes {
            match probe {
                Ok(probe) => {
                    let pid = probe.pid;
                    match probe.finish() {
                        Ok(usage) => usages.push(usage),
                        Err(err) => failures.push(format!("relay pid {pid}: {err}")),
                    }
                }
                Err((pid, err)) => failures.push(format!("relay pid {pid}: {err}")),
            }
        }
        (usages, failures)
    }
}
