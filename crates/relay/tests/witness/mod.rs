//! Shared by the tests of bad clients over real sockets: raw-client helpers (SETUP bytes,
//! uni streams, the close code, a liveness check) and the witness, an honest publisher and
//! subscriber pair that must see every group without a gap while bad clients come and go.

#![allow(dead_code)]

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use starling_model::{BroadcastProducer, Frame, Limits, Origin, Route, StartAt, TrackInfo};
use starling_net::QuicTransport;
use starling_proto::{encode_message, Path, Role, SessionCode, Setup, Subscribe, Version};
use starling_session::{random_hop, SessionConfig};
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
/// every one of them in order. Both run on a thread and runtime of their own, so what they
/// see is the relay's doing, not the test process's: a fleet of hostile clients in the
/// test's runtime does not starve the witness's tasks.
pub struct Witness {
    stop: tokio::sync::watch::Sender<bool>,
    count: tokio::sync::oneshot::Receiver<u64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub async fn witness(url: &Url) -> Witness {
    let url = url.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (count_tx, count) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("witness".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let total = runtime.block_on(run(url, stopped, ready_tx));
            let _ = count_tx.send(total);
        })
        .unwrap();
    let mut witness = Witness {
        stop,
        count,
        thread: Some(thread),
    };
    // The good subscriber is flowing before any bad client arrives.
    if within(ready_rx).await.is_err() {
        witness.rethrow();
    }
    witness
}

/// The witness's life on its own runtime: set up the pair, publish until `stopped`, and
/// return how many groups arrived from the first seen to the last sent (each of them did).
async fn run(
    url: Url,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    ready: tokio::sync::oneshot::Sender<()>,
) -> u64 {
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
    let publisher = session(&url, Version::Lite06, Role::Publisher, config).await;

    let sub_origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(sub_origin.clone());
    // Only its own broadcast: floods of other announcements are not the witness's to carry.
    config.announce_prefixes = vec![Path::new("good").unwrap()];
    let subscriber = session(&url, Version::Lite06, Role::Subscriber, config).await;
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

    // When each group was published: the witness's worst delivery latency is reported.
    let sent_at = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let published = sent_at.clone();
    tokio::spawn(async move {
        let _keep = (route, broadcast);
        let mut n = 0u64;
        // 10 groups a second: the 32 groups a subscription may have in flight (on the
        // publisher's session and on the relay's) are 3.2 s, so only a stall that long makes
        // either skip the witness as a slow subscriber. At 50 a second (640 ms), a fleet's
        // flood on a host whose cores were also busy elsewhere did (docs/reliability.md).
        let mut interval = tokio::time::interval(Duration::from_millis(100));
        while !*stopped.borrow() {
            tokio::select! {
                _ = interval.tick() => {}
                _ = stopped.changed() => break,
            }
            let mut group = track.append_group().unwrap();
            published
                .lock()
                .unwrap()
                .insert(n, tokio::time::Instant::now());
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
    // Groups travel on independent streams and may arrive out of order; what must hold is
    // that every group from the first one seen to the last one sent arrives.
    let mut ready = Some(ready);
    let mut seen = std::collections::BTreeSet::new();
    let mut total = None;
    let mut worst = Duration::ZERO;
    loop {
        if let Some(total) = total {
            let first = *seen.first().unwrap_or(&0);
            if (first..total).all(|n| seen.contains(&n)) {
                eprintln!(
                    "witness: {} groups, every one delivered, the slowest in {worst:?}",
                    total - first
                );
                return total - first;
            }
        }
        let next = tokio::time::timeout(STALL, reader.next_group()).await;
        let Ok(group) = next else {
            let first = *seen.first().unwrap_or(&0);
            let last = seen.last().copied().unwrap_or(0);
            let missing: Vec<u64> = (first..total.unwrap_or(last))
                .filter(|n| !seen.contains(n))
                .take(16)
                .collect();
            use std::sync::atomic::Ordering::Relaxed;
            panic!(
                "the witness went {STALL:?} without a group: {} seen ({first}..={last}), \
                 the last sent {total:?}, missing {missing:?}; the publisher sent {} groups \
                 (skipped {}, its stream errors {:?}), the subscriber received {} (its stream \
                 errors {:?})",
                seen.len(),
                publisher.stats().groups_sent.load(Relaxed),
                publisher.stats().groups_skipped.load(Relaxed),
                publisher.stats().stream_errors(),
                subscriber.stats().groups_received.load(Relaxed),
                subscriber.stats().stream_errors(),
            );
        };
        let mut group = group.unwrap().unwrap();
        let frame = within(group.next_frame())
            .await
            .unwrap_or_else(|code| panic!("witness group {}: {code:?}", group.sequence()))
            .unwrap();
        let text = String::from_utf8(frame.payload.to_vec()).unwrap();
        match text.strip_prefix("end ") {
            Some(n) => total = Some(n.parse::<u64>().unwrap()),
            None => {
                let n = text.parse::<u64>().unwrap();
                if let Some(at) = sent_at.lock().unwrap().remove(&n) {
                    worst = worst.max(at.elapsed());
                }
                seen.insert(n);
                if let Some(ready) = ready.take() {
                    let _ = ready.send(());
                }
            }
        }
    }
}

/// How long the witness may go without a group.
const STALL: Duration = Duration::from_secs(10);

impl Witness {
    /// Stop publishing and wait until every group from the first seen to the last sent has
    /// arrived; how many that is.
    pub async fn finish(mut self) -> u64 {
        let _ = self.stop.send(true);
        // Longer than the witness's own bound on a stall, so its account of one is what
        // fails the test.
        match tokio::time::timeout(STALL + Duration::from_secs(5), &mut self.count)
            .await
            .expect("the witness ended")
        {
            Ok(total) => total,
            Err(_) => self.rethrow(),
        }
    }

    /// The witness's thread ended without its result: raise its panic here.
    fn rethrow(&mut self) -> ! {
        let thread = self.thread.take().expect("the witness thread");
        match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => panic!("the witness ended without a result"),
        }
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
