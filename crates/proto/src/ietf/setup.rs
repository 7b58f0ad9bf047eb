//! The SETUP exchange of drafts 14 to 22 and its Setup Options (docs/wire-ietf.md §3).
//!
//! Drafts 14 to 16: CLIENT_SETUP (`0x20`) and SERVER_SETUP (`0x21`) open the bidi control
//! stream; draft 14 alone carries versions in them (the client's list, the server's pick).
//! From draft 17 each side opens one uni stream whose type is SETUP (`0x2F00`) and whose
//! first message is the SETUP itself, with no count before its options.
//!
//! The options are one [`SetupOptions`]: the ones moq-dev's peers act on are typed, every
//! other is read (its value must still parse) and dropped. A defined option that repeats is
//! refused; an unknown one may repeat.

use bytes::BytesMut;

use crate::coding::{read_varint, write_varint, DecodeError, EncodeError};
use crate::framing::write_frame;

use super::kvp::{Extent, Keys, PairReader, PairWriter, Value};
use super::Draft;

/// CLIENT_SETUP's type (drafts 14-16).
pub const CLIENT_SETUP: u64 = 0x20;
/// SERVER_SETUP's type (drafts 14-16).
pub const SERVER_SETUP: u64 = 0x21;
/// SETUP's type, which is also its uni stream's type (draft 17 on).
pub const SETUP: u64 = 0x2F00;

/// Option ids (docs/wire-ietf.md §3.4).
pub mod option {
    pub const PATH: u64 = 0x01;
    pub const MAX_REQUEST_ID: u64 = 0x02;
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    pub const MAX_AUTH_TOKEN_CACHE_SIZE: u64 = 0x04;
    pub const AUTHORITY: u64 = 0x05;
    pub const IMPLEMENTATION: u64 = 0x07;
    /// MoQ Cluster (draft 17 on): the declarer's hop id.
    pub const HOP_ID: u64 = 0x40B54;
    /// MoQ Cluster (draft 17 on): what pulling from the declarer costs.
    pub const RELAY_COST: u64 = 0x40B56;
    /// MoQ Solicit: advertise to the declarer only when asked (non-zero).
    pub const SOLICIT: u64 = 0x40B5A;
    /// MoQ Hidden: the declarer understands SUBSCRIBE_NAMESPACE's HIDDEN parameter.
    pub const HIDDEN: u64 = 0x40B5C;
}

/// The options of one SETUP. Byte values are kept as sent (PATH and the others are text to
/// moq-dev, which the session checks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetupOptions {
    pub path: Option<Vec<u8>>,
    /// Drafts 14-16 only; absent means no requests may be sent, as the drafts say (moq-net
    /// reads it as unlimited).
    pub max_request_id: Option<u64>,
    /// The raw Token structure; see [`AuthToken::decode`].
    pub authorization_token: Option<Vec<u8>>,
    pub max_auth_token_cache_size: Option<u64>,
    pub authority: Option<Vec<u8>>,
    pub implementation: Option<Vec<u8>>,
    /// Draft 17 on.
    pub hop_id: Option<u64>,
    /// Draft 17 on.
    pub relay_cost: Option<u64>,
    pub solicit: Option<u64>,
    pub hidden: Option<u64>,
}

impl SetupOptions {
    /// The block's key form and extent on `draft`: counted with absolute keys on 14 and 15,
    /// counted with delta keys on 16, delta keys to the end of the message from 17.
    fn layout(draft: Draft) -> (Keys, Extent) {
        match (draft.has_delta_keys(), draft.has_control_stream()) {
            (false, _) => (Keys::Absolute, Extent::Counted),
            (true, true) => (Keys::Delta, Extent::Counted),
            (true, false) => (Keys::Delta, Extent::ToEnd),
        }
    }

