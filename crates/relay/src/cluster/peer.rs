//! Peer entries: the relays a cluster member dials, as `--cluster-connect` and `[cluster]
//! connect` name them (moq-relay 0.17.10's forms), and the key that identifies one peer.
//!
//! A URL entry names a full URL (`moqt://`, `https://`, `http://`, `ws://`, `wss://`,
//! `tcp://`); a bare `host:port` is refused. `?cost=N` is read and stripped: N is this relay's
//! price for the link and the SETUP Cost sent to the peer. `?jwt=` stays on the URL (it is the
//! credential). The object form `{url, cost, egress, token}` says the same with fields; a cost
//! or token given both ways is refused, as is an `egress` other than the cost (asymmetric
//! prices are not supported). Two entries with one key must agree.

use std::collections::BTreeMap;

use serde::Deserialize;
use url::Url;

/// Schemes a peer may be dialed with.
const SCHEMES: [&str; 8] = ["moqt", "moql", "https", "http", "ws", "wss", "tcp", "unix"];

/// One relay to dial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerEntry {
    /// What is dialed: the entry's URL without `?cost=`, with the credential when one is set.
    pub url: Url,
    /// The link price (this relay's price for routes learned there, and the SETUP Cost sent).
    pub cost: Option<u64>,
    /// Identity: the URL without query, fragment and userinfo, slashes collapsed.
    pub key: String,
}

/// Why a peer entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    #[error("{0:?}: a peer needs a full URL (moqt://host:port/, https://host:port/, …)")]
    NotAUrl(String),
    #[error("{0:?}: not a URL: {1}")]
    BadUrl(String, String),
    #[error("{0:?}: unsupported scheme (moqt, moql, https, http, ws, wss, tcp)")]
    Scheme(String),
    #[error("{0:?}: cost must be an unsigned integer")]
    Cost(String),
    #[error("{0:?}: cost given both in the URL and as a field")]
    CostTwice(String),
    #[error("{0:?}: token given both in the URL and as a field")]
    TokenTwice(String),
    #[error("{0:?}: egress {1} differs from the cost {2}: asymmetric costs are not supported yet")]
    Asymmetric(String, u64, u64),
    #[error("peer {0} is listed twice with different settings")]
    Conflict(String),
}

/// The object form of a peer (`{url, cost, egress, token}` in TOML or a peer list).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PeerObject {
    pub url: String,
    pub cost: Option<u64>,
    pub egress: Option<u64>,
    pub token: Option<String>,
}

/// A peer as configured: a URL string or an object.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum PeerSpec {
    Url(String),
    Object(PeerObject),
}

impl PeerEntry {
    /// Parse the URL form.
    pub fn parse(text: &str) -> Result<PeerEntry, PeerError> {
        Self::build(text, None, None, None)
    }

    /// Parse either form.
    pub fn from_spec(spec: &PeerSpec) -> Result<PeerEntry, PeerError> {
        match spec {
            PeerSpec::Url(text) => Self::parse(text),
            PeerSpec::Object(object) => Self::build(
                &object.url,
                object.cost,
                object.egress,
                object.token.as_deref(),
            ),
        }
    }

