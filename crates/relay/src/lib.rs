//! The Starling relay: binds the QUIC/WebTransport listener and the HTTP listener on one port
//! number, admits each session onto the shared origin, and fans every track out from it.

mod admission;
mod config;
mod relay;

pub use admission::{Admission, Grant};
pub use config::{RelayConfig, TlsSource};
pub use relay::{Relay, RelayError};
