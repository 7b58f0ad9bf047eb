//! Failover: a relay whose upstream session dies mid-group hands the track to another route
//! with the same first hop, and its readers continue at the next frame with no gap and no
//! duplicate (cluster statement 18).

mod common;

use common::*;
use starling_model::{BroadcastProducer, Limits, Origin, Route, StartAt, TrackInfo};
use starling_proto::{SessionCode, Version};
use starling_session::{random_hop, SessionConfig};

async fn next(group: &mut starling_model::GroupConsumer) -> Option<String> {
    let frame = tokio::time::timeout(TIMEOUT, group.next_frame())
        .await
        .expect("the next frame arrives")
        .expect("the group goes on");
    frame.map(|f| String::from_utf8(f.payload.to_vec()).unwrap())
}

/// Publisher P is reached by relay C through two relays, B1 and B2; a subscriber reads
/// through C. The one of C's sessions that serves the track is closed in the middle of a
/// group.
async fn continues_through_the_other_route(version: Version) {
    let (b1, b2, c) = (Relay::new(), Relay::new(), Relay::new());

    // P publishes to both middle relays under one hop: one content identity.
    let p_origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let track = broadcast.create_track("video", TrackInfo::default());
    let _route = p_origin
        .publish(path("room/alice"), broadcast.consume(), Route::local())
        .unwrap();
    let p_hop = random_hop();
    let p_config = || {
        let mut config = SessionConfig::new(p_hop);
        config.publish = Some(p_origin.clone());
        config
    };
    let _p1 = b1.connect(version, p_config()).await;
    let _p2 = b2.connect(version, p_config()).await;

    // C dials both and hears their announcements.
    let c_config = || {
        let mut config = SessionConfig::new(c.hop);
        config.consume = Some(c.origin.clone());
        config
    };
    let (c_b1, _b1_c) = b1.connect(version, c_config()).await;
    let (c_b2, _b2_c) = b2.connect(version, c_config()).await;
    let interest = c.origin.interest(path("")).unwrap();
    let mut changed = Vec::new();
    while c.origin.routes(&path("room/alice")).len() < 2 {
        tokio::time::timeout(TIMEOUT, interest.changed(&mut changed))
            .await
            .expect("both routes reach C");
    }

    let d = subscriber(&c, version).await;
    let mut reader = d
        .track_from(
            "room/alice",
            "video",
            StartAt {
                max_age_ms: 10_000,
                ..Default::default()
            },
        )
        .await;

    let mut group = track.append_group().unwrap();
    group.write_frame(frame(0, "g0f0")).unwrap();
    group.write_frame(frame(10, "g0f1")).unwrap();
    let mut g0 = tokio::time::timeout(TIMEOUT, reader.next_group())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next(&mut g0).await.as_deref(), Some("g0f0"));
    assert_eq!(next(&mut g0).await.as_deref(), Some("g0f1"));

    // Exactly one of C's sessions carries the upstream subscription; it dies.
    let (serving, other) = match (c_b1.upstream(), c_b2.upstream()) {
        (1, 0) => (&c_b1, &c_b2),
        (0, 1) => (&c_b2, &c_b1),
        counts => panic!("{version}: one upstream per track at C, got {counts:?}"),
    };
    serving.close(SessionCode::Internal, "killed");
    let _ = tokio::time::timeout(TIMEOUT, serving.closed()).await;

    group.write_frame(frame(20, "g0f2")).unwrap();
    group.write_frame(frame(30, "g0f3")).unwrap();
    group.finish();
    assert_eq!(
        next(&mut g0).await.as_deref(),
        Some("g0f2"),
        "{version}: no gap"
    );
    assert_eq!(
        next(&mut g0).await.as_deref(),
        Some("g0f3"),
        "{version}: no gap"
    );
    assert_eq!(
        next(&mut g0).await,
        None,
        "{version}: no duplicate, and the group ends"
    );

    let mut group = track.append_group().unwrap();
    group.write_frame(frame(40, "g1f0")).unwrap();
    group.finish();
    let (sequence, frames) = read_group(&mut reader).await;
    assert_eq!(
        (sequence, frames),
        (1, vec!["g1f0".to_string()]),
        "{version}"
    );
    assert_eq!(other.upstream(), 1, "{version}: the other route serves now");
    assert_eq!(c.origin.failovers(), 1, "{version}");
}

#[tokio::test]
async fn lite06_failover_continues_at_the_next_frame() {
    continues_through_the_other_route(Version::Lite06).await;
}

#[tokio::test]
async fn lite05_failover_continues_at_the_next_frame() {
    continues_through_the_other_route(Version::Lite05).await;
}

/// With no route of the same first hop left, the track ends (INTERNAL_ERROR, as moq-relay
/// ends a dropped front) instead of waiting forever.
#[tokio::test]
async fn without_another_route_the_track_ends() {
    let version = Version::Lite06;
    let (b, c) = (Relay::new(), Relay::new());
    let publisher = publisher(&b, version, "room/alice", &["video"]).await;
    let mut config = SessionConfig::new(c.hop);
    config.consume = Some(c.origin.clone());
    let (c_b, _b_c) = b.connect(version, config).await;
    let d = subscriber(&c, version).await;
    let mut reader = d.track("room/alice", "video").await;
    let mut group = publisher.tracks[0].append_group().unwrap();
    group.write_frame(frame(0, "g0f0")).unwrap();
    let mut g0 = tokio::time::timeout(TIMEOUT, reader.next_group())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(g0.next_frame().await.unwrap().is_some());

    c_b.close(SessionCode::Internal, "killed");
    let ended = tokio::time::timeout(TIMEOUT, g0.next_frame())
        .await
        .expect("the orphaned group ends");
    assert!(ended.is_err(), "the group is aborted, not finished");
    let ended = tokio::time::timeout(TIMEOUT, reader.next_group())
        .await
        .expect("the track ends");
    assert!(ended.is_err(), "the track is aborted");
}