    fn build(
        text: &str,
        cost: Option<u64>,
        egress: Option<u64>,
        token: Option<&str>,
    ) -> Result<PeerEntry, PeerError> {
        let text = text.trim();
        if !text.contains("://") {
            return Err(PeerError::NotAUrl(text.to_string()));
        }
        let mut url =
            Url::parse(text).map_err(|err| PeerError::BadUrl(text.to_string(), err.to_string()))?;
        if !SCHEMES.contains(&url.scheme()) {
            return Err(PeerError::Scheme(text.to_string()));
        }
        let mut url_cost = None;
        let mut url_token = false;
        let mut kept: Vec<(String, String)> = Vec::new();
        for (name, value) in url.query_pairs() {
            match name.as_ref() {
                "cost" => {
                    let parsed = value
                        .parse::<u64>()
                        .map_err(|_| PeerError::Cost(text.to_string()))?;
                    url_cost = Some(parsed);
                }
                "jwt" => {
                    url_token |= !value.is_empty();
                    kept.push((name.into_owned(), value.into_owned()));
                }
                _ => kept.push((name.into_owned(), value.into_owned())),
            }
        }
        let cost = match (url_cost, cost) {
            (Some(_), Some(_)) => return Err(PeerError::CostTwice(text.to_string())),
            (url_cost, field) => url_cost.or(field),
        };
        if let Some(egress) = egress {
            let effective = cost.unwrap_or(1);
            if egress != effective {
                return Err(PeerError::Asymmetric(text.to_string(), egress, effective));
            }
        }
        if let Some(token) = token {
            if url_token {
                return Err(PeerError::TokenTwice(text.to_string()));
            }
            kept.retain(|(name, _)| name != "jwt");
            kept.push(("jwt".into(), token.to_string()));
        }
        if kept.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(&kept);
        }
        let key = key_of(&url);
        Ok(PeerEntry { url, cost, key })
    }

    /// What two entries for one peer must agree on: the price and the query (credential).
    fn settings(&self) -> (Option<u64>, Option<&str>) {
        (self.cost, self.url.query())
    }

    /// Add `?jwt=token` unless the entry already carries a credential (`--cluster-token`).
    pub fn with_token(mut self, token: &str) -> PeerEntry {
        let present = self
            .url
            .query_pairs()
            .any(|(name, value)| name == "jwt" && !value.is_empty());
        if !present && !token.is_empty() {
            let kept: Vec<(String, String)> = self
                .url
                .query_pairs()
                .filter(|(name, _)| name != "jwt")
                .map(|(n, v)| (n.into_owned(), v.into_owned()))
                .collect();
            self.url
                .query_pairs_mut()
                .clear()
                .extend_pairs(&kept)
                .append_pair("jwt", token);
        }
        self
    }
}

/// A peer's identity: scheme, host and port, and the path with repeated slashes collapsed and
/// a trailing slash dropped (URLs of the `http` family always keep at least `/`).
fn key_of(url: &Url) -> String {
    let mut path = String::with_capacity(url.path().len());
    for c in url.path().chars() {
        if c == '/' && path.ends_with('/') {
            continue;
        }
        path.push(c);
    }
    while path.ends_with('/') {
        path.pop();
    }
    if path.is_empty() && url.is_special() {
        path.push('/');
    }
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{path}", url.scheme()),
        None => format!("{}://{host}{path}", url.scheme()),
    }
}