    /// Read the block at the front of `r` (a message body).
    pub fn decode(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        let (keys, extent) = Self::layout(draft);
        let mut reader = PairReader::new(r, draft, keys, extent)?;
        let mut options = SetupOptions::default();
        let cluster = draft.has_cluster();
        while let Some(key) = reader.key(r)? {
            let value = reader.value(key, r)?;
            let slot = match (key, value) {
                (option::PATH, Value::Bytes(b)) => Slot::Bytes(&mut options.path, b),
                (option::AUTHORIZATION_TOKEN, Value::Bytes(b)) => {
                    Slot::Bytes(&mut options.authorization_token, b)
                }
                (option::AUTHORITY, Value::Bytes(b)) => Slot::Bytes(&mut options.authority, b),
                (option::IMPLEMENTATION, Value::Bytes(b)) => {
                    Slot::Bytes(&mut options.implementation, b)
                }
                (option::MAX_REQUEST_ID, Value::Varint(v)) if !cluster => {
                    Slot::Varint(&mut options.max_request_id, v)
                }
                (option::MAX_AUTH_TOKEN_CACHE_SIZE, Value::Varint(v)) => {
                    Slot::Varint(&mut options.max_auth_token_cache_size, v)
                }
                (option::HOP_ID, Value::Varint(v)) if cluster => {
                    Slot::Varint(&mut options.hop_id, v)
                }
                (option::RELAY_COST, Value::Varint(v)) if cluster => {
                    Slot::Varint(&mut options.relay_cost, v)
                }
                (option::SOLICIT, Value::Varint(v)) => Slot::Varint(&mut options.solicit, v),
                (option::HIDDEN, Value::Varint(v)) => Slot::Varint(&mut options.hidden, v),
                _ => continue,
            };
            slot.fill(key)?;
        }
        Ok(options)
    }

    /// Append the block (sorted by id; only the options `draft` defines).
    pub fn encode(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        let mut writer = PairWriter::new(draft);
        let cluster = draft.has_cluster();
        let varints = [
            (
                option::MAX_REQUEST_ID,
                self.max_request_id.filter(|_| !cluster),
            ),
            (
                option::MAX_AUTH_TOKEN_CACHE_SIZE,
                self.max_auth_token_cache_size,
            ),
            (option::HOP_ID, self.hop_id.filter(|_| cluster)),
            (option::RELAY_COST, self.relay_cost.filter(|_| cluster)),
            (option::SOLICIT, self.solicit),
            (option::HIDDEN, self.hidden),
        ];
        for (key, value) in varints {
            if let Some(value) = value {
                writer.varint(key, value)?;
            }
        }
        let bytes = [
            (option::PATH, &self.path),
            (option::AUTHORIZATION_TOKEN, &self.authorization_token),
            (option::AUTHORITY, &self.authority),
            (option::IMPLEMENTATION, &self.implementation),
        ];
        for (key, value) in bytes {
            if let Some(value) = value {
                writer.bytes(key, value)?;
            }
        }
        let (keys, extent) = Self::layout(draft);
        writer.finish(w, keys, extent)
    }
}

/// Where one decoded option goes.
enum Slot<'o, 'v> {
    Varint(&'o mut Option<u64>, u64),
    Bytes(&'o mut Option<Vec<u8>>, &'v [u8]),
}

impl Slot<'_, '_> {
    /// Store the value, refusing a second one.
    fn fill(self, key: u64) -> Result<(), DecodeError> {
        let taken = match self {
            Slot::Varint(slot, v) => slot.replace(v).is_some(),
            Slot::Bytes(slot, b) => slot.replace(b.to_vec()).is_some(),
        };
        if taken {
            return Err(DecodeError::DuplicateParameter(key));
        }
        Ok(())
    }
}

/// CLIENT_SETUP (drafts 14-16): the client's versions (draft 14 only) and options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSetup {
    /// The SETUP codes offered, most preferred first; empty on 15 and 16, which carry none.
    pub versions: Vec<u64>,
    pub options: SetupOptions,
}

/// SERVER_SETUP (drafts 14-16): the version chosen (draft 14 only) and options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSetup {
    /// The SETUP code chosen; `None` on 15 and 16.
    pub version: Option<u64>,
    pub options: SetupOptions,
}

