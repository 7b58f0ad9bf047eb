//! lite-06 subscription bounds: a start frame in the start group, an end frame in the end
//! group, groups above the end held until an update raises the cap.

mod common;

use bytes::BytesMut;
use common::*;
use starling_proto::{encode_message, Role, Subscribe, SubscribeUpdate, Version};
use starling_transport::SendStream;

#[tokio::test]
async fn frame_bounds_and_the_serving_cap() {
    let version = Version::Lite06;
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
    // A viewer keeps the relay's upstream alive while the groups are written.
    let viewer = subscriber(&relay, version).await;
    let mut viewing = viewer.track("room/alice", "video").await;
    for seq in 0..4u64 {
        let mut group = publisher.tracks[0].create_group(seq).unwrap();
        for i in 0..3u64 {
            group
                .write_frame(frame(seq * 100 + i, &format!("g{seq}f{i}")))
                .unwrap();
        }
        group.finish();
        read_group(&mut viewing).await;
    }

    let (client, _relay_side) = raw_client(&relay, version, Role::Subscriber, |_| {}).await;
    let (mut send, _recv) = starling_transport::Transport::open_bi(&client)
        .await
        .unwrap();
    let mut request = BytesMut::new();
    request.extend_from_slice(&[0x02]);
    encode_message(
        &Subscribe {
            id: 7,
            broadcast: path("room/alice"),
            track: "video".into(),
            priority: 0,
            max_age_ms: 60_000,
            group_start: Some(1),
            group_end: Some(2),
            frame_start: 1,
            frame_end: Some(0),
        },
        version,
        &mut request,
    )
    .unwrap();
    send.write(request.freeze()).await.unwrap();

    let mut got = Vec::new();
    for _ in 0..2 {
        let (mut stream, header, rest) = next_group_stream_with_rest(&client, version).await;
        assert_eq!(header.subscribe_id, 7);
        let frames = read_frames(&mut stream, rest, version).await;
        got.push((header.sequence, header.frame_start, frames));
    }
    got.sort();
    assert_eq!(
        got,
        vec![
            // From frame 1 of the start group; the first delta is still absolute.
            (1, 1, vec![(101, "g1f1".into()), (102, "g1f2".into())]),
            // Up to frame 0 of the end group.
            (2, 0, vec![(200, "g2f0".into())]),
        ]
    );

    // Group 3 is held above the cap; clearing the cap serves it whole.
    let mut update = BytesMut::new();
    encode_message(
        &SubscribeUpdate {
            priority: 0,
            max_age_ms: 60_000,
            group_start: Some(1),
            group_end: None,
            frame_start: 1,
            frame_end: None,
        },
        version,
        &mut update,
    )
    .unwrap();
    send.write(update.freeze()).await.unwrap();
    let (mut stream, header, rest) = next_group_stream_with_rest(&client, version).await;
    assert_eq!((header.sequence, header.frame_start), (3, 0));
    let frames = read_frames(&mut stream, rest, version).await;
    assert_eq!(
        frames,
        vec![
            (300, "g3f0".to_string()),
            (301, "g3f1".into()),
            (302, "g3f2".into())
        ]
    );
}

/// A peer asking for more tracks at once than it may have requests in flight is served as
/// slots free up, not refused: eight tracks through a relay side allowing two requests.
#[tokio::test]
async fn requests_past_the_limit_wait_for_a_slot() {
    let version = Version::Lite06;
    let relay = Relay::new();
    let names: Vec<String> = (0..8).map(|i| format!("t{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let publisher = publisher(&relay, version, "room/many", &refs).await;

    let origin = starling_model::Origin::new();
    let mut config = starling_session::SessionConfig::new(starling_session::random_hop());
    config.consume = Some(origin.clone());
    let (session, relay_side, _) = relay
        .connect_with(version, config, |relay_side| {
            relay_side.limits.max_requests = 2
        })
        .await;
    let viewer = Subscriber {
        origin,
        session,
        relay_side,
    };
    let mut readers = Vec::new();
    for name in &names {
        readers.push(viewer.track("room/many", name).await);
    }
    for (i, track) in publisher.tracks.iter().enumerate() {
        let mut group = track.create_group(0).unwrap();
        group
            .write_frame(frame(i as u64, &format!("f{i}")))
            .unwrap();
        group.finish();
    }
    for (i, reader) in readers.iter_mut().enumerate() {
        let (sequence, frames) = read_group(reader).await;
        assert_eq!((sequence, frames), (0, vec![format!("f{i}")]));
    }
}

/// Issue 10 item 2: a track name past the bound is refused with MALFORMED_TRACK before it is
/// looked up or requested upstream; the session goes on serving.
#[tokio::test]
async fn a_track_name_past_the_bound_is_refused() {
    use starling_proto::StreamCode;
    use starling_transport::{RecvStream, Transport, TransportError};
    let version = Version::Lite06;
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
    let (client, relay_side) = raw_client(&relay, version, Role::Subscriber, |_| {}).await;
    let long = "t".repeat(starling_model::Limits::default().max_track_name_bytes + 1);
    let (mut send, mut recv) = client.open_bi().await.unwrap();
    send.write(subscribe_bytes(version, 1, "room/alice", &long, 0))
        .await
        .unwrap();
    let refused = tokio::time::timeout(TIMEOUT, recv.read(1024))
        .await
        .unwrap();
    assert_eq!(
        refused,
        Err(TransportError::Reset(StreamCode::MalformedTrack.to_code()))
    );
    let at_relay = relay.origin.consume(&path("room/alice"), None).unwrap();
    assert!(
        at_relay.tracks().iter().all(|t| t.name != long),
        "nothing was requested upstream"
    );
    // The same session subscribes to a real track.
    let (mut send, _recv) = client.open_bi().await.unwrap();
    send.write(subscribe_bytes(version, 2, "room/alice", "video", 0))
        .await
        .unwrap();
    let mut group = publisher.tracks[0].create_group(0).unwrap();
    group.write_frame(frame(0, "live")).unwrap();
    group.finish();
    let (_stream, header) = next_group_stream(&client, version).await;
    assert_eq!(header.subscribe_id, 2);
    assert!(relay_side.served().0 >= 1);
}
