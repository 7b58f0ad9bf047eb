//! `starling`: the relay and the command-line client in one binary.

/// mimalloc: glibc's malloc and free were about 15 % of the relay's profile under load. The
/// `system-allocator` feature leaves the system's, for heap profilers.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod client;
mod logging;
mod publish;
mod relay;
mod subscribe;
mod token;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "starling", version, about = "Media over QUIC relay and client")]
struct Cli {
    /// Log directives (`info,starling_session=debug`, or with spans and fields
    /// `starling[session{id=7}]=trace`); defaults to RUST_LOG, else `info`.
    #[arg(long, global = true)]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a relay.
    Relay(Box<relay::RelayArgs>),
    /// Publish a broadcast to a relay.
    Publish(publish::PublishArgs),
    /// Subscribe to a track and write its frames to stdout.
    Subscribe(subscribe::SubscribeArgs),
    /// Generate keys, sign and verify JWT tokens (moq-cli compatible).
    Token(token::TokenArgs),
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
    starling_net::host::no_transparent_huge_pages();
    let cli = Cli::parse();
    logging::init_logging(cli.log.as_deref())?;
    starling_net::tls::install_default_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Relay(args) => relay::run(*args).await,
            Command::Publish(args) => publish::run(args, terminated()).await,
            Command::Subscribe(args) => subscribe::run(args, terminated()).await,
            Command::Token(args) => token::run(args),
        }
    })
}
