//! Who may do what: the relay's admission authority.
//!
//! A session presents its facts (transport, dialed path, raw query with `jwt=`, SETUP role);
//! the [`Authority`] answers with the [`Grant`] it runs under and a [`Lease`] that keeps the
//! grant live. With no auth option the relay is open. Otherwise a decider (local keys and
//! public patterns, or an external auth server) decides each credential once per maximum
//! age through the shared [`cache`], and live sessions are re-checked on the same bound.

mod cache;
mod config;
mod decision;
mod keys;
mod lease;
mod local;
mod server;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use starling_auth::{AuthError, Pattern, Patterns, Permissions, Segment};
use starling_proto::{Path, Role};

use cache::DecisionCache;
use server::{AuthServer, EndReporter, ServerCounters};

pub use config::AuthConfig;
pub use decision::{Decision, Moment, Refusal, SessionFacts};
pub use keys::KeySource;
pub use lease::{Lease, LeaseEnd};
pub use server::AuthUrlError;
pub use starling_auth::contract::{ByteTotals, TransportKind};

/// What one session may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Wire paths are relative to this root.
    pub root: Path,
    pub publish: bool,
    pub subscribe: bool,
    /// The scoped permissions when authentication is configured; `None` on an open relay.
    pub permissions: Option<Permissions>,
    /// Another relay of the cluster (an auth server's `"peer": true`).
    pub peer: bool,
}

/// What an admission is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// A session: its lease holds the decision and is re-checked while it runs.
    Session,
    /// A one-shot request, ended as soon as it is admitted.
    Once,
    /// A credential checked ahead of its session, which is admitted on its own later.
    Ahead,
}

/// An admitted session's grant and the lease that keeps it.
pub struct Admitted {
    pub grant: Grant,
    pub lease: Lease,
}

/// Auth options that cannot work together or at all.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    #[error("public pattern {0:?} has no wildcard; use a token to grant a literal path")]
    LiteralPublic(String),
    #[error(
        "--auth-url decides every session; it cannot be combined with keys or public patterns"
    )]
    UrlWithLocalRules,
    #[error("auth url: {0}")]
    Url(#[from] AuthUrlError),
    #[error("auth keys: {0}")]
    Keys(#[from] AuthError),
    #[error("the auth decision max age must be positive")]
    ZeroMaxAge,
}

/// Whether `pattern` holds a wildcard (`*`, `**`, or a partial `a*b`) in some segment.
fn has_wildcard(pattern: &Pattern) -> bool {
    pattern
        .segments()
        .iter()
        .any(|segment| !matches!(segment, Segment::Literal(_)))
}

fn has_local_rules(config: &AuthConfig) -> bool {
    config.keys.is_some()
        || !config.public_publish.is_empty()
        || !config.public_subscribe.is_empty()
}

/// Check `config` without starting anything: public patterns hold wildcards, an auth URL
/// stands alone and is usable, keys read, the max age is positive.
pub(crate) fn validate(config: &AuthConfig) -> Result<(), AuthConfigError> {
    for pattern in config
        .public_publish
        .iter()
        .chain(config.public_subscribe.iter())
    {
        if !has_wildcard(pattern) {
            return Err(AuthConfigError::LiteralPublic(pattern.to_string()));
        }
    }
    if config.max_age.is_zero() {
        return Err(AuthConfigError::ZeroMaxAge);
    }
    if let Some(url) = &config.url {
        if has_local_rules(config) {
            return Err(AuthConfigError::UrlWithLocalRules);
        }
        AuthServer::new(url.clone())?;
    }
    if let Some(keys) = &config.keys {
        keys.check()?;
    }
    Ok(())
}

/// Counts for the metrics scrape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthStats {
    /// `local` or `server`; empty on an open relay.
    pub decider: &'static str,
    pub hits: u64,
    pub misses_cold: u64,
    pub misses_stale: u64,
    pub coalesced: u64,
    pub evictions: u64,
    pub revalidations: u64,
    pub entries: u64,
    /// Requests made to the auth server: connect, revalidate, end.
    pub server_connect: u64,
    pub server_revalidate: u64,
    pub server_end: u64,
    pub server_end_dropped: u64,
    pub server_refused: u64,
    pub server_unavailable: u64,
}

