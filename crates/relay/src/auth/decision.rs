//! The vocabulary of admission: what a session presents, what a decider answers, and why
//! a session is refused.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use starling_auth::contract::{SessionRequest, SessionRole, TransportKind};
use starling_auth::{AuthError, Permissions};
use starling_proto::Role;

/// Everything the relay knows about a session when it asks to be admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionFacts {
    pub transport: TransportKind,
    /// The path as dialed, starting with `/`.
    pub path: String,
    /// The raw query (without `?`), which carries `jwt=`.
    pub query: Option<String>,
    /// The direction the client declared at SETUP; `None` is both.
    pub role: Option<Role>,
    pub remote: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    pub server_name: Option<String>,
    pub alpn: Option<String>,
}

impl SessionFacts {
    /// Facts for a request target `/path?query` on `transport`.
    pub fn new(transport: TransportKind, target: &str) -> Self {
        match target.split_once('?') {
            Some((path, query)) => Self::from_parts(transport, path, Some(query)),
            None => Self::from_parts(transport, target, None),
        }
    }

    /// Facts for a path (its leading `/` optional) and raw query already split apart, as a
    /// router hands them over: a `%3F` decoded in the path stays in the path.
    pub fn from_parts(transport: TransportKind, path: &str, query: Option<&str>) -> Self {
        SessionFacts {
            transport,
            path: format!("/{}", path.trim_start_matches('/')),
            query: query.filter(|q| !q.is_empty()).map(str::to_owned),
            role: None,
            remote: None,
            local: None,
            server_name: None,
            alpn: None,
        }
    }

    /// The non-empty raw query of a request target `/path?query`.
    pub fn query_of(target: &str) -> Option<String> {
        target
            .split_once('?')
            .map(|(_, query)| query.to_string())
            .filter(|query| !query.is_empty())
    }

    /// Present `token` (an IETF SETUP's AUTHORIZATION_TOKEN) as the `jwt` query parameter,
    /// unless the query already carries one, which wins.
    pub fn present_token(&mut self, token: &str) {
        if self.jwt().is_some() || token.is_empty() {
            return;
        }
        let pair: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("jwt", token)
            .finish();
        self.query = Some(match self.query.take() {
            Some(query) => format!("{query}&{pair}"),
            None => pair,
        });
    }

    /// The `jwt` query parameter, percent-decoded; the last non-empty one wins.
    pub fn jwt(&self) -> Option<String> {
        let query = self.query.as_deref()?;
        url::form_urlencoded::parse(query.as_bytes())
            .filter(|(name, value)| name == "jwt" && !value.is_empty())
            .map(|(_, value)| value.into_owned())
            .last()
    }

    /// What identifies the credential for caching: sessions presenting the same key share
    /// one decision.
    pub(crate) fn key(&self) -> CredentialKey {
        CredentialKey {
            transport: self.transport,
            path: self.path.clone(),
            query: self.query.clone(),
            role: self.role,
        }
    }

    /// The contract's `connect` request for these facts, under a fresh session id.
    pub(crate) fn request(&self, node: &str) -> SessionRequest {
        let mut request = SessionRequest::connect(node, self.transport, self.path.clone());
        request.query = self.query.clone();
        request.remote = self.remote;
        request.local = self.local;
        request.server_name = self.server_name.clone();
        request.alpn = self.alpn.clone();
        request.role = self.role.map(|role| match role {
            Role::Publisher => SessionRole::Publisher,
            Role::Subscriber => SessionRole::Subscriber,
        });
        request
    }
}

/// The cache key of a credential.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CredentialKey {
    transport: TransportKind,
    path: String,
    query: Option<String>,
    role: Option<Role>,
}

/// What a decider granted a credential, before the session's role narrows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The session root and the patterns relative to it.
    pub permissions: Permissions,
    /// The session must close at this instant (token `exp`, server `expires`).
    pub expires: Option<SystemTime>,
    /// The server asked to be re-checked at least this often.
    pub revalidate: Option<Duration>,
    /// The session is another relay of the cluster (an auth server's `"peer": true`): it
    /// hears hidden paths and the routes it announces are peer-learned.
    pub peer: bool,
}

impl Decision {
    /// Whether `fresh` still allows everything this decision allowed, at the same root and
    /// with the same standing as a peer (a flip closes the session, as moq-relay does).
    pub fn covered_by(&self, fresh: &Decision) -> bool {
        self.permissions.root == fresh.permissions.root
            && self.peer == fresh.peer
            && fresh.permissions.publish.covers(&self.permissions.publish)
            && fresh
                .permissions
                .subscribe
                .covers(&self.permissions.subscribe)
    }
}

