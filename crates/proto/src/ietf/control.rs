//! Every control message of drafts 14 to 22 as one enum, with each draft's type codes
//! (docs/wire-ietf.md §4.1), and the framing `Type(i) | Length(16) | body`.
//!
//! Whether a message may arrive on a given stream (the shared control stream of 14-16, a
//! request stream, the SETUP stream) is the session's business; this module knows only
//! which types a draft defines, and refuses any other as soon as its type has arrived.

use bytes::{Buf, BytesMut};

use crate::coding::{finish, read_varint, write_varint, DecodeError, EncodeError};
use crate::framing::{peek_frame, write_frame};
use crate::path::Path;

use super::fetch::{Fetch, FetchOk};
use super::fields::{read_name, read_namespace, write_name, write_namespace};
use super::namespace::{
    Namespace, NamespaceDone, PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone,
    SubscribeNamespace,
};
use super::publish::{Publish, PublishOk};
use super::reply::{Goaway, Refused, RequestError, RequestOk};
use super::setup::{ClientSetup, ServerSetup, Setup, CLIENT_SETUP, SERVER_SETUP, SETUP};
use super::subscribe::{PublishDone, RequestUpdate, Subscribe, SubscribeOk};
use super::Draft;

/// A control message body is at most this long (its length is 16 bits).
pub const MAX_BODY: usize = u16::MAX as usize;

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    ClientSetup(ClientSetup),
    ServerSetup(ServerSetup),
    Setup(Setup),
    Subscribe(Subscribe),
    SubscribeOk(SubscribeOk),
    RequestUpdate(RequestUpdate),
    /// UNSUBSCRIBE (14-16): the subscription's request id.
    Unsubscribe(u64),
    PublishDone(PublishDone),
    /// TRACK_STATUS, SUBSCRIBE's body.
    TrackStatus(Subscribe),
    /// REQUEST_OK; on 14 PUBLISH_NAMESPACE_OK or SUBSCRIBE_NAMESPACE_OK, which `answers`
    /// names (`None` when read on 15 and later, where one message serves every request).
    RequestOk {
        answers: Option<Refused>,
        ok: RequestOk,
    },
    /// REQUEST_ERROR; on 14 the refused request's own error message.
    RequestError {
        answers: Option<Refused>,
        error: RequestError,
    },
    PublishNamespace(PublishNamespace),
    PublishNamespaceDone(PublishNamespaceDone),
    PublishNamespaceCancel(PublishNamespaceCancel),
    SubscribeNamespace(SubscribeNamespace),
    /// UNSUBSCRIBE_NAMESPACE (14, 15): the request id.
    UnsubscribeNamespace(u64),
    Namespace(Namespace),
    NamespaceDone(NamespaceDone),
    Fetch(Fetch),
    FetchOk(FetchOk),
    /// FETCH_CANCEL (14-16): the request id.
    FetchCancel(u64),
    Publish(Publish),
    PublishOk(PublishOk),
    /// PUBLISH_BLOCKED (17 only).
    PublishBlocked {
        suffix: Path,
        track: String,
    },
    /// SUBSCRIBE_TRACKS (18 on), refused unread.
    SubscribeTracks,
    Goaway(Goaway),
    /// MAX_REQUEST_ID (14-16).
    MaxRequestId(u64),
    /// REQUESTS_BLOCKED (14-16); moq-net ends the session on receiving one.
    RequestsBlocked(u64),
}

/// Type codes.
pub mod kind {
    pub const REQUEST_UPDATE: u64 = 0x02;
    pub const SUBSCRIBE: u64 = 0x03;
    pub const SUBSCRIBE_OK: u64 = 0x04;
    pub const REQUEST_ERROR: u64 = 0x05;
    pub const PUBLISH_NAMESPACE: u64 = 0x06;
    pub const REQUEST_OK: u64 = 0x07;
    /// PUBLISH_NAMESPACE_ERROR on 14, NAMESPACE from 16.
    pub const NAMESPACE: u64 = 0x08;
    pub const PUBLISH_NAMESPACE_DONE: u64 = 0x09;
    pub const UNSUBSCRIBE: u64 = 0x0A;
    pub const PUBLISH_DONE: u64 = 0x0B;
    pub const PUBLISH_NAMESPACE_CANCEL: u64 = 0x0C;
    pub const TRACK_STATUS: u64 = 0x0D;
    pub const NAMESPACE_DONE: u64 = 0x0E;
    /// TRACK_STATUS_ERROR on 14, PUBLISH_BLOCKED on 17.
    pub const PUBLISH_BLOCKED: u64 = 0x0F;
    pub const GOAWAY: u64 = 0x10;
    pub const SUBSCRIBE_NAMESPACE_OLD: u64 = 0x11;
    pub const SUBSCRIBE_NAMESPACE_OK: u64 = 0x12;
    pub const SUBSCRIBE_NAMESPACE_ERROR: u64 = 0x13;
    pub const UNSUBSCRIBE_NAMESPACE: u64 = 0x14;
    pub const MAX_REQUEST_ID: u64 = 0x15;
    pub const FETCH: u64 = 0x16;
    pub const FETCH_CANCEL: u64 = 0x17;
    pub const FETCH_OK: u64 = 0x18;
    pub const FETCH_ERROR: u64 = 0x19;
    pub const REQUESTS_BLOCKED: u64 = 0x1A;
    pub const PUBLISH: u64 = 0x1D;
    pub const PUBLISH_OK: u64 = 0x1E;
    pub const PUBLISH_ERROR: u64 = 0x1F;
    pub const SUBSCRIBE_NAMESPACE: u64 = 0x50;
    pub const SUBSCRIBE_TRACKS: u64 = 0x51;
}