enum Mode {
    Open,
    Decided {
        cache: Arc<DecisionCache>,
        server: Option<(Arc<ServerCounters>, EndReporter)>,
    },
}

/// The admission authority; cheap to clone.
#[derive(Clone)]
pub struct Authority {
    mode: Arc<Mode>,
    node: Arc<str>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("enabled", &self.is_enabled())
            .field("node", &self.node)
            .finish()
    }
}

impl Authority {
    /// The authority `config` describes. Starts background tasks (the `end` reporter), so
    /// call it inside a Tokio runtime.
    pub fn new(config: &AuthConfig) -> Result<Self, AuthConfigError> {
        validate(config)?;
        let local_rules = has_local_rules(config);
        let node: Arc<str> = Arc::from(config.node.as_str());
        let mode = match &config.url {
            Some(_) if local_rules => return Err(AuthConfigError::UrlWithLocalRules),
            Some(url) => {
                let server = AuthServer::new(url.clone())?.with_clock(config.clock);
                let counters = server.counters().clone();
                let reporter = server.end_reporter();
                Mode::Decided {
                    cache: DecisionCache::new(
                        Arc::new(server),
                        config.max_age,
                        config.cache_capacity,
                        config.clock,
                    ),
                    server: Some((counters, reporter)),
                }
            }
            None if local_rules => {
                let policy = local::LocalPolicy::new(
                    config.keys.clone(),
                    &config.public_publish,
                    &config.public_subscribe,
                    config.cache_capacity,
                )
                .with_clock(config.clock);
                Mode::Decided {
                    cache: DecisionCache::new(
                        Arc::new(policy),
                        config.max_age,
                        config.cache_capacity,
                        config.clock,
                    ),
                    server: None,
                }
            }
            None => Mode::Open,
        };
        Ok(Authority {
            mode: Arc::new(mode),
            node,
        })
    }

    /// Whether any authentication is configured (otherwise the relay is open).
    pub fn is_enabled(&self) -> bool {
        !matches!(*self.mode, Mode::Open)
    }

    /// Admit a session: its grant, narrowed to its declared role, and the lease it holds.
    pub async fn admit(&self, facts: SessionFacts) -> Result<Admitted, Arc<Refusal>> {
        self.admit_for(facts, Use::Session).await
    }

    /// Admit a one-shot request (an HTTP API call) and end it at once.
    pub async fn check(&self, facts: SessionFacts) -> Result<Grant, Arc<Refusal>> {
        let mut admitted = self.admit_for(facts, Use::Once).await?;
        admitted.lease.close("done", ByteTotals::default());
        Ok(admitted.grant)
    }

    /// Decide a credential ahead of its session (a WebSocket upgrade, checked before the
    /// SETUP that opens the session): no session exists yet, so no end is reported.
    pub async fn precheck(&self, facts: SessionFacts) -> Result<Grant, Arc<Refusal>> {
        Ok(self.admit_for(facts, Use::Ahead).await?.grant)
    }

