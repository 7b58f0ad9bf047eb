//! `--cluster-connect-api`: a peer list served by an operator's control plane, as moq-relay
//! 0.17.10 reads it. An `http(s)://` URL is fetched every [`POLL`] with `?node=` naming this
//! relay; a file path (or `file://` URL) is re-read whenever its size or modification time
//! changes (checked every [`FILE_CHECK`]). The body is a JSON array of peer URLs and
//! `{url, cost, egress, token}` objects; a bare `host[:port]` means `https://host[:port]/`.
//! The list is fail-static: a failed fetch, a non-2xx answer, a body that is not an array, any
//! bad entry or two conflicting entries for one peer reject the whole list and keep the
//! current peers.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use url::Url;

use super::peer::{parse_peers, PeerEntry, PeerError, PeerSpec};

/// How often an HTTP peer list is fetched.
pub const POLL: Duration = Duration::from_secs(30);
/// How often a peer-list file's metadata is checked.
pub const FILE_CHECK: Duration = Duration::from_millis(500);
/// The largest peer list read (a body past it is refused).
pub const MAX_LIST_BYTES: usize = 1 << 20;

/// Where the peer list comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectApi {
    Http(Url),
    File(PathBuf),
}

impl ConnectApi {
    /// `http://…` or `https://…`, `file://…`, or a path.
    pub fn parse(text: &str) -> Result<ConnectApi, ApiError> {
        let text = text.trim();
        if text.starts_with("http://") || text.starts_with("https://") {
            let url = Url::parse(text).map_err(|err| ApiError::Source(err.to_string()))?;
            return Ok(ConnectApi::Http(url));
        }
        if let Some(rest) = text.strip_prefix("file://") {
            return Ok(ConnectApi::File(PathBuf::from(rest)));
        }
        if text.is_empty() {
            return Err(ApiError::Source("empty".into()));
        }
        Ok(ConnectApi::File(PathBuf::from(text)))
    }
}

/// Why a peer list was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("peer list source: {0}")]
    Source(String),
    #[error("peer list fetch: {0}")]
    Fetch(String),
    #[error("peer list answered HTTP {0}")]
    Status(u16),
    #[error("peer list is larger than {MAX_LIST_BYTES} bytes")]
    TooLarge,
    #[error("peer list is not a JSON array of peers: {0}")]
    Body(String),
    #[error("peer list entry: {0}")]
    Entry(#[from] PeerError),
}

/// Parse a peer-list body; bare `host[:port]` strings become `https://host[:port]/`.
pub fn parse_list(body: &[u8]) -> Result<Vec<PeerEntry>, ApiError> {
    if body.len() > MAX_LIST_BYTES {
        return Err(ApiError::TooLarge);
    }
    let specs: Vec<PeerSpec> =
        serde_json::from_slice(body).map_err(|err| ApiError::Body(err.to_string()))?;
    let specs: Vec<PeerSpec> = specs
        .into_iter()
        .map(|spec| match spec {
            PeerSpec::Url(text) if !text.contains("://") => {
                PeerSpec::Url(format!("https://{}/", text.trim()))
            }
            spec => spec,
        })
        .collect();
    Ok(parse_peers(&specs)?)
}

/// Reads one source's list when it may have changed.
pub(crate) struct ApiReader {
    source: ConnectApi,
    node: Option<String>,
    http: reqwest::Client,
    /// A file's size and modification time when last read.
    seen: Option<(u64, Option<SystemTime>)>,
}

impl ApiReader {
    pub fn new(source: ConnectApi, node: Option<String>) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| ApiError::Source(err.to_string()))?;
        Ok(ApiReader {
            source,
            node,
            http,
            seen: None,
        })
    }

    /// How long to wait between checks.
    pub fn interval(&self) -> Duration {
        match self.source {
            ConnectApi::Http(_) => POLL,
            ConnectApi::File(_) => FILE_CHECK,
        }
    }

    /// The list, when it is due: `Ok(None)` while a file is unchanged.
    pub async fn read(&mut self) -> Result<Option<Vec<PeerEntry>>, ApiError> {
        match &self.source {
            ConnectApi::File(path) => {
                let meta = tokio::fs::metadata(path)
                    .await
                    .map_err(|err| ApiError::Fetch(format!("{}: {err}", path.display())))?;
                let stamp = (meta.len(), meta.modified().ok());
                if self.seen == Some(stamp) {
                    return Ok(None);
                }
                let body = tokio::fs::read(path)
                    .await
                    .map_err(|err| ApiError::Fetch(format!("{}: {err}", path.display())))?;
                let list = parse_list(&body)?;
                self.seen = Some(stamp);
                Ok(Some(list))
            }
            ConnectApi::Http(url) => {
                let mut url = url.clone();
                if let Some(node) = &self.node {
                    url.query_pairs_mut().append_pair("node", node);
                }
                let response = self
                    .http
                    .get(url)
                    .send()
                    .await
                    .map_err(|err| ApiError::Fetch(err.without_url().to_string()))?;
                if !response.status().is_success() {
                    return Err(ApiError::Status(response.status().as_u16()));
                }
                if response
                    .content_length()
                    .is_some_and(|len| len > MAX_LIST_BYTES as u64)
                {
                    return Err(ApiError::TooLarge);
                }
                let body = response
                    .bytes()
                    .await
                    .map_err(|err| ApiError::Fetch(err.without_url().to_string()))?;
                Ok(Some(parse_list(&body)?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_urls_files_and_paths() {
        assert_eq!(
            ConnectApi::parse("https://cp.example/peers").unwrap(),
            ConnectApi::Http(Url::parse("https://cp.example/peers").unwrap())
        );
        assert_eq!(
            ConnectApi::parse("file:///etc/starling/peers.json").unwrap(),
            ConnectApi::File("/etc/starling/peers.json".into())
        );
        assert_eq!(
            ConnectApi::parse("peers.json").unwrap(),
            ConnectApi::File("peers.json".into())
        );
    }

    #[test]
    fn a_list_takes_urls_objects_and_bare_hosts() {
        let list = parse_list(
            br#"["moqt://a:1/?cost=1", {"url": "https://b.pop/", "cost": 2, "token": "t"}, "c.pop:4443"]"#,
        )
        .unwrap();
        let keys: Vec<&str> = list.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            vec!["https://b.pop/", "https://c.pop:4443/", "moqt://a:1"]
        );
        assert_eq!(list[0].url.as_str(), "https://b.pop/?jwt=t");
    }

    #[test]
    fn one_bad_entry_rejects_the_whole_list() {
        for body in [
            &br#"{"peers": []}"#[..],
            br#"["moqt://a:1/", "moqt://b:1/?cost=x"]"#,
            br#"["moqt://a:1/?cost=1", "moqt://a:1/?cost=2"]"#,
            br#"[{"url": "moqt://a:1/", "weight": 3}]"#,
            b"not json",
        ] {
            assert!(
                parse_list(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(matches!(
            parse_list(&vec![b' '; MAX_LIST_BYTES + 1]),
            Err(ApiError::TooLarge)
        ));
    }
}