/// Whether `draft` defines message type `code`.
pub fn defined(code: u64, draft: Draft) -> bool {
    use kind::*;
    let d14 = draft.has_inline_fields();
    let control_stream = draft.has_control_stream();
    match code {
        REQUEST_UPDATE | SUBSCRIBE | SUBSCRIBE_OK | REQUEST_ERROR | PUBLISH_NAMESPACE
        | REQUEST_OK | PUBLISH_DONE | TRACK_STATUS | GOAWAY | FETCH | FETCH_OK | PUBLISH
        | PUBLISH_OK => true,
        NAMESPACE => d14 || draft.has_namespace_messages(),
        PUBLISH_NAMESPACE_DONE
        | UNSUBSCRIBE
        | PUBLISH_NAMESPACE_CANCEL
        | MAX_REQUEST_ID
        | FETCH_CANCEL
        | REQUESTS_BLOCKED => control_stream,
        NAMESPACE_DONE => draft.has_namespace_messages(),
        PUBLISH_BLOCKED => d14 || draft.has_publish_blocked(),
        SUBSCRIBE_NAMESPACE_OLD => !draft.has_first_object_bit(),
        SUBSCRIBE_NAMESPACE_OK | SUBSCRIBE_NAMESPACE_ERROR | FETCH_ERROR | PUBLISH_ERROR => d14,
        UNSUBSCRIBE_NAMESPACE => draft.has_unsubscribe_namespace(),
        SUBSCRIBE_NAMESPACE | SUBSCRIBE_TRACKS => draft.has_first_object_bit(),
        CLIENT_SETUP | SERVER_SETUP => control_stream,
        SETUP => !control_stream,
        _ => false,
    }
}

fn check(code: u64, draft: Draft) -> Result<(), DecodeError> {
    if defined(code, draft) {
        Ok(())
    } else {
        Err(DecodeError::UnknownType(code))
    }
}

/// Draft 14's error message types, by the request they refuse.
fn error_kind(answers: Refused) -> u64 {
    match answers {
        Refused::Subscribe => kind::REQUEST_ERROR,
        Refused::TrackStatus => kind::PUBLISH_BLOCKED,
        Refused::Fetch => kind::FETCH_ERROR,
        Refused::Publish => kind::PUBLISH_ERROR,
        Refused::PublishNamespace => kind::NAMESPACE,
        Refused::SubscribeNamespace => kind::SUBSCRIBE_NAMESPACE_ERROR,
    }
}

