//! What each scenario adds to the common summary (`Summary::community`, `Summary::churn`):
//! plain data, written by the scenario and read by the report writers.

use serde::Serialize;

/// What a community run adds to the common summary.
#[derive(Clone, Debug, Serialize)]
pub struct CommunityReport {
    pub members: usize,
    pub agents: usize,
    pub channels: usize,
    /// Subscriptions owed history, those that received it in full, and messages older
    /// than the window that came too.
    pub history_owed: u64,
    pub history_complete: u64,
    pub history_older: u64,
    /// Members removed mid-run, those whose session the relay closed, and those that dialed
    /// after the removal and were refused.
    pub removed: usize,
    pub removed_closed: u64,
    pub removed_refused: u64,
    /// Clean refusals by the relay's admission (QUIC CONNECTION_REFUSED, WebSocket 503),
    /// each retried after the wait the relay asked for with jitter; members admitted after
    /// at least one; members still refused when the run ended (not errors: the relay said
    /// no cleanly).
    pub refusals: u64,
    pub admitted_after_refusal: u64,
    pub never_admitted: u64,
    /// Agents' API requests refused cleanly (503 with Retry-After), each followed by the
    /// wait the relay asked for, with jitter.
    pub http_refusals: u64,
    /// From the first member's dial to the last member's admission, in seconds.
    pub admission_span_secs: Option<f64>,
    /// Relay CPU over the burst and the live part, in cores: mean, and the busiest second.
    pub relay_cores_mean: Option<f64>,
    pub relay_cores_peak: Option<f64>,
    /// Relay RSS growth from before the burst to its sampled peak, per client.
    pub relay_rss_per_client_bytes: Option<u64>,
    /// The load generator's own CPU over the same window, in cores: mean, busiest second.
    pub load_cores_mean: Option<f64>,
    pub load_cores_peak: Option<f64>,
    /// Access decisions per second over the window, by `starling_auth_*` series.
    pub access_per_second: std::collections::BTreeMap<String, f64>,
}

/// What a churn run carried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChurnReport {
    /// Broadcasts whose every track carried every group (those cut short by the run's end
    /// are not counted, though their groups are).
    pub broadcasts: u64,
    /// Their tracks.
    pub tracks: u64,
    pub groups_per_second: f64,
}
