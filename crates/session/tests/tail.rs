//! An ended subscription's tail: QUIC does not order streams, so a group stream the publisher
//! opened before SUBSCRIBE_END can reach the relay after the subscribe stream's FIN. The relay
//! keeps such a subscription routable until every group from SUBSCRIBE_START to SUBSCRIBE_END
//! arrived (or a grace passed), so a late group still reaches the readers before the end.
//!
//! The publisher here is hand-driven at the wire level over the in-memory transport, so the
//! test chooses the order: END and FIN first, the owed group stream after. The clock is paused:
//! `settle` lets every session task run until none can make progress, the point at which the
//! relay has read the FIN.

mod common;

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use starling_proto::{
    encode_message, encode_typed, varint, Announce, AnnounceOk, AnnounceRequest, AnnounceStatus,
    Announcement, FrameHeader, GroupHeader, Hops, Message, Role, RouteCost, Subscribe,
    SubscribeResponse, Track, TrackInfo, Version,
};
use starling_transport::mem::{MemRecv, MemSend, MemTransport};
use starling_transport::{RecvStream, SendStream, Transport};
use tokio::sync::mpsc;

const BROADCAST: &str = "room/alice";

/// Let every task run until none is ready (with the clock paused, a sleep ends only once the
/// runtime is otherwise idle).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Read one message from `recv` (after whatever `buf` holds); `None` at a clean FIN.
async fn read_message<M: Message>(
    recv: &mut MemRecv,
    buf: &mut BytesMut,
    version: Version,
) -> Option<M> {
    loop {
        if let Some(msg) = starling_proto::decode_message::<M>(buf, version).unwrap() {
            return Some(msg);
        }
        match recv.read(1 << 16).await.unwrap() {
            Some(chunk) => buf.extend_from_slice(&chunk),
            None => {
                assert!(buf.is_empty(), "a message cut short by FIN");
                return None;
            }
        }
    }
}

/// Read a bidi stream's type varint.
async fn read_type(recv: &mut MemRecv, buf: &mut BytesMut) -> u64 {
    loop {
        if let Some((kind, n)) = varint::peek(buf) {
            let _ = buf.split_to(n);
            return kind;
        }
        let chunk = recv.read(1 << 16).await.unwrap().expect("a stream type");
        buf.extend_from_slice(&chunk);
    }
}

/// A SUBSCRIBE the relay sent the hand-driven publisher, with its stream.
struct Upstream {
    id: u64,
    track: String,
    priority: u8,
    send: MemSend,
    _recv: MemRecv,
}

/// Connect a hand-driven publisher of [`BROADCAST`] to `relay`: it announces the broadcast,
/// answers TRACK with the default info, and hands every SUBSCRIBE to the test.
async fn raw_publisher(
    relay: &Relay,
    version: Version,
) -> (MemTransport, mpsc::Receiver<Upstream>) {
    raw_publisher_with(relay, version, |_| {}).await
}

/// [`raw_publisher`], adjusting the relay side's session config first.
async fn raw_publisher_with(
    relay: &Relay,
    version: Version,
    configure: impl FnOnce(&mut starling_session::SessionConfig) + Send + 'static,
) -> (MemTransport, mpsc::Receiver<Upstream>) {
    let origin = relay.origin.clone();
    let (transport, relay_side) = raw_client(relay, version, Role::Publisher, move |config| {
        config.consume = Some(origin);
        configure(config);
    })
    .await;
    let (tx, rx) = mpsc::channel(4);
    let peer = transport.clone();
    tokio::spawn(async move {
        let _relay_side = relay_side;
        let mut held = Vec::new();
        loop {
            let Ok((mut send, mut recv)) = peer.accept_bi().await else {
                return;
            };
            let mut buf = BytesMut::new();
            match read_type(&mut recv, &mut buf).await {
                0x01 => {
                    let _: AnnounceRequest = read_message(&mut recv, &mut buf, version)
                        .await
                        .expect("an announce request");
                    let mut out = BytesMut::new();
                    let ok = AnnounceOk {
                        hop: random_hop_id(),
                        active_count: 1,
                    };
                    encode_message(&ok, version, &mut out).unwrap();
                    if version == Version::Lite05 {
                        let announce = Announce {
                            status: AnnounceStatus::Active,
                            suffix: path(BROADCAST),
                            hops: Hops::default(),
                        };
                        encode_message(&announce, version, &mut out).unwrap();
                    } else {
                        let start = Announcement::Start {
                            suffix: path(BROADCAST),
                            hops: Hops::default(),
                            cost: RouteCost::default(),
                        };
                        encode_typed(&start, version, &mut out).unwrap();
                    }
                    send.write(out.freeze()).await.unwrap();
                    held.push((send, recv));
                }
                0x06 => {
                    let _: Track = read_message(&mut recv, &mut buf, version)
                        .await
                        .expect("a track request");
                    let mut out = BytesMut::new();
                    encode_message(&TrackInfo::default(), version, &mut out).unwrap();
                    send.write(out.freeze()).await.unwrap();
                    send.finish().unwrap();
                    held.push((send, recv));
                }
                0x02 => {
                    let subscribe: Subscribe = read_message(&mut recv, &mut buf, version)
                        .await
                        .expect("a subscribe");
                    let upstream = Upstream {
                        id: subscribe.id,
                        track: subscribe.track.clone(),
                        priority: subscribe.priority,
                        send,
                        _recv: recv,
                    };
                    if tx.send(upstream).await.is_err() {
                        return;
                    }
                }
                _ => held.push((send, recv)),
            }
        }
    });
    (transport, rx)
}

