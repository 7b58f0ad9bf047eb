//! The whole-session targets: arbitrary bytes drive a client against a relay-side session over
//! the in-memory transport (streams opened, written, finished and reset in any order, time
//! moved on), next to an honest subscriber on the same origin. `session` speaks lite-06;
//! `ietf_session` an IETF draft picked by the first byte, its control stream (14-16) or SETUP
//! stream (17 on) the first stream the input can write to.
//!
//! The relay (its origin, a published track and the honest subscriber's session) and the
//! runtime are built once per thread and reused by every input, as a long-lived relay meets
//! one hostile session after another: that makes an execution cost one session, not a relay,
//! and it checks that each hostile session leaves nothing behind. A panicking input drops
//! them, so the next starts afresh.
//!
//! Checked after every step: the hostile session never holds more than its receive budget.
//! At the end: the honest subscriber still gets a group published after the attack; the
//! hostile session, once its client closes, ends; and the origin holds exactly what it held
//! before (the one broadcast, the honest interests). Time is paused: timeouts fire as soon as
//! every task waits, so an input can never hang.

use std::cell::RefCell;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_model::{
    BroadcastProducer, Frame, Limits, Origin, Route, RouteHandle, StartAt, TrackConsumer,
    TrackInfo, TrackProducer,
};
use starling_proto::ietf::Draft;
use starling_proto::{encode_message, ietf, Path, Protocol, Role, Setup, Version};
use starling_session::{Accepting, ClientSetup, Session, SessionConfig};
use starling_transport::mem::{pair, MemRecv, MemSend, MemTransport};
use starling_transport::{RecvStream, SendStream, Transport};

use crate::harness::{with_relay, Slot};

/// The hostile session's receive budget: small, so the short inputs this target runs with
/// (scripts/fuzz.sh caps them at 384 bytes) reach eviction.
const BUDGET: usize = 256;
/// The hostile session's control message bound: within the budget, so one whole message fits.
const MAX_CONTROL_MESSAGE: usize = 192;
/// How long one step may take, in paused time.
const STEP: Duration = Duration::from_secs(5);

thread_local! {
    static HARNESS: Slot<Relay> = const { RefCell::new(None) };
}

pub fn session(data: &[u8]) -> bool {
    run(data, Protocol::Lite(Version::Lite06))
}

/// The whole-session target on the IETF drafts: the first byte picks the draft.
pub fn ietf_session(data: &[u8]) -> bool {
    let Some((&pick, rest)) = data.split_first() else {
        return false;
    };
    let draft = Draft::ALL[pick as usize % Draft::ALL.len()];
    run(rest, Protocol::Ietf(draft))
}

fn run(data: &[u8], protocol: Protocol) -> bool {
    with_relay(&HARNESS, Relay::start, |runtime, relay| {
        runtime.block_on(relay.drive(data, protocol))
    })
}

/// The relay side: an origin publishing one track, and an honest subscriber reading it.
struct Relay {
    origin: Origin,
    track: TrackProducer,
    reader: TrackConsumer,
    /// The next group to publish.
    sequence: u64,
    /// Streams evicted from hostile sessions so far (the harness's own test reads it).
    evictions: u64,
    /// What the origin holds with no hostile session: its broadcasts and interests.
    baseline: (usize, usize),
    _broadcast: BroadcastProducer,
    _route: RouteHandle,
    _honest: (Session<MemTransport>, Session<MemTransport>),
}

/// The relay side's session config, with receive budget `budget`.
fn relay_config(origin: &Origin, budget: usize) -> SessionConfig {
    let mut config = SessionConfig::new(1);
    config.publish = Some(origin.clone());
    config.consume = Some(origin.clone());
    config.limits.recv_budget = budget;
    // As the relay's sessions do: pull each track's whole window.
    config.pull_window = true;
    config
}