    async fn admit_for(&self, facts: SessionFacts, usage: Use) -> Result<Admitted, Arc<Refusal>> {
        let role = facts.role;
        let (mut grant, lease) = match &*self.mode {
            Mode::Open => {
                if facts.jwt().is_some() {
                    return Err(Arc::new(Refusal::UnexpectedToken));
                }
                let root = Path::new(&facts.path).map_err(|_| Arc::new(Refusal::BadPath))?;
                let grant = Grant {
                    root,
                    publish: true,
                    subscribe: true,
                    permissions: None,
                    peer: false,
                };
                (grant, Lease::open())
            }
            Mode::Decided { cache, server } => {
                let request = facts.request(&self.node);
                let (entry, verdict) = cache.lookup(&facts, &request).await;
                let decision = verdict?;
                if decision.expires.is_some_and(|at| at <= cache.clock.wall()) {
                    return Err(Arc::new(Refusal::Token(AuthError::Expired)));
                }
                let mut grant = scoped(&decision.permissions)?;
                grant.peer = decision.peer;
                let report = server
                    .as_ref()
                    .filter(|_| usage != Use::Ahead)
                    .map(|(_, reporter)| (reporter.clone(), request));
                let lease = match usage {
                    Use::Session => Lease::held(cache.clone(), entry, decision, report),
                    // Nothing runs on for a re-check to stop.
                    Use::Once | Use::Ahead => Lease::unheld(report),
                };
                (grant, lease)
            }
        };
        match role {
            Some(Role::Publisher) if !grant.publish => {
                return Err(Arc::new(Refusal::Role("publish")))
            }
            Some(Role::Subscriber) if !grant.subscribe => {
                return Err(Arc::new(Refusal::Role("subscribe")))
            }
            Some(Role::Publisher) => grant.subscribe = false,
            Some(Role::Subscriber) => grant.publish = false,
            None => {}
        }
        Ok(Admitted { grant, lease })
    }

    /// The counts behind the auth metrics.
    pub fn stats(&self) -> AuthStats {
        let Mode::Decided { cache, server } = &*self.mode else {
            return AuthStats::default();
        };
        let c = cache.counters();
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        let mut stats = AuthStats {
            decider: cache.decider_name(),
            hits: load(&c.hits),
            misses_cold: load(&c.misses_cold),
            misses_stale: load(&c.misses_stale),
            coalesced: load(&c.coalesced),
            evictions: load(&c.evictions),
            revalidations: load(&c.revalidations),
            entries: cache.len() as u64,
            ..Default::default()
        };
        if let Some((s, _)) = server {
            stats.server_connect = load(&s.connect);
            stats.server_revalidate = load(&s.revalidate);
            stats.server_end = load(&s.end);
            stats.server_end_dropped = load(&s.end_dropped);
            stats.server_refused = load(&s.refused);
            stats.server_unavailable = load(&s.unavailable);
        }
        stats
    }
}

/// The session-level grant for scoped permissions: a direction is granted when any
/// pattern allows it; the session then checks every wire path against the patterns.
fn scoped(permissions: &Permissions) -> Result<Grant, Arc<Refusal>> {
    let root = Path::new(permissions.root()).map_err(|_| Arc::new(Refusal::BadPath))?;
    let publish = !permissions.publish.is_empty();
    let subscribe = !permissions.subscribe.is_empty();
    if !publish && !subscribe {
        return Err(Arc::new(Refusal::Narrow(permissions.root.clone())));
    }
    Ok(Grant {
        root,
        publish,
        subscribe,
        permissions: Some(permissions.clone()),
        peer: false,
    })
}

/// Patterns from strings, as given on the command line.
pub fn parse_patterns<'a>(
    patterns: impl IntoIterator<Item = &'a str>,
) -> Result<Patterns, AuthError> {
    let mut out = Patterns::new();
    for text in patterns {
        out.insert(text.parse::<Pattern>()?);
    }
    Ok(out)
}

/// A grant's permissions as the session's per-path access check (wire paths are relative to
/// the session root, as the permissions' patterns are).
#[derive(Debug)]
pub struct Scoped(pub Permissions);

impl starling_session::Access for Scoped {
    fn can_publish(&self, path: &Path) -> bool {
        self.0.can_publish(path.as_str())
    }

    fn can_subscribe(&self, path: &Path) -> bool {
        self.0.can_subscribe(path.as_str())
    }

