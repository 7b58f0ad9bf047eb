//! `starling subscribe`: read one track of a broadcast and write its frames to stdout.

use anyhow::Context;
use clap::{Args, ValueEnum};
use starling_model::{BroadcastConsumer, Origin, StartAt};
use starling_proto::{Path, Role, SessionCode};
use starling_session::SessionConfig;
use tokio::io::AsyncWriteExt;

use crate::client::{Backoff, ConnectArgs};

#[derive(Args, Debug)]
pub struct SubscribeArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Broadcast path, relative to the URL's path.
    #[arg(long)]
    broadcast: String,
    /// Track name.
    #[arg(long)]
    track: String,
    /// How frames are written to stdout.
    #[arg(long, value_enum, default_value = "lines")]
    format: Format,
    /// Exit after this many frames.
    #[arg(long)]
    count: Option<u64>,
    /// Subscribe at once instead of waiting for the broadcast to be announced.
    #[arg(long)]
    no_announce: bool,
    /// Reach back this far into the cache (0: start at the latest group).
    #[arg(long, default_value_t = 0)]
    max_age_ms: u64,
    /// Subscriber priority (higher is more urgent).
    #[arg(long, default_value_t = 0)]
    priority: u8,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
    /// Each payload followed by a newline.
    Lines,
    /// Payloads back to back.
    Raw,
    /// Each payload behind a 4-byte big-endian length.
    Length,
}

pub async fn run(
    args: SubscribeArgs,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(stop);
    let path = Path::new(&args.broadcast).context("broadcast path")?;
    let dialer = args.connect.dialer()?;
    let mut written = 0u64;
    let mut backoff = Backoff::default();
    loop {
        let origin = Origin::new();
        let mut config = SessionConfig::new(0);
        if !args.no_announce {
            config.consume = Some(origin.clone());
        }
        let session = match dialer.connect(Role::Subscriber, config).await {
            Ok(session) => session,
            Err(err) => {
                tracing::warn!(%err, "connect failed");
                backoff.wait().await;
                continue;
            }
        };
        backoff.reset();
        let done = tokio::select! {
            _ = &mut stop => true,
            err = session.closed() => {
                tracing::warn!(%err, "session closed; reconnecting");
                false
            }
            uri = session.goaway_received() => {
                tracing::info!(%uri, "relay going away; reconnecting");
                false
            }
            result = async {
                loop {
                    let broadcast = if args.no_announce {
                        session.consume_broadcast(path.clone())
                    } else {
                        announced(&origin, &path).await?
                    };
                    match read_track(&broadcast, &args, &mut written).await {
                        Ok(true) => return Ok::<_, anyhow::Error>(true),
                        Ok(false) => {}
                        Err(err) => {
                            tracing::warn!(%err, "track failed; subscribing again");
                            if args.no_announce {
                                return Err(err);
                            }
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                    }
                }
            } => result?,
        };
        session.close(SessionCode::NoError, "done");
        if done {
            dialer.close().await;
            return Ok(());
        }
        backoff.wait().await;
    }
}

/// Wait until `path` is announced.
async fn announced(origin: &Origin, path: &Path) -> anyhow::Result<BroadcastConsumer> {
    let interest = origin.interest(path.clone())?;
    let mut changed = Vec::new();
    loop {
        if let Some(broadcast) = origin.consume(path, None) {
            return Ok(broadcast);
        }
        interest.changed(&mut changed).await;
        changed.clear();
    }
}

/// Read the track until it ends; true when the requested count was reached or the track
/// finished, false when the broadcast went away (wait for it again).
async fn read_track(
    broadcast: &BroadcastConsumer,
    args: &SubscribeArgs,
    written: &mut u64,
) -> anyhow::Result<bool> {
    let mut track = broadcast
        .subscribe_track(
            &args.track,
            StartAt {
                max_age_ms: args.max_age_ms,
                priority: args.priority,
                ..StartAt::default()
            },
        )
        .map_err(|code| anyhow::anyhow!("subscribe refused: {code:?}"))?;
    let mut stdout = tokio::io::stdout();
    loop {
        let group = tokio::select! {
            group = track.next_group() => group,
            _ = broadcast.closed() => return Ok(false),
        };
        let mut group = match group {
            Ok(Some(group)) => group,
            Ok(None) => return Ok(true),
            Err(code) => {
                if broadcast.is_closed() {
                    return Ok(false);
                }
                anyhow::bail!("track failed: {code:?}");
            }
        };
        loop {
            let frame = match group.next_frame().await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(code) => {
                    tracing::warn!(?code, sequence = group.sequence(), "group skipped");
                    break;
                }
            };
            match args.format {
                Format::Lines => {
                    stdout.write_all(&frame.payload).await?;
                    stdout.write_all(b"\n").await?;
                }
                Format::Raw => stdout.write_all(&frame.payload).await?,
                Format::Length => {
                    stdout
                        .write_all(&(frame.payload.len() as u32).to_be_bytes())
                        .await?;
                    stdout.write_all(&frame.payload).await?;
                }
            }
            stdout.flush().await?;
            *written += 1;
            if args.count.is_some_and(|count| *written >= count) {
                return Ok(true);
            }
        }
    }
}
