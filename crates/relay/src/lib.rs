//! The Starling relay: binds the QUIC/WebTransport listener and the HTTP listener on one port
//! number, admits each session onto the shared origin, and fans every track out from it.

mod auth;
pub mod cluster;
mod config;
mod host;
mod http;
mod incoming;
mod metrics;
mod registry;
mod relay;
mod sessions;

pub use auth::{
    parse_patterns, Admitted, AuthConfigError, AuthStats, AuthUrlError, Authority, ByteTotals,
    Decision, Grant, KeySource, Lease, LeaseEnd, Moment, Refusal, SessionFacts, TransportKind,
};
pub use cluster::ClusterConfig;
pub use config::{
    parse_size, AuthConfig, HttpConfig, MemoryShare, MemoryShareError, RelayConfig, TlsSource,
    STATE_ENTRY_BYTES,
};
pub use host::memory_limit;
pub use http::{is_websocket_upgrade, HttpApi, HttpError};
pub use metrics::{internal_router, serve_internal, Rejection, RelayMetrics};
pub use registry::{
    LiveSession, Registered, SessionEntry, SessionFuture, SessionInfo, SessionRegistry,
    SessionTransport,
};
pub use relay::{Incoming, Relay, RelayCore, RelayError};
