//! `starling`: the relay and the command-line client in one binary.

mod client;
mod publish;
mod relay;
mod subscribe;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "starling", version, about = "Media over QUIC relay and client")]
struct Cli {
    /// Log directives (`target=level,…`); defaults to RUST_LOG, else `info`.
    #[arg(long, global = true)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a relay.
    Relay(relay::RelayArgs),
    /// Publish a broadcast to a relay.
    Publish(publish::PublishArgs),
    /// Subscribe to a track and write its frames to stdout.
    Subscribe(subscribe::SubscribeArgs),
}

fn init_logging(directives: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match directives {
        Some(d) => EnvFilter::new(d),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGINT or SIGTERM (what supervisors and test harnesses send).
pub async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log.as_deref());
    starling_net::tls::install_default_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Relay(args) => relay::run(args).await,
            Command::Publish(args) => publish::run(args, terminated()).await,
            Command::Subscribe(args) => subscribe::run(args, terminated()).await,
        }
    })
}