impl Control {
    /// Decode a body of type `code` (already vetted with [`defined`]).
    pub fn decode_body(code: u64, r: &mut &[u8], draft: Draft) -> Result<Control, DecodeError> {
        use kind::*;
        check(code, draft)?;
        let d14 = draft.has_inline_fields();
        let refused = |answers, r: &mut &[u8]| -> Result<Control, DecodeError> {
            Ok(Control::RequestError {
                answers: Some(answers),
                error: RequestError::decode_body(r, draft)?,
            })
        };
        Ok(match code {
            CLIENT_SETUP => Control::ClientSetup(ClientSetup::decode_body(r, draft)?),
            SERVER_SETUP => Control::ServerSetup(ServerSetup::decode_body(r, draft)?),
            SETUP => Control::Setup(Setup::decode_body(r, draft)?),
            SUBSCRIBE => Control::Subscribe(Subscribe::decode_body(r, draft)?),
            SUBSCRIBE_OK => Control::SubscribeOk(SubscribeOk::decode_body(r, draft)?),
            REQUEST_UPDATE => Control::RequestUpdate(RequestUpdate::decode_body(r, draft)?),
            UNSUBSCRIBE => Control::Unsubscribe(read_varint(r, draft)?),
            PUBLISH_DONE => Control::PublishDone(PublishDone::decode_body(r, draft)?),
            TRACK_STATUS => Control::TrackStatus(Subscribe::decode_body(r, draft)?),
            REQUEST_OK => Control::RequestOk {
                answers: d14.then_some(Refused::PublishNamespace),
                ok: RequestOk::decode_body(r, draft)?,
            },
            SUBSCRIBE_NAMESPACE_OK => Control::RequestOk {
                answers: Some(Refused::SubscribeNamespace),
                ok: RequestOk::decode_body(r, draft)?,
            },
            REQUEST_ERROR if d14 => refused(Refused::Subscribe, r)?,
            REQUEST_ERROR => Control::RequestError {
                answers: None,
                error: RequestError::decode_body(r, draft)?,
            },
            NAMESPACE if d14 => refused(Refused::PublishNamespace, r)?,
            PUBLISH_BLOCKED if d14 => refused(Refused::TrackStatus, r)?,
            FETCH_ERROR => refused(Refused::Fetch, r)?,
            PUBLISH_ERROR => refused(Refused::Publish, r)?,
            SUBSCRIBE_NAMESPACE_ERROR => refused(Refused::SubscribeNamespace, r)?,
            PUBLISH_NAMESPACE => {
                Control::PublishNamespace(PublishNamespace::decode_body(r, draft)?)
            }
            PUBLISH_NAMESPACE_DONE => {
                Control::PublishNamespaceDone(PublishNamespaceDone::decode_body(r, draft)?)
            }
            PUBLISH_NAMESPACE_CANCEL => {
                Control::PublishNamespaceCancel(PublishNamespaceCancel::decode_body(r, draft)?)
            }
            SUBSCRIBE_NAMESPACE_OLD | SUBSCRIBE_NAMESPACE => {
                Control::SubscribeNamespace(SubscribeNamespace::decode_body(r, draft)?)
            }
            UNSUBSCRIBE_NAMESPACE => Control::UnsubscribeNamespace(read_varint(r, draft)?),
            NAMESPACE => Control::Namespace(Namespace::decode_body(r, draft)?),
            NAMESPACE_DONE => Control::NamespaceDone(NamespaceDone::decode_body(r, draft)?),
            FETCH => Control::Fetch(Fetch::decode_body(r, draft)?),
            FETCH_OK => Control::FetchOk(FetchOk::decode_body(r, draft)?),
            FETCH_CANCEL => Control::FetchCancel(read_varint(r, draft)?),
            PUBLISH => Control::Publish(Publish::decode_body(r, draft)?),
            PUBLISH_OK => Control::PublishOk(PublishOk::decode_body(r, draft)?),
            PUBLISH_BLOCKED => Control::PublishBlocked {
                suffix: read_namespace(r, draft)?,
                track: read_name(r, draft)?,
            },
            SUBSCRIBE_TRACKS => {
                // Refused without being read: the body is dropped whole.
                *r = &[];
                Control::SubscribeTracks
            }
            GOAWAY => Control::Goaway(Goaway::decode_body(r, draft)?),
            MAX_REQUEST_ID => Control::MaxRequestId(read_varint(r, draft)?),
            REQUESTS_BLOCKED => Control::RequestsBlocked(read_varint(r, draft)?),
            other => return Err(DecodeError::UnknownType(other)),
        })
    }

