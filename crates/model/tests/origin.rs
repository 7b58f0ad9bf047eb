//! Origin route table and announce interests: unit tests (the random-operation test against a
//! brute-force reference model is `origin_model.rs`).

mod common;

use common::origin::*;
use common::Flag;
use std::collections::BTreeSet;
use std::task::{Context, Poll};

use futures::task::noop_waker;
use starling_model::{
    fnv_key, BroadcastConsumer, BroadcastProducer, Interest, ModelError, Origin, OriginLimits,
    Route, RouteHandle,
};
use starling_proto::{Path, RouteCost};

/// Paths the interest reported since the last drain, in report order; `None` while pending.
fn drain(interest: &Interest) -> Option<Vec<String>> {
    let w = noop_waker();
    let mut cx = Context::from_waker(&w);
    let mut out = Vec::new();
    match interest.poll_changed(&mut cx, &mut out) {
        Poll::Ready(()) => Some(out.iter().map(|p| p.to_string()).collect()),
        Poll::Pending => {
            assert!(out.is_empty());
            None
        }
    }
}

fn drain_set(interest: &Interest) -> BTreeSet<String> {
    drain(interest).unwrap_or_default().into_iter().collect()
}

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|s| s.to_string()).collect()
}

fn best_is(origin: &Origin, path: &str, exclude: Option<u64>, expect: &BroadcastConsumer) -> bool {
    origin
        .route(&p(path), exclude)
        .is_some_and(|a| a.broadcast.same(expect))
}

#[test]
fn publish_route_and_consume_exact_path() {
    let origin = Origin::new();
    assert!(origin.is_empty());
    let b = broadcast();
    let handle = origin
        .publish(p("/room/alice/"), b.consume(), Route::local())
        .unwrap();
    assert_eq!(origin.len(), 1);

    let announced = origin.route(&p("room/alice"), None).unwrap();
    assert_eq!(announced.path, p("room/alice"));
    assert!(announced.broadcast.same(&b.consume()));
    assert!(announced.route.hops.is_empty());
    assert_eq!(announced.route.cost, RouteCost::default());
    assert!(origin
        .consume(&p("room/alice"), None)
        .unwrap()
        .same(&b.consume()));

    // Lookups are by exact path: neither a parent nor a sibling resolves.
    assert!(origin.route(&p("room"), None).is_none());
    assert!(origin.route(&p("room/alice/cam"), None).is_none());
    assert!(origin.route(&p("room/alic"), None).is_none());
    assert!(origin.consume(&p("room/bob"), None).is_none());

    drop(handle);
    assert!(origin.is_empty());
    assert!(origin.route(&p("room/alice"), None).is_none());
    assert!(origin.consume(&p("room/alice"), None).is_none());
}

#[test]
fn best_route_ranks_warm_then_cold_then_hop_count() {
    let origin = Origin::new();
    let (a, b, c, d) = (broadcast(), broadcast(), broadcast(), broadcast());
    let path = "x";
    // Published best-first so "newest wins ties" cannot explain the choice.
    let _ha = origin
        .publish(p(path), a.consume(), route(1, 9, &[1, 2, 3]))
        .unwrap();
    let _hb = origin
        .publish(p(path), b.consume(), route(2, 0, &[]))
        .unwrap();
    let _hc = origin
        .publish(p(path), c.consume(), route(1, 10, &[]))
        .unwrap();
    let _hd = origin
        .publish(p(path), d.consume(), route(1, 9, &[1, 2, 3, 4]))
        .unwrap();
    assert!(best_is(&origin, path, None, &a.consume()));
    drop(_ha);
    // Same warm and cold: fewer hops wins over newer.
    assert!(best_is(&origin, path, None, &d.consume()));
    drop(_hd);
    // Lower warm beats lower cold.
    assert!(best_is(&origin, path, None, &c.consume()));
    drop(_hc);
    assert!(best_is(&origin, path, None, &b.consume()));
}

