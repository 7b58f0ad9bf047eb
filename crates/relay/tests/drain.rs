//! Relay shutdown: every session gets GOAWAY, and one that stays past the drain timeout is
//! closed with GOAWAY_TIMEOUT.

use std::time::Duration;

use starling_net::{Client, ClientConfig, TlsVerify};
use starling_proto::{Role, SessionCode, Version};
use starling_relay::{Relay, RelayConfig};
use starling_session::{random_hop, ClientSetup, Error, Session, SessionConfig};
use starling_transport::TransportError;
use url::Url;

const STEP: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_goaway_then_closes_stragglers() {
    starling_net::tls::install_default_provider();
    for version in [Version::Lite06, Version::Lite05] {
        let relay = Relay::bind(RelayConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            drain_timeout: Duration::from_millis(300),
            ..Default::default()
        })
        .await
        .unwrap();
        let url = Url::parse(&format!(
            "moqt://127.0.0.1:{}/",
            relay.local_addr().unwrap().port()
        ))
        .unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(relay.run_until(async move {
            let _ = stopped.await;
        }));

        let client = Client::new(
            ClientConfig::default()
                .with_alpns(&[version.alpn()])
                .with_tls(TlsVerify::Disabled),
        )
        .unwrap();
        let connected = client.connect(&url).await.unwrap();
        let session = Session::connect(
            connected.transport,
            version,
            ClientSetup {
                role: Some(Role::Subscriber),
                ..Default::default()
            },
            SessionConfig::new(random_hop()),
        )
        .await
        .unwrap();

        stop.send(()).unwrap();
        let uri = tokio::time::timeout(STEP, session.goaway_received())
            .await
            .expect("GOAWAY arrives");
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
