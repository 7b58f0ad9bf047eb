//! Starling's media model: origin tree, broadcasts, tracks, groups and frames, with the shared
//! group cache. Sans-IO: no runtime, no sockets; readers poll with a `Context` and are woken by
//! writers, so sessions, tests and benches drive it from any executor.

mod broadcast;
mod cache;
pub mod entropy;
mod error;
mod group;
mod origin;
mod route;
mod stats;
mod track;
mod waiters;

pub use broadcast::{BroadcastConsumer, BroadcastProducer, TrackRequest};
pub use cache::CacheBudget;
pub use error::ModelError;
pub use group::{Frame, GroupConsumer, GroupProducer, Unit};
pub use origin::{Announced, Interest, Origin, OriginLimits, RouteHandle};
pub use route::{fnv_key, Route};
pub use stats::{TrackStats, TrackSummary};
pub use track::{Demand, StartAt, TrackConsumer, TrackInfo, TrackProducer};

/// Per-track bounds: every buffer a peer can grow through the model has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_frame_bytes: usize,
    pub max_group_bytes: usize,
    pub max_group_frames: usize,
    /// Cached bytes per track; the latest group always stays, even alone over the budget.
    pub track_cache_bytes: usize,
    /// Cached groups per track.
    pub max_cached_groups: usize,
    /// Distinct track names a dynamic broadcast tracks at once.
    pub max_tracks_per_broadcast: usize,
    /// Longest track name a reader may ask for (MALFORMED_TRACK beyond it).
    pub max_track_name_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 32 << 20,
            max_group_bytes: 32 << 20,
            max_group_frames: 8192,
            track_cache_bytes: 64 << 20,
            max_cached_groups: 1024,
            max_tracks_per_broadcast: 4096,
            max_track_name_bytes: 1024,
        }
    }
}
