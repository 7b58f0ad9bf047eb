//! What an admitted session holds: the decision that admitted it, kept live.
//!
//! [`Lease::ended`] resolves when the session may no longer run: its grant expired, a
//! re-check refused the credential, or a re-check narrowed the grant below what the
//! session was admitted with (a live scope is not resized in place). Closing the lease
//! reports the session's end to the auth server when one decides.

use std::sync::Arc;
use std::time::{Instant as WallInstant, SystemTime};

use starling_auth::contract::{ByteTotals, SessionEvent, SessionRequest};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::auth::cache::{DecisionCache, Entry};
use crate::auth::server::EndReporter;
use crate::auth::Decision;

/// Why a lease stopped covering its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseEnd {
    /// The grant's expiry passed.
    Expired,
    /// A re-check refused the credential.
    Revoked(String),
    /// A re-check granted less than the session was admitted with.
    Narrowed,
}

impl std::fmt::Display for LeaseEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseEnd::Expired => f.write_str("expired"),
            LeaseEnd::Revoked(why) => write!(f, "refused: {why}"),
            LeaseEnd::Narrowed => f.write_str("grant narrowed"),
        }
    }
}

struct Held {
    cache: Arc<DecisionCache>,
    entry: Arc<Entry>,
    watcher: watch::Receiver<()>,
}

struct Report {
    reporter: EndReporter,
    request: SessionRequest,
    started: WallInstant,
}

/// A session's hold on its admission.
pub struct Lease {
    held: Option<Held>,
    admitted: Option<Arc<Decision>>,
    expires: Option<Instant>,
    /// Boxed: most sessions have none, and the lease lives as long as its session.
    report: Option<Box<Report>>,
}

/// `expires` (read against `clock`) as an instant on Tokio's clock; one already past is now.
fn deadline(expires: Option<SystemTime>, clock: starling_session::Clock) -> Option<Instant> {
    let left = expires?.duration_since(clock.wall()).unwrap_or_default();
    Instant::now().checked_add(left)
}

impl Lease {
    /// A lease nothing re-checks and nothing ends (an open relay).
    pub(crate) fn open() -> Self {
        Lease {
            held: None,
            admitted: None,
            expires: None,
            report: None,
        }
    }

    /// A lease on a decision nothing re-checks, for a request that ends as it is admitted.
    pub(crate) fn unheld(report: Option<(EndReporter, SessionRequest)>) -> Self {
        Lease {
            held: None,
            admitted: None,
            expires: None,
            report: report.map(|(reporter, request)| {
                Box::new(Report {
                    reporter,
                    request,
                    started: WallInstant::now(),
                })
            }),
        }
    }

    /// A lease on a cached decision, counted as a holder of `entry` until dropped.
    pub(crate) fn held(
        cache: Arc<DecisionCache>,
        entry: Arc<Entry>,
        admitted: Arc<Decision>,
        report: Option<(EndReporter, SessionRequest)>,
    ) -> Self {
        let watcher = entry.subscribe();
        cache.hold(&entry);
        Lease {
            expires: deadline(admitted.expires, cache.clock),
            held: Some(Held {
                cache,
                entry,
                watcher,
            }),
            admitted: Some(admitted),
            report: report.map(|(reporter, request)| {
                Box::new(Report {
                    reporter,
                    request,
                    started: WallInstant::now(),
                })
            }),
        }
    }

    /// Whether anything can end the lease (an expiry, or a decision re-checked): when not,
    /// [`Lease::ended`] never resolves.
    pub fn can_end(&self) -> bool {
        self.expires.is_some() || self.held.is_some()
    }

    /// Wait until the lease no longer covers the session.
    pub async fn ended(&mut self) -> LeaseEnd {
        loop {
            let expires = self.expires;
            let expire = async move {
                match expires {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let held = self.held.as_mut();
            let changed = async move {
                match held {
                    // The entry (and its sender) lives as long as this lease holds it.
                    Some(held) => match held.watcher.changed().await {
                        Ok(()) => {
                            held.watcher.mark_unchanged();
                            Some(held.entry.verdict())
                        }
                        Err(_) => None,
                    },
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = expire => return LeaseEnd::Expired,
                verdict = changed => {
                    let admitted = self.admitted.as_ref().expect("held leases are admitted");
                    match verdict {
                        None => return LeaseEnd::Revoked("the decision was dropped".into()),
                        Some(Some(Err(refusal))) => return LeaseEnd::Revoked(refusal.to_string()),
                        Some(Some(Ok(fresh))) if !Arc::ptr_eq(&fresh, admitted) => {
                            if !admitted.covered_by(&fresh) {
                                return LeaseEnd::Narrowed;
                            }
                            let clock = self.held.as_ref().map(|held| held.cache.clock);
                            self.expires = deadline(fresh.expires, clock.unwrap_or_default());
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }

    /// End the lease: report why the session closed and what it moved (once; later closes
    /// and the drop report nothing more).
    pub fn close(&mut self, reason: &str, bytes: ByteTotals) {
        self.report_end(reason, bytes);
    }

    fn report_end(&mut self, reason: &str, bytes: ByteTotals) {
        if let Some(report) = self.report.take() {
            let request = report.request.with_event(SessionEvent::End {
                reason: reason.to_string(),
                duration: report.started.elapsed(),
                bytes,
            });
            report.reporter.report(request);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.report_end("dropped", ByteTotals::default());
        if let Some(held) = &self.held {
            held.cache.release(&held.entry);
        }
    }
}
