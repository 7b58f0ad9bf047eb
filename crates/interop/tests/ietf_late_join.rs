//! A late joiner on an IETF draft gets the whole current group, head and tail: a moq-dev
//! publisher (lite-06) writes half a group, a first subscriber has read it (so the relay
//! holds the head), then a moq-dev subscriber on the draft joins, the publisher writes the
//! rest, and the joiner must read the group from its first frame to its last, intact.

#[macro_use]
mod common;

use common::{step, Case, MoqPublisher, MoqSubscription, Plan, StarlingRelay};
use starling_proto::{Protocol, Version};

/// The group the joiner lands in.
const GROUP: u64 = 1;

/// Read one group's frames to its end.
async fn read_group(
    track: &mut moq_net::track::Subscriber,
    frames: usize,
) -> anyhow::Result<(u64, Vec<bytes::Bytes>)> {
    let mut group = step("the group", track.recv_group())
        .await??
        .ok_or_else(|| anyhow::anyhow!("track ended"))?;
    let mut payloads = Vec::new();
    while payloads.len() < frames {
        match step("a frame", group.read_frame()).await?? {
            Some(frame) => payloads.push(frame.payload),
            None => break,
        }
    }
    Ok((group.sequence, payloads))
}

async fn late_join(case: Case) -> anyhow::Result<()> {
    let relay = StarlingRelay::start(Protocol::SUPPORTED.to_vec()).await?;
    let lite = Case::new(Version::Lite06, case.binding);
    let plan = Plan::standard();
    let half = plan.sizes.len() / 2;
    let publisher = MoqPublisher::connect(lite, relay.url(lite), &relay.fingerprint).await?;
    let mut early = MoqSubscription::connect(lite, relay.url(lite), &relay.fingerprint).await?;
    // Reading is what makes moq-net subscribe (its TRACK comes first).
    let head = tokio::spawn(async move {
        let read = read_group(&mut early.track, half).await;
        (read, early)
    });
    step("the relay's subscription", publisher.track.used()).await??;
    let mut group = publisher.track.create_group(GROUP.into())?;
    let write = |group: &mut moq_net::group::Producer, i: usize| -> anyhow::Result<()> {
        let timestamp = moq_net::Timestamp::from_millis(plan.timestamp_ms(GROUP, i))?;
        group.write_frame(timestamp, plan.payload(GROUP, i))?;
        Ok(())
    };
    for i in 0..half {
        write(&mut group, i)?;
    }
    // The head has reached the relay once the early subscriber read it.
    let (read, _early) = step("the early subscriber", head).await??;
    let (sequence, head) = read?;
    anyhow::ensure!(
        sequence == GROUP && head.len() == half,
        "early subscriber read {sequence}/{}",
        head.len()
    );

    let mut late = MoqSubscription::connect(case, relay.url(case), &relay.fingerprint).await?;
    for i in half..plan.sizes.len() {
        write(&mut group, i)?;
    }
    group.finish()?;
    let (sequence, frames) = read_group(&mut late.track, plan.sizes.len()).await?;
    anyhow::ensure!(
        sequence == GROUP,
        "the joiner got group {sequence}, not the current one"
    );
    anyhow::ensure!(
        frames.len() == plan.sizes.len(),
        "the joiner got {} of {} frames",
        frames.len(),
        plan.sizes.len()
    );
    for (i, payload) in frames.iter().enumerate() {
        anyhow::ensure!(*payload == plan.payload(GROUP, i), "frame {i} differs");
    }
    publisher.close();
    Ok(())
}

ietf_binding_matrix!(joins_the_current_group => late_join);
