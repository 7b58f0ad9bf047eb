//! QMux (WebSocket, TCP) helpers for the interop tests: the Starling relay with its QMux
//! endpoints, and Starling publisher / subscriber sessions dialing `ws://`.
//!
//! Included by the `websocket_*` tests beside `mod common;` (`#[path = "common/ws.rs"]`).

#![allow(dead_code)]

use std::net::SocketAddr;

use anyhow::{anyhow, bail, ensure, Context};
use starling_model::{Origin, StartAt, TrackProducer};
use starling_net::qmux::{connect, QmuxTransport};
use starling_net::TlsVerify;
use starling_proto::{Path, Role, SessionCode, Version};
use starling_relay::{Relay, RelayConfig};
use starling_session::{random_hop, ClientSetup, Session, SessionConfig};
use url::Url;

use crate::common::{
    step, write_plan, Case, Gate, Pacing, Plan, ProgressTx, Published, Received, RecvFrame,
    RecvGroup, BROADCAST, SYNC, TRACK,
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
    pub async fn start(versions: &[Version]) -> anyhow::Result<Self> {
        starling_net::tls::install_default_provider();
        let relay = Relay::bind(RelayConfig {
            bind: "127.0.0.1:0".parse()?,
            versions: versions.to_vec(),
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
    mut config: SessionConfig,
) -> anyhow::Result<Session<QmuxTransport>> {
    let connected = step(
        "Starling WebSocket connect",
        connect(url, &[case.version.alpn()], &TlsVerify::System),
    )
    .await?
    .with_context(|| format!("Starling WebSocket client connecting to {url}"))?;
    let version = Version::from_alpn(&connected.protocol)
        .with_context(|| format!("unknown negotiated protocol {:?}", connected.protocol))?;
    ensure!(
        version == case.version,
        "negotiated {version}, expected {}",
        case.version
    );
    if config.hop == 0 {
        config.hop = random_hop();
    }
    let setup = ClientSetup {
        path: connected.setup_path.clone(),
        role: Some(role),
        cost: None,
    };
    let session = step(
        "Starling SETUP exchange over WebSocket",
        Session::connect(connected.transport, version, setup, config),
    )
    .await?
    .context("Starling moq-lite handshake over WebSocket")?;
    Ok(session)
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
        let session = self.session.clone();
        tokio::select! {
            err = session.closed() => bail!("Starling WebSocket publisher session closed: {err}"),
            result = write_plan(&self.track, plan, pacing, gate) => result,
        }
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
    let result = tokio::select! {
        err = session.closed() => Err(anyhow!("Starling WebSocket subscriber session closed: {err}")),
        result = read(&origin, &plan, &progress) => result,
    };
    session.close(SessionCode::NoError, "done");
    result
}

async fn read(origin: &Origin, plan: &Plan, progress: &ProgressTx) -> anyhow::Result<Received> {
    let path = Path::new(BROADCAST)?;
    let interest = origin.interest(path.clone())?;
    let broadcast = step(
        "the broadcast announcement (Starling WebSocket subscriber)",
        async {
            let mut changed = Vec::new();
            loop {
                if let Some(broadcast) = origin.consume(&path, None) {
                    return broadcast;
                }
                interest.changed(&mut changed).await;
                changed.clear();
            }
        },
    )
    .await?;
    let mut track = broadcast
        .subscribe_track(TRACK, StartAt::default())
        .map_err(|code| anyhow!("subscribe refused: {code:?}"))?;
    let mut received = Received::default();
    let mut first = true;
    while (received.groups.len() as u64) < plan.groups {
        let mut group = match step("the next group", track.next_group())
            .await
            .with_context(|| received.summary())?
        {
            Ok(Some(group)) => group,
            Ok(None) => bail!("track ended after {} data groups", received.groups.len()),
            Err(code) => bail!("track failed with {code:?}"),
        };
        let sequence = group.sequence();
        ensure!(
            !first || sequence == 0,
            "the first group is {sequence}, expected the sync group 0"
        );
        let mut frames = Vec::new();
        let mut error = None;
        loop {
            match step("the next frame", group.next_frame()).await? {
                Ok(Some(frame)) => frames.push(RecvFrame {
                    timestamp_ms: frame.timestamp,
                    payload: frame.payload,
                }),
                Ok(None) => break,
                Err(code) => {
                    error = Some(format!("{code:?}"));
                    break;
                }
            }
        }
        progress.send_replace(Some(sequence));
        if first {
            first = false;
            ensure!(
                error.is_none() && frames.len() == 1 && frames[0].payload == SYNC,
                "sync group arrived as {frames:?} / {error:?}"
            );
            continue;
        }
        received.groups.push(RecvGroup {
            sequence,
            frames,
            error,
        });
    }
    Ok(received)
}
