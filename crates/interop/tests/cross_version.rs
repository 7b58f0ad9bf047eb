//! One relay core for every version: a moq-dev publisher on one moq-lite version, a moq-dev
//! subscriber on another, through one Starling relay serving both, over raw QUIC and
//! WebTransport, and between moq-lite and the IETF drafts. What a version cannot carry is derived (lite-05 has no route costs or frame
//! bounds, lite-07 compresses its announcements, nothing before 05 carries timestamps, which
//! the relay then stamps on arrival); every frame's payload must arrive intact.

mod common;

use common::{progress, run, Binding, Case, MoqPublisher, Pacing, Plan, StarlingRelay};
use starling_proto::ietf::Draft;
use starling_proto::{Protocol, Version};

async fn across(publish: Case, subscribe: Case) -> anyhow::Result<()> {
    let mut served = Protocol::SUPPORTED.to_vec();
    served.push(Protocol::Lite(Version::Lite07Wip));
    let relay = StarlingRelay::start(served).await?;
    let plan = Plan::standard().through(&[publish, subscribe]);
    let (mut txs, mut gate) = progress(1);
    let publisher = MoqPublisher::connect(publish, relay.url(publish), &relay.fingerprint).await?;
    let subscriber = tokio::spawn(common::moq_subscribe(
        subscribe,
        relay.url(subscribe),
        relay.fingerprint.clone(),
        plan.clone(),
        txs.pop().expect("one progress channel"),
    ));
    let published = publisher.publish(&plan, Pacing::Lockstep, &mut gate).await;
    let received = common::step("the moq-dev subscriber to finish", subscriber).await???;
    published?;
    publisher.close();
    plan.verify(&format!("{} subscriber", subscribe.version), &received)
}

macro_rules! pair {
    ($name:ident, $from:ident => $to:ident, $binding:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let publish = Case::new(Version::$from, Binding::$binding);
            let subscribe = Case::new(Version::$to, Binding::$binding);
            run(subscribe, across(publish, subscribe)).await;
        }
    };
}

pair!(lite07_to_lite05_raw_quic, Lite07Wip => Lite05, Quic);
pair!(lite07_to_lite05_webtransport, Lite07Wip => Lite05, WebTransport);
pair!(lite05_to_lite07_raw_quic, Lite05 => Lite07Wip, Quic);
pair!(lite05_to_lite07_webtransport, Lite05 => Lite07Wip, WebTransport);
pair!(lite06_to_lite07_raw_quic, Lite06 => Lite07Wip, Quic);
pair!(lite07_to_lite06_webtransport, Lite07Wip => Lite06, WebTransport);
pair!(lite06_to_lite05_raw_quic, Lite06 => Lite05, Quic);
pair!(lite03_to_lite07_raw_quic, Lite03 => Lite07Wip, Quic);
pair!(lite07_to_lite03_webtransport, Lite07Wip => Lite03, WebTransport);
pair!(lite04_to_lite06_webtransport, Lite04 => Lite06, WebTransport);
pair!(lite06_to_lite04_raw_quic, Lite06 => Lite04, Quic);
pair!(lite02_moql_to_lite06_raw_quic, Lite02 => Lite06, Quic);
pair!(lite06_to_lite01_moql_webtransport, Lite06 => Lite01, WebTransport);
pair!(lite01_moql_to_lite04_raw_quic, Lite01 => Lite04, Quic);
pair!(lite03_to_lite07_webtransport, Lite03 => Lite07Wip, WebTransport);
pair!(lite04_to_lite06_raw_quic, Lite04 => Lite06, Quic);
pair!(lite02_moql_to_lite06_webtransport, Lite02 => Lite06, WebTransport);
pair!(lite06_to_lite01_moql_raw_quic, Lite06 => Lite01, Quic);
pair!(lite06_to_lite07_webtransport, Lite06 => Lite07Wip, WebTransport);
pair!(lite05_to_lite03_raw_quic, Lite05 => Lite03, Quic);

/// A moq-dev peer on an IETF draft on one side, on a lite version on the other.
macro_rules! across {
    ($name:ident, $from:expr => $to:expr, $binding:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let publish = Case::new($from, Binding::$binding);
            let subscribe = Case::new($to, Binding::$binding);
            run(subscribe, across(publish, subscribe)).await;
        }
    };
}

across!(draft22_to_lite06_raw_quic, Draft::D22 => Version::Lite06, Quic);
across!(lite06_to_draft22_raw_quic, Version::Lite06 => Draft::D22, Quic);
across!(draft14_to_lite06_webtransport, Draft::D14 => Version::Lite06, WebTransport);
across!(lite06_to_draft14_webtransport, Version::Lite06 => Draft::D14, WebTransport);
across!(draft16_to_lite06_raw_quic, Draft::D16 => Version::Lite06, Quic);
across!(lite06_to_draft16_webtransport, Version::Lite06 => Draft::D16, WebTransport);
across!(draft17_to_lite07_raw_quic, Draft::D17 => Version::Lite07Wip, Quic);
across!(lite05_to_draft19_raw_quic, Version::Lite05 => Draft::D19, Quic);
across!(draft20_to_lite03_webtransport, Draft::D20 => Version::Lite03, WebTransport);
across!(lite02_moql_to_draft18_webtransport, Version::Lite02 => Draft::D18, WebTransport);
across!(draft15_to_draft21_raw_quic, Draft::D15 => Draft::D21, Quic);
