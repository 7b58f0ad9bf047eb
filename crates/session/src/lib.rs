//! One MoQ session over an abstract transport: every moq-lite version, and the IETF
//! moq-transport drafts 14 to 22 (`ietf`).
//!
//! A session has a publisher half, which answers the peer's announce interests, SUBSCRIBEs,
//! TRACKs and FETCHes from the origin we publish, and a subscriber half, which turns the peer's
//! announcements into routes in the origin we consume and pulls tracks on demand. The same code
//! serves a relay (both halves on one shared origin) and a client (one half each).

mod announcing;
mod budget;
mod cancellable;
mod clock;
mod config;
mod dispatch;
mod error;
#[cfg(feature = "faults")]
pub mod faults;
mod frames;
mod future_set;
mod gate;
mod handshake;
mod hearing;
mod ietf;
mod inflight;
mod ledger;
mod pool;
mod publisher;
mod pulls;
mod rank;
mod reader;
mod serve;
mod session;
mod shared;
mod stop;
mod subscriber;
mod violation;
mod writer;

pub use budget::{Account, BudgetStats, RecvBudget, WindowSink, STREAM_CREDIT_COST};
pub use clock::Clock;
pub use config::{random_hop, Access, SessionConfig, SessionLimits};
pub use error::Error;
pub use frames::WHOLE_FRAME_BYTES;
pub use handshake::{Accepting, ClientSetup};
pub use ledger::{Held, LedgerStats, StateAccount, StateEntry, StateLedger};
pub use pool::{PoolStats, ReceivePool, WindowRange, RECLAIM_EVERY};
pub use rank::Rank;
pub use reader::HEADERLESS_STREAM_COST;
pub use session::Session;
pub use shared::{PeerSetup, SessionStats};
pub use violation::Violation;