/// SETUP (draft 17 on), the same for both sides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    pub options: SetupOptions,
}

/// Versions offered in one CLIENT_SETUP at most.
const MAX_VERSIONS: u64 = 64;

impl ClientSetup {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        expect_control_stream(draft)?;
        let mut versions = Vec::new();
        if draft.has_inline_fields() {
            let count = read_varint(r, draft)?;
            if count > MAX_VERSIONS {
                return Err(DecodeError::BoundsExceeded("more than 64 versions"));
            }
            for _ in 0..count {
                versions.push(read_varint(r, draft)?);
            }
        }
        Ok(ClientSetup {
            versions,
            options: SetupOptions::decode(r, draft)?,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        if !draft.has_control_stream() {
            return Err(EncodeError::Unsupported);
        }
        if draft.has_inline_fields() {
            if self.versions.len() as u64 > MAX_VERSIONS {
                return Err(EncodeError::BoundsExceeded("more than 64 versions"));
            }
            write_varint(w, self.versions.len() as u64, draft)?;
            for &version in &self.versions {
                write_varint(w, version, draft)?;
            }
        }
        self.options.encode(w, draft)
    }
}

impl ServerSetup {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        expect_control_stream(draft)?;
        let version = if draft.has_inline_fields() {
            Some(read_varint(r, draft)?)
        } else {
            None
        };
        Ok(ServerSetup {
            version,
            options: SetupOptions::decode(r, draft)?,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        if !draft.has_control_stream() {
            return Err(EncodeError::Unsupported);
        }
        if draft.has_inline_fields() {
            let version = self.version.ok_or(EncodeError::InvalidValue(
                "draft 14's SERVER_SETUP names a version",
            ))?;
            write_varint(w, version, draft)?;
        }
        self.options.encode(w, draft)
    }
}

impl Setup {
    pub fn decode_body(r: &mut &[u8], draft: Draft) -> Result<Self, DecodeError> {
        if draft.has_control_stream() {
            return Err(DecodeError::UnknownType(SETUP));
        }
        Ok(Setup {
            options: SetupOptions::decode(r, draft)?,
        })
    }

    pub fn encode_body(&self, w: &mut Vec<u8>, draft: Draft) -> Result<(), EncodeError> {
        if draft.has_control_stream() {
            return Err(EncodeError::Unsupported);
        }
        self.options.encode(w, draft)
    }

    /// Append the whole message: `2F00(i) | Len(16) | options`, which is also the start of
    /// the SETUP uni stream.
    pub fn encode(&self, draft: Draft, out: &mut BytesMut) -> Result<(), EncodeError> {
        let mut body = Vec::new();
        self.encode_body(&mut body, draft)?;
        write_frame(SETUP, &body, draft, u16::MAX as usize, out)
    }
}

fn expect_control_stream(draft: Draft) -> Result<(), DecodeError> {
    if draft.has_control_stream() {
        Ok(())
    } else {
        Err(DecodeError::UnknownType(CLIENT_SETUP))
    }
}

/// The AUTHORIZATION_TOKEN structure a SETUP may carry: an alias type, then its fields.
/// With no token cache offered (Starling offers none, like moq-net), only a value can
/// arrive: a registration is read as its value, and a use or deletion of an alias is a
/// protocol violation (nothing can have been registered before SETUP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthToken {
    /// The Token Type: 0 a format agreed out of band (a JWT), 1 a Common Access Token.
    pub kind: u64,
    pub value: Vec<u8>,
}

/// Why a SETUP's token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// DELETE or USE_ALIAS before any alias could exist: close PROTOCOL_VIOLATION (0x3).
    #[error("the token names an alias, and none can be registered before SETUP")]
    Alias,
    /// An unknown alias type or a structure that does not parse: close
    /// KEY_VALUE_FORMATTING_ERROR (0x6).
    #[error("malformed token structure")]
    Malformed,
}

impl AuthToken {
    const DELETE: u64 = 0;
    const REGISTER: u64 = 1;
    const USE_ALIAS: u64 = 2;
    const USE_VALUE: u64 = 3;

