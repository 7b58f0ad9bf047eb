//! One member: connect over QUIC or WebSocket with its token, ask for each of its channels
//! (hearing the channel's announce, then subscribing with a max age that reaches back over
//! the history), and read every channel until the run ends, all within the member's task.
//!
//! Recorded per channel: the answer (first message, from the ask), the history (every owed
//! message, from the ask) and each live message's delivery (from when it was due). A member
//! signed by the removable key expects the relay to close its session once the key is gone:
//! the time from the removal to the close is the removal latency, and a session still open
//! at the end is `removal_missed`.

use std::sync::atomic::Ordering;

use futures::stream::{FuturesUnordered, StreamExt};
use starling_model::{GroupConsumer, Origin, StartAt};
use starling_proto::{Path, Role, SessionCode};
use starling_session::{Error as SessionError, SessionConfig};
use starling_transport::TransportError;

use super::history::ChannelHistory;
use super::layout::{Channel, TRACK};
use super::Plan;
use crate::clock::Clock;
use crate::frame::FrameHeader;
use crate::recorder::Recorder;
use crate::run::announced;

/// Run member `i` from its start to the end of the run.
pub(super) async fn member(i: usize, plan: &Plan) {
    let kind = plan.mix[i % plan.mix.len()];
    let recorder = &plan.recorders[kind.index()];
    Recorder::bump(&recorder.attempted, 1);
    let removable = plan.removal.is_removed(i);
    let channels = plan.layout.channels_of(i);
    let url = plan.member_url(i, kind);
    let started = plan.clock.now_ns();
    plan.first_dial_ns.fetch_min(started, Ordering::AcqRel);
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    config.announce_prefixes = channels
        .iter()
        .filter_map(|c| Path::new(&c.path()).ok())
        .collect();
    let mut refused = 0u32;
    let session = loop {
        let deadline = tokio::time::Instant::now() + plan.timeout;
        // Boxed: the dial's state (handshakes, TLS) is most of a member's future, and held
        // inline it would stay allocated, and touched, for the member's whole life.
        let dial = Box::pin(plan.dialer.connect(&url, Role::Subscriber, config.clone()));
        let connected = tokio::select! {
            connected = tokio::time::timeout_at(deadline, dial) => connected,
            _ = plan.stop.stopped() => return,
        };
        match connected {
            Err(_) => return recorder.errors.count("connect_timeout"),
            // A removed member dialing after its key is gone is refused, as it should be.
            Ok(Err(_)) if removable && plan.removed_at_ns.load(Ordering::Acquire) != 0 => {
                return Recorder::bump(&plan.removed_refused, 1);
            }
            // The relay said no cleanly: come back after the wait it asked for.
            Ok(Err(err)) if err.refusal().is_some() => {
                Recorder::bump(&plan.refusals, 1);
                refused += 1;
                let wait = jittered(err.refusal().unwrap_or_default(), i, refused);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = plan.stop.stopped() => {
                        return Recorder::bump(&plan.never_admitted, 1);
                    }
                }
            }
            Ok(Err(err)) => return recorder.errors.count(&err.kind()),
            Ok(Ok(session)) => break session,
        }
    };
    if refused > 0 {
        Recorder::bump(&plan.admitted_after_refusal, 1);
    }
    plan.last_admitted_ns
        .fetch_max(plan.clock.now_ns(), Ordering::AcqRel);
    // The member's deadlines (first message, history) run from its admission.
    let deadline = tokio::time::Instant::now() + plan.timeout;
    recorder.connect.record(plan.clock.now_ns() - started);
    Recorder::bump(&recorder.connected, 1);

    let reads = futures::future::join_all(
        channels
            .iter()
            .map(|&channel| read_channel(plan, recorder, &origin, channel, deadline, removable)),
    );
    // Channels end early only when the session does (or the relay failed them): then wait
    // for the session's end to learn why.
    let closed = tokio::select! {
        _ = reads => tokio::select! {
            err = session.closed() => Some(err),
            _ = plan.stop.stopped() => None,
        },
        _ = plan.stop.stopped() => None,
        err = session.closed() => Some(err),
    };
    let removed_at = plan.removed_at_ns.load(Ordering::Acquire);
    match closed {
        Some(_) if removable && removed_at != 0 => {
            plan.removal_latency
                .record(plan.clock.now_ns().saturating_sub(removed_at));
            Recorder::bump(&plan.removed_closed, 1);
        }
        Some(err) => recorder.errors.count(&close_kind(&err)),
        None if removable && removed_at != 0 => recorder.errors.count("removal_missed"),
        None => {}
    }
    session.close(SessionCode::NoError, "done");
}

