//! A mixed cluster: an in-process Starling relay and a moq-relay 0.17.10 process as peers of
//! one mesh, in both dialing directions (Starling's `cluster.connect` to moq-relay, and
//! moq-relay's `--cluster-connect` to Starling). A moq-dev publisher on one relay reaches a
//! moq-dev subscriber on the other, both ways, over raw QUIC and WebTransport (the peer link
//! uses the same binding as the clients). And a three-relay chain with moq-relay in the
//! middle of two Starling relays.

#[macro_use]
mod common;

use anyhow::Context;
use common::{moq_subscribe, progress, Case, MoqPublisher, MoqRelay, Pacing, Plan, StarlingRelay};
use starling_net::TlsVerify;
use starling_relay::cluster::PeerEntry;
use starling_relay::ClusterConfig;
use url::Url;

const STARLING_ID: u64 = 1001;
const MOQ_RELAY_ID: u64 = 1002;
const STARLING_C_ID: u64 = 1003;

/// The two relays of one mesh.
struct Mesh {
    starling: StarlingRelay,
    moq: MoqRelay,
}

impl Mesh {
    /// Starling dials moq-relay, pinning its certificate.
    async fn starling_dials(case: Case) -> anyhow::Result<Mesh> {
        let moq = MoqRelay::start_with(
            case.version,
            &["--cluster-id".into(), MOQ_RELAY_ID.to_string()],
        )
        .await?;
        let pin = starling_net::tls::parse_fingerprint(&moq.fingerprint)
            .context("moq-relay's fingerprint")?;
        let peer = PeerEntry::parse(moq.url(case).as_str())?;
        let starling = StarlingRelay::start_with(vec![case.version], |config| {
            config.cluster = ClusterConfig {
                id: Some(STARLING_ID),
                connect: vec![peer],
                connect_tls: TlsVerify::PinnedSha256(vec![pin]),
                ..ClusterConfig::default()
            };
        })
        .await?;
        Ok(Mesh { starling, moq })
    }

    /// moq-relay dials Starling, pinning its certificate.
    async fn moq_relay_dials(case: Case) -> anyhow::Result<Mesh> {
        let starling = StarlingRelay::start_with(vec![case.version], |config| {
            config.cluster.id = Some(STARLING_ID);
        })
        .await?;
        let moq = MoqRelay::start_with(
            case.version,
            &[
                "--cluster-id".into(),
                MOQ_RELAY_ID.to_string(),
                "--cluster-connect".into(),
                starling.url(case).to_string(),
                "--connect-tls-fingerprint".into(),
                starling.fingerprint.clone(),
            ],
        )
        .await?;
        // moq-relay's link is up before anything is published through it (it dials on its
        // own schedule, with backoff after a failed attempt).
        starling
            .sessions_at_least(1)
            .await
            .context("moq-relay's cluster link to Starling")?;
        Ok(Mesh { starling, moq })
    }

    fn starling(&self, case: Case) -> (Url, String) {
        (self.starling.url(case), self.starling.fingerprint.clone())
    }

    fn moq(&self, case: Case) -> (Url, String) {
        (self.moq.url(case), self.moq.fingerprint.clone())
    }
}

/// Publish the standard plan on `from` with a moq-dev publisher and read it with a moq-dev
/// subscriber on `to`: every group, intact and in order.
async fn across(
    case: Case,
    from: (Url, String),
    to: (Url, String),
    moq: &MoqRelay,
) -> anyhow::Result<()> {
    let plan = Plan::standard().through(&[case]);
    let (mut txs, mut gate) = progress(1);
    let publisher = MoqPublisher::connect(case, from.0, &from.1).await?;
    let subscriber = tokio::spawn(moq_subscribe(
        case,
        to.0,
        to.1,
        plan.clone(),
        txs.pop().expect("one progress channel"),
    ));
    let published = publisher.publish(&plan, Pacing::Lockstep, &mut gate).await;
    let received = common::step("the moq-dev subscriber to finish", subscriber)
        .await?
        .context("subscriber task")?
        .with_context(|| format!("moq-relay log:\n{}", moq.log_text()))?;
    published?;
    publisher.close();
    plan.verify("moq-dev subscriber across the mesh", &received)
}

async fn starling_dials_moq_relay_to_starling(case: Case) -> anyhow::Result<()> {
    let mesh = Mesh::starling_dials(case).await?;
    across(case, mesh.moq(case), mesh.starling(case), &mesh.moq).await
}

