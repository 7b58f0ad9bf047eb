//! The whole-session target: arbitrary bytes drive a client against a relay-side session over
//! the in-memory transport (streams opened, written, finished and reset in any order, time
//! moved on), next to an honest subscriber on the same origin.
//!
//! Checked after every step: the hostile session never holds more than its receive budget.
//! At the end: the honest subscriber still gets a group published after the attack, and the
//! hostile session, once its client closes, ends. Time is paused: timeouts fire as soon as
//! every task waits, so an input can never hang.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, StartAt, TrackInfo};
use starling_proto::{encode_message, Path, Role, Setup, Version};
use starling_session::{Accepting, ClientSetup, Session, SessionConfig};
use starling_transport::mem::{pair, MemRecv, MemSend};
use starling_transport::{RecvStream, SendStream, Transport};

/// The hostile session's receive budget: small, so inputs reach eviction.
const BUDGET: usize = 16 * 1024;
/// How long one step may take, in paused time.
const STEP: Duration = Duration::from_secs(5);

pub fn session(data: &[u8]) -> bool {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(drive(data))
}

async fn drive(data: &[u8]) -> bool {
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let track = broadcast.create_track("seq", TrackInfo::default());
    let _route = origin
        .publish(
            Path::new("good").unwrap(),
            broadcast.consume(),
            Route::local(),
        )
        .unwrap();

    // The honest subscriber.
    let (honest_client, honest_server) = pair();
    let relay_config = |budget: usize| {
        let mut config = SessionConfig::new(1);
        config.publish = Some(origin.clone());
        config.consume = Some(origin.clone());
        config.limits.recv_budget = budget;
        config
    };
    let honest_side = relay_config(1 << 20);
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
    let Ok(Ok(_honest)) = tokio::time::timeout(
        STEP,
        Session::connect(honest_client, Version::Lite06, setup, honest_config),
    )
    .await
    else {
        panic!("the honest subscriber connects");
    };
    let _honest_relay = honest_relay
        .await
        .unwrap()
        .expect("the relay serves the honest subscriber");
    let mut reader = loop {
        if let Some(b) = seen.consume(&Path::new("good").unwrap(), None) {
            break b.subscribe_track("seq", StartAt::default()).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };

    // The hostile client: a valid SETUP, then whatever the input says.
    let (client, server) = pair();
    let hostile_side = relay_config(BUDGET);
    let hostile_relay = tokio::spawn(async move {
        let accepting = Accepting::new(server, Version::Lite06, STEP).await.ok()?;
        accepting.start(hostile_side).await.ok()
    });
    let mut setup = Setup::new();
    setup.set_hop(Some(3)).unwrap();
    let mut bytes = BytesMut::new();
    bytes.put_u8(0x01);
    encode_message(&setup, Version::Lite06, &mut bytes).unwrap();
    let mut uni = client.open_uni().await.unwrap();
    let _ = uni.write(bytes.freeze()).await;
    let _ = uni.finish();
    let hostile = tokio::time::timeout(STEP, hostile_relay)
        .await
        .ok()
        .and_then(|r| r.ok().flatten());

    let mut sends: Vec<MemSend> = Vec::new();
    let mut recvs: Vec<MemRecv> = Vec::new();
    let mut input = data;
    let mut sequence = 0u64;
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
                if let Ok(Ok((mut send, recv))) = tokio::time::timeout(STEP, client.open_bi()).await
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
                    let _ =
                        tokio::time::timeout(Duration::from_millis(1), recvs[i].read(4096)).await;
                }
            }
            6 => {
                let ms = input.first().copied().unwrap_or(0) as u64;
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            _ => {
                publish(&track, sequence);
                sequence += 1;
            }
        }
        tokio::task::yield_now().await;
        if let Some(session) = &hostile {
            let budget = session.budget();
            assert!(budget.held <= BUDGET, "held {} of {BUDGET}", budget.held);
        }
    }

    // The honest subscriber is unaffected: a group published now reaches it.
    publish(&track, sequence);
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

    // The hostile session ends once its client closes.
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
    true
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

fn publish(track: &starling_model::TrackProducer, sequence: u64) {
    if let Ok(mut group) = track.create_group(sequence) {
        let _ = group.write_frame(Frame {
            timestamp: sequence,
            payload: Bytes::from(sequence.to_string()),
        });
        group.finish();
    }
}
