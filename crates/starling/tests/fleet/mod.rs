//! What the fleet cases share: the fleet's size, the relay-wide memory bound each asserts,
//! summing the fleet's per-connection tallies, and dialing from the namespace hosts.

#![allow(dead_code)] // each fleet binary uses a different subset

use crate::attack::{dial_with, hostile_client, MIB};
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

/// Hosts (network namespaces) the namespace fleet comes from.
pub const HOSTS: usize = 10;

/// A raw-QUIC connection to `relay` from a socket inside namespace `ns`, retried while the
/// relay refuses it; no moq SETUP sent.
pub async fn dial_inside(ns: &str, relay: std::net::SocketAddr) -> starling_net::QuicTransport {
    let client = lab::inside(ns, || hostile_client("0.0.0.0:0".parse().unwrap())).unwrap();
    let url = url::Url::parse(&format!("moqt://{relay}/")).unwrap();
    dial_with(&client, &url).await
}
