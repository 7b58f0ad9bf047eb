//! lite-07's Hidden opt-in over real sockets: a route with a `.`-segment below the requested
//! prefix is announced only to a subscriber whose ANNOUNCE_REQUEST asks for hidden paths.

mod common;

use common::{bind_relay, session, within};
use starling_model::{BroadcastProducer, Limits, Origin, Route};
use starling_proto::{Path, Role, Version};
use starling_relay::RelayConfig;
use starling_session::{random_hop, SessionConfig};

fn path(s: &str) -> Path {
    Path::new(s).unwrap()
}

/// A lite-07 subscriber listening under `room`, asking for hidden paths or not.
async fn listener(
    url: &url::Url,
    hear_hidden: bool,
) -> (
    starling_session::Session<starling_net::QuicTransport>,
    Origin,
) {
    let origin = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(origin.clone());
    config.announce_prefixes = vec![path("room")];
    config.hear_hidden = hear_hidden;
    let session = session(url, Version::Lite07Wip, Role::Subscriber, config).await;
    (session, origin)
}

/// Wait until `origin` has heard `wanted`; then every path it has heard.
async fn until_heard(origin: &Origin, wanted: &str) -> Vec<Path> {
    let interest = origin.interest(Path::empty()).unwrap();
    let mut changed = Vec::new();
    within(async {
        while origin.consume(&path(wanted), None).is_none() {
            interest.changed(&mut changed).await;
        }
    })
    .await;
    let mut heard: Vec<Path> = origin
        .announced(&Path::empty(), None)
        .into_iter()
        .map(|a| a.path)
        .collect();
    heard.sort();
    heard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_routes_reach_only_subscribers_that_opt_in() {
    let (relay, url) = bind_relay(RelayConfig {
        versions: vec![Version::Lite07Wip.into(), Version::Lite06.into()],
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());

    let published = Origin::new();
    let broadcasts: Vec<BroadcastProducer> = (0..3)
        .map(|_| BroadcastProducer::new(Limits::default()))
        .collect();
    let _hidden = published
        .publish(
            path("room/.stats/a"),
            broadcasts[0].consume(),
            Route::local(),
        )
        .unwrap();
    let _visible = published
        .publish(
            path("room/visible"),
            broadcasts[1].consume(),
            Route::local(),
        )
        .unwrap();
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(published.clone());
    let _publisher = session(&url, Version::Lite07Wip, Role::Publisher, config).await;

    // Opted in: hears the hidden path (and so the relay has both).
    let (_in_session, opted_in) = listener(&url, true).await;
    until_heard(&opted_in, "room/.stats/a").await;
    let heard = until_heard(&opted_in, "room/visible").await;
    assert_eq!(heard, vec![path("room/.stats/a"), path("room/visible")]);

    // Opted out: hears the visible path, then one announced later on the same stream, and
    // never the hidden one (which the relay held all along).
    let (_out_session, opted_out) = listener(&url, false).await;
    until_heard(&opted_out, "room/visible").await;
    let _later = published
        .publish(path("room/later"), broadcasts[2].consume(), Route::local())
        .unwrap();
    let heard = until_heard(&opted_out, "room/later").await;
    assert_eq!(heard, vec![path("room/later"), path("room/visible")]);
}
