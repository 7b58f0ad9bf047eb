//! Malformed input over real sockets: each bad client gets its session closed with the spec's
//! code (or, for an unknown stream type, only that stream dropped), while a good subscriber on
//! the same relay keeps receiving every frame without a gap.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, StartAt, TrackInfo};
use starling_net::QuicTransport;
use starling_proto::{
    encode_message, varint, AnnounceRequest, Path, Role, SessionCode, Setup, StreamCode, Version,
};
use starling_session::{random_hop, Session, SessionConfig};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use url::Url;

mod common;

use common::{dial, session, start_relay, within};

/// Open a uni stream carrying `bytes`, then FIN.
async fn send_uni(transport: &QuicTransport, bytes: &[u8]) {
    let mut stream = transport.open_uni().await.unwrap();
    stream.write(Bytes::copy_from_slice(bytes)).await.unwrap();
    stream.finish().unwrap();
}

fn setup_bytes(setup: &Setup) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_u8(0x01);
    encode_message(setup, Version::Lite06, &mut buf).unwrap();
    buf.to_vec()
}

fn valid_setup() -> Vec<u8> {
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup_bytes(&setup)
}

/// Wait for the relay to close `transport`; return its code.
async fn closed_code(transport: &QuicTransport) -> u32 {
    match within(transport.closed()).await {
        TransportError::ClosedByPeer { code, .. } => code,
        other => panic!("expected a close by the relay, got {other:?}"),
    }
}

const PROTOCOL_VIOLATION: u32 = SessionCode::ProtocolViolation.to_code();

/// A publisher sending numbered frames as fast as the test runs, and a subscriber that must see
/// every one of them in order.
struct Witness {
    stop: tokio::sync::watch::Sender<bool>,
    checker: tokio::task::JoinHandle<u64>,
    _publisher: Session<QuicTransport>,
    _subscriber: Session<QuicTransport>,
}

async fn witness(url: &Url) -> Witness {
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
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(origin);
    let publisher = session(url, Version::Lite06, Role::Publisher, config).await;

    let sub_origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(sub_origin.clone());
    let subscriber = session(url, Version::Lite06, Role::Subscriber, config).await;
    let good = Path::new("good").unwrap();
    let interest = sub_origin.interest(Path::empty()).unwrap();
    let mut changed = Vec::new();
    let consumer = loop {
        if let Some(b) = sub_origin.consume(&good, None) {
            break b;
        }
        within(interest.changed(&mut changed)).await;
    };
    let mut reader = consumer.subscribe_track("seq", StartAt::default()).unwrap();

    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let _keep = (route, broadcast);
        let mut n = 0u64;
        let mut interval = tokio::time::interval(Duration::from_millis(5));
        while !*stopped.borrow() {
            tokio::select! {
                _ = interval.tick() => {}
                _ = stopped.changed() => break,
            }
            let mut group = track.append_group().unwrap();
            group
                .write_frame(Frame {
                    timestamp: n,
                    payload: Bytes::from(n.to_string()),
                })
                .unwrap();
            group.finish();
            n += 1;
        }
        // One last group so the checker can finish on a known value.
        let mut group = track.append_group().unwrap();
        group
            .write_frame(Frame {
                timestamp: n,
                payload: Bytes::from(format!("end {n}")),
            })
            .unwrap();
        group.finish();
        std::future::pending::<()>().await;
    });
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let mut first_tx = Some(first_tx);
    let checker = tokio::spawn(async move {
        // Groups travel on independent streams and may arrive out of order; what must hold is
        // that every group from the first one seen to the last one sent arrives.
        let mut seen = std::collections::BTreeSet::new();
        let mut total = None;
        loop {
            if let Some(total) = total {
                let first = *seen.first().unwrap_or(&0);
                if (first..total).all(|n| seen.contains(&n)) {
                    return total - first;
                }
            }
            let mut group = within(reader.next_group()).await.unwrap().unwrap();
            let frame = within(group.next_frame()).await.unwrap().unwrap();
            let text = String::from_utf8(frame.payload.to_vec()).unwrap();
            match text.strip_prefix("end ") {
                Some(n) => total = Some(n.parse::<u64>().unwrap()),
                None => {
                    seen.insert(text.parse::<u64>().unwrap());
                    if let Some(tx) = first_tx.take() {
                        let _ = tx.send(());
                    }
                }
            }
        }
    });
    // The good subscriber is flowing before any bad client arrives.
    within(first_rx).await.unwrap();
    Witness {
        stop,
        checker,
        _publisher: publisher,
        _subscriber: subscriber,
    }
}

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
    let (mut send, mut recv) = odd.open_bi().await.unwrap();
    let mut request = BytesMut::new();
    request.put_u8(0x01);
    encode_message(
        &AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
        },
        Version::Lite06,
        &mut request,
    )
    .unwrap();
    send.write(request.freeze()).await.unwrap();
    let ok = within(recv.read(1024)).await.unwrap().unwrap();
    assert!(
        !ok.is_empty(),
        "ANNOUNCE_OK arrives on the surviving session"
    );

    let _ = witness.stop.send(true);
    let received = within(witness.checker).await.unwrap();
    assert!(received > 0, "the good subscriber kept receiving");
}