/// Why a session was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("the path is not a broadcast path")]
    BadPath,
    #[error("a token was presented but no key is configured")]
    UnexpectedToken,
    #[error("no token and no public access here")]
    MissingToken,
    #[error("token refused: {0}")]
    Token(#[from] AuthError),
    #[error("the grant allows no {0} here")]
    Role(&'static str),
    #[error("the grant covers only part of {0:?}; dial a path the grant covers entirely")]
    Narrow(String),
    #[error("the auth server refused the session")]
    Server,
    #[error("the auth server answered a grant this relay cannot honour: {0}")]
    InvalidGrant(#[from] starling_auth::contract::GrantError),
    #[error("auth server unavailable: {0}")]
    Unavailable(String),
}

impl Refusal {
    /// Whether the refusal says nothing about the credential (the server could not be
    /// asked): never cached, and answered 502 rather than 401 over HTTP.
    pub fn is_outage(&self) -> bool {
        matches!(self, Refusal::Unavailable(_))
    }
}

/// The outcome of one decision, shared by every session waiting on it.
pub(crate) type Verdict = Result<Arc<Decision>, Arc<Refusal>>;

/// Which moment a decision is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// A session asks to be admitted.
    Connect,
    /// A live grant is re-checked.
    Revalidate,
}

/// A decision in progress.
pub(crate) type Deciding = Pin<Box<dyn Future<Output = Result<Decision, Refusal>> + Send>>;

/// Something that decides credentials: local keys and public rules, or an auth server.
pub(crate) trait Decide: Send + Sync + 'static {
    /// Decide for `facts` (the facts of the session that first presented the credential)
    /// under the contract's session `request`.
    fn decide(&self, facts: &SessionFacts, request: &SessionRequest, moment: Moment) -> Deciding;

    /// Which decider this is, for metrics.
    fn name(&self) -> &'static str;

    /// For a decider whose answers rest only on the credential, the clock and state it can
    /// look at itself (key files): look now, and say whether anything changed since the
    /// last look. Held decisions are then made again only after a sweep reports a change
    /// (their expiry ends their sessions on its own). `None`, the default: answers may
    /// change at any time (an auth server's), so held decisions are made again every
    /// maximum age.
    fn sweep(&self) -> Option<bool> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setup_token_is_presented_unless_the_query_has_one() {
        let mut facts = SessionFacts::new(TransportKind::Quic, "/room?x=1");
        facts.present_token("a.b+c");
        assert_eq!(facts.jwt().as_deref(), Some("a.b+c"));
        assert_eq!(facts.query.as_deref(), Some("x=1&jwt=a.b%2Bc"));
        let mut facts = SessionFacts::new(TransportKind::Quic, "/room?jwt=url");
        facts.present_token("setup");
        assert_eq!(facts.jwt().as_deref(), Some("url"));
    }

    #[test]
    fn facts_split_the_target_and_read_the_last_jwt() {
        let facts = SessionFacts::new(TransportKind::Quic, "room/a?x=1&jwt=one&jwt=two&jwt=");
        assert_eq!(facts.path, "/room/a");
        assert_eq!(facts.query.as_deref(), Some("x=1&jwt=one&jwt=two&jwt="));
        assert_eq!(facts.jwt().as_deref(), Some("two"));
        let bare = SessionFacts::new(TransportKind::Http, "/");
        assert_eq!((bare.path.as_str(), bare.query), ("/", None));
        assert_eq!(SessionFacts::new(TransportKind::Quic, "/a?").query, None);
    }

    #[test]
    fn the_cache_key_separates_paths_queries_roles_and_transports() {
        let a = SessionFacts::new(TransportKind::Quic, "/room?jwt=t");
        let mut b = a.clone();
        b.remote = Some("127.0.0.1:1".parse().unwrap());
        assert_eq!(
            a.key(),
            b.key(),
            "the peer address is not part of the credential"
        );
        b.role = Some(Role::Publisher);
        assert_ne!(a.key(), b.key());
        assert_ne!(
            a.key(),
            SessionFacts::new(TransportKind::Quic, "/roomy?jwt=t").key()
        );
        assert_ne!(
            a.key(),
            SessionFacts::new(TransportKind::WebSocket, "/room?jwt=t").key()
        );
    }
}