    pub fn decode(mut bytes: &[u8], draft: Draft) -> Result<AuthToken, TokenError> {
        let r = &mut bytes;
        match read_varint(r, draft).map_err(|_| TokenError::Malformed)? {
            Self::USE_VALUE => {}
            Self::REGISTER => {
                read_varint(r, draft).map_err(|_| TokenError::Malformed)?;
            }
            Self::DELETE | Self::USE_ALIAS => return Err(TokenError::Alias),
            _ => return Err(TokenError::Malformed),
        }
        let kind = read_varint(r, draft).map_err(|_| TokenError::Malformed)?;
        Ok(AuthToken {
            kind,
            value: r.to_vec(),
        })
    }

    /// The structure, by value (USE_VALUE).
    pub fn encode(&self, draft: Draft) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        write_varint(&mut out, Self::USE_VALUE, draft)?;
        write_varint(&mut out, self.kind, draft)?;
        out.extend_from_slice(&self.value);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framing::peek_frame;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The body of the one message in `bytes`, checking its type.
    fn body(bytes: &[u8], draft: Draft, kind: u64) -> &[u8] {
        let (found, range) = peek_frame(bytes, draft, u16::MAX as usize, |_| Ok(()))
            .unwrap()
            .unwrap();
        assert_eq!(found, kind);
        assert_eq!(range.end, bytes.len());
        &bytes[range]
    }

    fn moq_net_client() -> SetupOptions {
        SetupOptions {
            path: Some(b"/anon".to_vec()),
            authority: Some(b"relay.example:4443".to_vec()),
            implementation: Some(b"moq-lite-rs".to_vec()),
            max_request_id: Some(0xFFFF_FFFF),
            solicit: Some(1),
            hidden: Some(1),
            ..Default::default()
        }
    }

    /// docs/wire-ietf.md §10.1: moq-net's draft-14 CLIENT_SETUP (its options in one of the
    /// orders its hash map gives) and moq-relay's answer.
    #[test]
    fn draft14() {
        let client = hex(
            "20 0045 01 c0000000ff00000e 06 02c0000000ffffffff 80040b5a01 80040b5c01
             01052f616e6f6e 051272656c61792e6578616d706c653a34343433 070b6d6f712d6c6974652d7273",
        );
        let setup =
            ClientSetup::decode_body(&mut body(&client, Draft::D14, CLIENT_SETUP), Draft::D14)
                .unwrap();
        assert_eq!(setup.versions, vec![Draft::D14.code()]);
        assert_eq!(setup.options, moq_net_client());
        let server = hex(
            "21 0029 c0000000ff00000e 04 02c0000000ffffffff 80040b5a01 80040b5c01 070b6d6f712d6c6974652d7273",
        );
        let setup =
            ServerSetup::decode_body(&mut body(&server, Draft::D14, SERVER_SETUP), Draft::D14)
                .unwrap();
        assert_eq!(setup.version, Some(Draft::D14.code()));
        assert_eq!(setup.options.max_request_id, Some(0xFFFF_FFFF));
        let mut again = Vec::new();
        setup.encode_body(&mut again, Draft::D14).unwrap();
        assert_eq!(
            ServerSetup::decode_body(&mut &again[..], Draft::D14).unwrap(),
            setup
        );
    }

    /// §10.1's draft-16 CLIENT_SETUP: a count and sorted delta keys, byte for byte.
    #[test]
    fn draft16() {
        let options = SetupOptions {
            authority: None,
            ..moq_net_client()
        };
        let mut out = Vec::new();
        ClientSetup {
            versions: vec![],
            options: options.clone(),
        }
        .encode_body(&mut out, Draft::D16)
        .unwrap();
        let expected =
            hex("05 01052f616e6f6e 01c0000000ffffffff 050b6d6f712d6c6974652d7273 80040b5301 0201");
        assert_eq!(out, expected);
        assert_eq!(
            ClientSetup::decode_body(&mut &out[..], Draft::D16)
                .unwrap()
                .options,
            options
        );
    }