async fn starling_dials_starling_to_moq_relay(case: Case) -> anyhow::Result<()> {
    let mesh = Mesh::starling_dials(case).await?;
    across(case, mesh.starling(case), mesh.moq(case), &mesh.moq).await
}

async fn moq_relay_dials_moq_relay_to_starling(case: Case) -> anyhow::Result<()> {
    let mesh = Mesh::moq_relay_dials(case).await?;
    across(case, mesh.moq(case), mesh.starling(case), &mesh.moq).await
}

async fn moq_relay_dials_starling_to_moq_relay(case: Case) -> anyhow::Result<()> {
    let mesh = Mesh::moq_relay_dials(case).await?;
    across(case, mesh.starling(case), mesh.moq(case), &mesh.moq).await
}

/// Three relays with moq-relay in the middle: moq-relay dials Starling A, Starling C dials
/// moq-relay; a moq-dev publisher on A reaches a moq-dev subscriber on C through it.
async fn moq_relay_in_the_middle_of_two_starlings(case: Case) -> anyhow::Result<()> {
    let a = StarlingRelay::start_with(vec![case.version], |config| {
        config.cluster.id = Some(STARLING_ID);
    })
    .await?;
    let b = MoqRelay::start_with(
        case.version,
        &[
            "--cluster-id".into(),
            MOQ_RELAY_ID.to_string(),
            "--cluster-connect".into(),
            a.url(case).to_string(),
            "--connect-tls-fingerprint".into(),
            a.fingerprint.clone(),
        ],
    )
    .await?;
    let pin =
        starling_net::tls::parse_fingerprint(&b.fingerprint).context("moq-relay's fingerprint")?;
    let peer = PeerEntry::parse(b.url(case).as_str())?;
    let c = StarlingRelay::start_with(vec![case.version], |config| {
        config.cluster = ClusterConfig {
            id: Some(STARLING_C_ID),
            connect: vec![peer],
            connect_tls: TlsVerify::PinnedSha256(vec![pin]),
            ..ClusterConfig::default()
        };
    })
    .await?;
    across(
        case,
        (a.url(case), a.fingerprint.clone()),
        (c.url(case), c.fingerprint.clone()),
        &b,
    )
    .await
}

version_binding_matrix!(moq_in_the_middle => moq_relay_in_the_middle_of_two_starlings);
version_binding_matrix!(starling_dials_moq_to_starling => starling_dials_moq_relay_to_starling);
version_binding_matrix!(starling_dials_starling_to_moq => starling_dials_starling_to_moq_relay);
version_binding_matrix!(moq_dials_moq_to_starling => moq_relay_dials_moq_relay_to_starling);
version_binding_matrix!(moq_dials_starling_to_moq => moq_relay_dials_starling_to_moq_relay);

/// The same mesh over IETF drafts: each relay serves only the draft, so the peer link speaks it
/// too (moq-relay's and Starling's cluster dials offer every protocol). One draft of each wire
/// family, both bindings between them.
macro_rules! ietf_cells {
    ($name:ident => $scenario:ident) => {
        mod $name {
            use crate::common::{run, Binding, Case};
            use starling_proto::ietf::Draft;

            ietf_cells!(@cell draft14_raw_quic, D14, Quic, $scenario);
            ietf_cells!(@cell draft16_webtransport, D16, WebTransport, $scenario);
            ietf_cells!(@cell draft17_raw_quic, D17, Quic, $scenario);
            ietf_cells!(@cell draft22_webtransport, D22, WebTransport, $scenario);
        }
    };
    (@cell $test:ident, $draft:ident, $binding:ident, $scenario:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let case = Case::new(Draft::$draft, Binding::$binding);
            run(case, super::$scenario(case)).await;
        }
    };
}

ietf_cells!(moq_in_the_middle_ietf => moq_relay_in_the_middle_of_two_starlings);
ietf_cells!(starling_dials_moq_to_starling_ietf => starling_dials_moq_relay_to_starling);
ietf_cells!(starling_dials_starling_to_moq_ietf => starling_dials_starling_to_moq_relay);
ietf_cells!(moq_dials_moq_to_starling_ietf => moq_relay_dials_moq_relay_to_starling);
ietf_cells!(moq_dials_starling_to_moq_ietf => moq_relay_dials_starling_to_moq_relay);
