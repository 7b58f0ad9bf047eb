//! A peer that opens many streams and never completes a unit cannot make a session buffer more
//! than its receive budget: the lowest-ranked streams are evicted and the session lives on.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use starling_proto::{encode_message, AnnounceRequest, Path, Role, StreamCode, Version};
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
    // The newest header-less stream ranks lowest, so it is evicted; streams are served in
    // order, so once it is, every earlier one has had its turn.
    let last = streams.last_mut().unwrap();
    let code = tokio::time::timeout(TIMEOUT, last.stopped()).await.unwrap();
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
    let (used, evictions) = relay_side.budget();
    assert!(used <= BUDGET, "{used} bytes buffered");
    assert!(evictions > 0 && evicted > 0, "{evictions} evictions");

    // The session still serves control streams.
    let (mut send, mut recv) = client.open_bi().await.unwrap();
    let mut request = BytesMut::new();
    request.put_u8(0x01);
    encode_message(
        &AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
        },
        version,
        &mut request,
    )
    .unwrap();
    send.write(request.freeze()).await.unwrap();
    let ok: Result<Option<Bytes>, TransportError> = tokio::time::timeout(TIMEOUT, recv.read(1024))
        .await
        .unwrap();
    assert!(ok.unwrap().is_some(), "ANNOUNCE_OK after the flood");
}
