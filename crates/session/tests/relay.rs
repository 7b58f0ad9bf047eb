//! Publisher -> relay -> subscribers over the in-memory transport, on every moq-lite version
//! and on the IETF drafts.

mod common;

use common::*;
use starling_proto::Version;

async fn publish_and_receive(version: impl Into<starling_proto::Protocol> + Copy) {
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

#[tokio::test]
async fn lite07_publish_through_relay() {
    publish_and_receive(Version::Lite07Wip).await;
}

#[tokio::test]
async fn lite04_publish_through_relay() {
    publish_and_receive(Version::Lite04).await;
}

#[tokio::test]
async fn lite03_publish_through_relay() {
    publish_and_receive(Version::Lite03).await;
}

#[tokio::test]
async fn lite02_publish_through_relay() {
    publish_and_receive(Version::Lite02).await;
}

#[tokio::test]
async fn lite01_publish_through_relay() {
    publish_and_receive(Version::Lite01).await;
}

async fn wait_announced(origin: &starling_model::Origin, name: &str, present: bool) {
    let interest = origin.interest(starling_proto::Path::empty()).unwrap();
    let mut changed = Vec::new();
    loop {
        if origin.route(&path(name), None).is_some() == present {
            return;
        }
        tokio::time::timeout(TIMEOUT, interest.changed(&mut changed))
            .await
            .expect("announce change in time");
    }
}

#[tokio::test]
async fn announce_then_unannounce_reaches_subscribers() {
    for version in Version::ALL.iter().copied() {
        let relay = Relay::new();
        let sub = subscriber(&relay, version).await;
        let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
        wait_announced(&sub.origin, "room/alice", true).await;
        // The chain names the publisher first, then the relay (from 04; before, no ids
        // travel and the chain holds stand-ins).
        let route = sub.origin.route(&path("room/alice"), None).unwrap();
        if version.has_hop_list() {
            assert_eq!(route.route.hops.len(), 2, "{version}");
            assert_eq!(route.route.hops[1], relay.hop);
        } else {
            assert!(!route.route.hops.is_empty(), "{version}");
        }
        drop(publisher.route);
        wait_announced(&sub.origin, "room/alice", false).await;
        assert!(relay.origin.route(&path("room/alice"), None).is_none());
    }
}

#[tokio::test]
async fn prefix_interest_matches_whole_segments() {
    let relay = Relay::new();
    let _a = publisher(&relay, Version::Lite06, "room/alice", &["video"]).await;
    let _b = publisher(&relay, Version::Lite06, "roomy/bob", &["video"]).await;
    let _c = publisher(&relay, Version::Lite06, "other/carol", &["video"]).await;
    let origin = starling_model::Origin::new();
    let mut config = starling_session::SessionConfig::new(starling_session::random_hop());
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![path("room")];
    let (_session, _) = relay.connect(Version::Lite06, config).await;
    wait_announced(&origin, "room/alice", true).await;
    // A later publisher under the prefix is heard too; lookalikes never.
    let _d = publisher(&relay, Version::Lite06, "room/dave", &["video"]).await;
    wait_announced(&origin, "room/dave", true).await;
    let heard: Vec<String> = origin
        .announced(&starling_proto::Path::empty(), None)
        .into_iter()
        .map(|a| a.path.to_string())
        .collect();
    assert_eq!(heard, vec!["room/alice", "room/dave"]);
}

#[tokio::test]
async fn late_joiner_starts_at_the_latest_group() {
    for version in [Version::Lite06, Version::Lite05] {
        let relay = Relay::new();
        let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
        let early = subscriber(&relay, version).await;
        let mut early_track = early.track("room/alice", "video").await;
        for seq in 0..3u64 {
            write_group(&publisher.tracks[0], seq * 1000, &format!("g{seq}"));
            let (got, frames) = read_group(&mut early_track).await;
            assert_eq!((got, frames), (seq, vec![format!("g{seq}")]));
        }
        let late = subscriber(&relay, version).await;
        let mut late_track = late.track("room/alice", "video").await;
        let (seq, frames) = read_group(&mut late_track).await;
        assert_eq!(seq, 2, "{version}: late joiner gets the latest group first");
        assert_eq!(frames, vec!["g2"]);
    }
}

#[tokio::test]
async fn many_subscribers_share_one_upstream_which_ends_after_the_last_leaves() {
    let relay = Relay::new();
    let publisher = publisher(&relay, Version::Lite06, "room/alice", &["video"]).await;
    let mut subs = Vec::new();
    let mut tracks = Vec::new();
    for _ in 0..10 {
        let sub = subscriber(&relay, Version::Lite06).await;
        tracks.push(sub.track("room/alice", "video").await);
        subs.push(sub);
    }
    let mut group = publisher.tracks[0].append_group().unwrap();
    group.write_frame(frame(0, "hello")).unwrap();
    group.finish();
    for track in &mut tracks {
        assert_eq!(read_group(track).await, (0, vec!["hello".to_string()]));
    }
    // One upstream subscription however many viewers.
    assert_eq!(publisher.tracks[0].consumers(), 1);
    drop(tracks);
    tokio::time::timeout(TIMEOUT, publisher.tracks[0].unused())
        .await
        .expect("upstream ends after the last viewer leaves");
}

#[tokio::test]
async fn a_reconnecting_publisher_takes_its_path_over() {
    for version in [Version::Lite06, Version::Lite05] {
        let relay = Relay::new();
        let old = publisher(&relay, version, "room/alice", &["video"]).await;
        wait_announced(&relay.origin, "room/alice", true).await;
        let old_chain = relay
            .origin
            .route(&path("room/alice"), None)
            .unwrap()
            .route
            .hops;

        // The same path published again (a publisher that reconnected) wins at once.
        let new = publisher(&relay, version, "room/alice", &["video"]).await;
        let interest = relay.origin.interest(path("room/alice")).unwrap();
        let mut changed = Vec::new();
        while relay
            .origin
            .route(&path("room/alice"), None)
            .unwrap()
            .route
            .hops
            == old_chain
        {
            tokio::time::timeout(TIMEOUT, interest.changed(&mut changed))
                .await
                .expect("takeover in time");
        }
        let sub = subscriber(&relay, version).await;
        let mut track = sub.track("room/alice", "video").await;
        let mut group = new.tracks[0].append_group().unwrap();
        group.write_frame(frame(0, "new")).unwrap();
        group.finish();
        assert_eq!(read_group(&mut track).await.1, vec!["new"], "{version}");

        // The old session leaving does not unannounce the path.
        old.session
            .close(starling_proto::SessionCode::NoError, "gone");
        drop(old);
        let mut group = new.tracks[0].append_group().unwrap();
        group.write_frame(frame(1000, "still")).unwrap();
        group.finish();
        assert_eq!(read_group(&mut track).await.1, vec!["still"], "{version}");
        assert!(relay.origin.route(&path("room/alice"), None).is_some());
    }
}

#[tokio::test]
async fn datagrams_arrive_as_single_frame_groups() {
    use starling_transport::Transport;
    let version = Version::Lite06;
    let relay = Relay::new();
    let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
    let sub = subscriber(&relay, version).await;
    let mut track = sub.track("room/alice", "video").await;
    let mut group = publisher.tracks[0].append_group().unwrap();
    group.write_frame(frame(0, "stream")).unwrap();
    group.finish();
    assert_eq!(
        read_group(&mut track).await,
        (0, vec!["stream".to_string()])
    );

    // The relay's upstream subscription is id 0 on the publisher's session.
    let mut datagram = bytes::BytesMut::new();
    starling_proto::Datagram {
        subscribe_id: 0,
        sequence: 1,
        timestamp: 40,
        payload: bytes::Bytes::from_static(b"datagram"),
    }
    .encode(version, &mut datagram)
    .unwrap();
    // Noise first: an unknown subscription and bytes that do not decode are dropped.
    publisher
        .transport
        .send_datagram(bytes::Bytes::from_static(&[0x3f, 0x01, 0x00, 0x61]))
        .unwrap();
    publisher
        .transport
        .send_datagram(bytes::Bytes::from_static(&[0xff]))
        .unwrap();
    publisher
        .transport
        .send_datagram(datagram.freeze())
        .unwrap();
    assert_eq!(
        read_group(&mut track).await,
        (1, vec!["datagram".to_string()])
    );
}

#[tokio::test]
async fn fetch_reads_a_cached_group_from_a_frame_on() {
    for version in [Version::Lite06, Version::Lite05] {
        let relay = Relay::new();
        let publisher = publisher(&relay, version, "room/alice", &["video"]).await;
        let sub = subscriber(&relay, version).await;
        let mut track = sub.track("room/alice", "video").await;
        for seq in 0..2u64 {
            let mut group = publisher.tracks[0].append_group().unwrap();
            for i in 0..3u64 {
                group
                    .write_frame(frame(seq * 1000 + i * 10, &format!("g{seq}f{i}")))
                    .unwrap();
            }
            group.finish();
            read_group(&mut track).await;
        }
        // Group 0 is still in the relay's cache; fetch it whole, then from frame 1 (06 only).
        let mut fetched = sub
            .session
            .fetch(path("room/alice"), "video", 0, 0)
            .unwrap();
        let mut frames = Vec::new();
        while let Some(f) = tokio::time::timeout(TIMEOUT, fetched.next_frame())
            .await
            .unwrap()
            .unwrap()
        {
            frames.push((f.timestamp, String::from_utf8(f.payload.to_vec()).unwrap()));
        }
        assert_eq!(
            frames,
            vec![(0, "g0f0".into()), (10, "g0f1".into()), (20, "g0f2".into())],
            "{version}"
        );
        if version == Version::Lite06 {
            let mut tail = sub
                .session
                .fetch(path("room/alice"), "video", 1, 1)
                .unwrap();
            let first = tokio::time::timeout(TIMEOUT, tail.next_frame())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(&first.payload[..], b"g1f1");
        }
        // A group that does not exist is refused.
        let mut missing = sub
            .session
            .fetch(path("room/alice"), "video", 9, 0)
            .unwrap();
        let err = tokio::time::timeout(TIMEOUT, missing.next_frame())
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(err, starling_proto::StreamCode::NotFound);
    }
}

/// A FETCH for a track the relay does not hold (moq-cli's HLS server fetches every segment
/// this way, subscribing to nothing): the relay reads the track from the publisher and
/// answers with the group once it arrives.
#[tokio::test]
async fn fetch_of_a_track_the_relay_does_not_hold_is_asked_of_its_publisher() {
    let relay = Relay::new();
    let publisher = publisher(&relay, Version::Lite06, "room/alice", &["video"]).await;
    for seq in 0..3u64 {
        write_group(&publisher.tracks[0], seq * 1000, &format!("g{seq}"));
    }
    let sub = subscriber(&relay, Version::Lite06).await;
    // The announce reached the subscriber: the relay knows the broadcast, holds no track.
    sub.announced("room/alice").await;
    let mut fetched = sub
        .session
        .fetch(path("room/alice"), "video", 1, 0)
        .unwrap();
    let first = tokio::time::timeout(TIMEOUT, fetched.next_frame())
        .await
        .expect("in time")
        .expect("fetched")
        .expect("a frame");
    assert_eq!(&first.payload[..], b"g1");
}

/// A grant that allows paths under one prefix, per direction.
#[derive(Debug)]
struct Only {
    publish: &'static str,
    subscribe: &'static str,
}

impl starling_session::Access for Only {
    fn can_publish(&self, path: &starling_proto::Path) -> bool {
        path.has_prefix(&common::path(self.publish))
    }
    fn can_subscribe(&self, path: &starling_proto::Path) -> bool {
        path.has_prefix(&common::path(self.subscribe))
    }
    fn can_subscribe_under(&self, prefix: &starling_proto::Path) -> bool {
        let allowed = common::path(self.subscribe);
        prefix.has_prefix(&allowed) || allowed.has_prefix(prefix)
    }
}

fn only_alice(config: &mut starling_session::SessionConfig) {
    config.access = Some(std::sync::Arc::new(Only {
        publish: "alice",
        subscribe: "alice",
    }));
}

#[tokio::test]
async fn per_path_access_scopes_announces_and_subscriptions() {
    let version = Version::Lite06;
    let relay = Relay::new();
    // A publisher allowed to publish only under `alice` announces two broadcasts.
    let origin = starling_model::Origin::new();
    let alice = starling_model::BroadcastProducer::new(Default::default());
    let bob = starling_model::BroadcastProducer::new(Default::default());
    let _a = origin
        .publish(
            path("alice/cam"),
            alice.consume(),
            starling_model::Route::local(),
        )
        .unwrap();
    let _b = origin
        .publish(
            path("bob/cam"),
            bob.consume(),
            starling_model::Route::local(),
        )
        .unwrap();
    let mut config = starling_session::SessionConfig::new(starling_session::random_hop());
    config.publish = Some(origin.clone());
    let _publisher = relay.connect_with(version, config, only_alice).await;
    wait_announced(&relay.origin, "alice/cam", true).await;
    assert!(
        relay.origin.route(&path("bob/cam"), None).is_none(),
        "outside the grant, never published"
    );

    // Another publisher (unrestricted) publishes bob/cam; a subscriber allowed only under
    // `alice` hears alice/cam and cannot subscribe to bob/cam.
    let _bob_publisher = publisher(&relay, version, "bob/cam", &["video"]).await;
    wait_announced(&relay.origin, "bob/cam", true).await;
    let heard = starling_model::Origin::new();
    let mut config = starling_session::SessionConfig::new(starling_session::random_hop());
    config.consume = Some(heard.clone());
    let (subscriber, _, _) = relay.connect_with(version, config, only_alice).await;
    wait_announced(&heard, "alice/cam", true).await;
    let listed: Vec<String> = heard
        .announced(&starling_proto::Path::empty(), None)
        .into_iter()
        .map(|a| a.path.to_string())
        .collect();
    assert_eq!(listed, vec!["alice/cam"]);
    // Subscribing outside the grant is refused like a path with no route.
    let bob_track = subscriber
        .consume_broadcast(path("bob/cam"))
        .subscribe_track("video", Default::default())
        .unwrap();
    let err = tokio::time::timeout(TIMEOUT, bob_track.info())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err, starling_proto::StreamCode::Unroutable);
}