/// Parse a list of peers, one per key: identical repeats collapse, conflicting ones refuse
/// the whole list.
pub fn parse_peers<'a>(
    specs: impl IntoIterator<Item = &'a PeerSpec>,
) -> Result<Vec<PeerEntry>, PeerError> {
    let mut by_key: BTreeMap<String, PeerEntry> = BTreeMap::new();
    for spec in specs {
        let entry = PeerEntry::from_spec(spec)?;
        match by_key.get(&entry.key) {
            Some(existing) if existing.settings() != entry.settings() => {
                return Err(PeerError::Conflict(entry.key.clone()))
            }
            Some(_) => {}
            None => {
                by_key.insert(entry.key.clone(), entry);
            }
        }
    }
    Ok(by_key.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> PeerSpec {
        PeerSpec::Url(text.into())
    }

    #[test]
    fn cost_is_stripped_and_the_credential_stays() {
        let peer = PeerEntry::parse("moqt://127.0.0.1:14443/?cost=3&jwt=abc").unwrap();
        assert_eq!(peer.cost, Some(3));
        assert_eq!(peer.url.as_str(), "moqt://127.0.0.1:14443/?jwt=abc");
        assert_eq!(peer.key, "moqt://127.0.0.1:14443");
        let free = PeerEntry::parse("moqt://h:1/?cost=0").unwrap();
        assert_eq!(free.cost, Some(0));
        assert_eq!(free.url.query(), None);
    }

    #[test]
    fn keys_ignore_query_userinfo_and_slashes() {
        let key = |t: &str| PeerEntry::parse(t).unwrap().key;
        assert_eq!(key("moqt://h:1/"), key("moqt://h:1"));
        assert_eq!(key("moqt://h:1//a//b/"), "moqt://h:1/a/b");
        assert_eq!(key("moqt://user:pw@h:1/?jwt=x#frag"), "moqt://h:1");
        // The http family always has a path; moq-relay's /nodes shows it the same way.
        assert_eq!(
            key("http://127.0.0.1:14443/?cost=10"),
            "http://127.0.0.1:14443/"
        );
        assert_ne!(key("moqt://h:1/a"), key("moqt://h:1/b"));
    }

    #[test]
    fn bare_hosts_bad_costs_and_schemes_are_refused() {
        for (text, want) in [
            ("relay.example:4443", "NotAUrl"),
            ("relay.example", "NotAUrl"),
            ("moqt://h:1/?cost=cheap", "Cost"),
            ("moqt://h:1/?cost=-1", "Cost"),
            ("ftp://h:1/", "Scheme"),
        ] {
            let err = PeerEntry::parse(text).unwrap_err();
            assert!(format!("{err:?}").starts_with(want), "{text}: {err:?}");
        }
    }

    #[test]
    fn the_object_form_follows_the_same_rules() {
        let object = |url: &str, cost, egress, token: Option<&str>| {
            PeerSpec::Object(PeerObject {
                url: url.into(),
                cost,
                egress,
                token: token.map(str::to_string),
            })
        };
        let peer =
            PeerEntry::from_spec(&object("https://b/", Some(2), Some(2), Some("t"))).unwrap();
        assert_eq!(peer.cost, Some(2));
        assert_eq!(peer.url.as_str(), "https://b/?jwt=t");
        // egress defaults to the effective cost (1 when unpriced).
        assert!(PeerEntry::from_spec(&object("https://b/", None, Some(1), None)).is_ok());
        for (spec, want) in [
            (
                object("https://b/?cost=1", Some(1), None, None),
                "CostTwice",
            ),
            (
                object("https://b/?jwt=x", None, None, Some("y")),
                "TokenTwice",
            ),
            (object("https://b/", Some(2), Some(3), None), "Asymmetric"),
        ] {
            let err = PeerEntry::from_spec(&spec).unwrap_err();
            assert!(format!("{err:?}").starts_with(want), "{spec:?}: {err:?}");
        }
        let list: Vec<PeerSpec> =
            serde_json::from_str(r#"["moqt://a:1/", {"url": "moqt://b:1/", "cost": 4}]"#).unwrap();
        let peers = parse_peers(&list).unwrap();
        assert_eq!(peers.len(), 2);
        assert_eq!(peers[1].cost, Some(4));
        let unknown: Result<Vec<PeerSpec>, _> =
            serde_json::from_str(r#"[{"url": "moqt://b:1/", "price": 4}]"#);
        assert!(unknown.is_err(), "unknown fields are refused");
    }

    #[test]
    fn one_entry_per_key_and_conflicts_refuse_the_list() {
        let peers = parse_peers(&[url("moqt://h:1/"), url("moqt://h:1")]).unwrap();
        assert_eq!(peers.len(), 1);
        let err = parse_peers(&[url("moqt://h:1/?cost=2"), url("moqt://h:1/")]).unwrap_err();
        assert_eq!(err, PeerError::Conflict("moqt://h:1".into()));
    }

    #[test]
    fn the_cluster_token_is_added_only_where_no_credential_is() {
        let plain = PeerEntry::parse("moqt://h:1/?cost=2").unwrap();
        assert_eq!(plain.with_token("T").url.as_str(), "moqt://h:1/?jwt=T");
        let own = PeerEntry::parse("moqt://h:1/?jwt=mine").unwrap();
        assert_eq!(own.with_token("T").url.as_str(), "moqt://h:1/?jwt=mine");
    }
}
