//! The legacy in-band negotiation over real sockets: a WebTransport client offering no protocol
//! the relay knows gets an answer without one, and both sides then pick lite-01/02 with the
//! legacy SETUP on the first bidi stream, as moq-net does; a relay serving neither closes such
//! a session with VERSION_NEGOTIATION_FAILED.

mod common;

use common::{bind_relay, within};
use starling_model::{BroadcastProducer, Limits, Origin, Route, StartAt, TrackInfo};
use starling_proto::{Path, Protocol, Role, SessionCode, Version};
use starling_relay::RelayConfig;
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use starling_transport::TransportError;
use url::Url;

/// A WebTransport session to `url`'s relay offering only an unknown protocol: the relay answers
/// without one.
async fn no_protocol(url: &Url) -> starling_net::Connected {
    let client = starling_net::Client::new(
        starling_net::ClientConfig::default()
            .with_alpns(&["x-unknown-protocol"])
            .with_tls(starling_net::TlsVerify::Disabled),
    )
    .unwrap();
    let https = Url::parse(&format!("https://127.0.0.1:{}/", url.port().unwrap())).unwrap();
    within(client.connect(&https)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_offering_no_known_protocol_negotiates_in_band() {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());

    // A publisher on lite-06 and a subscriber that reaches lite-02 in band.
    let origin = Origin::new();
    let broadcast = BroadcastProducer::new(Limits::default());
    let track = broadcast.create_track("t", TrackInfo::default());
    let _route = origin
        .publish(
            Path::new("room").unwrap(),
            broadcast.consume(),
            Route::local(),
        )
        .unwrap();
    let mut config = SessionConfig::new(random_hop());
    config.publish = Some(origin);
    let _publisher = common::session(&url, Version::Lite06, Role::Publisher, config).await;

    let connected = no_protocol(&url).await;
    assert_eq!(connected.protocol, "", "no protocol picked");
    let seen = Origin::new();
    let mut config = SessionConfig::new(random_hop());
    config.consume = Some(seen.clone());
    let subscriber = within(Session::connect_negotiated(
        connected.transport,
        &connected.protocol,
        &[Version::Lite02, Version::Lite01],
        ClientSetup::default(),
        config,
    ))
    .await
    .expect("negotiated in band");
    assert_eq!(subscriber.protocol(), Protocol::Lite(Version::Lite02));

    let interest = seen.interest(Path::empty()).unwrap();
    let mut changed = Vec::new();
    let consumer = within(async {
        loop {
            if let Some(b) = seen.consume(&Path::new("room").unwrap(), None) {
                return b;
            }
            interest.changed(&mut changed).await;
        }
    })
    .await;
    let mut reader = consumer.subscribe_track("t", StartAt::default()).unwrap();
    let mut group = track.append_group().unwrap();
    group
        .write_frame(starling_model::Frame {
            timestamp: 1,
            payload: bytes::Bytes::from_static(b"hello"),
        })
        .unwrap();
    group.finish();
    let mut received = within(reader.next_group()).await.unwrap().unwrap();
    let frame = within(received.next_frame()).await.unwrap().unwrap();
    assert_eq!(&frame.payload[..], b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_serving_no_legacy_version_refuses_in_band() {
    let (relay, url) = bind_relay(RelayConfig {
        versions: vec![Version::Lite06.into(), Version::Lite05.into()],
        ..Default::default()
    })
    .await;
    tokio::spawn(relay.run());
    let connected = no_protocol(&url).await;
    let refused = within(Session::connect_negotiated(
        connected.transport,
        &connected.protocol,
        &[Version::Lite02, Version::Lite01],
        ClientSetup::default(),
        SessionConfig::new(random_hop()),
    ))
    .await;
    match refused {
        Err(starling_session::Error::Transport(TransportError::ClosedByPeer { code, .. })) => {
            assert_eq!(code, SessionCode::VersionNegotiationFailed.to_code())
        }
        Err(other) => panic!("closed with VERSION_NEGOTIATION_FAILED, got {other:?}"),
        Ok(_) => panic!("no common version, yet a session"),
    }
}