    fn can_subscribe_under(&self, prefix: &Path) -> bool {
        self.0.can_subscribe_under(prefix.as_str())
    }
}

/// The default maximum age of a cached decision.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(1);

/// The default number of credentials whose decisions are kept.
pub const DEFAULT_CACHE_CAPACITY: usize = 16_384;

#[cfg(test)]
mod tests {
    use super::*;

    fn public(publish: &[&str], subscribe: &[&str]) -> AuthConfig {
        AuthConfig {
            public_publish: parse_patterns(publish.iter().copied()).unwrap(),
            public_subscribe: parse_patterns(subscribe.iter().copied()).unwrap(),
            ..AuthConfig::default()
        }
    }

    fn facts(target: &str, role: Option<Role>) -> SessionFacts {
        let mut facts = SessionFacts::new(TransportKind::Quic, target);
        facts.role = role;
        facts
    }

    #[tokio::test]
    async fn an_open_relay_admits_everything_but_tokens() {
        let authority = Authority::new(&AuthConfig::default()).unwrap();
        assert!(!authority.is_enabled());
        let grant = authority.check(facts("/room", None)).await.unwrap();
        assert!(grant.publish && grant.subscribe);
        assert_eq!(grant.root.as_str(), "room");
        assert!(matches!(
            *authority
                .check(facts("/room?jwt=abc", None))
                .await
                .unwrap_err(),
            Refusal::UnexpectedToken
        ));
    }

    #[tokio::test]
    async fn configuration_errors() {
        assert!(Authority::new(&public(&["room"], &[])).is_err());
        assert!(Authority::new(&public(&[], &["room/*"])).is_ok());
        let mut config = public(&["a/**"], &[]);
        config.url = Some("http://127.0.0.1:1/".parse().unwrap());
        assert!(matches!(
            Authority::new(&config),
            Err(AuthConfigError::UrlWithLocalRules)
        ));
        let config = AuthConfig {
            max_age: Duration::ZERO,
            ..public(&["a/**"], &[])
        };
        assert!(matches!(
            Authority::new(&config),
            Err(AuthConfigError::ZeroMaxAge)
        ));
    }

    #[tokio::test]
    async fn roles_narrow_public_grants() {
        let authority = Authority::new(&public(&[], &["demo/**"])).unwrap();
        let root = authority.check(facts("/", None)).await.unwrap();
        assert!(root.subscribe && !root.publish);
        let demo = authority
            .check(facts("/demo", Some(Role::Subscriber)))
            .await
            .unwrap();
        assert!(demo.subscribe && !demo.publish);
        let again = authority
            .check(facts("/demo", Some(Role::Subscriber)))
            .await
            .unwrap();
        assert_eq!(again, demo);
        assert!(authority.check(facts("/other", None)).await.is_err());
        assert!(authority
            .check(facts("/demo", Some(Role::Publisher)))
            .await
            .is_err());
        // The repeated lookup was answered from the cache.
        let stats = authority.stats();
        assert_eq!(stats.decider, "local");
        assert_eq!((stats.hits, stats.misses_cold), (1, 4), "{stats:?}");
    }

    #[tokio::test]
    async fn one_shot_and_ahead_checks_leave_no_task_behind() {
        let authority = Authority::new(&public(&[], &["demo/**"])).unwrap();
        let tasks = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        for n in 0..50 {
            authority
                .check(facts(&format!("/demo/{n}"), None))
                .await
                .unwrap();
            authority
                .precheck(facts(&format!("/demo/p{n}"), None))
                .await
                .unwrap();
        }
        assert_eq!(
            tasks(),
            0,
            "a local decision or a re-check ran on as a task"
        );
        // A session's lease holds its decision (one refresher, one sweeper) until dropped.
        let admitted = authority.admit(facts("/demo", None)).await.unwrap();
        assert_eq!(tasks(), 2);
        drop(admitted);
    }
}
