//! A peer that opens many streams and never completes a unit cannot make a session buffer more
//! than its receive budget: the lowest-ranked streams are evicted and the session lives on.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use starling_proto::{Role, StreamCode, Version};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};

const BUDGET: usize = 256 * 1024;

#[tokio::test]
async fn incomplete_units_are_bounded_by_the_receive_budget() {
    let version = Version::Lite06;
    let relay = Relay::new();
    let (client, relay_side) = raw_client(&relay, version, Role::Subscriber, |config| {
        config.limits.recv_budget = BUDGET;
    })
    .await;

    // 64 group streams, each stuck inside a 60 KiB header: 3.75 MiB offered, 256 KiB allowed.
    let mut streams = Vec::new();
    for _ in 0..64 {
        let mut stream = client.open_uni().await.unwrap();
        let mut head = BytesMut::new();
        head.put_u8(0x00); // GROUP
        head.put_slice(&[0x80, 0x00, 0xf0, 0x00]); // Len = 61440, never completed
        head.put_slice(&vec![0u8; 40 * 1024]);
        stream.write(head.freeze()).await.unwrap();
        streams.push(stream);
    }
    // Header-less streams rank lowest and the oldest of them makes room first.
    let first = streams.first_mut().unwrap();
    let code = tokio::time::timeout(TIMEOUT, first.stopped())
        .await
        .unwrap();
    assert_eq!(code, Ok(Some(StreamCode::Evicted.to_code())));
    // Every stream was either buffered within the budget or evicted with EVICTED.
    let mut evicted = 0;
    for stream in &mut streams {
        if let Ok(Ok(Some(code))) =
            tokio::time::timeout(std::time::Duration::ZERO, stream.stopped()).await
        {
            assert_eq!(code, StreamCode::Evicted.to_code());
            evicted += 1;
        }
    }
    let stats = relay_side.budget();
    let (used, evictions) = (stats.held, stats.evicted);
    assert!(used <= BUDGET, "{used} bytes buffered");
    assert!(evictions > 0 && evicted > 0, "{evictions} evictions");

    // The session still serves control streams.
    let (mut send, mut recv) = client.open_bi().await.unwrap();
    send.write(announce_request_bytes(version)).await.unwrap();
    let ok: Result<Option<Bytes>, TransportError> = tokio::time::timeout(TIMEOUT, recv.read(1024))
        .await
        .unwrap();
    assert!(ok.unwrap().is_some(), "ANNOUNCE_OK after the flood");
}

/// Issue 10 item 5: a request stream whose type is not decoded yet ranks with header-less
/// streams, not as control. Streams stuck inside their type varint fill the budget; an honest
/// request stream still gets its answer (with the old ranking every stuck stream counted as
/// control and the honest one, asking last among equals, was evicted).
#[tokio::test]
async fn request_streams_rank_as_header_less_until_their_type_is_decoded() {
    const STUCK: usize = 28;
    const PARTIAL_TYPE: [u8; 7] = [0xc0, 0, 0, 0, 0, 0, 0]; // 7 of an 8-byte varint
                                                            // Each is charged its bytes and, being header-less, what the stream itself costs.
    const STUCK_COST: usize = PARTIAL_TYPE.len() + starling_session::HEADERLESS_STREAM_COST;
    let version = Version::Lite06;
    let relay = Relay::new();
    let (client, relay_side) = raw_client(&relay, version, Role::Subscriber, |config| {
        config.limits.recv_budget = STUCK * STUCK_COST;
    })
    .await;
    let mut stuck = Vec::new();
    for _ in 0..STUCK {
        let (mut send, recv) = client.open_bi().await.unwrap();
        send.write(Bytes::from_static(&PARTIAL_TYPE)).await.unwrap();
        stuck.push((send, recv));
    }
    // Every stuck stream's bytes are charged: the budget is exactly full.
    tokio::time::timeout(TIMEOUT, async {
        while relay_side.budget().held < STUCK * STUCK_COST {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the stuck streams fill the budget");

    let (mut send, mut recv) = client.open_bi().await.unwrap();
    send.write(announce_request_bytes(version)).await.unwrap();
    let answer = tokio::time::timeout(TIMEOUT, recv.read(1024))
        .await
        .unwrap();
    assert!(
        matches!(answer, Ok(Some(_))),
        "the honest request is answered: {answer:?}"
    );
    // The oldest stuck stream made room, stopped with EVICTED.
    let code = tokio::time::timeout(TIMEOUT, stuck[0].0.stopped())
        .await
        .unwrap();
    assert_eq!(code, Ok(Some(StreamCode::Evicted.to_code())));
    assert!(relay_side.budget().evicted >= 1);
}
