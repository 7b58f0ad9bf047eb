//! moq-dev publisher (moq-net/moq-tokio) -> in-process Starling relay -> moq-dev subscriber.

#[macro_use]
mod common;

use common::{progress, Case, MoqPublisher, Plan, StarlingRelay};

async fn moq_dev_through_starling(case: Case) -> anyhow::Result<()> {
    let relay = StarlingRelay::start(vec![case.version]).await?;
    let url = relay.url(case);
    let plan = Plan::standard();
    let (mut txs, mut gate) = progress(1);

    let publisher = MoqPublisher::connect(case, url.clone(), &relay.fingerprint).await?;
    let subscriber = tokio::spawn(common::moq_subscribe(
        case,
        url,
        relay.fingerprint.clone(),
        plan.clone(),
        txs.pop().expect("one progress channel"),
    ));
    let published = publisher.publish(&plan, &mut gate).await;
    let received = common::step("the moq-dev subscriber to finish", subscriber).await???;
    published?;
    plan.verify("moq-dev subscriber", &received)?;
    publisher.close();
    Ok(())
}

version_binding_matrix!(moq_dev_through_starling);
