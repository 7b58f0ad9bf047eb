//! Installs the process-wide log subscriber from `--log`, else `RUST_LOG`, else `info`.

use anyhow::{anyhow, bail};
use starling_logging::{choose, LogFilter};
use tracing_subscriber::{layer::SubscriberExt, util::SubscriberInitExt, Layer, Registry};

/// Parses the directive list (see `starling_logging` for how it picks `Targets` or
/// `EnvFilter`) and installs a stderr formatter behind it. An invalid directive is an error
/// naming its source, never silently dropped.
pub fn init_logging(flag: Option<&str>) -> anyhow::Result<()> {
    let env = match std::env::var("RUST_LOG") {
        Ok(value) => Some(value),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => bail!("RUST_LOG is not valid UTF-8"),
    };
    let (source, list) = choose(flag, env.as_deref());
    let filter = LogFilter::parse(list).map_err(|e| anyhow!("{source}: {e}"))?;
    // One monomorphic subscriber per filter, so the `Targets` path pays no dispatch to reach it.
    match filter {
        LogFilter::Targets(targets) => install(targets),
        LogFilter::Env(env) => install(env),
    }
}

fn install<F: Layer<Registry> + Send + Sync + 'static>(filter: F) -> anyhow::Result<()> {
    tracing_subscriber::registry()
        .with(filter)
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .try_init()?;
    Ok(())
}
