//! The replies every request shares and the session-level messages: REQUEST_OK and
//! REQUEST_ERROR (with draft 14's per-request forms), GOAWAY, MAX_REQUEST_ID and
//! REQUESTS_BLOCKED (docs/wire-ietf.md §4.5, §4.14, §4.15).

use crate::coding::{read_str, read_varint, write_str, write_varint, DecodeError, EncodeError};
use crate::limits::MAX_GOAWAY_URI;

use super::fields::{read_reply_id, write_reply_id};
use super::params::{key, ParamReader, ParamWriter};
use super::Draft;

/// REQUEST_OK (`0x07`, 15 on); on 14, PUBLISH_NAMESPACE_OK (`0x07`) and
/// SUBSCRIBE_NAMESPACE_OK (`0x12`), which carry the Request ID alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestOk {
    /// On the wire on 14-16.
    pub request_id: u64,
}

impl RequestOk {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_reply_id(r, draft)?;
        if !draft.has_inline_fields() {
            let mut params = ParamReader::new(r, draft)?;
            while let Some(k) = params.key(r)? {
                match k {
                    key::EXPIRES => {
                        params.varint(k, r)?;
                    }
                    _ => params.unknown(k, r)?,
                }
            }
        }
        Ok(RequestOk { request_id })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(w, self.request_id, draft)?;
        if !draft.has_inline_fields() {
            ParamWriter::new(draft).finish(w)?;
        }
        Ok(())
    }
}

/// REQUEST_ERROR (`0x05`, 15 on), and on 14 each request's own refusal with the same body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestError {
    /// On the wire on 14-16.
    pub request_id: u64,
    /// A code of the refused request's registry on this draft (see [`RefusalCode`]).
    pub code: u64,
    /// From 16: 0 means never retry, N wait N ms (moq-net always writes 0).
    pub retry_interval: u64,
    pub reason: String,
}

impl RequestError {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let request_id = read_reply_id(r, draft)?;
        let code = read_varint(r, draft)?;
        let retry_interval = if draft.has_retry_interval() {
            read_varint(r, draft)?
        } else {
            0
        };
        Ok(RequestError {
            request_id,
            code,
            retry_interval,
            reason: read_str(r, draft)?.to_owned(),
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        write_reply_id(w, self.request_id, draft)?;
        write_varint(w, self.code, draft)?;
        if draft.has_retry_interval() {
            write_varint(w, self.retry_interval, draft)?;
        }
        write_str(w, &self.reason, draft)
    }
}

/// What a request is refused for, in words; [`RefusalCode::code`] gives the number for a
/// draft and the kind of request (docs/wire-ietf.md §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalCode {
    InternalError,
    Unauthorized,
    Timeout,
    NotSupported,
    /// The track or broadcast is missing (a request *for* content).
    DoesNotExist,
    /// Not wanted (an *offer*: PUBLISH_NAMESPACE, PUBLISH).
    Uninterested,
    InvalidRange,
    InvalidJoiningRequestId,
    MalformedTrack,
    GoingAway,
}

/// Which request a refusal answers: draft 14 numbers refusals per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Subscribe,
    TrackStatus,
    Fetch,
    Publish,
    PublishNamespace,
    SubscribeNamespace,
}

impl RefusalCode {
    /// The code on `draft` for a refusal of `request`; a condition the draft does not
    /// register for it is INTERNAL_ERROR (0).
    pub fn code(self, draft: Draft, request: Refused) -> u64 {
        use RefusalCode::*;
        match self {
            InternalError => 0x0,
            Unauthorized => 0x1,
            Timeout => 0x2,
            NotSupported => 0x3,
            _ if draft.has_inline_fields() => match (self, request) {
                (DoesNotExist, Refused::Subscribe | Refused::TrackStatus | Refused::Fetch) => 0x4,
                (Uninterested, Refused::Publish | Refused::PublishNamespace) => 0x4,
                (InvalidRange, Refused::Fetch) => 0x5,
                (InvalidJoiningRequestId, Refused::Fetch) => 0x7,
                (MalformedTrack, Refused::Fetch) => 0x9,
                _ => 0x0,
            },
            DoesNotExist => 0x10,
            Uninterested => 0x20,
            InvalidRange => 0x11,
            InvalidJoiningRequestId if !draft.has_fill() => 0x32,
            MalformedTrack => 0x12,
            GoingAway if draft.has_cluster() => 0x6,
            _ => 0x0,
        }
    }
}

