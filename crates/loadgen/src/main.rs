//! `starling-load`: drive a relay process with publishers and subscribers over real sockets
//! and report latency, loss, errors and the relay's CPU and memory.

use std::path::PathBuf;

/// Cheaper allocation leaves more of a shared machine to the relay under test.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use starling_loadgen::{burst, cdf, churn, community, dash, fanout, RunOptions, Summary};

#[derive(Parser, Debug)]
#[command(name = "starling-load", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One publisher and N subscribers on one relay: delivery latency and loss.
    Fanout {
        #[command(flatten)]
        args: fanout::FanoutArgs,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// N clients (QUIC, WebSocket, HTTP fetch) connecting as fast as a limit allows.
    Burst {
        #[command(flatten)]
        args: burst::BurstArgs,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// A chat community on a cold relay: members bursting in with history, live messages,
    /// members-only channels, HTTP agents and members removed mid-run.
    Community {
        #[command(flatten)]
        args: community::CommunityArgs,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Groups through short-lived tracks, publishers and subscribers coming and going (the
    /// soak's track churn).
    Churn {
        #[command(flatten)]
        args: churn::ChurnArgs,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// The stats-aggregator shape across a cluster: per-tick completion latency.
    Dash {
        #[command(flatten)]
        args: dash::DashArgs,
        #[command(flatten)]
        report: ReportArgs,
    },
    /// Side by side: ratios A/B per figure over paired runs (`runs/<scenario>/<a>-<i>.json`).
    Compare {
        /// The directory holding one subdirectory per scenario.
        #[arg(long)]
        runs: PathBuf,
        /// The name of side A in the file names.
        #[arg(long, default_value = "starling")]
        a: String,
        /// The name of side B in the file names.
        #[arg(long, default_value = "moq-relay")]
        b: String,
    },
}

/// Print a Markdown table per scenario under `runs`.
fn compare(runs: &std::path::Path, a: &str, b: &str) -> anyhow::Result<()> {
    use starling_loadgen::compare;
    let mut scenarios: Vec<_> = std::fs::read_dir(runs)
        .with_context(|| format!("reading {}", runs.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    scenarios.sort();
    for dir in scenarios {
        let pairs = compare::load_pairs(&dir, a, b)?;
        let first = &pairs[0].0;
        let mode = first["mode"].as_str().unwrap_or_default().to_string();
        let idle = first["config"]["idle_secs"].as_f64().unwrap_or(0.0) > 0.0;
        let rows = compare::rows(&pairs, &compare::figures(&mode, idle));
        let title = format!(
            "{} ({} pairs)",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or_default(),
            pairs.len()
        );
        println!("{}", compare::markdown(&title, a, b, &rows));
    }
    Ok(())
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// Write the summary as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the latency CDFs as an SVG to this file.
    #[arg(long)]
    cdf: Option<PathBuf>,
    /// A relay process to report CPU seconds and peak RSS for (repeatable).
    #[arg(long = "relay-pid")]
    relay_pids: Vec<u32>,
    /// Never draw the progress line.
    #[arg(long)]
    no_progress: bool,
}

impl ReportArgs {
    fn options(&self) -> RunOptions {
        RunOptions {
            relay_pids: self.relay_pids.clone(),
            progress: !self.no_progress,
        }
    }

    fn emit(&self, summary: &Summary) -> anyhow::Result<()> {
        print!("{summary}");
        if let Some(path) = &self.json {
            summary
                .write_json(path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.cdf {
            let title = format!("starling-load {}: latency CDF", summary.mode);
            let svg = cdf::render(&title, &summary.distributions);
            starling_loadgen::summary::write_file(path, svg.as_bytes())?;
        }
        Ok(())
    }
}

async fn interrupted() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    starling_net::host::no_transparent_huge_pages();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // web-transport-quinn warns about every session closed under it at exit.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,web_transport_quinn=error")
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    starling_net::tls::install_default_provider();
    let (summary, report) = match &cli.command {
        Command::Compare { runs, a, b } => return compare(runs, a, b),
        Command::Fanout { args, report } => (
            fanout::run(args, &report.options(), interrupted()).await?,
            report,
        ),
        Command::Burst { args, report } => (
            burst::run(args, &report.options(), interrupted()).await?,
            report,
        ),
        Command::Community { args, report } => (
            community::run(args, &report.options(), interrupted()).await?,
            report,
        ),
        Command::Churn { args, report } => (
            churn::run(args, &report.options(), interrupted()).await?,
            report,
        ),
        Command::Dash { args, report } => (
            dash::run(args, &report.options(), interrupted()).await?,
            report,
        ),
    };
    report.emit(&summary)
}