fn random_hop_id() -> u64 {
    starling_session::random_hop()
}

/// Write one subscribe response on the upstream subscription.
async fn respond(upstream: &mut Upstream, response: SubscribeResponse, version: Version) {
    let mut out = BytesMut::new();
    starling_proto::encode_typed(&response, version, &mut out).unwrap();
    upstream.send.write(out.freeze()).await.unwrap();
}

/// A group stream's opening: the stream type, the group header and one frame header.
fn group_head(id: u64, sequence: u64, frame: FrameHeader, version: Version) -> BytesMut {
    let mut out = BytesMut::new();
    out.put_u8(0x00);
    let header = GroupHeader {
        subscribe_id: id,
        sequence,
        frame_start: 0,
    };
    encode_message(&header, version, &mut out).unwrap();
    starling_proto::encode_frame_header(&frame, version, &mut out).unwrap();
    out
}

/// Open one group stream of one frame (`g<sequence>` at `sequence * 100` ms) and FIN it.
async fn send_group(peer: &MemTransport, id: u64, sequence: u64, version: Version) {
    let payload = format!("g{sequence}");
    let frame = FrameHeader {
        timestamp_delta: (sequence * 100) as i64,
        size: payload.len() as u64,
    };
    let mut out = group_head(id, sequence, frame, version);
    out.extend_from_slice(payload.as_bytes());
    let mut stream = peer.open_uni().await.unwrap();
    stream.write(Bytes::from(out)).await.unwrap();
    stream.finish().unwrap();
}

/// The relay's reader of the track through a subscriber client, and the upstream SUBSCRIBE
/// the relay sent for it.
async fn subscribed(
    relay: &Relay,
    version: Version,
    upstreams: &mut mpsc::Receiver<Upstream>,
) -> (Subscriber, starling_model::TrackConsumer, Upstream) {
    let sub = subscriber(relay, version).await;
    let track = sub.track(BROADCAST, "data").await;
    let upstream = tokio::time::timeout(TIMEOUT, upstreams.recv())
        .await
        .expect("the relay subscribes upstream")
        .expect("the publisher is running");
    (sub, track, upstream)
}

/// A subscriber reading through the relay from the hand-driven publisher, after the publisher
/// served group 0 and then sent END (exclusive 2) and FIN: group 1 is owed.
struct Ended {
    peer: MemTransport,
    track: starling_model::TrackConsumer,
    upstream: Upstream,
    _sub: Subscriber,
}

async fn ended_owing_group_one(version: Version) -> Ended {
    let relay = Relay::new();
    let (peer, mut upstreams) = raw_publisher(&relay, version).await;
    let (sub, mut track, mut upstream) = subscribed(&relay, version, &mut upstreams).await;
    respond(
        &mut upstream,
        SubscribeResponse::Start { group: 0 },
        version,
    )
    .await;
    send_group(&peer, upstream.id, 0, version).await;
    assert_eq!(read_group(&mut track).await, (0, vec!["g0".to_string()]));
    respond(&mut upstream, SubscribeResponse::End { group: 2 }, version).await;
    upstream.send.finish().unwrap();
    Ended {
        peer,
        track,
        upstream,
        _sub: sub,
    }
}

