//! `starling publish`: a clock, or frames from stdin, published as one broadcast.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, TrackInfo, TrackProducer};
use starling_proto::{Path, Role, SessionCode};
use starling_session::SessionConfig;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::client::{Backoff, ConnectArgs};

#[derive(Args, Debug)]
pub struct PublishArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Broadcast path, relative to the URL's path.
    #[arg(long)]
    broadcast: String,
    #[command(subcommand)]
    source: Source,
}

#[derive(Subcommand, Debug)]
enum Source {
    /// Track `seconds`: a frame a second, a group a minute.
    Clock,
    /// Frames read from stdin.
    Stdin(StdinArgs),
}

#[derive(Args, Debug)]
struct StdinArgs {
    /// Track name.
    #[arg(long, default_value = "data")]
    track: String,
    /// How frames are delimited on stdin.
    #[arg(long, value_enum, default_value = "lines")]
    framing: Framing,
    /// Frames per group.
    #[arg(long, default_value_t = 1)]
    group_frames: usize,
    /// Track max age (cache window) in milliseconds.
    #[arg(long, default_value_t = 5000)]
    max_age_ms: u64,
    /// After stdin ends, keep serving this long before exiting.
    #[arg(long, default_value_t = 1000)]
    linger_ms: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Framing {
    /// One frame per line (the newline is not part of the frame).
    Lines,
    /// Each frame is a 4-byte big-endian length followed by the payload.
    Length,
}

pub async fn run(
    args: PublishArgs,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let path = Path::new(&args.broadcast).context("broadcast path")?;
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let _route = origin.publish(path, broadcast.consume(), Route::local())?;

    // The source runs for the life of the process; connections come and go beneath it.
    let source = async {
        match &args.source {
            Source::Clock => clock(&broadcast).await,
            Source::Stdin(stdin) => {
                let info = TrackInfo {
                    max_age_ms: stdin.max_age_ms,
                    ..TrackInfo::default()
                };
                let track = broadcast.create_track(&stdin.track, info);
                from_stdin(&track, stdin).await?;
                track.finish();
                tokio::time::sleep(Duration::from_millis(stdin.linger_ms)).await;
                Ok(())
            }
        }
    };
    let dialer = args.connect.dialer()?;
    // The live session, so a stop signal can close it cleanly.
    let current =
        std::sync::Mutex::new(None::<starling_session::Session<starling_net::AnyTransport>>);
    let connections = async {
        let mut backoff = Backoff::default();
        loop {
            let mut config = SessionConfig::new(0);
            config.publish = Some(origin.clone());
            match dialer.connect(Role::Publisher, config).await {
                Ok(session) => {
                    backoff.reset();
                    *current.lock().expect("session slot") = Some(session.clone());
                    tokio::select! {
                        err = session.closed() => tracing::warn!(%err, "session closed; reconnecting"),
                        uri = session.goaway_received() => {
                            tracing::info!(%uri, "relay going away; reconnecting");
                            session.close(SessionCode::NoError, "going away");
                            continue;
                        }
                    }
                }
                Err(err) => tracing::warn!(%err, "connect failed"),
            }
            backoff.wait().await;
        }
    };
    let result = tokio::select! {
        result = source => result,
        never = connections => never,
        _ = stop => Ok(()),
    };
    let session = current.lock().expect("session slot").take();
    if let Some(session) = session {
        session.close(SessionCode::NoError, "done");
    }
    dialer.close().await;
    result
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Like moq-dev's clock: each minute is a group whose first frame is `YYYY-MM-DD HH:MM:` and
/// whose following frames are the seconds `SS`.
async fn clock(broadcast: &BroadcastProducer) -> anyhow::Result<()> {
    let track = broadcast.create_track("seconds", TrackInfo::default());
    loop {
        let start = now_ms();
        let minute = start / 60_000;
        let mut group = track.create_group(minute)?;
        group.write_frame(Frame {
            timestamp: start,
            payload: Bytes::from(format_minute(minute)),
        })?;
        loop {
            let now = now_ms();
            if now / 60_000 != minute {
                break;
            }
            let second = (now / 1000) % 60;
            group.write_frame(Frame {
                timestamp: now,
                payload: Bytes::from(format!("{second:02}")),
            })?;
            let next = (now / 1000 + 1) * 1000;
            tokio::time::sleep(Duration::from_millis(next - now)).await;
        }
        group.finish();
    }
}

fn format_minute(minute: u64) -> String {
    // Civil date from days since the epoch (Howard Hinnant's algorithm), UTC.
    let days = (minute / 1440) as i64;
    let (hour, min) = ((minute / 60) % 24, minute % 60);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{min:02}:")
}

async fn from_stdin(track: &TrackProducer, args: &StdinArgs) -> anyhow::Result<()> {
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut group = None;
    let mut in_group = 0usize;
    let mut line = Vec::new();
    loop {
        let payload = match args.framing {
            Framing::Lines => {
                line.clear();
                if stdin.read_until(b'\n', &mut line).await? == 0 {
                    break;
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Bytes::copy_from_slice(&line)
            }
            Framing::Length => {
                let mut len = [0u8; 4];
                match stdin.read_exact(&mut len).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(e.into()),
                }
                let len = u32::from_be_bytes(len) as usize;
                anyhow::ensure!(len <= 32 << 20, "frame of {len} bytes is too large");
                let mut payload = vec![0u8; len];
                stdin.read_exact(&mut payload).await?;
                Bytes::from(payload)
            }
        };
        if group.is_none() {
            group = Some(track.append_group()?);
            in_group = 0;
        }
        let current = group.as_mut().expect("group just created");
        current.write_frame(Frame {
            timestamp: now_ms(),
            payload,
        })?;
        in_group += 1;
        if in_group >= args.group_frames.max(1) {
            if let Some(done) = group.take() {
                done.finish();
            }
        }
    }
    if let Some(done) = group.take() {
        done.finish();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::format_minute;

    #[test]
    fn minute_formats_as_utc_date() {
        // 2026-11-30 02:43 UTC
        let minute = 1_796_006_580_000u64 / 60_000;
        assert_eq!(format_minute(minute), "2026-11-30 02:43:");
        assert_eq!(format_minute(0), "1970-01-01 00:00:");
    }
}
