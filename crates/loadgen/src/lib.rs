//! Starling's load generator: whole relay processes driven over real sockets.
//!
//! Three shapes, each a module with its arguments and a `run` returning a [`Summary`]:
//! [`fanout`] (one publisher, N subscribers), [`burst`] (N clients connecting as fast as a
//! concurrency limit allows, over QUIC, WebSocket and HTTP) and [`dash`] (the stats
//! aggregator: every node's `.stats` broadcast followed by one client on relay 0), and
//! [`community`] (a chat community on a cold relay: members with history, live messages,
//! members-only channels and HTTP agents). Every
//! frame carries its sequence and scheduled send time ([`frame`]), so delivery latency is
//! measured from when the frame was due and loss from gaps in the sequence ([`loss`]).

pub mod access;
pub mod burst;
pub mod cdf;
pub mod churn;
pub mod clock;
pub mod community;
pub mod compare;
pub mod connect;
pub mod countdown;
pub mod dash;
pub mod error;
pub mod errors;
pub mod fanout;
pub mod frame;
pub mod histogram;
pub mod http_fetch;
pub mod loss;
pub mod proc;
pub mod progress;
pub mod publisher;
pub mod reader;
pub mod recorder;
pub mod report;
pub mod run;
pub mod summary;
pub mod usage;

pub use error::LoadError;
pub use run::RunOptions;
pub use summary::Summary;
