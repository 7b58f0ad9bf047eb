//! The checks of the IETF decoders (drafts 14-22). The first input byte picks the draft
//! (and, for data streams, what is read); the rest is the wire.
//!
//! Decoding may lose what moq-dev ignores (an unknown parameter on 14 or 15, a timeout), so
//! the round trip is checked as a fixed point: what decodes encodes; that encoding decodes;
//! and encoding it again gives the same bytes.

use bytes::BytesMut;
use starling_proto::ietf::datagram::ObjectDatagram;
use starling_proto::ietf::fetch_stream::{self, FetchEntry};
use starling_proto::ietf::setup::AuthToken;
use starling_proto::ietf::stream::UniStream;
use starling_proto::ietf::subgroup::{ObjectHeader, SubgroupHeader};
use starling_proto::ietf::{Control, Draft};

/// The draft a selector byte picks (the seeds use the same order).
pub fn draft(selector: u8) -> Draft {
    Draft::ALL[selector as usize % Draft::ALL.len()]
}

/// Check `decoded`'s fixed point: `encode` must accept it, `decode` read the encoding back,
/// and encoding that give the same bytes.
fn fixed_point<M: std::fmt::Debug + PartialEq>(
    decoded: M,
    encode: impl Fn(&M) -> BytesMut,
    decode: impl Fn(&[u8]) -> M,
) {
    let first = encode(&decoded);
    let again = decode(&first);
    let second = encode(&again);
    assert_eq!(
        first, second,
        "{decoded:?} then {again:?} encode differently"
    );
    assert_eq!(decode(&second), again);
}

/// Control messages, SETUP included, and the token a SETUP may carry.
pub fn ietf_control(data: &[u8]) -> bool {
    let Some((&selector, wire)) = data.split_first() else {
        return false;
    };
    let draft = draft(selector);
    let Ok(Some((msg, _))) = Control::peek(wire, draft) else {
        return false;
    };
    let token = match &msg {
        Control::ClientSetup(s) => s.options.authorization_token.clone(),
        Control::ServerSetup(s) => s.options.authorization_token.clone(),
        Control::Setup(s) => s.options.authorization_token.clone(),
        _ => None,
    };
    if let Some(token) = token {
        if let Ok(parsed) = AuthToken::decode(&token, draft) {
            let bytes = parsed.encode(draft).expect("a decoded token encodes");
            assert_eq!(AuthToken::decode(&bytes, draft), Ok(parsed));
        }
    }
    fixed_point(
        msg,
        |m| {
            let mut out = BytesMut::new();
            m.encode(draft, &mut out).unwrap_or_else(|err| {
                panic!("{m:?} decoded on {draft} but does not encode: {err}")
            });
            out
        },
        |bytes| {
            let (m, used) = Control::peek(bytes, draft)
                .unwrap_or_else(|err| panic!("re-encoded {bytes:02x?} fails on {draft}: {err}"))
                .expect("a whole message");
            assert_eq!(used, bytes.len());
            m
        },
    );
    true
}

/// Data streams and datagrams: the second byte picks a subgroup stream (a header and the
/// objects after it, payloads skipped), a fetch stream, or one datagram.
pub fn ietf_data(data: &[u8]) -> bool {
    let [selector, kind, wire @ ..] = data else {
        return false;
    };
    let draft = draft(*selector);
    const MAX_PAYLOAD: u64 = 1 << 16;
    match kind % 3 {
        0 => {
            let Ok(Some((header, mut at))) = SubgroupHeader::peek(wire, draft) else {
                return false;
            };
            assert!(matches!(
                UniStream::classify(wire_type(wire, draft), draft),
                Ok(UniStream::Subgroup(_))
            ));
            fixed_point(
                header.clone(),
                |h| {
                    let mut out = BytesMut::new();
                    h.encode(draft, &mut out).expect("a decoded header encodes");
                    out
                },
                |bytes| SubgroupHeader::peek(bytes, draft).unwrap().unwrap().0,
            );
            while let Ok(Some((object, used))) =
                ObjectHeader::peek(&wire[at..], draft, header.flags.properties, MAX_PAYLOAD)
            {
                fixed_point(
                    object.clone(),
                    |o| {
                        let mut out = BytesMut::new();
                        o.encode(draft, &mut out).expect("a decoded object encodes");
                        out
                    },
                    |bytes| {
                        ObjectHeader::peek(bytes, draft, header.flags.properties, MAX_PAYLOAD)
                            .unwrap()
                            .unwrap()
                            .0
                    },
                );
                at += used;
                let Some(next) = at
                    .checked_add(object.length as usize)
                    .filter(|&n| n <= wire.len())
                else {
                    break;
                };
                at = next;
            }
            true
        }
        1 => {
            let Ok(Some((request_id, mut at))) = fetch_stream::peek_header(wire, draft) else {
                return false;
            };
            let mut out = BytesMut::new();
            fetch_stream::encode_header(request_id, draft, &mut out).unwrap();
            assert_eq!(
                fetch_stream::peek_header(&out, draft),
                Ok(Some((request_id, out.len())))
            );
            while let Ok(Some((entry, used))) = FetchEntry::peek(&wire[at..], draft, MAX_PAYLOAD) {
                fixed_point(
                    entry.clone(),
                    |e| {
                        let mut out = BytesMut::new();
                        e.encode(draft, &mut out).expect("a decoded entry encodes");
                        out
                    },
                    |bytes| {
                        FetchEntry::peek(bytes, draft, MAX_PAYLOAD)
                            .unwrap()
                            .unwrap()
                            .0
                    },
                );
                at += used;
                let length = match entry {
                    FetchEntry::Object(object) => object.length as usize,
                    FetchEntry::EndOfRange { .. } => break,
                };
                let Some(next) = at.checked_add(length).filter(|&n| n <= wire.len()) else {
                    break;
                };
                at = next;
            }
            true
        }
        _ => {
            let Ok(datagram) = ObjectDatagram::decode(wire, draft) else {
                return false;
            };
            fixed_point(
                datagram,
                |d| {
                    let mut out = BytesMut::new();
                    d.encode(draft, &mut out)
                        .expect("a decoded datagram encodes");
                    out
                },
                |bytes| ObjectDatagram::decode(bytes, draft).unwrap(),
            );
            true
        }
    }
}

/// The type varint at the front of a stream that decoded.
fn wire_type(wire: &[u8], draft: Draft) -> u64 {
    use starling_proto::coding::Wire;
    starling_proto::varint::peek_as(draft.flavor(), wire)
        .unwrap()
        .unwrap()
        .0
}
