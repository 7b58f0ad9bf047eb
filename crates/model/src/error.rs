//! Errors the model returns to its callers.

use starling_proto::StreamCode;

/// Why a model operation was refused. These are caller-side conditions; sessions map them to
/// stream codes with [`ModelError::stream_code`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("already ended")]
    Ended,
    #[error("aborted with {0:?}")]
    Aborted(StreamCode),
    #[error("frame of {0} bytes exceeds the frame limit")]
    FrameTooLarge(usize),
    #[error("group exceeds its frame or byte limit")]
    GroupTooLarge,
    #[error("group {0} already exists")]
    DuplicateGroup(u64),
    #[error("group {0} is older than what already left the cache")]
    Expired(u64),
    #[error("too many {0}")]
    TooMany(&'static str),
    #[error("a frame's payload does not match its declared size")]
    WrongSize,
    #[error("a frame is still arriving")]
    FrameIncomplete,
}

impl ModelError {
    pub fn stream_code(&self) -> StreamCode {
        match self {
            ModelError::Ended => StreamCode::Cancelled,
            ModelError::Aborted(code) => *code,
            ModelError::FrameTooLarge(_) => StreamCode::FrameTooLarge,
            ModelError::GroupTooLarge => StreamCode::GroupTooLarge,
            ModelError::DuplicateGroup(_) => StreamCode::Cancelled,
            ModelError::Expired(_) => StreamCode::Old,
            ModelError::TooMany(_) => StreamCode::Internal,
            ModelError::WrongSize | ModelError::FrameIncomplete => StreamCode::WrongSize,
        }
    }
}
