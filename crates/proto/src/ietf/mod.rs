//! The IETF moq-transport drafts 14 to 22, as moq-dev's moq-net 0.3.18 speaks them
//! (docs/wire-ietf.md): the draft table, SETUP, the control messages, and the data streams.
//!
//! Sans-IO like the rest of the crate: the drafts share the field primitives of
//! [`crate::coding`] (a [`Draft`] fixes the varint form) and the framing of
//! [`crate::framing`] (a control message's length is two raw bytes).

pub mod control;
mod cursor;
pub mod datagram;
pub mod draft;
pub mod fetch;
pub mod fetch_stream;
pub mod fields;
pub mod filter;
pub mod kvp;
pub mod namespace;
pub mod params;
pub mod properties;
pub mod publish;
pub mod reply;
pub mod setup;
pub mod stream;
pub mod subgroup;
pub mod subscribe;

pub use control::Control;
pub use draft::Draft;
pub use filter::{EndLocation, Fill, Filter, Location};
pub use setup::{AuthToken, ClientSetup, ServerSetup, Setup, SetupOptions, TokenError};
