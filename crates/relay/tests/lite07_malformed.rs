//! lite-07 malformed input over real sockets: announce references that do not resolve (a base
//! out of range, a keep past the base, a resolved path over 32 segments) and a SUBSCRIBE_DROP,
//! which lite-07 removed. Each closes the offending publisher's session with
//! PROTOCOL_VIOLATION, while a witness on the same relay keeps receiving every frame.

mod common;
#[path = "../../session/tests/hand/mod.rs"]
mod hand;
mod witness;

use bytes::{Bytes, BytesMut};
use starling_model::StartAt;
use starling_proto::{
    encode_message, encode_typed, AnnounceOk, CompressedAnnouncement, Hops, HopsRef, Path, PathRef,
    Role, RouteCost, Setup, Version,
};
use starling_relay::RelayConfig;
use starling_session::random_hop;
use starling_transport::{SendStream, Transport};

use common::{bind_relay, dial, within};
use witness::{closed_code, send_uni, witness, PROTOCOL_VIOLATION};

const V7: Version = Version::Lite07Wip;

/// A raw lite-07 publisher whose SETUP is sent.
async fn publisher(url: &url::Url) -> starling_net::QuicTransport {
    let transport = dial(url, V7).await;
    let mut setup = Setup::new();
    setup.set_hop(Some(random_hop())).unwrap();
    setup.set_role(Some(Role::Publisher));
    let mut bytes = BytesMut::from(&[0x01][..]);
    encode_message(&setup, V7, &mut bytes).unwrap();
    send_uni(&transport, &bytes).await;
    transport
}

fn start(path: PathRef) -> CompressedAnnouncement {
    CompressedAnnouncement::Start {
        suffix: path,
        hops: HopsRef::literal(Hops::default()),
        cost: RouteCost::default(),
    }
}

fn literal(path: &str) -> CompressedAnnouncement {
    start(PathRef::literal(Path::new(path).unwrap()))
}

fn reference(base: u64, keep: u64, rest: &str) -> CompressedAnnouncement {
    start(PathRef {
        base,
        keep,
        rest: Path::new(rest).unwrap(),
    })
}

/// Answer the relay's announce request with `announcements`; the session must close with
/// PROTOCOL_VIOLATION.
async fn announcing_closes(url: &url::Url, announcements: &[CompressedAnnouncement], case: &str) {
    let bad = publisher(url).await;
    let (mut send, _recv) = within(bad.accept_bi()).await.unwrap();
    let mut out = BytesMut::new();
    let ok = AnnounceOk {
        hop: random_hop(),
        active_count: announcements.len() as u64,
    };
    encode_message(&ok, V7, &mut out).unwrap();
    for announcement in announcements {
        encode_typed(announcement, V7, &mut out).unwrap();
    }
    send.write(out.freeze()).await.unwrap();
    assert_eq!(closed_code(&bad).await, PROTOCOL_VIOLATION, "{case}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unresolvable_references_and_subscribe_drop_close_the_session() {
    let (relay, url) = bind_relay(RelayConfig {
        versions: vec![Version::Lite06.into(), V7.into()],
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());
    let witness = witness(&url).await;

    announcing_closes(&url, &[reference(1, 0, "a")], "a base out of range").await;
    announcing_closes(
        &url,
        &[literal("a/b"), reference(1, 3, "x")],
        "a keep past the base",
    )
    .await;
    let deep = vec!["x"; 32].join("/");
    announcing_closes(
        &url,
        &[literal(&deep), reference(1, 32, "y")],
        "a resolved path over 32 segments",
    )
    .await;
    announcing_closes(
        &url,
        &[
            literal("a"),
            literal("b"),
            CompressedAnnouncement::End { id: 0 },
            reference(2, 1, "c"),
        ],
        "a retired base",
    )
    .await;

    // SUBSCRIBE_DROP: a publisher answering the relay's subscription with it.
    let bad = publisher(&url).await;
    let mut upstreams = hand::serve(bad.clone(), V7, Path::new("evil").unwrap(), ());
    let (_reader_session, broadcast) = common::subscribed_broadcast(&url, "evil").await;
    let _reader = broadcast.subscribe_track("t", StartAt::default()).unwrap();
    let mut upstream = within(upstreams.recv()).await.unwrap();
    // Type 2, three varints: start 1, end 2, error 3.
    upstream
        .send
        .write(Bytes::from_static(&[0x02, 0x03, 0x01, 0x02, 0x03]))
        .await
        .unwrap();
    assert_eq!(
        closed_code(&bad).await,
        PROTOCOL_VIOLATION,
        "SUBSCRIBE_DROP"
    );

    let received = witness.finish().await;
    assert!(received > 0, "the witness kept receiving");
}
