//! The auth decision cache's and the auth server's series (`starling_auth_*`), registered only
//! when the relay authenticates.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::auth::AuthStats;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LookupLabels {
    result: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

/// The auth decision cache and auth-server requests; nothing when the relay is open.
pub(super) fn register(registry: &mut Registry, auth: &AuthStats) {
    if auth.decider.is_empty() {
        return;
    }
    let lookups: Family<LookupLabels, Counter> = Family::default();
    for (result, reason, count) in [
        ("hit", "fresh", auth.hits),
        ("hit", "coalesced", auth.coalesced),
        ("miss", "cold", auth.misses_cold),
        ("miss", "stale", auth.misses_stale),
    ] {
        lookups
            .get_or_create(&LookupLabels {
                result: result.into(),
                reason: reason.into(),
            })
            .inc_by(count);
    }
    registry.register(
        "auth_cache_lookups",
        "Access decision lookups: hits (a fresh decision, or one already being made) and misses (none yet, or older than the max age)",
        lookups,
    );
    let counter = |value: u64| {
        let counter: Counter = Counter::default();
        counter.inc_by(value);
        counter
    };
    registry.register(
        "auth_cache_evictions",
        "Credentials forgotten because the decision cache was full",
        counter(auth.evictions),
    );
    registry.register(
        "auth_revalidations",
        "Decisions re-made for credentials live sessions hold",
        counter(auth.revalidations),
    );
    let entries: Gauge = Gauge::default();
    entries.set(auth.entries as i64);
    registry.register(
        "auth_cache_entries",
        "Credentials with a cached decision",
        entries,
    );
    if auth.decider != "server" {
        return;
    }
    let requests: Family<RequestLabels, Counter> = Family::default();
    for (event, count) in [
        ("connect", auth.server_connect),
        ("revalidate", auth.server_revalidate),
        ("end", auth.server_end),
    ] {
        requests
            .get_or_create(&RequestLabels {
                event: event.into(),
            })
            .inc_by(count);
    }
    registry.register(
        "auth_server_requests",
        "Requests made to the auth server, by event",
        requests,
    );
    let failures: Family<OutcomeLabels, Counter> = Family::default();
    for (outcome, count) in [
        ("refused", auth.server_refused),
        ("unavailable", auth.server_unavailable),
        ("end_dropped", auth.server_end_dropped),
    ] {
        failures
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc_by(count);
    }
    registry.register(
        "auth_server_failures",
        "Auth-server answers that refused, outages, and end reports dropped because the queue was full",
        failures,
    );
}
