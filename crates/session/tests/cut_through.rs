//! Cut-through: a large frame crosses a relay as its bytes arrive. The subscriber sees the
//! frame begin and its first bytes while the publisher has not yet written the rest, on
//! moq-lite (old and new framing) and on the IETF drafts.

mod common;

use std::future::poll_fn;

use common::*;
use starling_model::{GroupConsumer, Unit};
use starling_proto::ietf::Draft;
use starling_proto::{Protocol, Version};

const SIZE: usize = 256 * 1024;

/// Take what the group forwards until `want` payload bytes of its first frame are in `got`,
/// or the group ends: whether it ended.
async fn take_until(group: &mut GroupConsumer, got: &mut Vec<u8>, want: usize) -> bool {
    let mut units = Vec::new();
    loop {
        let done = tokio::time::timeout(TIMEOUT, poll_fn(|cx| group.poll_units(cx, &mut units)))
            .await
            .expect("the frame's bytes in time")
            .expect("group open");
        for unit in units.drain(..) {
            match unit {
                Unit::Head { size, .. } => assert_eq!(size, SIZE, "the declared size first"),
                Unit::Bytes(bytes) => got.extend_from_slice(&bytes),
                Unit::Frame(_) => panic!("the frame was whole before its bytes were forwarded"),
            }
        }
        if done || got.len() >= want {
            return done;
        }
    }
}

async fn a_large_frame_crosses_as_it_arrives(version: impl Into<Protocol> + Copy) {
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
    let sub = subscriber(&relay, version).await;
    let mut track = sub.track("room/alice", "video").await;

    let payload: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    let mut group = publisher.tracks[0].append_group().unwrap();
    group.begin_frame(5, SIZE).unwrap();
    group.write_chunk(&payload[..SIZE / 4]).unwrap();

    let mut received = tokio::time::timeout(TIMEOUT, track.next_group())
        .await
        .expect("group in time")
        .expect("group ok")
        .expect("track open");
    let mut got = Vec::new();
    let done = take_until(&mut received, &mut got, SIZE / 4).await;
    assert!(!done);
    assert_eq!(
        got,
        payload[..SIZE / 4],
        "the first quarter arrived before the rest was written"
    );

    group.write_chunk(&payload[SIZE / 4..]).unwrap();
    group.finish();
    while !take_until(&mut received, &mut got, usize::MAX).await {}
    assert_eq!(got.len(), SIZE);
    assert!(got == payload, "the whole frame, each byte once");
}

#[tokio::test]
async fn lite06_cut_through() {
    a_large_frame_crosses_as_it_arrives(Version::Lite06).await;
}

#[tokio::test]
async fn lite03_cut_through() {
    a_large_frame_crosses_as_it_arrives(Version::Lite03).await;
}

#[tokio::test]
async fn ietf14_cut_through() {
    a_large_frame_crosses_as_it_arrives(Draft::D14).await;
}

#[tokio::test]
async fn ietf22_cut_through() {
    a_large_frame_crosses_as_it_arrives(Draft::D22).await;
}
