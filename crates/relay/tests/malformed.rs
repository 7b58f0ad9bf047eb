//! Malformed input over real sockets: each bad client gets its session closed with the spec's
//! code (or, for an unknown stream type, only that stream dropped), while a good subscriber on
//! the same relay keeps receiving every frame without a gap.

use bytes::{BufMut, Bytes, BytesMut};
use starling_proto::{
    encode_message, varint, AnnounceRequest, Path, Role, Setup, StreamCode, Version,
};
use starling_session::random_hop;
use starling_transport::{RecvStream, SendStream, Transport, TransportError};

mod common;
mod witness;

use common::{dial, start_relay, within};
use witness::{closed_code, send_uni, setup_bytes, valid_setup, witness, PROTOCOL_VIOLATION};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_clients_are_closed_and_others_keep_flowing() {
    let url = start_relay().await;
    let witness = witness(&url).await;

    // Garbage where SETUP belongs: a SETUP whose parameter count is absurd.
    let bad = dial(&url, Version::Lite06).await;
    send_uni(&bad, &[0x01, 0x03, 0x7f, 0xff, 0xff]).await;
    assert_eq!(closed_code(&bad).await, PROTOCOL_VIOLATION, "garbage SETUP");

    // A truncated SETUP: the length promises more than arrives before FIN.
    let bad = dial(&url, Version::Lite06).await;
    send_uni(&bad, &[0x01, 0x0a, 0x01, 0x03]).await;
    assert_eq!(
        closed_code(&bad).await,
        PROTOCOL_VIOLATION,
        "truncated SETUP"
    );

    // An oversized length: a 1 MiB SETUP is refused as soon as the prefix arrives.
    let bad = dial(&url, Version::Lite06).await;
    let mut oversized = vec![0x01];
    varint::encode(1 << 20, &mut oversized).unwrap();
    let mut stream = bad.open_uni().await.unwrap();
    stream.write(Bytes::from(oversized)).await.unwrap();
    assert_eq!(
        closed_code(&bad).await,
        PROTOCOL_VIOLATION,
        "oversized SETUP"
    );

    // A second SETUP stream after a valid handshake.
    let bad = dial(&url, Version::Lite06).await;
    send_uni(&bad, &valid_setup()).await;
    let _server_setup = within(bad.accept_uni()).await.unwrap();
    send_uni(&bad, &valid_setup()).await;
    assert_eq!(closed_code(&bad).await, PROTOCOL_VIOLATION, "second SETUP");

    // Garbage answering the relay's announce request (an ANNOUNCE_OK with a trailing byte):
    // session-fatal.
    let bad = dial(&url, Version::Lite06).await;
    send_uni(&bad, &valid_setup()).await;
    let (mut send, mut recv) = within(bad.accept_bi()).await.unwrap();
    let request = within(recv.read(64)).await.unwrap().unwrap();
    let mut expected = BytesMut::new();
    expected.put_u8(0x01);
    encode_message(
        &AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: false,
        },
        Version::Lite06,
        &mut expected,
    )
    .unwrap();
    assert_eq!(
        &request[..],
        &expected[..],
        "relay asks for announcements under \"\""
    );
    send.write(Bytes::from_static(&[0x03, 0x00, 0x00, 0x00]))
        .await
        .unwrap();
    assert_eq!(
        closed_code(&bad).await,
        PROTOCOL_VIOLATION,
        "garbage announce stream"
    );

    // An unknown bidi stream type: that stream is dropped, the session survives.
    let odd = dial(&url, Version::Lite06).await;
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(Role::Subscriber));
    send_uni(&odd, &setup_bytes(&setup)).await;
    let (mut send, mut recv) = odd.open_bi().await.unwrap();
    send.write(Bytes::from_static(&[0x3f, 0x00])).await.unwrap();
    match within(recv.read(64)).await {
        Err(TransportError::Reset(code)) => assert_eq!(code, StreamCode::Internal.to_code()),
        other => panic!("unknown stream type should be reset, got {other:?}"),
    }
    // Still alive: an announce interest on the same session is answered.
    witness::assert_alive(&odd, witness::announce_request()).await;

    let received = witness.finish().await;
    assert!(received > 0, "the good subscriber kept receiving");
}
