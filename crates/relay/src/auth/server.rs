//! Deciding through an external auth server (`--auth-url`), speaking moq-relay 0.17.10's
//! contract (moq-auth 0.2.2): a JSON `POST` per session event.
//!
//! `connect` and `revalidate` answer a grant (2xx), a refusal (401, 403) or an outage
//! (anything else, a timeout, a body that is not a grant). `end` reports each session's
//! close; those go through a bounded queue so a slow server never holds a closing session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use starling_auth::contract::{ServerGrant, SessionRequest};
use starling_auth::Permissions;
use tokio::sync::mpsc;
use url::Url;

use crate::auth::decision::{Decide, Deciding, Decision, Moment, Refusal, SessionFacts};

/// Every request is bounded, so a hung server refuses rather than parks sessions.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `end` reports waiting to be sent; past this they are dropped (and counted).
const END_QUEUE: usize = 4096;

/// `end` reports sent at once.
const END_CONCURRENCY: usize = 8;

/// Why an auth URL cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthUrlError {
    #[error("http:// auth servers must be on a loopback host; use https:// for {0}")]
    Insecure(String),
    #[error("unsupported auth URL scheme in {0}")]
    Scheme(String),
    #[error("http client: {0}")]
    Client(String),
}

/// The URL without userinfo, query or fragment (any may carry a secret), for messages.
fn redact(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// Counters of the requests made to the server.
#[derive(Debug, Default)]
pub struct ServerCounters {
    pub connect: AtomicU64,
    pub revalidate: AtomicU64,
    pub end: AtomicU64,
    pub end_dropped: AtomicU64,
    pub refused: AtomicU64,
    pub unavailable: AtomicU64,
}

/// The client side of the contract.
#[derive(Clone, Debug)]
pub(crate) struct AuthServer {
    http: reqwest::Client,
    url: Url,
    counters: Arc<ServerCounters>,
    /// Where grant lifetimes are read against.
    clock: starling_session::Clock,
}

impl AuthServer {
    /// A client for `url`: `https://`, or `http://` on a loopback host.
    pub fn new(url: Url) -> Result<Self, AuthUrlError> {
        match url.scheme() {
            "http" => {
                let loopback = match url.host() {
                    Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                    Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                    Some(url::Host::Domain(host)) => host == "localhost",
                    None => false,
                };
                if !loopback {
                    return Err(AuthUrlError::Insecure(redact(&url)));
                }
            }
            "https" => {}
            _ => return Err(AuthUrlError::Scheme(redact(&url))),
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|err| AuthUrlError::Client(err.to_string()))?;
        Ok(AuthServer {
            http,
            url,
            counters: Arc::default(),
            clock: starling_session::Clock::system(),
        })
    }

    /// Read grant lifetimes against `clock` (a simulation's).
    pub fn with_clock(mut self, clock: starling_session::Clock) -> Self {
        self.clock = clock;
        self
    }

    pub fn counters(&self) -> &Arc<ServerCounters> {
        &self.counters
    }

    /// POST a `connect` or `revalidate` and read the grant.
    async fn post(&self, request: &SessionRequest) -> Result<ServerGrant, Refusal> {
        let outage = |err: reqwest::Error| Refusal::Unavailable(err.without_url().to_string());
        let response = self
            .http
            .post(self.url.clone())
            .json(request)
            .send()
            .await
            .map_err(outage)?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(Refusal::Server);
        }
        if !status.is_success() {
            return Err(Refusal::Unavailable(format!(
                "auth server answered {status}"
            )));
        }
        response.json::<ServerGrant>().await.map_err(outage)
    }

    /// A worker sending `end` reports, fed by the returned queue.
    pub fn end_reporter(&self) -> EndReporter {
        let (queue, mut reports) = mpsc::channel::<SessionRequest>(END_QUEUE);
        let server = self.clone();
        tokio::spawn(async move {
            let mut sending = tokio::task::JoinSet::new();
            while let Some(report) = reports.recv().await {
                while sending.len() >= END_CONCURRENCY {
                    sending.join_next().await;
                }
                let server = server.clone();
                sending.spawn(async move {
                    server.counters.end.fetch_add(1, Ordering::Relaxed);
                    let sent = server
                        .http
                        .post(server.url.clone())
                        .json(&report)
                        .send()
                        .await
                        .and_then(|response| response.error_for_status());
                    if let Err(err) = sent {
                        tracing::warn!(id = %report.id, err = %err.without_url(), "auth server: end report failed");
                    }
                });
            }
            while sending.join_next().await.is_some() {}
        });
        EndReporter {
            queue,
            counters: self.counters.clone(),
        }
    }
}