#[test]
fn newest_route_wins_ties_so_a_reconnecting_publisher_takes_over() {
    let origin = Origin::new();
    let old = broadcast();
    let new = broadcast();
    let h_old = origin
        .publish(p("live/cam"), old.consume(), Route::local())
        .unwrap();
    assert!(best_is(&origin, "live/cam", None, &old.consume()));
    let h_new = origin
        .publish(p("live/cam"), new.consume(), Route::local())
        .unwrap();
    assert!(best_is(&origin, "live/cam", None, &new.consume()));
    // The stale session going away later does not disturb the new one.
    drop(h_old);
    assert!(best_is(&origin, "live/cam", None, &new.consume()));
    drop(h_new);
    assert!(origin.route(&p("live/cam"), None).is_none());

    // And if the new one leaves first, the old route is still there.
    let h_old = origin
        .publish(p("live/cam"), old.consume(), route(0, 0, &[5]))
        .unwrap();
    let h_new = origin
        .publish(p("live/cam"), new.consume(), route(0, 0, &[6]))
        .unwrap();
    assert!(best_is(&origin, "live/cam", None, &new.consume()));
    drop(h_new);
    assert!(best_is(&origin, "live/cam", None, &old.consume()));
    drop(h_old);
}

#[test]
fn update_route_replaces_cost_in_place_and_notifies() {
    let origin = Origin::new();
    let (a, b) = (broadcast(), broadcast());
    let ha = origin
        .publish(p("s"), a.consume(), route(1, 1, &[7]))
        .unwrap();
    let _hb = origin
        .publish(p("s"), b.consume(), route(5, 5, &[8]))
        .unwrap();
    let interest = origin.interest(Path::empty()).unwrap();
    assert!(best_is(&origin, "s", None, &a.consume()));
    origin.update_route(&ha, route(9, 9, &[7, 3]));
    assert!(best_is(&origin, "s", None, &b.consume()));
    assert_eq!(drain(&interest), Some(vec!["s".to_string()]));
    // The updated route keeps its age: an equal update does not make it "newest".
    origin.update_route(&ha, route(5, 5, &[7]));
    assert!(best_is(&origin, "s", None, &b.consume()));
    let got = origin.route(&p("s"), Some(8)).unwrap();
    assert!(got.broadcast.same(&a.consume()));
    assert_eq!(got.route.cost, RouteCost::new(5));
    assert_eq!(&*got.route.hops, &[7]);
    assert_eq!(origin.len(), 1);
}

#[test]
fn exclude_hop_is_split_horizon() {
    let origin = Origin::new();
    let (via_peer, local) = (broadcast(), broadcast());
    let _h1 = origin
        .publish(p("a"), via_peer.consume(), route(0, 0, &[7, 9]))
        .unwrap();
    assert!(best_is(&origin, "a", None, &via_peer.consume()));
    assert!(best_is(&origin, "a", Some(8), &via_peer.consume()));
    // Hop 0 means "no hop to exclude".
    assert!(best_is(&origin, "a", Some(0), &via_peer.consume()));
    // A route through the asking peer, anywhere in its chain, is never offered back to it.
    assert!(origin.route(&p("a"), Some(9)).is_none());
    assert!(origin.route(&p("a"), Some(7)).is_none());
    assert!(origin.consume(&p("a"), Some(7)).is_none());
    assert!(origin.announced(&Path::empty(), Some(7)).is_empty());

    // A costlier local route is what that peer gets instead.
    let _h2 = origin
        .publish(p("a"), local.consume(), route(100, 100, &[]))
        .unwrap();
    assert!(best_is(&origin, "a", Some(7), &local.consume()));
    assert!(best_is(&origin, "a", None, &via_peer.consume()));
    let ann = origin.announced(&Path::empty(), Some(9));
    assert_eq!(ann.len(), 1);
    assert!(ann[0].broadcast.same(&local.consume()));
}

