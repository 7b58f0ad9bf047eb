//! `--cluster-connect-dns URL`: peers found in DNS, as a Kubernetes headless Service publishes
//! its pods. The URL's host is resolved (A and AAAA) every [`RESOLVE_EVERY`]; each address is
//! one peer, dialed at the URL with the host replaced by the address (scheme, port, path and
//! query kept, so `?cost=` and `?jwt=` apply to every member). Addresses that stop resolving
//! are released. A relay that finds itself in the answer notices when the session's SETUP
//! carries its own hop, and stops dialing that address.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use url::{Host, Url};

use super::peer::{PeerEntry, PeerError};

/// How often the name is resolved again.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(5);
/// The most addresses taken from one answer.
pub const MAX_ADDRESSES: usize = 256;

/// A name whose addresses are cluster peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsPeers {
    template: Url,
    host: String,
    port: u16,
}

impl DnsPeers {
    /// A peer URL whose host is a DNS name (`moqt://relays.prod.svc:4443/?cost=2`).
    pub fn parse(text: &str) -> Result<DnsPeers, PeerError> {
        // Parsed as a peer first: the same schemes, cost and token rules.
        let entry = PeerEntry::parse(text)?;
        let template = Url::parse(text.trim())
            .map_err(|err| PeerError::BadUrl(text.to_string(), err.to_string()))?;
        // Non-special schemes (moqt) keep an IPv4 address as an opaque host: refuse it too.
        let host = match template.host() {
            Some(Host::Domain(name)) if name.parse::<IpAddr>().is_err() => name.to_string(),
            _ => return Err(PeerError::NotAUrl(text.to_string())),
        };
        let port = entry
            .url
            .port_or_known_default()
            .ok_or_else(|| PeerError::NotAUrl(text.to_string()))?;
        Ok(DnsPeers {
            template,
            host,
            port,
        })
    }

    /// The peers for one answer: one per distinct address (at most [`MAX_ADDRESSES`]).
    pub fn peers(&self, addresses: impl IntoIterator<Item = IpAddr>) -> Vec<PeerEntry> {
        let distinct: BTreeSet<IpAddr> = addresses.into_iter().take(MAX_ADDRESSES).collect();
        distinct
            .into_iter()
            .filter_map(|ip| {
                let mut url = self.template.clone();
                url.set_ip_host(ip).ok()?;
                PeerEntry::parse(url.as_str()).ok()
            })
            .collect()
    }

    /// Resolve the name now.
    pub async fn resolve(&self) -> std::io::Result<Vec<IpAddr>> {
        let answer = tokio::net::lookup_host((self.host.as_str(), self.port)).await?;
        Ok(answer.map(|addr: SocketAddr| addr.ip()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_is_a_peer_at_the_template() {
        let dns = DnsPeers::parse("moqt://relays.prod.svc:4443/?cost=2&jwt=T").unwrap();
        let peers = dns.peers([
            "10.0.0.2".parse().unwrap(),
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            "fd00::7".parse().unwrap(),
        ]);
        let urls: Vec<&str> = peers.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(
            urls,
            vec![
                "moqt://10.0.0.1:4443/?jwt=T",
                "moqt://10.0.0.2:4443/?jwt=T",
                "moqt://[fd00::7]:4443/?jwt=T",
            ]
        );
        assert!(peers.iter().all(|p| p.cost == Some(2)));
    }

    #[test]
    fn the_host_must_be_a_name() {
        assert!(DnsPeers::parse("moqt://10.0.0.1:4443/").is_err());
        assert!(DnsPeers::parse("relays.prod.svc:4443").is_err());
        assert!(DnsPeers::parse("https://relays.prod.svc/").is_ok());
    }

    #[tokio::test]
    async fn localhost_resolves_to_a_loopback_peer() {
        let dns = DnsPeers::parse("moqt://localhost:4443/").unwrap();
        let addresses = dns.resolve().await.unwrap();
        assert!(addresses.iter().all(IpAddr::is_loopback), "{addresses:?}");
        assert!(!dns.peers(addresses).is_empty());
    }
}
