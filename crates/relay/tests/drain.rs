//! Relay shutdown: every session gets GOAWAY, and one that stays past the drain timeout is
//! closed with GOAWAY_TIMEOUT.

use std::time::Duration;

use starling_proto::{Role, SessionCode, Version};
use starling_relay::RelayConfig;
use starling_session::{random_hop, Error, SessionConfig};
use starling_transport::TransportError;

mod common;

use common::{bind_relay, session, STEP};

type Running = tokio::task::JoinHandle<Result<(), starling_relay::RelayError>>;

/// A relay with a 300 ms drain, serving until the returned sender fires.
async fn draining_relay() -> (url::Url, tokio::sync::oneshot::Sender<()>, Running) {
    let (relay, url) = bind_relay(RelayConfig {
        drain_timeout: Duration::from_millis(300),
        ..Default::default()
    })
    .await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(relay.run_until(async move {
        let _ = stopped.await;
    }));
    (url, stop, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_goaway_then_closes_stragglers() {
    for version in [Version::Lite06, Version::Lite05] {
        let (url, stop, running) = draining_relay().await;

        let session = session(
            &url,
            version,
            Role::Subscriber,
            SessionConfig::new(random_hop()),
        )
        .await;

        stop.send(()).unwrap();
        let uri = tokio::time::timeout(STEP, session.goaway_received())
            .await
            .unwrap_or_else(|_| panic!("{version}: GOAWAY arrives"));
        assert_eq!(uri, "", "{version}: reconnect to the same endpoint");
        // We stay: the relay closes us once the drain timeout passes.
        let err = tokio::time::timeout(STEP, session.closed()).await.unwrap();
        assert_eq!(
            err,
            Error::Transport(TransportError::ClosedByPeer {
                code: SessionCode::GoawayTimeout.to_code(),
                reason: "drain timeout".into()
            }),
            "{version}"
        );
        tokio::time::timeout(STEP, running)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

/// Issue 10 item 4: a peer that grants no bidirectional stream (so the relay cannot open its
/// GOAWAY stream) holds neither the other sessions' GOAWAY nor the shutdown past the drain
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_granting_no_stream_cannot_hold_the_drain() {
    use starling_net::{Client, ClientConfig, QuicConfig, TlsVerify};
    use starling_session::{ClientSetup, Session};
    let version = Version::Lite06;
    let (url, stop, running) = draining_relay().await;
    // The stuck peer first, so a drain that sends GOAWAY one session after another meets it
    // before the honest one.
    let stingy = Client::new(ClientConfig {
        quic: QuicConfig {
            max_bidi_streams: 0,
            ..QuicConfig::default()
        },
        ..ClientConfig::default()
            .with_alpns(&[version.alpn()])
            .with_tls(TlsVerify::Disabled)
    })
    .unwrap();
    let transport = tokio::time::timeout(STEP, stingy.connect(&url))
        .await
        .unwrap()
        .unwrap()
        .transport;
    let setup = ClientSetup {
        role: Some(Role::Subscriber),
        ..Default::default()
    };
    let _stuck = tokio::time::timeout(
        STEP,
        Session::connect(transport, version, setup, SessionConfig::new(random_hop())),
    )
    .await
    .unwrap()
    .unwrap();
    let honest = session(
        &url,
        version,
        Role::Subscriber,
        SessionConfig::new(random_hop()),
    )
    .await;

    stop.send(()).unwrap();
    tokio::time::timeout(STEP, honest.goaway_received())
        .await
        .expect("the honest session still gets its GOAWAY");
    tokio::time::timeout(STEP, running)
        .await
        .expect("shutdown ends at the drain deadline")
        .unwrap()
        .unwrap();
}