#[test]
fn closed_broadcasts_are_skipped() {
    let origin = Origin::new();
    let (cheap, dear) = (broadcast(), broadcast());
    let _h1 = origin
        .publish(p("b"), cheap.consume(), Route::local())
        .unwrap();
    let _h2 = origin
        .publish(p("b"), dear.consume(), route(50, 50, &[3]))
        .unwrap();
    assert!(best_is(&origin, "b", None, &cheap.consume()));
    cheap.close();
    assert!(best_is(&origin, "b", None, &dear.consume()));
    assert_eq!(origin.announced(&p("b"), None).len(), 1);
    drop(dear); // dropping the producer closes it too
    assert!(origin.route(&p("b"), None).is_none());
    assert!(origin.consume(&p("b"), None).is_none());
    assert!(origin.announced(&Path::empty(), None).is_empty());
    // The routes themselves are still held until their handles go.
    assert_eq!(origin.len(), 1);
}

#[test]
fn announced_lists_live_paths_under_prefix_sorted() {
    let origin = Origin::new();
    let b = broadcast();
    let mut handles = Vec::new();
    for path in ["room/b", "room", "roomy/a", "room/a/x", "other", "room/a"] {
        handles.push(
            origin
                .publish(p(path), b.consume(), Route::local())
                .unwrap(),
        );
    }
    let paths = |prefix: &str| -> Vec<String> {
        origin
            .announced(&p(prefix), None)
            .into_iter()
            .map(|a| a.path.to_string())
            .collect()
    };
    assert_eq!(paths("room"), ["room", "room/a", "room/a/x", "room/b"]);
    assert_eq!(paths("room/a"), ["room/a", "room/a/x"]);
    assert_eq!(paths("roomy"), ["roomy/a"]);
    assert!(paths("roo").is_empty());
    assert_eq!(paths("").len(), 6);
}

#[test]
fn unpublish_all_removes_a_batch_and_reports_each_path_once() {
    let origin = Origin::new();
    let b = broadcast();
    let keep = broadcast();
    let interest = origin.interest(Path::empty()).unwrap();
    let mut batch = Vec::new();
    for path in ["s/1", "s/1", "s/2", "s/3", "s/3", "s/3"] {
        batch.push(
            origin
                .publish(p(path), b.consume(), Route::local())
                .unwrap(),
        );
    }
    let _kept = origin
        .publish(p("s/3"), keep.consume(), route(1, 1, &[]))
        .unwrap();
    assert_eq!(drain_set(&interest), set(&["s/1", "s/2", "s/3"]));
    assert!(drain(&interest).is_none());

    origin.unpublish_all(batch);
    let reported = drain(&interest).unwrap();
    assert_eq!(reported.len(), 3, "each touched path once: {reported:?}");
    assert_eq!(
        reported.into_iter().collect::<BTreeSet<_>>(),
        set(&["s/1", "s/2", "s/3"])
    );
    assert!(origin.route(&p("s/1"), None).is_none());
    assert!(origin.route(&p("s/2"), None).is_none());
    assert!(best_is(&origin, "s/3", None, &keep.consume()));
    assert_eq!(origin.len(), 1);
    // The handles were consumed without a second, stray notification.
    assert!(drain(&interest).is_none());

    // An empty batch is a no-op.
    origin.unpublish_all(Vec::new());
    assert!(drain(&interest).is_none());
}

#[test]
fn interests_match_whole_segments() {
    let origin = Origin::new();
    let b = broadcast();
    let room = origin.interest(p("room")).unwrap();
    let room_a = origin.interest(p("room/a")).unwrap();
    let all = origin.interest(Path::empty()).unwrap();
    let roo = origin.interest(p("roo")).unwrap();

    let mut handles = Vec::new();
    for path in [
        "room", "room/a", "room/a/b", "roomy/a", "room/ab", "rooms", "x/room",
    ] {
        handles.push(
            origin
                .publish(p(path), b.consume(), Route::local())
                .unwrap(),
        );
    }
    assert_eq!(
        drain_set(&room),
        set(&["room", "room/a", "room/a/b", "room/ab"])
    );
    assert_eq!(drain_set(&room_a), set(&["room/a", "room/a/b"]));
    assert_eq!(drain_set(&all).len(), 7);
    assert!(
        drain(&roo).is_none(),
        "`roo` must not hear `room` or `rooms`"
    );
}

