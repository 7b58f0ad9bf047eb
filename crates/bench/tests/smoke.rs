//! Smoke run of the session benches: every shape once at tiny sizes, asserting that every frame
//! and every group reached every reader (so a delivery regression fails the normal test suite).

use starling_bench::{Dash, DashShape, Delivery};
use starling_proto::ietf::Draft;
use starling_proto::{Protocol, Version};

async fn delivery(viewers: usize, frames: u64, version: impl Into<Protocol>) {
    let mut shape = Delivery::setup(viewers, version)
        .await
        .expect("delivery setup");
    // Past two group boundaries (30 frames per group).
    while shape.frames() < frames {
        shape
            .frame()
            .await
            .expect("frame delivered to every viewer");
    }
    assert_eq!(shape.tally().errors(), 0, "no gaps, no wrong frames");
    assert_eq!(
        shape.tally().counts(),
        vec![frames; viewers],
        "every viewer got every frame once"
    );
    assert_eq!(shape.tally().total(), frames * viewers as u64);
    shape.close();
}

async fn dash(shape: DashShape, ticks: u64) {
    let mut dash = Dash::setup(shape).await.expect("dash setup");
    while dash.ticks() < ticks {
        dash.tick().await.expect("one group from every track");
    }
    assert_eq!(dash.tally().errors(), 0, "no gaps, no wrong groups");
    assert_eq!(
        dash.tally().counts(),
        vec![ticks; shape.total_tracks()],
        "every track delivered one group per tick"
    );
    dash.close();
}

#[tokio::test]
async fn delivery_to_one_viewer() {
    delivery(1, 65, Version::Lite06).await;
}

#[tokio::test]
async fn delivery_to_ten_viewers() {
    delivery(10, 65, Version::Lite06).await;
}

#[tokio::test]
async fn delivery_to_ten_viewers_on_lite07() {
    delivery(10, 65, Version::Lite07Wip).await;
}

#[tokio::test]
async fn delivery_to_ten_viewers_on_ietf22() {
    delivery(10, 65, Draft::D22).await;
}

#[tokio::test]
async fn delivery_to_ten_viewers_on_ietf14() {
    delivery(10, 65, Draft::D14).await;
}

#[tokio::test]
async fn dash_five_relays_on_ietf22() {
    let shape = DashShape {
        relays: 5,
        projects: 2,
        tracks: 6,
        version: Draft::D22.into(),
    };
    dash(shape, 3).await;
}

#[tokio::test]
async fn dash_two_relays() {
    let shape = DashShape {
        relays: 2,
        projects: 1,
        tracks: 6,
        version: Version::Lite06.into(),
    };
    dash(shape, 3).await;
}

#[tokio::test]
async fn dash_five_relays_on_lite07() {
    let shape = DashShape {
        relays: 5,
        projects: 2,
        tracks: 6,
        version: Version::Lite07Wip.into(),
    };
    dash(shape, 3).await;
}

#[tokio::test]
async fn dash_production_mesh_at_one_track() {
    // Production's mesh (34 nodes and the dash's relay), one project of one track instead of
    // 5 x 24: the announce flood of 5 projects alone takes about 10 s in a debug build.
    let shape = DashShape {
        relays: 35,
        projects: 1,
        tracks: 1,
        version: Version::Lite06.into(),
    };
    dash(shape, 2).await;
}

#[test]
fn routes_teardown_and_refollow_touch_each_route_once() {
    let mut shape = starling_bench::Teardown::setup(16, 4).expect("routes setup");
    for _ in 0..3 {
        // Every path's best route moves to the staying one: each heard of once.
        assert_eq!(shape.teardown(), shape.routes());
        // Coming back, the peer's interests are told of every staying route.
        assert_eq!(shape.refollow().expect("refollow"), shape.routes());
    }
}