/// A peer that sends GOAWAY is leaving: every route it announced is re-priced to the maximum
/// at once (so any other route wins), and relays downstream hear it as an UPDATE at the
/// ceiling (moq-relay's drain pricing, cluster statement 16); on an IETF draft with MoQ
/// Cluster (17 on) as a repeated NAMESPACE.
async fn drains(protocol: starling_proto::Protocol) {
    use starling_proto::RouteCost;
    let relay = Relay::new();
    let publisher = publisher(&relay, protocol, "room/alice", &["video"]).await;
    let sub = subscriber(&relay, protocol).await;
    wait_announced(&sub.origin, "room/alice", true).await;
    let cost = |origin: &starling_model::Origin| {
        origin
            .route(&path("room/alice"), None)
            .map(|r| r.route.cost)
    };
    assert_eq!(cost(&relay.origin), Some(RouteCost::new(1)));
    assert_eq!(cost(&sub.origin), Some(RouteCost::new(2)));

    publisher.session.goaway("").await.unwrap();
    let interest = sub.origin.interest(starling_proto::Path::empty()).unwrap();
    let mut changed = Vec::new();
    while cost(&sub.origin) != Some(RouteCost::MAX) {
        tokio::time::timeout(TIMEOUT, interest.changed(&mut changed))
            .await
            .expect("the re-priced route reaches the subscriber");
    }
    assert_eq!(cost(&relay.origin), Some(RouteCost::MAX));
    // The route is still there: the draining session keeps serving until it closes.
    assert_eq!(
        sub.origin
            .route(&path("room/alice"), None)
            .unwrap()
            .route
            .hops
            .len(),
        2
    );
}