/// GOAWAY (`0x10`): a new session URI (empty: reconnect here), and from 17 a timeout in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Goaway {
    pub uri: String,
    /// Milliseconds until the sender closes; 0 names none (17 on).
    pub timeout: u64,
}

impl Goaway {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let uri = read_str(r, draft)?;
        if uri.len() > MAX_GOAWAY_URI {
            return Err(DecodeError::BoundsExceeded("GOAWAY URI"));
        }
        let timeout = if draft.has_cluster() {
            read_varint(r, draft)?
        } else {
            0
        };
        // Draft 18 adds a Request ID (moq-net writes 0 and tolerates its absence).
        if draft.has_goaway_request_id() && !r.is_empty() {
            read_varint(r, draft)?;
        }
        Ok(Goaway {
            uri: uri.to_owned(),
            timeout,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        if self.uri.len() > MAX_GOAWAY_URI {
            return Err(EncodeError::BoundsExceeded("GOAWAY URI"));
        }
        write_str(w, &self.uri, draft)?;
        if draft.has_cluster() {
            write_varint(w, self.timeout, draft)?;
        }
        if draft.has_goaway_request_id() {
            write_varint(w, 0, draft)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_codes() {
        use RefusalCode::*;
        assert_eq!(DoesNotExist.code(Draft::D14, Refused::Subscribe), 0x4);
        assert_eq!(DoesNotExist.code(Draft::D15, Refused::Subscribe), 0x10);
        assert_eq!(
            Uninterested.code(Draft::D14, Refused::PublishNamespace),
            0x4
        );
        assert_eq!(
            Uninterested.code(Draft::D14, Refused::SubscribeNamespace),
            0x0
        );
        assert_eq!(
            Uninterested.code(Draft::D22, Refused::PublishNamespace),
            0x20
        );
        assert_eq!(InvalidRange.code(Draft::D14, Refused::Fetch), 0x5);
        assert_eq!(
            InvalidJoiningRequestId.code(Draft::D19, Refused::Fetch),
            0x32
        );
        assert_eq!(
            InvalidJoiningRequestId.code(Draft::D20, Refused::Fetch),
            0x0
        );
        assert_eq!(GoingAway.code(Draft::D16, Refused::Subscribe), 0x0);
        assert_eq!(GoingAway.code(Draft::D17, Refused::Subscribe), 0x6);
        assert_eq!(NotSupported.code(Draft::D14, Refused::TrackStatus), 0x3);
    }

    /// docs/wire-ietf.md §10.5's bodies.
    #[test]
    fn bodies() {
        let error = RequestError {
            request_id: 0,
            code: 0x10,
            retry_interval: 0,
            reason: "not found".into(),
        };
        let mut out = Vec::new();
        error.encode_body(&mut out, Draft::D22).unwrap();
        assert_eq!(out, b"\x10\x00\x09not found");
        assert_eq!(
            RequestError::decode_body(&mut &out[..], Draft::D22),
            Ok(error)
        );

        let mut out = Vec::new();
        RequestOk::default()
            .encode_body(&mut out, Draft::D22)
            .unwrap();
        assert_eq!(out, [0]);

        for (draft, bytes) in [
            (Draft::D22, &[0, 0][..]),
            (Draft::D18, &[0, 0, 0]),
            (Draft::D16, &[0]),
        ] {
            let mut out = Vec::new();
            Goaway::default().encode_body(&mut out, draft).unwrap();
            assert_eq!(out, bytes, "{draft}");
        }
        // Draft 18's trailing Request ID may be missing.
        assert_eq!(
            Goaway::decode_body(&mut &[0, 5][..], Draft::D18)
                .unwrap()
                .timeout,
            5
        );
        let long = "x".repeat(MAX_GOAWAY_URI + 1);
        let mut out = Vec::new();
        write_str(&mut out, &long, Draft::D16).unwrap();
        assert!(Goaway::decode_body(&mut &out[..], Draft::D16).is_err());
    }
}