#[test]
fn dirty_paths_are_deduplicated_until_drained() {
    let origin = Origin::new();
    let b = broadcast();
    let interest = origin.interest(p("a")).unwrap();
    assert!(drain(&interest).is_none());
    for _ in 0..5 {
        let h = origin
            .publish(p("a/x"), b.consume(), Route::local())
            .unwrap();
        origin.update_route(&h, route(1, 1, &[]));
        drop(h);
    }
    origin.touch(&p("a/x"));
    origin.touch(&p("a/y"));
    origin.touch(&p("a/x"));
    assert_eq!(
        drain(&interest),
        Some(vec!["a/x".to_string(), "a/y".to_string()])
    );
    assert!(drain(&interest).is_none());
    // After a drain the same path is reported again.
    origin.touch(&p("a/x"));
    assert_eq!(drain(&interest), Some(vec!["a/x".to_string()]));
}

#[test]
fn interest_is_woken_by_a_change_under_its_prefix_only() {
    let origin = Origin::new();
    let b = broadcast();
    let interest = origin.interest(p("room")).unwrap();
    let (flag, w) = Flag::new();
    let mut cx = Context::from_waker(&w);
    let mut out = Vec::new();
    assert!(interest.poll_changed(&mut cx, &mut out).is_pending());
    let _other = origin
        .publish(p("roomy"), b.consume(), Route::local())
        .unwrap();
    assert!(!flag.woken());
    let _h = origin
        .publish(p("room/1"), b.consume(), Route::local())
        .unwrap();
    assert!(flag.woken());
    assert!(interest.poll_changed(&mut cx, &mut out).is_ready());
    assert_eq!(out, vec![p("room/1")]);
    // The async form resolves at once while something is dirty.
    origin.touch(&p("room"));
    let mut out = Vec::new();
    futures::executor::block_on(interest.changed(&mut out));
    assert_eq!(out, vec![p("room")]);
    assert!(interest.origin().route(&p("room/1"), None).is_some());
}

#[test]
fn dropping_an_interest_unregisters_it() {
    let origin = Origin::with_limits(OriginLimits {
        max_routes: 16,
        max_interests: 2,
    });
    let b = broadcast();
    let i1 = origin.interest(p("a")).unwrap();
    let i2 = origin.interest(p("a")).unwrap();
    assert_eq!(
        origin.interest(p("b")).unwrap_err(),
        ModelError::TooMany("interests")
    );
    drop(i1);
    // Its slot is free again, and changes still reach the survivor.
    let i3 = origin.interest(p("a")).unwrap();
    let _h = origin
        .publish(p("a/z"), b.consume(), Route::local())
        .unwrap();
    assert_eq!(drain(&i2), Some(vec!["a/z".to_string()]));
    assert_eq!(drain(&i3), Some(vec!["a/z".to_string()]));
    drop(i2);
    drop(i3);
    // Every prefix entry is gone: two fresh interests fit and publish does not panic.
    let _i4 = origin.interest(p("a")).unwrap();
    let _i5 = origin.interest(p("c")).unwrap();
    origin.touch(&p("a/z"));
}

#[test]
fn route_handle_drop_unpublishes_and_notifies() {
    let origin = Origin::new();
    let b = broadcast();
    let interest = origin.interest(p("a")).unwrap();
    let h = origin
        .publish(p("a/b"), b.consume(), Route::local())
        .unwrap();
    assert_eq!(drain(&interest), Some(vec!["a/b".to_string()]));
    drop(h);
    assert_eq!(drain(&interest), Some(vec!["a/b".to_string()]));
    assert!(origin.route(&p("a/b"), None).is_none());
    assert!(origin.is_empty());
}