impl Relay {
    async fn start() -> Relay {
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new(Limits::default());
        let track = broadcast.create_track("seq", TrackInfo::default());
        let route = origin
            .publish(
                Path::new("good").unwrap(),
                broadcast.consume(),
                Route::local(),
            )
            .unwrap();

        // The honest subscriber.
        let (honest_client, honest_server) = pair();
        let honest_side = relay_config(&origin, 1 << 20);
        let honest_relay = tokio::spawn(async move {
            let accepting = Accepting::new(honest_server, Version::Lite06, STEP)
                .await
                .ok()?;
            accepting.start(honest_side).await.ok()
        });
        let seen = Origin::new();
        let mut honest_config = SessionConfig::new(2);
        honest_config.consume = Some(seen.clone());
        let setup = ClientSetup {
            role: Some(Role::Subscriber),
            ..Default::default()
        };
        let Ok(Ok(honest)) = tokio::time::timeout(
            STEP,
            Session::connect(honest_client, Version::Lite06, setup, honest_config),
        )
        .await
        else {
            panic!("the honest subscriber connects");
        };
        let honest_relay = honest_relay
            .await
            .unwrap()
            .expect("the relay serves the honest subscriber");
        let reader = loop {
            if let Some(b) = seen.consume(&Path::new("good").unwrap(), None) {
                break b.subscribe_track("seq", StartAt::default()).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        let baseline = (origin.len(), origin.interest_count());
        Relay {
            origin,
            track,
            reader,
            sequence: 0,
            evictions: 0,
            baseline,
            _broadcast: broadcast,
            _route: route,
            _honest: (honest, honest_relay),
        }
    }

    async fn drive(&mut self, data: &[u8], protocol: Protocol) -> bool {
        // The hostile client: a valid SETUP, then whatever the input says.
        let (client, server) = pair();
        let mut hostile_side = relay_config(&self.origin, BUDGET);
        hostile_side.limits.max_control_message = MAX_CONTROL_MESSAGE;
        let hostile_relay = tokio::spawn(async move {
            let accepting = match protocol {
                Protocol::Lite(version) => Accepting::new(server, version, STEP).await.ok()?,
                Protocol::Ietf(draft) => Accepting::ietf(server, draft, STEP).await.ok()?,
            };
            accepting.start(hostile_side).await.ok()
        });
        let mut sends: Vec<MemSend> = Vec::new();
        let mut recvs: Vec<MemRecv> = Vec::new();
        let mut bytes = BytesMut::new();
        match protocol {
            Protocol::Lite(version) => {
                let mut setup = Setup::new();
                setup.set_hop(Some(3)).unwrap();
                bytes.put_u8(0x01);
                encode_message(&setup, version, &mut bytes).unwrap();
                let mut uni = client.open_uni().await.unwrap();
                let _ = uni.write(bytes.freeze()).await;
                let _ = uni.finish();
            }
            Protocol::Ietf(draft) if draft.has_control_stream() => {
                let versions = if draft.has_inline_fields() {
                    vec![draft.code()]
                } else {
                    Vec::new()
                };
                let setup = ietf::ClientSetup {
                    versions,
                    options: ietf::SetupOptions::default(),
                };
                ietf::Control::ClientSetup(setup)
                    .encode(draft, &mut bytes)
                    .unwrap();
                let (mut send, recv) = client.open_bi().await.unwrap();
                let _ = send.write(bytes.freeze()).await;
                // The control stream: the input writes its requests there.
                sends.push(send);
                recvs.push(recv);
            }
            Protocol::Ietf(draft) => {
                let setup = ietf::Setup {
                    options: ietf::SetupOptions::default(),
                };
                setup.encode(draft, &mut bytes).unwrap();
                let mut uni = client.open_uni().await.unwrap();
                let _ = uni.write(bytes.freeze()).await;
                // The SETUP stream: what follows must be GOAWAY.
                sends.push(uni);
            }
        }
        let hostile = tokio::time::timeout(STEP, hostile_relay)
            .await
            .ok()
            .and_then(|r| r.ok().flatten());

        let mut input = data;
        while let Some((&op, rest)) = input.split_first() {
            input = rest;
            match op % 8 {
                0 => {
                    let bytes = take_chunk(&mut input);
                    if let Ok(Ok(mut send)) = tokio::time::timeout(STEP, client.open_uni()).await {
                        let _ = tokio::time::timeout(STEP, send.write(bytes)).await;
                        sends.push(send);
                    }
                }
                1 => {
                    let bytes = take_chunk(&mut input);
                    if let Ok(Ok((mut send, recv))) =
                        tokio::time::timeout(STEP, client.open_bi()).await
                    {
                        let _ = tokio::time::timeout(STEP, send.write(bytes)).await;
                        sends.push(send);
                        recvs.push(recv);
                    }
                }
                2 => {
                    let index = take_index(&mut input, sends.len());
                    let bytes = take_chunk(&mut input);
                    if let Some(i) = index {
                        let _ = tokio::time::timeout(STEP, sends[i].write(bytes)).await;
                    }
                }
                3 => {
                    if let Some(i) = take_index(&mut input, sends.len()) {
                        let _ = sends[i].finish();
                    }
                }
                4 => {
                    if let Some(i) = take_index(&mut input, sends.len()) {
                        let code = input.first().copied().unwrap_or(0) as u32;
                        sends.swap_remove(i).reset(code);
                    }
                }
                5 => {
                    if let Some(i) = take_index(&mut input, recvs.len()) {
                        let _ = tokio::time::timeout(Duration::from_millis(1), recvs[i].read(4096))
                            .await;
                    }
                }
                6 => {
                    let ms = input.first().copied().unwrap_or(0) as u64;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                _ => {
                    publish(&self.track, self.sequence);
                    self.sequence += 1;
                }
            }
            tokio::task::yield_now().await;
            if let Some(session) = &hostile {
                let budget = session.budget();
                assert!(budget.held <= BUDGET, "held {} of {BUDGET}", budget.held);
            }
        }

        if let Some(session) = &hostile {
            self.evictions += session.budget().evicted;
        }

        // The honest subscriber is unaffected: a group published now reaches it.
        let sequence = self.sequence;
        self.sequence += 1;
        publish(&self.track, sequence);
        let reader = &mut self.reader;
        let got = tokio::time::timeout(STEP, async {
            loop {
                let Ok(Some(mut group)) = reader.next_group().await else {
                    return false;
                };
                if group.sequence() == sequence {
                    return matches!(group.next_frame().await, Ok(Some(_)));
                }
            }
        })
        .await;
        assert_eq!(
            got,
            Ok(true),
            "the honest subscriber got the group published last"
        );

        // The hostile session ends once its client closes, and leaves nothing behind.
        client.close(0, "done");
        drop((sends, recvs));
        if let Some(session) = hostile {
            assert!(
                tokio::time::timeout(Duration::from_secs(60), session.closed())
                    .await
                    .is_ok(),
                "the hostile session ended"
            );
        }
        let origin = &self.origin;
        let restored = tokio::time::timeout(STEP, async {
            while (origin.len(), origin.interest_count()) != self.baseline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(
            restored.is_ok(),
            "the origin holds {:?} (broadcasts, interests) after the hostile session, {:?} before",
            (origin.len(), origin.interest_count()),
            self.baseline
        );
        true
    }
}

/// A length byte, then up to that many bytes.
fn take_chunk(input: &mut &[u8]) -> Bytes {
    let Some((&len, rest)) = input.split_first() else {
        return Bytes::new();
    };
    let n = (len as usize).min(rest.len());
    let bytes = Bytes::copy_from_slice(&rest[..n]);
    *input = &rest[n..];
    bytes
}

/// One of `n` things, by the next byte; `None` when there are none.
fn take_index(input: &mut &[u8], n: usize) -> Option<usize> {
    let (&i, rest) = input.split_first()?;
    *input = rest;
    (n > 0).then(|| i as usize % n)
}

fn publish(track: &TrackProducer, sequence: u64) {
    if let Ok(mut group) = track.create_group(sequence) {
        let _ = group.write_frame(Frame {
            timestamp: sequence,
            payload: Bytes::from(sequence.to_string()),
        });
        group.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams evicted by this thread's hostile sessions so far.
    fn evictions() -> u64 {
        HARNESS.with(|cell| cell.borrow().as_ref().map_or(0, |h| h.relay.evictions))
    }

    #[test]
    fn an_input_can_fill_the_budget_and_evict() {
        let before = evictions();
        assert!(session(&crate::seeds::evicting_session_input()));
        assert!(
            evictions() > before,
            "two streams of 153 bytes against a {BUDGET}-byte budget evict one"
        );
    }
}
