//! One burst client: a QUIC or WebSocket subscriber waiting for its first frame (and staying
//! for the hold time), or an HTTP agent fetching the latest group.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::FutureExt;
use starling_model::{Origin, StartAt};
use starling_proto::{Role, SessionCode};
use starling_session::SessionConfig;
use tokio::sync::{watch, OwnedSemaphorePermit};
use url::Url;

use super::{AgentKind, Plan};
use crate::countdown::Countdown;
use crate::http_fetch::{fetch_latest, fetch_url};
use crate::loss::LossCounts;
use crate::publisher::track_name;
use crate::reader::{read_track, ReadContext, TrackRead};
use crate::recorder::Recorder;
use crate::run::{announced, stopped_or_closed};

/// One client; returns its loss counts (non-zero only when held).
pub(super) async fn client(i: usize, plan: Arc<Plan>, permit: OwnedSemaphorePermit) -> LossCounts {
    let kind = plan.mix[i % plan.mix.len()];
    let recorder = &plan.recorders[kind.index()];
    Recorder::bump(&recorder.attempted, 1);
    let deadline = tokio::time::Instant::now() + plan.timeout;
    let track = track_name(i % plan.tracks);
    let counts = match kind {
        AgentKind::Http => {
            http_client(&plan, recorder, &track, deadline).await;
            drop(permit);
            LossCounts::default()
        }
        AgentKind::Quic | AgentKind::WebSocket => {
            let url = &plan.urls[kind.index()];
            subscriber(&plan, recorder, url, &track, deadline, permit).await
        }
    };
    Recorder::bump(&plan.done, 1);
    counts
}

async fn http_client(
    plan: &Plan,
    recorder: &Recorder,
    track: &str,
    deadline: tokio::time::Instant,
) {
    let url = fetch_url(&plan.http_base, &plan.broadcast, track);
    let fetched = tokio::select! {
        fetched = tokio::time::timeout_at(deadline, fetch_latest(&plan.http, &url)) => fetched,
        _ = plan.stop.stopped() => return,
    };
    let fetched = match fetched {
        Err(_) => return recorder.errors.count("http_timeout"),
        Ok(Err(err)) => return recorder.errors.count(&err.kind()),
        Ok(Ok(fetched)) => fetched,
    };
    let now = plan.clock.now_ns();
    recorder.connect.record(fetched.headers_ns);
    Recorder::bump(&recorder.connected, 1);
    recorder.first_frame.record(fetched.body_ns);
    Recorder::bump(&recorder.bytes, fetched.bytes as u64);
    Recorder::bump(&recorder.groups, 1);
    match fetched.first {
        Ok(header) if !header.prime => {
            recorder
                .delivery
                .record(now.saturating_sub(header.scheduled_ns));
            Recorder::bump(&recorder.frames, 1);
        }
        Ok(_) => {}
        Err(err) => {
            recorder.errors.count(err.kind());
            Recorder::bump(&recorder.groups_failed, 1);
        }
    }
}

async fn subscriber(
    plan: &Plan,
    recorder: &Recorder,
    url: &Url,
    track: &str,
    deadline: tokio::time::Instant,
    permit: OwnedSemaphorePermit,
) -> LossCounts {
    let started = plan.clock.now_ns();
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![plan.path.clone()];
    let connected = tokio::select! {
        connected = tokio::time::timeout_at(deadline, plan.dialer.connect(url, Role::Subscriber, config)) => connected,
        _ = plan.stop.stopped() => return LossCounts::default(),
    };
    let session = match connected {
        Err(_) => {
            recorder.errors.count("connect_timeout");
            return LossCounts::default();
        }
        Ok(Err(err)) => {
            recorder.errors.count(&err.kind());
            return LossCounts::default();
        }
        Ok(Ok(session)) => session,
    };
    recorder.connect.record(plan.clock.now_ns() - started);
    Recorder::bump(&recorder.connected, 1);

    let broadcast = tokio::select! {
        broadcast = tokio::time::timeout_at(deadline, announced(&origin, &plan.path)) => match broadcast {
            Ok(Ok(broadcast)) => Some(broadcast),
            Ok(Err(_)) => None,
            Err(_) => {
                recorder.errors.count("timeout_announce");
                None
            }
        },
        _ = stopped_or_closed(&plan.stop, &session) => None,
    };
    let Some(broadcast) = broadcast else {
        session.close(SessionCode::NoError, "done");
        return LossCounts::default();
    };
    let consumer = match broadcast.subscribe_track(track, StartAt::default()) {
        Ok(consumer) => consumer,
        Err(code) => {
            recorder
                .errors
                .count(&format!("subscribe_refused:{code:?}"));
            session.close(SessionCode::NoError, "done");
            return LossCounts::default();
        }
    };
    let first = Countdown::new(1);
    let ctx = ReadContext {
        clock: &plan.clock,
        recorder,
        ready: Some(&first),
        on_frame: None,
    };
    // Leave at the deadline without a first frame; after it, release the slot and stay for
    // the hold time.
    let timed_out = AtomicBool::new(false);
    let leave = async {
        tokio::select! {
            _ = first.wait() => {}
            _ = tokio::time::sleep_until(deadline) => {
                timed_out.store(true, Ordering::Relaxed);
                return;
            }
        }
        drop(permit);
        if !plan.hold.is_zero() {
            tokio::time::sleep(plan.hold).await;
        }
    };
    let (_never_tx, last_group) = watch::channel(None);
    let read = read_track(consumer, &ctx, TrackRead::late(), last_group, async {
        tokio::select! {
            _ = leave => {}
            _ = stopped_or_closed(&plan.stop, &session) => {}
        }
    })
    .await;
    match read.first_frame_ns {
        Some(at) => recorder.first_frame.record(at.saturating_sub(started)),
        None if timed_out.load(Ordering::Relaxed) => recorder.errors.count("timeout_first_frame"),
        None => {}
    }
    if session.closed().now_or_never().is_some() {
        recorder.errors.count("session_closed");
    }
    session.close(SessionCode::NoError, "done");
    // Loss means something only for a client that stayed: gaps after its first frame.
    if plan.hold.is_zero() {
        LossCounts::default()
    } else {
        read.frames.counts(None)
    }
}
