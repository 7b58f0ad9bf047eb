//! Starling publisher -> in-process Starling relay -> 100 concurrent Starling subscriber sessions,
//! on moq-lite and on the IETF drafts.

#[macro_use]
mod common;

use common::{progress, Case, Pacing, Plan, StarlingPublisher, StarlingRelay};

/// Subscriber sessions, each with its own client endpoint.
const SUBSCRIBERS: usize = 100;

async fn fanout(case: Case) -> anyhow::Result<()> {
    let relay = StarlingRelay::start(vec![case.version]).await?;
    let url = relay.url(case);
    let plan = Plan::fanout().through(&[case]);
    let (txs, mut gate) = progress(SUBSCRIBERS);

    let publisher = StarlingPublisher::connect(case, &url, &relay.fingerprint).await?;
    let subscribers: Vec<_> = txs
        .into_iter()
        .map(|tx| {
            tokio::spawn(common::starling_subscribe(
                case,
                url.clone(),
                relay.fingerprint.clone(),
                plan.clone(),
                tx,
            ))
        })
        .collect();
    if let Err(err) = publisher.publish(&plan, Pacing::Lockstep, &mut gate).await {
        // Report the subscribers that already failed: usually the root cause.
        let mut causes = Vec::new();
        for (i, subscriber) in subscribers.into_iter().enumerate() {
            if subscriber.is_finished() && causes.len() < 5 {
                if let Ok(Err(cause)) = subscriber.await {
                    causes.push(format!("subscriber {i}: {cause:#}"));
                }
            } else {
                subscriber.abort();
            }
        }
        return Err(err.context(format!("failed subscribers: {causes:#?}")));
    }
    let mut failures = Vec::new();
    for (i, subscriber) in subscribers.into_iter().enumerate() {
        let who = format!("subscriber {i}");
        let outcome = match common::step("a subscriber to finish", subscriber).await? {
            Ok(Ok(received)) => plan.verify(&who, &received),
            Ok(Err(err)) => Err(err),
            Err(join) => Err(join.into()),
        };
        if let Err(err) = outcome {
            failures.push(format!("{who}: {err:#}"));
        }
    }
    anyhow::ensure!(
        failures.is_empty(),
        "{} of {SUBSCRIBERS} subscribers failed; first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    publisher.close();
    Ok(())
}

version_binding_matrix!(hundred_subscribers => fanout);

/// One draft of each wire family (14; 15-16; 17-19; 20-22), both bindings between them.
mod fanout_ietf {
    use crate::common::{run, Binding, Case};
    use starling_proto::ietf::Draft;

    macro_rules! cell {
        ($test:ident, $draft:ident, $binding:ident) => {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                let case = Case::new(Draft::$draft, Binding::$binding);
                run(case, super::fanout(case)).await;
            }
        };
    }

    cell!(draft14_raw_quic, D14, Quic);
    cell!(draft16_webtransport, D16, WebTransport);
    cell!(draft18_raw_quic, D18, Quic);
    cell!(draft22_webtransport, D22, WebTransport);
}