#[test]
fn route_limit_is_a_typed_error() {
    let origin = Origin::with_limits(OriginLimits {
        max_routes: 2,
        max_interests: 16,
    });
    let b = broadcast();
    let h1 = origin.publish(p("a"), b.consume(), Route::local()).unwrap();
    let _h2 = origin.publish(p("a"), b.consume(), Route::local()).unwrap();
    let err = origin
        .publish(p("b"), b.consume(), Route::local())
        .unwrap_err();
    assert_eq!(err, ModelError::TooMany("routes"));
    assert_eq!(err.stream_code(), starling_proto::StreamCode::Internal);
    drop(h1);
    let _h3 = origin.publish(p("b"), b.consume(), Route::local()).unwrap();
    assert_eq!(origin.len(), 2);
}

#[test]
fn fnv_key_matches_moq_relays_vectors() {
    assert_eq!(
        fnv_key(&p("demo/clock"), &[12345, 0x1A2B3C4D5E6F]),
        0xee233f2fce751df5
    );
    assert_eq!(fnv_key(&p("demo/clock"), &[12345, 7]), 0x9dc18a878d62cc0b);
    assert_eq!(fnv_key(&Path::empty(), &[]), 0x420c0decb00b);
}

#[test]
fn anonymous_chains_rank_below_identified_ones_whatever_the_cost() {
    let origin = Origin::new();
    let (named, anonymous) = (broadcast(), broadcast());
    let _n = origin
        .publish(p("x"), named.consume(), route(50, 50, &[7, 8, 9]))
        .unwrap();
    let _a = origin
        .publish(p("x"), anonymous.consume(), route(1, 1, &[7, 0]))
        .unwrap();
    assert!(best_is(&origin, "x", None, &named.consume()));
}

#[test]
fn equal_peer_routes_are_ranked_by_their_hash_not_their_age() {
    // Two equal routes learned from cluster peers: the one with the lower FNV key wins,
    // whichever arrived last, so every relay of a mesh picks the same one.
    let chains = [[12345u64, 0x1A2B3C4D5E6F], [12345, 7]];
    let keys = chains.map(|c| fnv_key(&p("demo/clock"), &c));
    let low = if keys[0] < keys[1] { 0 } else { 1 };
    for order in [[0usize, 1], [1, 0]] {
        let origin = Origin::new();
        let broadcasts = [broadcast(), broadcast()];
        let _handles: Vec<_> = order
            .iter()
            .map(|&i| {
                let route = Route::learned(chains[i].to_vec(), RouteCost::new(3), true);
                origin
                    .publish(p("demo/clock"), broadcasts[i].consume(), route)
                    .unwrap()
            })
            .collect();
        assert!(best_is(
            &origin,
            "demo/clock",
            None,
            &broadcasts[low].consume()
        ));
    }
    // Without the peer mark the newest of two equal routes wins, as before.
    let origin = Origin::new();
    let (old, new) = (broadcast(), broadcast());
    let _o = origin
        .publish(p("demo/clock"), old.consume(), route(3, 3, &chains[low]))
        .unwrap();
    let _n = origin
        .publish(
            p("demo/clock"),
            new.consume(),
            route(3, 3, &chains[1 - low]),
        )
        .unwrap();
    assert!(best_is(&origin, "demo/clock", None, &new.consume()));
}

