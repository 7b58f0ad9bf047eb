//! `starling relay`: flags and an optional TOML file into a `RelayConfig`, then serve.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use starling_proto::Version;
use starling_relay::{Relay, RelayConfig, TlsSource};

#[derive(Args, Debug, Default)]
pub struct RelayArgs {
    /// TOML configuration file; flags override its values.
    #[arg(long)]
    config: Option<PathBuf>,
    /// UDP address for QUIC and WebTransport; HTTP binds the same TCP port. Default [::]:4443.
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// PEM certificate chain (with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key (with --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Generate a self-signed certificate for these hostnames (default: localhost).
    #[arg(long, value_delimiter = ',')]
    tls_generate: Vec<String>,
    /// Versions served, most preferred first.
    #[arg(long = "listen-version", value_delimiter = ',')]
    versions: Vec<Version>,
    /// Cache budget per track in bytes (the latest group always stays).
    #[arg(long)]
    cache_track_bytes: Option<usize>,
    /// Seconds sessions get to leave after GOAWAY on shutdown.
    #[arg(long)]
    drain_timeout_secs: Option<u64>,
    /// Also accept plaintext QMux over TCP (`tcp://`) here, for trusted local workers.
    #[arg(long)]
    listen_tcp: Option<SocketAddr>,
}

/// The TOML file's shape.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    bind: Option<SocketAddr>,
    #[serde(default)]
    tls: FileTls,
    #[serde(default)]
    versions: Vec<String>,
    cache_track_bytes: Option<usize>,
    drain_timeout_secs: Option<u64>,
    listen_tcp: Option<SocketAddr>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileTls {
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    #[serde(default)]
    generate: Vec<String>,
}

fn build(args: RelayArgs) -> anyhow::Result<RelayConfig> {
    let file: FileConfig = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let mut config = RelayConfig::default();
    if let Some(bind) = args.bind.or(file.bind) {
        config.bind = bind;
    }
    let cert = args.tls_cert.or(file.tls.cert);
    let key = args.tls_key.or(file.tls.key);
    let generate = if args.tls_generate.is_empty() {
        file.tls.generate
    } else {
        args.tls_generate
    };
    config.tls = match (cert, key) {
        (Some(cert), Some(key)) => TlsSource::Files { cert, key },
        (None, None) if !generate.is_empty() => TlsSource::Generate(generate),
        (None, None) => TlsSource::Generate(vec!["localhost".into()]),
        _ => anyhow::bail!("tls cert and key go together"),
    };
    let versions = if args.versions.is_empty() {
        file.versions
            .iter()
            .map(|v| v.parse::<Version>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("{e}"))?
    } else {
        args.versions
    };
    if !versions.is_empty() {
        config.versions = versions;
    }
    if let Some(bytes) = args.cache_track_bytes.or(file.cache_track_bytes) {
        config.model_limits.track_cache_bytes = bytes;
    }
    config.listen_tcp = args.listen_tcp.or(file.listen_tcp);
    if let Some(secs) = args.drain_timeout_secs.or(file.drain_timeout_secs) {
        config.drain_timeout = std::time::Duration::from_secs(secs);
    }
    Ok(config)
}

pub async fn run(args: RelayArgs) -> anyhow::Result<()> {
    let config = build(args)?;
    let relay = Relay::bind(config).await?;
    let addr = relay.local_addr()?;
    if let Some(tcp) = relay.tcp_addr() {
        tracing::info!(%tcp, "plaintext QMux over TCP listening");
    }
    tracing::info!(%addr, fingerprint = relay.fingerprint(), "relay listening (QUIC, WebTransport, WebSocket, HTTP)");
    relay
        .run_until(async {
            crate::terminated().await;
            tracing::info!("shutting down");
        })
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_run_with_no_configuration() {
        let config = build(RelayArgs::default()).unwrap();
        assert_eq!(config.bind, "[::]:4443".parse().unwrap());
        assert!(matches!(config.tls, TlsSource::Generate(ref h) if h == &["localhost"]));
        assert_eq!(config.versions, Version::SUPPORTED);
    }

    #[test]
    fn toml_file_is_read_and_flags_override() {
        let dir = std::env::temp_dir().join(format!("starling-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("relay.toml");
        std::fs::write(
            &file,
            "bind = \"127.0.0.1:5000\"\nversions = [\"moq-lite-05\"]\ncache_track_bytes = 1024\n[tls]\ngenerate = [\"relay.test\"]\n",
        )
        .unwrap();
        let config = build(RelayArgs {
            config: Some(file.clone()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(config.bind, "127.0.0.1:5000".parse().unwrap());
        assert_eq!(config.versions, vec![Version::Lite05]);
        assert_eq!(config.model_limits.track_cache_bytes, 1024);
        assert!(matches!(config.tls, TlsSource::Generate(ref h) if h == &["relay.test"]));
        let config = build(RelayArgs {
            config: Some(file),
            bind: Some("127.0.0.1:6000".parse().unwrap()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(config.bind, "127.0.0.1:6000".parse().unwrap());
    }
}
