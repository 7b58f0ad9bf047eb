//! An in-process relay on loopback for the end-to-end tests, and a deadline for each step.

#![allow(dead_code)]

use std::time::Duration;

use starling_relay::{Relay, RelayConfig};
use url::Url;

/// Await `fut`, failing the test instead of hanging.
pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A running relay on an ephemeral loopback port; its raw QUIC URL (`moql://127.0.0.1:port/`).
/// The TCP port with the same number serves HTTP and WebSocket.
pub async fn start_relay() -> Url {
    start_relay_with(RelayConfig::default()).await
}

/// [`start_relay`] with `config` (its address and internal listener replaced).
pub async fn start_relay_with(config: RelayConfig) -> Url {
    starling_net::tls::install_default_provider();
    let relay = Relay::bind(RelayConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        internal_listen: None,
        ..config
    })
    .await
    .expect("relay binds");
    let port = relay.local_addr().unwrap().port();
    tokio::spawn(relay.run());
    Url::parse(&format!("moql://127.0.0.1:{port}/")).unwrap()
}

/// Dial options for the relay's self-signed certificate, on one QUIC endpoint.
pub fn connect_args() -> starling_loadgen::connect::ConnectArgs {
    starling_loadgen::connect::ConnectArgs {
        tls_disable_verify: true,
        endpoints: 1,
        ..Default::default()
    }
}