#[tokio::test]
async fn a_draining_publishers_routes_cost_the_maximum_downstream() {
    drains(Version::Lite06.into()).await;
}

#[tokio::test]
async fn an_ietf_draining_publishers_routes_cost_the_maximum_downstream() {
    drains(starling_proto::ietf::Draft::D22.into()).await;
}

/// A change of a path's best route is held for 300 ms and a burst of changes inside the hold
/// goes out as one UPDATE (cluster statement 13); a withdrawal is not held.
#[tokio::test(start_paused = true)]
async fn route_changes_are_held_and_a_burst_is_one_update() {
    use starling_model::{BroadcastProducer, Limits, Route};
    use starling_proto::RouteCost;
    let relay = Relay::new();
    let sub = subscriber(&relay, Version::Lite06).await;
    let broadcast = BroadcastProducer::new(Limits::default());
    let handle = relay
        .origin
        .publish(
            path("room/alice"),
            broadcast.consume(),
            Route::learned(vec![7], RouteCost::new(5), false),
        )
        .unwrap();
    wait_announced(&sub.origin, "room/alice", true).await;
    let cost = || {
        sub.origin
            .route(&path("room/alice"), None)
            .map(|r| r.route.cost.warm)
    };
    assert_eq!(cost(), Some(6));

    // Two changes back to back: neither is on the wire before the hold has passed.
    relay
        .origin
        .update_route(&handle, Route::learned(vec![7], RouteCost::new(3), false));
    relay
        .origin
        .update_route(&handle, Route::learned(vec![7], RouteCost::new(2), false));
    tokio::time::sleep(std::time::Duration::from_millis(290)).await;
    assert_eq!(cost(), Some(6), "an update went out inside the hold");
    // After it, the last one only.
    let interest = sub.origin.interest(starling_proto::Path::empty()).unwrap();
    let mut changed = Vec::new();
    let mut seen = Vec::new();
    while cost() != Some(3) {
        tokio::time::timeout(TIMEOUT, interest.changed(&mut changed))
            .await
            .expect("the held update arrives");
        seen.push(cost());
    }
    assert!(
        !seen.contains(&Some(4)),
        "the first change of the burst was sent: {seen:?}"
    );

    // A withdrawal goes at once.
    let withdrawn_at = tokio::time::Instant::now();
    drop(handle);
    wait_announced(&sub.origin, "room/alice", false).await;
    assert!(withdrawn_at.elapsed() < std::time::Duration::from_millis(100));
}

