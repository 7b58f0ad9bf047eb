//! `GET /sessions` on the internal listener, in moq-relay 0.17.10's shape: the sessions this
//! relay accepted (peers that dialed in included, its own dials not), filtered by the query.
//!
//! Filter fields are moq-relay's: `id`, `node`, `transport`, `remote` (an IP or a CIDR, port
//! ignored), `local` (exact, port included), `server_name`, `alpn`, `path` (a path pattern),
//! `role`, and the client-certificate fields `tls_name`, `tls_fingerprint`, `tls_issuer`
//! (a session without a verified client certificate matches none of them). Every field given
//! must match. An unknown field (`query` included: credentials are never listed or
//! matched) or a value that does not parse is a 400 naming it.

use std::net::{IpAddr, SocketAddr};
use std::time::UNIX_EPOCH;

use serde::Serialize;
use starling_auth::Pattern;
use starling_proto::Role;

use crate::registry::{SessionInfo, SessionRegistry, SessionTransport};

/// One listed session.
#[derive(Debug, Serialize)]
struct View {
    id: String,
    node: String,
    transport: &'static str,
    remote: Option<SocketAddr>,
    local: Option<SocketAddr>,
    server_name: Option<String>,
    alpn: Option<String>,
    path: String,
    role: Option<&'static str>,
    tls: Option<TlsView>,
    started: u64,
}

/// The verified client certificate of a session.
#[derive(Debug, Serialize)]
struct TlsView {
    name: Option<String>,
    fingerprint: String,
    expires: i64,
    issuer: String,
}

/// moq-relay's transport names (WebTransport runs over QUIC, and is listed as such).
fn transport_name(transport: SessionTransport) -> &'static str {
    match transport {
        SessionTransport::Quic | SessionTransport::WebTransport => "quic",
        SessionTransport::WebSocket => "websocket",
        SessionTransport::Tcp => "tcp",
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Publisher => "publisher",
        Role::Subscriber => "subscriber",
    }
}

/// An IP address or a CIDR block.
#[derive(Debug, PartialEq)]
struct Remote {
    network: IpAddr,
    bits: u8,
}

impl Remote {
    fn parse(text: &str) -> Option<Remote> {
        let (ip, bits) = match text.split_once('/') {
            Some((ip, bits)) => (ip.parse::<IpAddr>().ok()?, Some(bits.parse::<u8>().ok()?)),
            None => (text.parse::<IpAddr>().ok()?, None),
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let bits = bits.unwrap_or(max);
        (bits <= max).then_some(Remote { network: ip, bits })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let prefix =
            |a: u128, b: u128, len: u32, bits: u8| bits == 0 || (a ^ b) >> (len - bits as u32) == 0;
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix(u32::from(net) as u128, u32::from(ip) as u128, 32, self.bits)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix(u128::from(net), u128::from(ip), 128, self.bits)
            }
            _ => false,
        }
    }
}

/// Why a query is not a filter: the body of the 400.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("unknown filter field: {0}")]
    Unknown(String),
    #[error("invalid {field}: {value}")]
    Invalid { field: &'static str, value: String },
}

/// Which sessions a query selects.
#[derive(Debug, Default)]
pub struct Filter {
    id: Option<String>,
    node: Option<String>,
    transport: Option<String>,
    remote: Option<Remote>,
    local: Option<SocketAddr>,
    server_name: Option<String>,
    alpn: Option<String>,
    path: Option<Pattern>,
    role: Option<Role>,
    tls_name: Option<String>,
    tls_fingerprint: Option<String>,
    tls_issuer: Option<String>,
}

