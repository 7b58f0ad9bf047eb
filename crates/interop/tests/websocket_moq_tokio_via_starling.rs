//! moq-tokio 0.19.31 publishing over `ws://` (or `tcp://`) -> the Starling relay's QMux
//! endpoints -> a moq-tokio subscriber and a Starling subscriber over the same binding.

// The shared harness defines `version_binding_matrix!`, which these tests do not use.
#![allow(unused_macros)]

mod common;
#[path = "common/ws.rs"]
mod ws;

use anyhow::Context;
use common::{progress, run, step, Binding, Case, MoqPublisher, Pacing, Plan};
use starling_proto::Version;
use ws::{StarlingWsRelay, NO_TLS_FINGERPRINT};

async fn scenario(case: Case, tcp: bool) -> anyhow::Result<()> {
    let relay = StarlingWsRelay::start(&[case.version]).await?;
    let url = if tcp { relay.tcp_url() } else { relay.url() };
    let plan = Plan::standard().through(&[case]);
    let (mut txs, mut gate) = progress(2);

    let publisher = MoqPublisher::connect(case, url.clone(), NO_TLS_FINGERPRINT)
        .await
        .with_context(|| format!("moq-tokio publisher over {url}"))?;
    let moq_subscriber = tokio::spawn(common::moq_subscribe(
        case,
        url.clone(),
        NO_TLS_FINGERPRINT.to_string(),
        plan.clone(),
        txs.pop().expect("two progress channels"),
    ));
    let starling_subscriber = tokio::spawn(ws::starling_ws_subscribe(
        case,
        url,
        plan.clone(),
        txs.pop().expect("two progress channels"),
    ));
    let published = publisher.publish(&plan, Pacing::Lockstep, &mut gate).await;
    let moq_received = step("the moq-tokio subscriber to finish", moq_subscriber).await???;
    let starling_received =
        step("the Starling subscriber to finish", starling_subscriber).await???;
    published?;
    plan.verify("moq-tokio subscriber", &moq_received)?;
    plan.verify("Starling subscriber", &starling_received)?;
    publisher.close();
    Ok(())
}

// `Case::binding` only shapes QUIC URLs; these tests dial `ws://` themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite06_moq_tokio_publisher_over_websocket() {
    let case = Case::new(Version::Lite06, Binding::Quic);
    run(case, scenario(case, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite05_moq_tokio_publisher_over_websocket() {
    let case = Case::new(Version::Lite05, Binding::Quic);
    run(case, scenario(case, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite06_moq_tokio_publisher_over_tcp() {
    let case = Case::new(Version::Lite06, Binding::Quic);
    run(case, scenario(case, true)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite05_moq_tokio_publisher_over_tcp() {
    let case = Case::new(Version::Lite05, Binding::Quic);
    run(case, scenario(case, true)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite07_moq_tokio_publisher_over_websocket() {
    let case = Case::new(Version::Lite07Wip, Binding::Quic);
    run(case, scenario(case, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite07_moq_tokio_publisher_over_tcp() {
    let case = Case::new(Version::Lite07Wip, Binding::Quic);
    run(case, scenario(case, true)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite04_moq_tokio_publisher_over_websocket() {
    let case = Case::new(Version::Lite04, Binding::Quic);
    run(case, scenario(case, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite02_moql_moq_tokio_publisher_over_websocket() {
    let case = Case::new(Version::Lite02, Binding::Quic);
    run(case, scenario(case, false)).await;
}

/// The IETF drafts over QMux: draft 17 pairs with qmux-01 and qmux-00, draft 22 with qmux-01
/// only; both over WebSocket and TCP.
mod ietf {
    use super::*;
    use starling_proto::ietf::Draft;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn draft22_over_websocket() {
        let case = Case::new(Draft::D22, Binding::Quic);
        run(case, scenario(case, false)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn draft14_over_websocket() {
        let case = Case::new(Draft::D14, Binding::Quic);
        run(case, scenario(case, false)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn draft17_over_tcp() {
        let case = Case::new(Draft::D17, Binding::Quic);
        run(case, scenario(case, true)).await;
    }
}