/// A request never flows back towards the peer a route came through: the publisher itself
/// asking the relay for its own broadcast finds no route (0x36), as a peer relay asking for a
/// path whose only route goes through it does (cluster statement 19).
#[tokio::test]
async fn a_request_from_the_routes_own_peer_is_unroutable() {
    let relay = Relay::new();
    let publisher = publisher(&relay, Version::Lite06, "room/alice", &["video"]).await;
    wait_announced(&relay.origin, "room/alice", true).await;
    let looped = publisher
        .session
        .consume_broadcast(path("room/alice"))
        .subscribe_track("video", Default::default())
        .unwrap();
    let err = tokio::time::timeout(TIMEOUT, looped.info())
        .await
        .expect("an answer in time")
        .unwrap_err();
    assert_eq!(err, starling_proto::StreamCode::Unroutable);
    // Anyone else is served.
    let sub = subscriber(&relay, Version::Lite06).await;
    let track = sub.track("room/alice", "video").await;
    assert!(tokio::time::timeout(TIMEOUT, track.info())
        .await
        .unwrap()
        .is_ok());
}

/// Cluster statement 7: with max hops k, a route of k hops is not offered (the receiver's
/// append would not fit); a shorter one is, even when costlier, and with none the path is
/// withdrawn.
#[tokio::test]
async fn a_route_too_long_to_forward_falls_back_to_a_shorter_one() {
    use starling_model::{BroadcastProducer, Limits, Origin, Route};
    use starling_proto::RouteCost;
    use starling_session::{random_hop, SessionConfig};
    let relay = Relay::new();
    let long = BroadcastProducer::dynamic(Limits::default());
    let short = BroadcastProducer::dynamic(Limits::default());
    let _long = relay
        .origin
        .publish(
            path("room/alice"),
            long.consume(),
            Route::learned(vec![11, 12], RouteCost::new(1), true),
        )
        .unwrap();
    let short_route = relay
        .origin
        .publish(
            path("room/alice"),
            short.consume(),
            Route::learned(vec![13], RouteCost::new(5), true),
        )
        .unwrap();
    let origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(origin.clone());
    let (_session, _relay_side, _) = relay
        .connect_with(Version::Lite06, config, |relay_side| {
            relay_side.max_hops = 2
        })
        .await;
    wait_announced(&origin, "room/alice", true).await;
    let chain = origin.route(&path("room/alice"), None).unwrap().route.hops;
    assert_eq!(
        &chain[..],
        &[13, relay.hop],
        "the two-hop route does not fit"
    );
    drop(short_route);
    wait_announced(&origin, "room/alice", false).await;
}

#[tokio::test]
async fn ietf14_publish_through_relay() {
    publish_and_receive(starling_proto::ietf::Draft::D14).await;
}

#[tokio::test]
async fn ietf16_publish_through_relay() {
    publish_and_receive(starling_proto::ietf::Draft::D16).await;
}

#[tokio::test]
async fn ietf22_publish_through_relay() {
    publish_and_receive(starling_proto::ietf::Draft::D22).await;
}
