//! Starling publisher -> moq-relay 0.17.10 (child process) -> Starling subscriber, on every
//! moq-lite version and IETF draft, over raw QUIC and WebTransport.

#[macro_use]
mod common;

use anyhow::Context;
use common::{progress, Case, MoqRelay, Pacing, Plan, StarlingPublisher};

async fn starling_through_moq_relay(case: Case) -> anyhow::Result<()> {
    let relay = MoqRelay::start(case.version).await?;
    let result = scenario(case, &relay).await;
    result.with_context(|| format!("moq-relay log:\n{}", relay.log_text()))
}

async fn scenario(case: Case, relay: &MoqRelay) -> anyhow::Result<()> {
    let url = relay.url(case);
    let plan = Plan::standard().through(&[case]);
    let (mut txs, mut gate) = progress(1);

    let publisher = StarlingPublisher::connect(case, &url, &relay.fingerprint).await?;
    let subscriber = tokio::spawn(common::starling_subscribe(
        case,
        url,
        relay.fingerprint.clone(),
        plan.clone(),
        txs.pop().expect("one progress channel"),
    ));
    let published = publisher.publish(&plan, Pacing::Lockstep, &mut gate).await;
    let received = common::step("the Starling subscriber to finish", subscriber).await???;
    published?;
    plan.verify("Starling subscriber", &received)?;
    publisher.close();
    Ok(())
}

version_binding_matrix!(lockstep_groups => starling_through_moq_relay);
legacy_binding_matrix!(lockstep_groups_legacy => starling_through_moq_relay);
ietf_binding_matrix!(lockstep_groups_ietf => starling_through_moq_relay);