/// `wait` spread over half to one and a half of itself, differently for each member and
/// attempt, so members refused together do not all come back together.
pub(super) fn jittered(
    wait: std::time::Duration,
    member: usize,
    attempt: u32,
) -> std::time::Duration {
    // splitmix64 of (member, attempt): cheap, and the same run retries the same way.
    let mut x = (member as u64) << 32 ^ u64::from(attempt);
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
    wait.mul_f64(0.5 + unit)
}

/// A stable name for why a session ended under a member.
fn close_kind(err: &SessionError) -> String {
    match err {
        SessionError::Transport(TransportError::ClosedByPeer { code, .. }) => {
            format!("session_closed:{code}")
        }
        _ => "session_closed".into(),
    }
}

/// Ask for `channel` and read it until the run ends.
async fn read_channel(
    plan: &Plan,
    recorder: &Recorder,
    origin: &Origin,
    channel: Channel,
    deadline: tokio::time::Instant,
    removable: bool,
) {
    let asked = plan.clock.now_ns();
    let mut history = ChannelHistory::new(plan.channels.sent(channel), plan.history);
    if history.owed() > 0 {
        Recorder::bump(&plan.history_owed, 1);
    }
    let Ok(path) = Path::new(&channel.path()) else {
        return recorder.errors.count("channel_path");
    };
    let broadcast = match tokio::time::timeout_at(deadline, announced(origin, &path)).await {
        Ok(Ok(broadcast)) => broadcast,
        Ok(Err(_)) => return recorder.errors.count("announce_interest"),
        Err(_) => return recorder.errors.count("timeout_announce"),
    };
    let start = StartAt {
        max_age_ms: plan.reach.as_millis() as u64,
        ..StartAt::default()
    };
    let mut track = match broadcast.subscribe_track(TRACK, start) {
        Ok(track) => track,
        Err(code) => {
            return recorder
                .errors
                .count(&format!("subscribe_refused:{code:?}"))
        }
    };
    let mut reading = FuturesUnordered::new();
    let mut open = true;
    let mut answered = false;
    let first_deadline = tokio::time::sleep_until(deadline);
    tokio::pin!(first_deadline);
    while open || !reading.is_empty() {
        tokio::select! {
            next = track.next_group(), if open => match next {
                Ok(Some(group)) => reading.push(read_message(group, &plan.clock)),
                Ok(None) => open = false,
                Err(code) => {
                    // A removed member's channels end with its session: expected.
                    if !(removable && plan.removed_at_ns.load(Ordering::Acquire) != 0) {
                        recorder.errors.count(&format!("track_failed:{code:?}"));
                    }
                    open = false;
                }
            },
            Some(message) = reading.next() => {
                let (header, now) = match message {
                    Ok(message) => message,
                    Err(kind) => {
                        recorder.errors.count(&kind);
                        Recorder::bump(&recorder.groups_failed, 1);
                        continue;
                    }
                };
                Recorder::bump(&recorder.groups, 1);
                let arrival = history.record(header.sequence);
                if arrival.first {
                    answered = true;
                    recorder.first_frame.record(now.saturating_sub(asked));
                }
                if arrival.older {
                    Recorder::bump(&plan.history_older, 1);
                }
                if arrival.completed_history {
                    plan.history_latency.record(now.saturating_sub(asked));
                    Recorder::bump(&plan.history_complete, 1);
                }
                if arrival.live {
                    recorder.delivery.record(now.saturating_sub(header.scheduled_ns));
                    Recorder::bump(&recorder.frames, 1);
                    recorder.delivered_at(now);
                }
            }
            _ = &mut first_deadline, if !answered => {
                recorder.errors.count("timeout_first_group");
                answered = true;
            }
        }
    }
}

/// Read one message (a group of one frame): its header and arrival time, or the kind of
/// failure.
async fn read_message(
    mut group: GroupConsumer,
    clock: &Clock,
) -> Result<(FrameHeader, u64), String> {
    match group.next_frame().await {
        Ok(Some(frame)) => {
            let now = clock.now_ns();
            FrameHeader::decode(&frame.payload)
                .map(|header| (header, now))
                .map_err(|err| err.kind().to_string())
        }
        Ok(None) => Err("group_empty".into()),
        Err(code) => Err(format!("group_reset:{code:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::jittered;
    use std::time::Duration;

    #[test]
    fn retries_spread_over_half_to_one_and_a_half_of_the_wait() {
        let wait = Duration::from_secs(1);
        let waits: Vec<Duration> = (0..1000).map(|m| jittered(wait, m, 1)).collect();
        assert!(waits
            .iter()
            .all(|w| *w >= wait / 2 && *w < wait.mul_f64(1.5)));
        let early = waits.iter().filter(|w| **w < wait).count();
        assert!(
            (400..600).contains(&early),
            "{early} of 1000 below the wait"
        );
        assert_ne!(
            jittered(wait, 7, 1),
            jittered(wait, 7, 2),
            "attempts differ"
        );
    }
}
