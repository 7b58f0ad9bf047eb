//! Read-only statistics of tracks and broadcasts, for status pages and metrics.
//!
//! Each value is a copy taken under one lock of the object it describes; reading statistics
//! never creates a reader, never wakes anyone and never changes what the cache keeps.

use starling_proto::TrackInfo;

/// One track's counters and cache occupancy at the moment it was read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackStats {
    /// Groups the track accepted since it was created (cumulative).
    pub groups: u64,
    /// Frames written into the track's groups (cumulative).
    pub frames: u64,
    /// Payload bytes written into the track's groups (cumulative).
    pub bytes: u64,
    /// Live readers (the broadcast's own bookkeeping handle does not count).
    pub consumers: usize,
    /// Payload bytes currently cached.
    pub cached_bytes: usize,
    /// Groups currently cached.
    pub cached_groups: usize,
    /// Highest group sequence seen.
    pub latest_sequence: Option<u64>,
    /// Highest sequence that left the cache; nothing at or below it is served again.
    pub expired_through: Option<u64>,
    /// Whether the track finished or failed.
    pub closed: bool,
}

/// One track of a broadcast, as listed by [`crate::BroadcastConsumer::tracks`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackSummary {
    pub name: String,
    /// The publisher's track info, once known.
    pub info: Option<TrackInfo>,
    pub stats: TrackStats,
}
