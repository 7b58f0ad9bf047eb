//! What the fleet cases share: the fleet's size, the relay-wide memory bound each asserts,
//! summing the fleet's per-connection tallies, and dialing from the namespace hosts.

#![allow(dead_code)] // each fleet binary uses a different subset

use std::net::SocketAddr;

use starling_net::QuicTransport;
use starling_proto::Role;

use crate::attack::{dial_with, hostile_client, set_up, MIB};
use crate::lab;

/// The fleet's size: `FLEET_CONNECTIONS` (default 40; `scripts/hostile-fleet.sh` runs 400).
pub fn fleet_connections() -> usize {
    std::env::var("FLEET_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40)
}

/// The fleets' memory bound: the relay's RSS `rss` grows over `settled` by at most the
/// `budgets` that hold the attack (`what` they are) plus 256 MiB.
pub fn assert_fleet_rss(rss: u64, settled: u64, budgets: u64, what: &str) {
    assert!(
        rss <= settled + budgets + 256 * MIB,
        "relay RSS {} MiB, settled at {} MiB (bound: {what} plus 256 MiB)",
        rss / MIB,
        settled / MIB
    );
}

pub fn sum(counts: impl Iterator<Item = (usize, usize, usize)>) -> (usize, usize, usize) {
    counts.fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
}

/// Hosts (network namespaces) a namespace fleet comes from.
const HOSTS: usize = 10;

/// Ten hosts: network namespaces joined to the relay's by veth pairs, so the relay sees ten
/// addresses that are not loopback and applies its admission to them as to any remote client.
pub struct Hosts {
    links: Vec<lab::Link>,
    _lab: lab::Lab,
}

impl Hosts {
    /// The hosts, or `None`, having said why, where namespaces cannot be built (the case is
    /// then skipped).
    pub fn build() -> Option<Self> {
        if let Some(why) = lab::cannot_build_namespaces() {
            eprintln!("skipped: {why}");
            return None;
        }
        let mut lab = lab::Lab::new(HOSTS).unwrap();
        let links = (0..HOSTS).map(|h| lab.link(None, h).unwrap()).collect();
        Some(Hosts { links, _lab: lab })
    }

    /// The fleet's connection `i`: raw QUIC to the relay's `port` from host `i % 10` (its only
    /// way out is its veth link, so the relay sees its address), retried while the relay
    /// refuses it, then set up as `role`.
    pub async fn dial(&self, i: usize, port: u16, role: Role) -> QuicTransport {
        let link = &self.links[i % HOSTS];
        let relay = SocketAddr::new(link.a_ip.into(), port);
        let client =
            lab::inside(&link.b_ns, || hostile_client("0.0.0.0:0".parse().unwrap())).unwrap();
        let url = url::Url::parse(&format!("moqt://{relay}/")).unwrap();
        set_up(dial_with(&client, &url).await, role).await
    }
}
