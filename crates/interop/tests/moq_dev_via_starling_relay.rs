//! moq-dev publisher (moq-net/moq-tokio) -> in-process Starling relay -> moq-dev subscriber,
//! on every moq-lite version and every IETF draft, over raw QUIC and WebTransport.

#[macro_use]
mod common;

use common::{progress, Case, MoqPublisher, Pacing, Plan, StarlingRelay};

/// Publish `plan` with `pacing` through a Starling relay; return what the subscriber got.
async fn relay_plan(case: Case, plan: &Plan, pacing: Pacing) -> anyhow::Result<common::Received> {
    let relay = StarlingRelay::start(vec![case.version]).await?;
    let url = relay.url(case);
    let (mut txs, mut gate) = progress(1);

    let publisher = MoqPublisher::connect(case, url.clone(), &relay.fingerprint).await?;
    let subscriber = tokio::spawn(common::moq_subscribe(
        case,
        url,
        relay.fingerprint.clone(),
        plan.clone(),
        txs.pop().expect("one progress channel"),
    ));
    let published = publisher.publish(plan, pacing, &mut gate).await;
    let received = common::step("the moq-dev subscriber to finish", subscriber).await???;
    published?;
    publisher.close();
    Ok(received)
}

/// One group in flight at a time: every group intact and in publishing order.
async fn lockstep(case: Case) -> anyhow::Result<()> {
    let plan = Plan::standard().through(&[case]);
    let received = relay_plan(case, &plan, Pacing::Lockstep).await?;
    plan.verify("moq-dev subscriber", &received)
}

/// Every data group written back to back (all in flight at once); the subscriber asks for a
/// Max Age covering them all, so every group must still arrive intact (in any order).
async fn burst(case: Case) -> anyhow::Result<()> {
    let plan = Plan::standard().through(&[case]);
    let received = relay_plan(case, &plan, Pacing::Burst).await?;
    plan.verify_any_order("moq-dev subscriber", &received)
}

version_binding_matrix!(lockstep_groups => lockstep);
version_binding_matrix!(burst_groups => burst);
legacy_binding_matrix!(lockstep_groups_legacy => lockstep);
legacy_binding_matrix!(burst_groups_legacy => burst);
ietf_binding_matrix!(lockstep_groups_ietf => lockstep);
ietf_binding_matrix!(burst_groups_ietf => burst);
