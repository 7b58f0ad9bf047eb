//! Why a bench topology failed to build or to deliver.

use starling_model::ModelError;
use starling_proto::{PathError, StreamCode};

/// A failed setup or tick. Every variant is a bug or a regression in the layers under test, never
/// an expected outcome: the bench stops and the smoke test fails.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A session failed to start (handshake) or ended early.
    #[error("session: {0}")]
    Session(#[from] starling_session::Error),
    /// The model refused a write (a group or frame the publisher side could not add).
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// A path the bench built does not parse.
    #[error("path: {0}")]
    Path(#[from] PathError),
    /// A subscription was refused.
    #[error("subscribe: {0:?}")]
    Subscribe(StreamCode),
    /// An awaited event (announce, delivery) did not happen within the bench timeout.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// A broadcast that was announced had no route when the bench went to read it.
    #[error("an announced broadcast went away before it was read")]
    Unannounced,
    /// A reader received something out of order, of the wrong size, or a failed stream.
    #[error("a reader saw a gap, a wrong frame or a failed stream")]
    Delivery,
    /// The shape's parameters cannot be built (zero viewers, a mesh without nodes).
    #[error("bad shape: {0}")]
    Shape(&'static str),
}