impl Filter {
    pub fn from_query(query: Option<&str>) -> Result<Filter, FilterError> {
        let mut filter = Filter::default();
        for (field, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let value = value.into_owned();
            let invalid = |field: &'static str| FilterError::Invalid {
                field,
                value: value.clone(),
            };
            match field.as_ref() {
                "id" => filter.id = Some(value),
                "node" => filter.node = Some(value),
                "transport" => match value.as_str() {
                    "quic" | "iroh" | "websocket" | "tcp" | "unix" | "http" => {
                        filter.transport = Some(value)
                    }
                    _ => return Err(invalid("transport")),
                },
                "remote" => filter.remote = Some(Remote::parse(&value).ok_or(invalid("remote"))?),
                "local" => filter.local = Some(value.parse().map_err(|_| invalid("local"))?),
                "server_name" => filter.server_name = Some(value),
                "alpn" => filter.alpn = Some(value),
                "path" => {
                    let pattern = value.trim_start_matches('/');
                    filter.path = Some(pattern.parse().map_err(|_| invalid("path"))?);
                }
                "role" => {
                    filter.role = Some(match value.as_str() {
                        "publisher" => Role::Publisher,
                        "subscriber" => Role::Subscriber,
                        _ => return Err(invalid("role")),
                    })
                }
                "tls_name" => filter.tls_name = Some(value),
                "tls_fingerprint" => filter.tls_fingerprint = Some(value.to_ascii_lowercase()),
                "tls_issuer" => filter.tls_issuer = Some(value),
                other => return Err(FilterError::Unknown(other.to_string())),
            }
        }
        Ok(filter)
    }

    fn matches(&self, node: &str, info: &SessionInfo) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|want| Some(want) == have)
        };
        let tls = info.tls.as_ref();
        same(&self.tls_name, tls.and_then(|t| t.name.as_deref()))
            && same(&self.tls_fingerprint, tls.map(|t| t.fingerprint.as_str()))
            && same(&self.tls_issuer, tls.map(|t| t.issuer.as_str()))
            && same(&self.id, Some(&info.id.to_string()))
            && same(&self.node, Some(node))
            && same(&self.transport, Some(transport_name(info.transport)))
            && self
                .remote
                .as_ref()
                .is_none_or(|remote| remote.contains(info.remote.ip()))
            && self.local.is_none_or(|local| Some(local) == info.local)
            && same(&self.server_name, info.server_name.as_deref())
            && same(&self.alpn, info.alpn.as_deref())
            && self
                .path
                .as_ref()
                .is_none_or(|pattern| pattern.matches(info.path.trim_start_matches('/')))
            && self.role.is_none_or(|role| Some(role) == info.role)
    }
}

/// The body of `GET /sessions?{query}`: accepted sessions matching the filter, by id.
pub fn sessions_json(sessions: &SessionRegistry, node: &str, filter: &Filter) -> String {
    let list: Vec<View> = sessions
        .list()
        .into_iter()
        .filter(|entry| entry.info.peer.is_none() && filter.matches(node, &entry.info))
        .map(|entry| entry.info.clone())
        .map(|info| View {
            id: info.id.to_string(),
            node: node.to_string(),
            transport: transport_name(info.transport),
            remote: Some(info.remote),
            local: info.local,
            server_name: info.server_name,
            alpn: info.alpn,
            path: info.path,
            role: info.role.map(role_name),
            tls: info.tls.map(|tls| TlsView {
                name: tls.name,
                fingerprint: tls.fingerprint,
                expires: tls.expires,
                issuer: tls.issuer,
            }),
            started: info
                .started_at
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        })
        .collect();
    serde_json::json!({ "sessions": list }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_and_addresses() {
        let block = Remote::parse("10.1.0.0/16").unwrap();
        assert!(block.contains("10.1.200.3".parse().unwrap()));
        assert!(!block.contains("10.2.0.1".parse().unwrap()));
        assert!(Remote::parse("::1")
            .unwrap()
            .contains("::1".parse().unwrap()));
        assert!(Remote::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Remote::parse("10.0.0.0/33").is_none());
        assert!(Remote::parse("nope").is_none());
    }

    #[test]
    fn unknown_and_invalid_fields_are_refused() {
        assert_eq!(
            Filter::from_query(Some("query=jwt")).err(),
            Some(FilterError::Unknown("query".into()))
        );
        assert_eq!(
            Filter::from_query(Some("role=viewer")).err(),
            Some(FilterError::Invalid {
                field: "role",
                value: "viewer".into()
            })
        );
        assert!(Filter::from_query(Some("path=room/*&transport=quic")).is_ok());
    }
}
