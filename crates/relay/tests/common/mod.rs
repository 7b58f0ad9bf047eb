//! Helpers for relay tests over real sockets on loopback.

#![allow(dead_code)]

use std::time::Duration;

use starling_net::{Client, ClientConfig, QuicTransport, TlsVerify};
use starling_proto::{Role, Version};
use starling_relay::{Relay, RelayConfig};
use starling_session::{ClientSetup, Session, SessionConfig};
use url::Url;

pub const STEP: Duration = Duration::from_secs(10);

/// Await `fut`, failing the test instead of hanging.
pub async fn within<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .expect("step timed out")
}

/// A relay on an ephemeral loopback port with `config`'s other settings; its raw QUIC URL.
pub async fn bind_relay(config: RelayConfig) -> (Relay, Url) {
    starling_net::tls::install_default_provider();
    let relay = Relay::bind(RelayConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..config
    })
    .await
    .unwrap();
    let url = Url::parse(&format!(
        "moqt://127.0.0.1:{}/",
        relay.local_addr().unwrap().port()
    ))
    .unwrap();
    (relay, url)
}

/// A running relay with default settings; its raw QUIC URL.
pub async fn start_relay() -> Url {
    let (relay, url) = bind_relay(RelayConfig::default()).await;
    tokio::spawn(relay.run());
    url
}

/// A QUIC client offering only `version`, trusting any certificate.
pub fn quic_client(version: Version) -> Client {
    quic_client_alpn(version.alpn())
}

/// A QUIC client offering only `alpn`, trusting any certificate.
pub fn quic_client_alpn(alpn: &str) -> Client {
    Client::new(
        ClientConfig::default()
            .with_alpns(&[alpn])
            .with_tls(TlsVerify::Disabled),
    )
    .unwrap()
}

/// A raw QUIC connection offering only `version`, retried as a client should while the
/// relay's admission refuses it cleanly.
pub async fn dial(url: &Url, version: Version) -> QuicTransport {
    let client = quic_client(version);
    admitted(|| client.connect(url), starling_net::ClientError::refusal)
        .await
        .transport
}

/// Run `attempt` until it succeeds: a clean refusal by the relay's admission (which
/// `refusal` tells apart, with the wait the relay asked for) is retried after that wait, as
/// real clients do; any other error fails the test.
pub async fn admitted<T, E, F>(
    mut attempt: impl FnMut() -> F,
    refusal: impl Fn(&E) -> Option<std::time::Duration>,
) -> T
where
    E: std::fmt::Debug,
    F: std::future::Future<Output = Result<T, E>>,
{
    within(async {
        loop {
            match attempt().await {
                Ok(done) => return done,
                Err(err) => match refusal(&err) {
                    // The wait is the relay's answer, not a stand-in for an event.
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => panic!("dial failed: {err:?}"),
                },
            }
        }
    })
    .await
}

/// A Starling session to the relay in `role`.
pub async fn session(
    url: &Url,
    version: Version,
    role: Role,
    config: SessionConfig,
) -> Session<QuicTransport> {
    let transport = dial(url, version).await;
    let setup = ClientSetup {
        role: Some(role),
        ..Default::default()
    };
    within(Session::connect(transport, version, setup, config))
        .await
        .unwrap()
}

/// A subscriber session on the relay and the broadcast at `path` once it hears of it.
pub async fn subscribed_broadcast(
    url: &Url,
    path: &str,
) -> (Session<QuicTransport>, starling_model::BroadcastConsumer) {
    let origin = starling_model::Origin::new();
    let mut config = SessionConfig::new(starling_session::random_hop());
    config.consume = Some(origin.clone());
    let subscriber = session(url, Version::Lite06, Role::Subscriber, config).await;
    let interest = origin.interest(starling_proto::Path::empty()).unwrap();
    let path = starling_proto::Path::new(path).unwrap();
    let mut changed = Vec::new();
    loop {
        if let Some(broadcast) = origin.consume(&path, None) {
            return (subscriber, broadcast);
        }
        within(interest.changed(&mut changed)).await;
    }
}

/// A lite publisher's track `cached/t` on the relay, and a lite reader that brings every group
/// published into the relay's cache (so FETCH and filters have something to find).
pub struct CachedTrack {
    pub track: starling_model::TrackProducer,
    reading: starling_model::TrackConsumer,
    _route: starling_model::RouteHandle,
    _broadcast: starling_model::BroadcastProducer,
    _publisher: Session<QuicTransport>,
    _reader: Session<QuicTransport>,
}

impl CachedTrack {
    pub async fn start(url: &Url, info: starling_proto::TrackInfo) -> CachedTrack {
        use starling_model::{BroadcastProducer, Limits, Origin, Route, StartAt};
        let origin = Origin::new();
        let broadcast = BroadcastProducer::new(Limits::default());
        let track = broadcast.create_track("t", info);
        let route = origin
            .publish(
                starling_proto::Path::new("cached").unwrap(),
                broadcast.consume(),
                Route::local(),
            )
            .unwrap();
        let mut config = SessionConfig::new(starling_session::random_hop());
        config.publish = Some(origin);
        let publisher = session(url, Version::Lite06, Role::Publisher, config).await;
        let (reader, cached) = subscribed_broadcast(url, "cached").await;
        let start = StartAt {
            max_age_ms: info.max_age_ms,
            ..StartAt::default()
        };
        let reading = cached.subscribe_track("t", start).unwrap();
        CachedTrack {
            track,
            reading,
            _route: route,
            _broadcast: broadcast,
            _publisher: publisher,
            _reader: reader,
        }
    }

    /// Publish `payloads` as group `sequence` (frame i stamped i) and wait until the reader
    /// has read it whole: the relay holds it.
    pub async fn publish(&mut self, sequence: u64, payloads: &[&str]) {
        let mut group = self.track.create_group(sequence).unwrap();
        for (i, payload) in payloads.iter().enumerate() {
            group
                .write_frame(starling_model::Frame {
                    timestamp: i as u64,
                    payload: bytes::Bytes::copy_from_slice(payload.as_bytes()),
                })
                .unwrap();
        }
        group.finish();
        let mut read = within(self.reading.next_group()).await.unwrap().unwrap();
        assert_eq!(read.sequence(), sequence);
        while within(read.next_frame()).await.unwrap().is_some() {}
    }
}
