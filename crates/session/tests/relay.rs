//! Publisher -> relay -> subscribers over the in-memory transport, in lite-05 and lite-06.

mod common;

use common::*;
use starling_proto::Version;

async fn publish_and_receive(version: Version) {
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
    let sub = subscriber(&relay, version).await;
    let mut track = sub.track("room/alice", "video").await;

    // Wait until the relay's upstream subscription is live before writing.
    let mut group = publisher.tracks[0].append_group().unwrap();
    group.write_frame(frame(0, "a")).unwrap();
    group.write_frame(frame(33, "b")).unwrap();
    group.finish();
    let (seq, frames) = read_group(&mut track).await;
    assert_eq!(seq, 0);
    assert_eq!(frames, vec!["a", "b"]);

    let mut group = publisher.tracks[0].append_group().unwrap();
    group.write_frame(frame(66, "c")).unwrap();
    group.finish();
    let (seq, frames) = read_group(&mut track).await;
    assert_eq!(seq, 1);
    assert_eq!(frames, vec!["c"]);
}

#[tokio::test]
async fn lite06_publish_through_relay() {
    publish_and_receive(Version::Lite06).await;
}

#[tokio::test]
async fn lite05_publish_through_relay() {
    publish_and_receive(Version::Lite05).await;
}