    /// §10.2: draft 22's SETUP with a hop id, both sides, byte for byte.
    #[test]
    fn draft22() {
        let client = SetupOptions {
            max_request_id: None,
            hop_id: Some(42),
            ..moq_net_client()
        };
        let mut out = bytes::BytesMut::new();
        Setup {
            options: client.clone(),
        }
        .encode(Draft::D22, &mut out)
        .unwrap();
        let expected = hex(
            "af00 0030 01052f616e6f6e 041272656c61792e6578616d706c653a34343433
             020b6d6f712d6c6974652d7273 c40b4d2a 0601 0201",
        );
        assert_eq!(&out[..], &expected[..]);
        let decoded =
            Setup::decode_body(&mut body(&expected, Draft::D22, SETUP), Draft::D22).unwrap();
        assert_eq!(decoded.options, client);

        let server = SetupOptions {
            implementation: Some(b"moq-lite-rs".to_vec()),
            hop_id: Some(0x1F2E_3D4C_5B6A),
            solicit: Some(1),
            hidden: Some(1),
            ..Default::default()
        };
        let mut out = bytes::BytesMut::new();
        Setup { options: server }
            .encode(Draft::D22, &mut out)
            .unwrap();
        assert_eq!(
            &out[..],
            &hex("af00 001c 070b6d6f712d6c6974652d7273 c40b4d fe001f2e3d4c5b6a 0601 0201")[..]
        );
    }

    #[test]
    fn duplicates_and_draft_gates() {
        // SOLICIT twice is refused; an unknown option may repeat.
        let twice = [0xc4, 0x0b, 0x5a, 1, 0, 1];
        assert_eq!(
            SetupOptions::decode(&mut &twice[..], Draft::D18),
            Err(DecodeError::DuplicateParameter(option::SOLICIT))
        );
        assert!(SetupOptions::decode(&mut &[0x20, 1, 0, 1][..], Draft::D18).is_ok());
        // MAX_REQUEST_ID is unknown from 17 (it may repeat and is dropped), HOP_ID before it.
        let options = SetupOptions::decode(&mut &[0x02, 5, 0, 6][..], Draft::D17).unwrap();
        assert_eq!(options.max_request_id, None);
        let mut hop = Vec::new();
        SetupOptions {
            hop_id: Some(9),
            ..Default::default()
        }
        .encode(&mut hop, Draft::D16)
        .unwrap();
        assert_eq!(hop, [0]);
        // A value that does not parse fails the SETUP even under an unknown id.
        assert!(SetupOptions::decode(&mut &[0x21, 1, b'a', 0, 2, b'b'][..], Draft::D18).is_err());
        // SETUP does not exist before 17, CLIENT_SETUP not after 16.
        assert!(Setup::decode_body(&mut &[][..], Draft::D16).is_err());
        assert!(ClientSetup::decode_body(&mut &[0][..], Draft::D17).is_err());
    }

    #[test]
    fn tokens() {
        let token = AuthToken {
            kind: 300,
            value: vec![0, 0xff, b'j'],
        };
        for draft in [Draft::D14, Draft::D22] {
            let bytes = token.encode(draft).unwrap();
            assert_eq!(AuthToken::decode(&bytes, draft), Ok(token.clone()));
        }
        // REGISTER is read as its value; DELETE and USE_ALIAS cannot come before SETUP.
        assert_eq!(
            AuthToken::decode(&[1, 5, 0, b'x'], Draft::D16),
            Ok(AuthToken {
                kind: 0,
                value: b"x".to_vec()
            })
        );
        assert_eq!(
            AuthToken::decode(&[0, 5], Draft::D16),
            Err(TokenError::Alias)
        );
        assert_eq!(
            AuthToken::decode(&[2, 5], Draft::D16),
            Err(TokenError::Alias)
        );
        assert_eq!(
            AuthToken::decode(&[4], Draft::D16),
            Err(TokenError::Malformed)
        );
        assert_eq!(
            AuthToken::decode(&[3], Draft::D16),
            Err(TokenError::Malformed)
        );
    }
}
