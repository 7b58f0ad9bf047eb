//! Why a run could not start or finish (failures during a run are counted, not returned).

use starling_proto::PathError;

use crate::access::AccessError;
use crate::connect::ConnectError;
use crate::http_fetch::FetchError;
use crate::publisher::PublishError;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("invalid arguments: {0}")]
    Config(String),
    #[error("broadcast path: {0}")]
    Path(#[from] PathError),
    #[error("publisher connection: {0}")]
    Connect(#[from] ConnectError),
    #[error("publishing: {0}")]
    Publish(#[from] PublishError),
    #[error("credentials: {0}")]
    Access(#[from] AccessError),
    #[error("HTTP client: {0}")]
    Http(#[from] FetchError),
}
