//! Starling publisher over `ws://` -> moq-relay 0.17.10's WebSocket endpoint (child process)
//! -> Starling subscriber over `ws://`.

// The shared harness defines `version_binding_matrix!`, which these tests do not use.
#![allow(unused_macros)]

mod common;
#[path = "common/ws.rs"]
mod ws;

use anyhow::Context;
use common::{progress, run, step, Binding, Case, MoqRelay, Pacing, Plan};
use starling_proto::Version;
use ws::{ws_url, StarlingWsPublisher};

async fn scenario(case: Case) -> anyhow::Result<()> {
    let relay = MoqRelay::start(case.version).await?;
    let result = through(case, &relay).await;
    result.with_context(|| format!("moq-relay log:\n{}", relay.log_text()))
}

async fn through(case: Case, relay: &MoqRelay) -> anyhow::Result<()> {
    // moq-relay serves WebSocket on its web listener, bound to the same port number.
    let url = ws_url(relay.port);
    let plan = Plan::standard().through(&[case]);
    let (mut txs, mut gate) = progress(1);
    let publisher = StarlingWsPublisher::connect(case, &url).await?;
    let subscriber = tokio::spawn(ws::starling_ws_subscribe(
        case,
        url,
        plan.clone(),
        txs.pop().expect("one progress channel"),
    ));
    let published = publisher.publish(&plan, Pacing::Lockstep, &mut gate).await;
    let received = step("the Starling subscriber to finish", subscriber).await???;
    published?;
    plan.verify("Starling subscriber over ws://", &received)?;
    publisher.close();
    Ok(())
}

// `Case::binding` only shapes QUIC URLs; these tests dial `ws://` themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite06_starling_over_websocket_through_moq_relay() {
    let case = Case::new(Version::Lite06, Binding::Quic);
    run(case, scenario(case)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite05_starling_over_websocket_through_moq_relay() {
    let case = Case::new(Version::Lite05, Binding::Quic);
    run(case, scenario(case)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lite07_starling_over_websocket_through_moq_relay() {
    let case = Case::new(Version::Lite07Wip, Binding::Quic);
    run(case, scenario(case)).await;
}
