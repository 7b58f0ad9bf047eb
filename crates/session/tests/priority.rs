//! Send order: a more urgent subscription's groups go first, newer groups before older ones,
//! and a SUBSCRIBE_UPDATE re-prioritizes the streams already in flight.

mod common;

use bytes::BytesMut;
use common::*;
use starling_proto::{encode_message, Role, SubscribeUpdate, Version};
use starling_transport::{RecvStream, SendStream, Transport};

#[tokio::test]
async fn streams_are_ordered_by_priority_then_newest_group() {
    for version in [Version::Lite06, Version::Lite05] {
        let relay = Relay::new();
        let publisher = publisher(&relay, version, "room/alice", &["low", "high"]).await;
        let (client, _relay_side) = raw_client(&relay, version, Role::Subscriber, |_| {}).await;
        let (mut low_send, mut low_recv) = client.open_bi().await.unwrap();
        low_send
            .write(subscribe_bytes(version, 0, "room/alice", "low", 1))
            .await
            .unwrap();
        let (mut high_send, mut high_recv) = client.open_bi().await.unwrap();
        high_send
            .write(subscribe_bytes(version, 1, "room/alice", "high", 9))
            .await
            .unwrap();

        let mut low0 = publisher.tracks[0].create_group(0).unwrap();
        low0.write_frame(frame(0, "l0")).unwrap();
        let mut high0 = publisher.tracks[1].create_group(0).unwrap();
        high0.write_frame(frame(0, "h0")).unwrap();
        let mut streams = Vec::new();
        for _ in 0..2 {
            streams.push(next_group_stream(&client, version).await);
        }
        streams.sort_by_key(|(_, header)| header.subscribe_id);
        let (low_stream, _) = &streams[0];
        let (high_stream, _) = &streams[1];
        assert!(
            high_stream.send_priority() > low_stream.send_priority(),
            "{version}: the more urgent subscription goes first"
        );
        // SUBSCRIBE_START arrived on both subscribe streams.
        assert!(low_recv.read(64).await.unwrap().is_some());
        assert!(high_recv.read(64).await.unwrap().is_some());

        // A newer group of the same subscription goes before the older one.
        let mut low1 = publisher.tracks[0].create_group(1).unwrap();
        low1.write_frame(frame(1000, "l1")).unwrap();
        let (low1_stream, header) = next_group_stream(&client, version).await;
        assert_eq!((header.subscribe_id, header.sequence), (0, 1));
        assert!(low1_stream.send_priority() > low_stream.send_priority());
        assert!(low1_stream.send_priority() < high_stream.send_priority());

        // Raising the low subscription above the high one re-prioritizes its open streams at
        // their next frame.
        let mut update = BytesMut::new();
        encode_message(
            &SubscribeUpdate {
                priority: 20,
                max_age_ms: 0,
                group_start: None,
                group_end: None,
                frame_start: 0,
                frame_end: None,
            },
            version,
            &mut update,
        )
        .unwrap();
        low_send.write(update.freeze()).await.unwrap();
        let mut low1_stream = low1_stream;
        low1_stream.read(1 << 20).await.unwrap();
        // Frames after the update carry the new order; wait for one to arrive.
        let mut seen = false;
        for n in 0..100u64 {
            low1.write_frame(frame(1001 + n, "more")).unwrap();
            let _ = tokio::time::timeout(TIMEOUT, low1_stream.read(1 << 20))
                .await
                .unwrap()
                .unwrap();
            if low1_stream.send_priority() > high_stream.send_priority() {
                seen = true;
                break;
            }
        }
        assert!(seen, "{version}: the update reached the in-flight stream");
        drop((high0, low0));
    }
}