#[test]
fn announced_lists_the_prefix_and_what_is_below_it_only() {
    let origin = Origin::new();
    let broadcasts: Vec<BroadcastProducer> = (0..8).map(|_| broadcast()).collect();
    let paths = [
        "a/b", "a/b/c", "a/b/c/d", "a/b!", "a/bc", "a/b0", "a", "b/a/b",
    ];
    let _handles: Vec<_> = paths
        .iter()
        .zip(&broadcasts)
        .map(|(path, b)| {
            origin
                .publish(p(path), b.consume(), Route::local())
                .unwrap()
        })
        .collect();
    let listed = |prefix: &str| -> Vec<String> {
        origin
            .announced(&p(prefix), None)
            .into_iter()
            .map(|a| a.path.to_string())
            .collect()
    };
    assert_eq!(listed("a/b"), vec!["a/b", "a/b/c", "a/b/c/d"]);
    assert_eq!(listed("a/b/c"), vec!["a/b/c", "a/b/c/d"]);
    assert_eq!(listed("a").len(), 7);
    assert_eq!(listed("").len(), 8);
    assert!(listed("a/b/c/d/e").is_empty());
    let all = listed("");
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "in path order");
}

/// A path reached from peer X (hop 50) directly, and through C (hop 60) and X: the origin,
/// the direct route's handle, and what must stay alive for the other.
fn direct_and_through_x() -> (Origin, RouteHandle, Vec<BroadcastProducer>, RouteHandle) {
    let origin = Origin::new();
    let (from_x, via_c) = (broadcast(), broadcast());
    let path = p("room/alice");
    let direct = origin
        .publish(path.clone(), from_x.consume(), route(2, 2, &[7, 50]))
        .unwrap();
    let through = origin
        .publish(path, via_c.consume(), route(5, 5, &[7, 50, 60]))
        .unwrap();
    (origin, direct, vec![from_x, via_c], through)
}

/// Cluster statement 15: after X explicitly withdraws a path, other routes to it through X go
/// stale until X announces it again; a route simply lost with X's session leaves none.
#[test]
fn an_explicit_withdrawal_makes_routes_through_the_peer_stale() {
    let (origin, direct, _broadcasts, _through) = direct_and_through_x();
    let path = p("room/alice");
    origin.withdraw_all(50, [direct]);
    assert!(origin.route(&path, None).is_none(), "[7, 50, 60] is stale");
    assert_eq!(origin.routes(&path).len(), 1, "still held, only not used");
    assert!(origin.announced(&p(""), None).is_empty());

    // X announces the path again: nothing through it is stale any more.
    let again = broadcast();
    let _back = origin
        .publish(path.clone(), again.consume(), route(3, 3, &[7, 50]))
        .unwrap();
    assert_eq!(origin.route(&path, None).unwrap().route.hops.len(), 2);
    assert_eq!(origin.announced(&p(""), None).len(), 1);
}

/// A withdrawal lasts while a route it hides is held: once the stale routes through X are
/// gone, a route learned later through X (news from another neighbour) is used, though X never
/// announced the path to us again (moq-net forgets such withdrawals the same way).
#[test]
fn a_withdrawal_ends_with_the_last_route_it_hides() {
    let (origin, direct, _broadcasts, through) = direct_and_through_x();
    let path = p("room/alice");
    let (elsewhere, via_d) = (broadcast(), broadcast());
    let _elsewhere = origin
        .publish(path.clone(), elsewhere.consume(), route(9, 9, &[8, 90]))
        .unwrap();
    origin.withdraw_all(50, [direct]);
    assert_eq!(
        origin.route(&path, None).unwrap().route.hops.to_vec(),
        vec![8, 90]
    );
    drop(through);
    let _later = origin
        .publish(path.clone(), via_d.consume(), route(6, 6, &[7, 50, 70]))
        .unwrap();
    let best = origin
        .route(&path, None)
        .expect("the later route through X is used");
    assert_eq!(best.route.hops.to_vec(), vec![7, 50, 70]);
}

#[test]
fn a_lost_session_leaves_no_stale_routes() {
    let (origin, direct, _broadcasts, _through) = direct_and_through_x();
    origin.unpublish_all([direct]);
    let best = origin.route(&p("room/alice"), None).unwrap();
    assert_eq!(best.route.hops.len(), 3);
}