    /// Append the body; returns the type code to frame it with.
    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<u64, EncodeError> {
        use kind::*;
        let code = match self {
            Control::ClientSetup(m) => m.encode_body(w, draft).map(|()| CLIENT_SETUP)?,
            Control::ServerSetup(m) => m.encode_body(w, draft).map(|()| SERVER_SETUP)?,
            Control::Setup(m) => m.encode_body(w, draft).map(|()| SETUP)?,
            Control::Subscribe(m) => m.encode_body(w, draft).map(|()| SUBSCRIBE)?,
            Control::SubscribeOk(m) => m.encode_body(w, draft).map(|()| SUBSCRIBE_OK)?,
            Control::RequestUpdate(m) => m.encode_body(w, draft).map(|()| REQUEST_UPDATE)?,
            Control::Unsubscribe(id) => write_varint(w, *id, draft).map(|()| UNSUBSCRIBE)?,
            Control::PublishDone(m) => m.encode_body(w, draft).map(|()| PUBLISH_DONE)?,
            Control::TrackStatus(m) => m.encode_body(w, draft).map(|()| TRACK_STATUS)?,
            Control::RequestOk { answers, ok } => {
                ok.encode_body(w, draft)?;
                match (draft, answers) {
                    (Draft::D14, Some(Refused::SubscribeNamespace)) => SUBSCRIBE_NAMESPACE_OK,
                    (Draft::D14, Some(Refused::PublishNamespace)) => REQUEST_OK,
                    (Draft::D14, _) => {
                        return Err(EncodeError::InvalidValue(
                            "draft 14 answers only namespace requests with an OK",
                        ))
                    }
                    _ => REQUEST_OK,
                }
            }
            Control::RequestError { answers, error } => {
                error.encode_body(w, draft)?;
                match (draft, answers) {
                    (Draft::D14, Some(answers)) => error_kind(*answers),
                    (Draft::D14, None) => {
                        return Err(EncodeError::InvalidValue(
                            "draft 14 refuses each request its own way",
                        ))
                    }
                    _ => REQUEST_ERROR,
                }
            }
            Control::PublishNamespace(m) => m.encode_body(w, draft).map(|()| PUBLISH_NAMESPACE)?,
            Control::PublishNamespaceDone(m) => {
                m.encode_body(w, draft).map(|()| PUBLISH_NAMESPACE_DONE)?
            }
            Control::PublishNamespaceCancel(m) => {
                m.encode_body(w, draft).map(|()| PUBLISH_NAMESPACE_CANCEL)?
            }
            Control::SubscribeNamespace(m) => m
                .encode_body(w, draft)
                .map(|()| SubscribeNamespace::kind(draft))?,
            Control::UnsubscribeNamespace(id) => {
                write_varint(w, *id, draft).map(|()| UNSUBSCRIBE_NAMESPACE)?
            }
            // 0x08 is PUBLISH_NAMESPACE_ERROR on 14.
            Control::Namespace(_) if !draft.has_namespace_messages() => {
                return Err(EncodeError::Unsupported)
            }
            Control::Namespace(m) => m.encode_body(w, draft).map(|()| NAMESPACE)?,
            Control::NamespaceDone(m) => m.encode_body(w, draft).map(|()| NAMESPACE_DONE)?,
            Control::Fetch(m) => m.encode_body(w, draft).map(|()| FETCH)?,
            Control::FetchOk(m) => m.encode_body(w, draft).map(|()| FETCH_OK)?,
            Control::FetchCancel(id) => write_varint(w, *id, draft).map(|()| FETCH_CANCEL)?,
            Control::Publish(m) => m.encode_body(w, draft).map(|()| PUBLISH)?,
            Control::PublishOk(m) => m.encode_body(w, draft).map(|()| PUBLISH_OK)?,
            // 0x0F is TRACK_STATUS_ERROR on 14.
            Control::PublishBlocked { .. } if !draft.has_publish_blocked() => {
                return Err(EncodeError::Unsupported)
            }
            Control::PublishBlocked { suffix, track } => {
                write_namespace(w, suffix, draft)?;
                write_name(w, track, draft)?;
                PUBLISH_BLOCKED
            }
            Control::SubscribeTracks => SUBSCRIBE_TRACKS,
            Control::Goaway(m) => m.encode_body(w, draft).map(|()| GOAWAY)?,
            Control::MaxRequestId(id) => write_varint(w, *id, draft).map(|()| MAX_REQUEST_ID)?,
            Control::RequestsBlocked(id) => {
                write_varint(w, *id, draft).map(|()| REQUESTS_BLOCKED)?
            }
        };
        if !defined(code, draft) {
            return Err(EncodeError::Unsupported);
        }
        Ok(code)
    }

    /// Append the framed message.
    pub fn encode(&self, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
        let mut body = Vec::new();
        let code = self.encode_body(&mut body, draft)?;
        write_frame(code, &body, draft, MAX_BODY, out)
    }

    /// Look for a whole message at the front of `buf` without consuming it: the message and
    /// the bytes it takes, `Ok(None)` until it has all arrived. An undefined type fails as
    /// soon as it is read; a body must be consumed exactly.
    pub fn peek(buf: &[u8], draft: Draft) -> Result<Option<(Control, usize)>, DecodeError> {
        Self::peek_with_limit(buf, draft, MAX_BODY)
    }

    /// [`Control::peek`] refusing a body over `max` bytes as soon as its length has arrived.
    pub fn peek_with_limit(
        buf: &[u8],
        draft: Draft,
        max: usize,
    ) -> Result<Option<(Control, usize)>, DecodeError> {
        let Some((code, range)) =
            peek_frame(buf, draft, max.min(MAX_BODY), |code| check(code, draft))?
        else {
            return Ok(None);
        };
        let end = range.end;
        let mut body = &buf[range];
        let msg = Control::decode_body(code, &mut body, draft)?;
        finish(body)?;
        Ok(Some((msg, end)))
    }

    /// Decode one message from the front of `buf`, consuming it; `Ok(None)` (nothing
    /// consumed) until all of it has arrived.
    pub fn decode(buf: &mut BytesMut, draft: Draft) -> Result<Option<Control>, DecodeError> {
        let Some((msg, used)) = Self::peek(buf, draft)? else {
            return Ok(None);
        };
        buf.advance(used);
        Ok(Some(msg))
    }
}
