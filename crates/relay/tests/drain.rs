//! Relay shutdown: every session gets GOAWAY, and one that stays past the drain timeout is
//! closed with GOAWAY_TIMEOUT.

use std::time::Duration;

use starling_proto::{Role, SessionCode, Version};
use starling_relay::RelayConfig;
use starling_session::{random_hop, Error, SessionConfig};
use starling_transport::TransportError;

mod common;

use common::{bind_relay, session, STEP};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_goaway_then_closes_stragglers() {
    for version in [Version::Lite06, Version::Lite05] {
        let (relay, url) = bind_relay(RelayConfig {
            drain_timeout: Duration::from_millis(300),
            ..Default::default()
        })
        .await;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(relay.run_until(async move {
            let _ = stopped.await;
        }));

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
