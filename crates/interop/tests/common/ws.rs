//! QMux (WebSocket, TCP) helpers for the interop tests: the Starling relay with its QMux
//! endpoints, and Starling publisher / subscriber sessions dialing `ws://`.
//!
//! Included by the `websocket_*` tests beside `mod common;` (`#[path = "common/ws.rs"]`).

#![allow(dead_code)]

use std::net::SocketAddr;

use anyhow::Context;
use starling_model::{Origin, TrackProducer};
use starling_net::qmux::{connect, QmuxTransport};
use starling_net::TlsVerify;
use starling_proto::{Role, SessionCode};
use starling_relay::{Relay, RelayConfig};
use starling_session::{Session, SessionConfig};
use url::Url;

use crate::common::{
    publish_while_open, read_while_open, Case, Gate, Pacing, Plan, ProgressTx, Published, Received,
};

/// A placeholder certificate pin for moq-tokio clients dialing `ws://` (no TLS involved).
pub const NO_TLS_FINGERPRINT: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

/// The Starling relay itself (in process), serving QMux over WebSocket on its TCP port and
/// over plaintext TCP on a second listener. Stopped on drop.
pub struct StarlingWsRelay {
    pub addr: SocketAddr,
    /// The same relay's plaintext QMux TCP listener (`tcp://`).
    pub tcp_addr: SocketAddr,
    pub origin: Origin,
    task: tokio::task::JoinHandle<()>,
}

impl StarlingWsRelay {
    pub async fn start<P: Into<starling_proto::Protocol> + Copy>(
        versions: &[P],
    ) -> anyhow::Result<Self> {
        starling_net::tls::install_default_provider();
        let relay = Relay::bind(RelayConfig {
            bind: "127.0.0.1:0".parse()?,
            versions: versions.iter().map(|&v| v.into()).collect(),
            listen_tcp: Some("127.0.0.1:0".parse()?),
            ..RelayConfig::default()
        })
        .await?;
        let addr = relay.local_addr()?;
        let tcp_addr = relay.tcp_addr().context("the QMux TCP listener")?;
        let origin = relay.origin().clone();
        let task = tokio::spawn(async move {
            if let Err(err) = relay.run().await {
                tracing::error!(%err, "relay stopped");
            }
        });
        Ok(StarlingWsRelay {
            addr,
            tcp_addr,
            origin,
            task,
        })
    }

    pub fn url(&self) -> Url {
        ws_url(self.addr.port())
    }

    pub fn tcp_url(&self) -> Url {
        Url::parse(&format!("tcp://{}/", self.tcp_addr)).expect("valid url")
    }
}

impl Drop for StarlingWsRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `ws://127.0.0.1:port/`.
pub fn ws_url(port: u16) -> Url {
    Url::parse(&format!("ws://127.0.0.1:{port}/")).expect("valid url")
}

/// Dial `url` (`ws://` or `tcp://`) offering only `case.version` and start a Starling session.
pub async fn starling_ws_connect(
    case: Case,
    url: &Url,
    role: Role,
    config: SessionConfig,
) -> anyhow::Result<Session<QmuxTransport>> {
    let alpns = [case.version.alpn()];
    let connected = crate::common::admitted(
        "Starling WebSocket connect",
        || connect(url, &alpns, &TlsVerify::System),
        starling_net::qmux::QmuxConnectError::refusal,
    )
    .await?
    .with_context(|| format!("Starling WebSocket client connecting to {url}"))?;
    crate::common::start_session(
        case,
        connected.transport,
        &connected.protocol,
        connected.setup_path.clone(),
        role,
        config,
    )
    .await
}

/// A Starling publisher over WebSocket serving [`BROADCAST`] / [`TRACK`].
pub struct StarlingWsPublisher {
    pub session: Session<QmuxTransport>,
    pub track: TrackProducer,
    _published: Published,
}

impl StarlingWsPublisher {
    pub async fn connect(case: Case, url: &Url) -> anyhow::Result<Self> {
        let (published, track, config) = Published::new()?;
        let session = starling_ws_connect(case, url, Role::Publisher, config).await?;
        Ok(StarlingWsPublisher {
            session,
            track,
            _published: published,
        })
    }

    /// The sync group, then the plan's data groups, paced by the subscribers' progress.
    pub async fn publish(
        &self,
        plan: &Plan,
        pacing: Pacing,
        gate: &mut Gate,
    ) -> anyhow::Result<()> {
        let who = "Starling WebSocket";
        publish_while_open(&self.session, &self.track, plan, pacing, gate, who).await
    }

    pub fn close(&self) {
        self.session.close(SessionCode::NoError, "done");
    }
}

/// A Starling subscriber over WebSocket: wait for [`BROADCAST`], subscribe to [`TRACK`], read
/// the sync group then `plan.groups` data groups, reporting each to `progress`.
pub async fn starling_ws_subscribe(
    case: Case,
    url: Url,
    plan: Plan,
    progress: ProgressTx,
) -> anyhow::Result<Received> {
    let origin = Origin::new();
    let mut config = SessionConfig::new(0);
    config.consume = Some(origin.clone());
    let session = starling_ws_connect(case, &url, Role::Subscriber, config).await?;
    read_while_open(session, &origin, &plan, &progress, "Starling WebSocket").await
}