/// Hands `end` reports to the sending worker without waiting.
#[derive(Clone, Debug)]
pub(crate) struct EndReporter {
    queue: mpsc::Sender<SessionRequest>,
    counters: Arc<ServerCounters>,
}

impl EndReporter {
    pub fn report(&self, request: SessionRequest) {
        if self.queue.try_send(request).is_err() {
            self.counters.end_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The decision a grant makes for a session that dialed `path`.
fn decision(path: &str, grant: ServerGrant, now: SystemTime) -> Result<Decision, Refusal> {
    grant.validate(now).map_err(|err| match err {
        // A grant that names nothing is a refusal, not a malformed answer.
        starling_auth::contract::GrantError::Useless => Refusal::Server,
        other => Refusal::InvalidGrant(other),
    })?;
    let root = grant.root.as_deref().unwrap_or(path);
    Ok(Decision {
        permissions: Permissions {
            root: starling_auth::path::normalize(root),
            publish: grant.publish,
            subscribe: grant.subscribe,
        },
        expires: grant.expires,
        revalidate: grant.revalidate,
        peer: grant.peer,
    })
}

impl Decide for AuthServer {
    fn decide(&self, facts: &SessionFacts, request: &SessionRequest, moment: Moment) -> Deciding {
        let server = self.clone();
        let path = facts.path.clone();
        let event = match moment {
            Moment::Connect => starling_auth::contract::SessionEvent::Connect,
            Moment::Revalidate => starling_auth::contract::SessionEvent::Revalidate,
        };
        let request = request.with_event(event);
        Box::pin(async move {
            let counter = match moment {
                Moment::Connect => &server.counters.connect,
                Moment::Revalidate => &server.counters.revalidate,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let decided = server
                .post(&request)
                .await
                .and_then(|grant| decision(&path, grant, server.clock.wall()));
            match &decided {
                Err(err) if err.is_outage() => {
                    server.counters.unavailable.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    server.counters.refused.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => {}
            }
            decided
        })
    }

    fn name(&self) -> &'static str {
        "server"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_may_be_plain_http() {
        for ok in [
            "http://127.0.0.1:4440/",
            "http://localhost:4440/",
            "http://[::1]:4440/",
            "https://auth.example/",
        ] {
            assert!(AuthServer::new(ok.parse().unwrap()).is_ok(), "{ok}");
        }
        let err = AuthServer::new("http://user:pw@auth.example/?jwt=secret".parse().unwrap())
            .unwrap_err();
        let printed = err.to_string();
        assert!(printed.contains("auth.example"), "{printed}");
        for secret in ["user", "pw", "secret"] {
            assert!(!printed.contains(secret), "leaked {secret}: {printed}");
        }
        assert!(AuthServer::new("ftp://auth.example/".parse().unwrap()).is_err());
    }

    #[test]
    fn a_grant_is_relative_to_its_root_or_the_dialed_path() {
        let grant: ServerGrant = serde_json::from_str(r#"{"subscribe":["**"]}"#).unwrap();
        let decided = decision("/room/a/", grant, SystemTime::now()).unwrap();
        assert_eq!(decided.permissions.root, "room/a");
        let grant: ServerGrant =
            serde_json::from_str(r#"{"publish":["cam"],"root":"/pid/7"}"#).unwrap();
        assert_eq!(
            decision("/slug", grant, SystemTime::now())
                .unwrap()
                .permissions
                .root,
            "pid/7"
        );
        assert!(matches!(
            decision("/room", ServerGrant::default(), SystemTime::now()),
            Err(Refusal::Server)
        ));
    }
}
