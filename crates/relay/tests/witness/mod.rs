//! Shared by the tests of bad clients over real sockets: raw-client helpers (SETUP bytes,
//! uni streams, the close code, a liveness check) and the witness, an honest publisher and
//! subscriber pair that must see every group without a gap while bad clients come and go.

#![allow(dead_code)]

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, StartAt, TrackInfo};
use starling_net::QuicTransport;
use starling_proto::{encode_message, Path, Role, SessionCode, Setup, Subscribe, Version};
use starling_session::{random_hop, Session, SessionConfig};
use starling_transport::{RecvStream, SendStream, Transport, TransportError};
use url::Url;

use crate::common::{session, within};

/// Open a uni stream carrying `bytes`, then FIN.
pub async fn send_uni<T: Transport>(transport: &T, bytes: &[u8]) {
    let mut stream = transport.open_uni().await.unwrap();
    stream.write(Bytes::copy_from_slice(bytes)).await.unwrap();
    stream.finish().unwrap();
}

pub fn setup_bytes(setup: &Setup) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_u8(0x01);
    encode_message(setup, Version::Lite06, &mut buf).unwrap();
    buf.to_vec()
}

pub fn valid_setup() -> Vec<u8> {
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup_bytes(&setup)
}

/// Wait for the relay to close `transport`; return its code.
pub async fn closed_code(transport: &QuicTransport) -> u32 {
    match within(transport.closed()).await {
        TransportError::ClosedByPeer { code, .. } => code,
        other => panic!("expected a close by the relay, got {other:?}"),
    }
}

pub const PROTOCOL_VIOLATION: u32 = SessionCode::ProtocolViolation.to_code();

/// A publisher sending numbered frames as fast as the test runs, and a subscriber that must see
/// every one of them in order.
pub struct Witness {
    pub stop: tokio::sync::watch::Sender<bool>,
    pub checker: tokio::task::JoinHandle<u64>,
    _publisher: Session<QuicTransport>,
    _subscriber: Session<QuicTransport>,
}

pub async fn witness(url: &Url) -> Witness {
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
    // Only its own broadcast: floods of other announcements are not the witness's to carry.
    config.announce_prefixes = vec![Path::new("good").unwrap()];
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
        // 50 groups a second: 32 groups in flight are 640 ms of slack, so a loaded machine
        // does not make the relay skip the witness as a slow subscriber.
        let mut interval = tokio::time::interval(Duration::from_millis(20));
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
            let frame = within(group.next_frame())
                .await
                .unwrap_or_else(|code| panic!("witness group {}: {code:?}", group.sequence()))
                .unwrap();
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

impl Witness {
    /// Stop publishing and wait until every group from the first seen to the last sent has
    /// arrived; how many that is.
    pub async fn finish(self) -> u64 {
        let _ = self.stop.send(true);
        within(self.checker).await.unwrap()
    }
}

/// The session still serves: an announce interest (`request`, a whole ANNOUNCE_REQUEST
/// stream opening) on a new stream is answered.
pub async fn assert_alive<T: Transport>(transport: &T, request: Bytes) {
    let (mut send, mut recv) = transport.open_bi().await.unwrap();
    send.write(request).await.unwrap();
    let answer = within(recv.read(1024)).await;
    assert!(
        matches!(&answer, Ok(Some(bytes)) if !bytes.is_empty()),
        "the session answers: {answer:?}"
    );
}

/// A subscribe stream's opening at the live edge (lite-06).
pub fn subscribe_bytes(id: u64, broadcast: &str, track: &str) -> Bytes {
    let mut bytes = BytesMut::new();
    bytes.put_u8(0x02);
    encode_message(
        &Subscribe {
            id,
            broadcast: Path::new(broadcast).unwrap(),
            track: track.into(),
            priority: 0,
            max_age_ms: 0,
            group_start: None,
            group_end: None,
            frame_start: 0,
            frame_end: None,
        },
        Version::Lite06,
        &mut bytes,
    )
    .unwrap();
    bytes.freeze()
}

/// An announce interest's stream opening: type, then ANNOUNCE_REQUEST for everything.
pub fn announce_request() -> Bytes {
    let mut request = BytesMut::new();
    request.put_u8(0x01);
    encode_message(
        &starling_proto::AnnounceRequest {
            prefix: Path::empty(),
            exclude_hop: 0,
            hidden: false,
        },
        Version::Lite06,
        &mut request,
    )
    .unwrap();
    request.freeze()
}