async fn a_group_arriving_after_the_end_is_still_delivered(version: Version) {
    tokio::time::pause();
    let mut ended = ended_owing_group_one(version).await;
    // Let the relay read END and FIN before group 1's stream opens.
    settle().await;
    send_group(&ended.peer, ended.upstream.id, 1, version).await;

    assert_eq!(
        read_group(&mut ended.track).await,
        (1, vec!["g1".to_string()])
    );
    let end = tokio::time::timeout(TIMEOUT, ended.track.next_group())
        .await
        .expect("the track ends");
    assert!(
        matches!(end, Ok(None)),
        "{version}: after the owed group the track finishes, got {end:?}"
    );
}

#[tokio::test]
async fn lite06_a_group_arriving_after_the_end_is_still_delivered() {
    a_group_arriving_after_the_end_is_still_delivered(Version::Lite06).await;
}

#[tokio::test]
async fn lite05_a_group_arriving_after_the_end_is_still_delivered() {
    a_group_arriving_after_the_end_is_still_delivered(Version::Lite05).await;
}

/// An owed group that never comes does not hold the track open forever: after the grace (the
/// max age asked for, else 1 s) it finishes with what arrived.
#[tokio::test]
async fn an_owed_group_that_never_arrives_ends_the_track_after_the_grace() {
    tokio::time::pause();
    let mut ended = ended_owing_group_one(Version::Lite06).await;
    let ended_at = tokio::time::Instant::now();

    let end = tokio::time::timeout(TIMEOUT, ended.track.next_group())
        .await
        .expect("the track ends within the step");
    assert!(matches!(end, Ok(None)), "got {end:?}");
    let waited = ended_at.elapsed();
    assert!(
        waited >= Duration::from_secs(1),
        "the relay waited {waited:?} for the owed group, less than the 1 s grace"
    );
}

/// Issue 10 item 5: a group stream ranks in the receive budget by its subscription's real
/// priority (what the relay's readers asked for), not at priority 0. With the budget full of
/// two incomplete groups, the group of the less urgent track is the one evicted, even though
/// it is the newer group.
#[tokio::test(start_paused = true)]
async fn an_incomplete_group_of_a_less_urgent_track_is_evicted_first() {
    use starling_model::StartAt;
    let version = Version::Lite06;
    let relay = Relay::new();
    let (peer, mut upstreams) = raw_publisher_with(&relay, version, |config| {
        config.limits.recv_budget = 64 * 1024;
    })
    .await;
    // Two readers at the relay itself: "low" at priority 1, "high" at priority 9.
    let interest = relay.origin.interest(path("")).unwrap();
    let mut changed = Vec::new();
    let broadcast = loop {
        if let Some(broadcast) = relay.origin.consume(&path(BROADCAST), None) {
            break broadcast;
        }
        interest.changed(&mut changed).await;
    };
    let reader = |name: &str, priority: u8| {
        broadcast
            .subscribe_track(
                name,
                StartAt {
                    priority,
                    ..Default::default()
                },
            )
            .unwrap()
    };
    let (_low, _high) = (reader("low", 1), reader("high", 9));
    let mut ids = std::collections::HashMap::new();
    while ids.len() < 2 {
        let upstream = tokio::time::timeout(TIMEOUT, upstreams.recv())
            .await
            .unwrap()
            .unwrap();
        ids.insert(
            upstream.track.clone(),
            (upstream.id, upstream.priority, upstream),
        );
    }
    assert_eq!(
        (ids["low"].1, ids["high"].1),
        (1, 9),
        "the readers' priorities go upstream"
    );

    // A group stream stuck inside a 60 000-byte frame, 40 KiB in. The header goes first, so
    // the relay knows the stream's subscription (and rank) before the payload is charged.
    let head = |id: u64, sequence: u64| {
        let frame = FrameHeader {
            timestamp_delta: 0,
            size: 60_000,
        };
        group_head(id, sequence, frame, version).freeze()
    };
    let payload = Bytes::from(vec![0u8; 40 * 1024]);
    let mut low = peer.open_uni().await.unwrap();
    low.write(head(ids["low"].0, 5)).await.unwrap();
    let mut high = peer.open_uni().await.unwrap();
    high.write(head(ids["high"].0, 1)).await.unwrap();
    settle().await;
    low.write(payload.clone()).await.unwrap();
    settle().await;
    high.write(payload).await.unwrap();
    settle().await;
    let evicted = starling_proto::StreamCode::Evicted.to_code();
    assert_eq!(
        tokio::time::timeout(TIMEOUT, low.stopped()).await.ok(),
        Some(Ok(Some(evicted))),
        "the less urgent group goes"
    );
    // With every task idle (the clock is paused), the urgent group is still held.
    assert!(
        tokio::time::timeout(Duration::from_millis(1), high.stopped())
            .await
            .is_err(),
        "the urgent one stays"
    );
}
