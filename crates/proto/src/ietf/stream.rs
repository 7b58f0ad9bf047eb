//! What a uni stream is, by its first varint (docs/wire-ietf.md §3.1): a subgroup, a fetch
//! response, the peer's SETUP (17 on) or padding (18 on). Anything else ends the session.

use crate::coding::DecodeError;

use super::fetch_stream::FETCH_HEADER;
use super::setup::SETUP;
use super::subgroup::SubgroupFlags;
use super::Draft;

/// The PADDING stream type (18 on): read to its end and dropped.
pub const PADDING: u64 = 0x132B_3E28;

/// A uni stream's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniStream {
    Subgroup(SubgroupFlags),
    Fetch,
    Setup,
    Padding,
}

impl UniStream {
    pub fn classify(code: u64, draft: Draft) -> Result<UniStream, DecodeError> {
        if let Ok(flags) = SubgroupFlags::from_code(code, draft) {
            return Ok(UniStream::Subgroup(flags));
        }
        match code {
            FETCH_HEADER => Ok(UniStream::Fetch),
            SETUP if !draft.has_control_stream() => Ok(UniStream::Setup),
            PADDING if draft.has_first_object_bit() => Ok(UniStream::Padding),
            _ => Err(DecodeError::UnknownType(code)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(UniStream::classify(0x05, Draft::D14), Ok(UniStream::Fetch));
        assert_eq!(
            UniStream::classify(0x2F00, Draft::D17),
            Ok(UniStream::Setup)
        );
        assert!(UniStream::classify(0x2F00, Draft::D16).is_err());
        assert_eq!(
            UniStream::classify(PADDING, Draft::D18),
            Ok(UniStream::Padding)
        );
        assert!(UniStream::classify(PADDING, Draft::D17).is_err());
        assert!(matches!(
            UniStream::classify(0x59, Draft::D18),
            Ok(UniStream::Subgroup(_))
        ));
        assert!(UniStream::classify(0x59, Draft::D17).is_err());
        assert!(UniStream::classify(0x04, Draft::D22).is_err());
    }
}
