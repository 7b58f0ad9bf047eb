//! The legacy in-band negotiation that picks lite-01 or lite-02 over the shared ALPN `moql`
//! (docs/wire.md §1.7), and SESSION_INFO, which the stream then carries.
//!
//! The client opens the first bidi stream (no stream type) and writes CLIENT_SETUP; the server
//! answers SERVER_SETUP with the first version of the client's list it serves; the stream then
//! stays open for the session's life as the *session stream*. Both messages use the framing of
//! moq-transport draft-14, as moq-net does: `Type(8), Length(16, big-endian), body`, the body
//! holding QUIC varints:
//!
//! * CLIENT_SETUP (0x20): `Count(i), Version(i) × Count, Parameters`
//! * SERVER_SETUP (0x21): `Version(i), Parameters`
//! * Parameters: `Count(i)` (at most 64), then per entry `Key(i)` and, for an even key, a
//!   varint value, for an odd key `Len(i)` and that many bytes (at most 65 535).
//!
//! SESSION_INFO (`Len(i), Bitrate(i)`, 0 = unknown) may then travel either way on the session
//! stream; moq-net only reads it, and so does Starling.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::coding::{self, DecodeError, EncodeError};
use crate::framing::Message;
use crate::varint;
use crate::version::Version;

/// Type byte of CLIENT_SETUP.
pub const CLIENT_SETUP: u8 = 0x20;
/// Type byte of SERVER_SETUP.
pub const SERVER_SETUP: u8 = 0x21;
/// Largest body either SETUP may have.
pub const MAX_SETUP_BODY: usize = u16::MAX as usize;
/// Most parameters a SETUP may carry.
pub const MAX_PARAMETERS: u64 = 64;

/// Parameter keys moq-net's client sends (draft-14 numbering).
pub mod key {
    /// Bytes: the request path (ignored when a lite version is chosen, as moq-net does).
    pub const PATH: u64 = 0x1;
    /// Varint: the most request ids the peer may use.
    pub const MAX_REQUEST_ID: u64 = 0x2;
    /// Bytes: the authority.
    pub const AUTHORITY: u64 = 0x5;
    /// Bytes: the implementation's name.
    pub const IMPLEMENTATION: u64 = 0x7;
}

/// One parameter's value: a varint for an even key, bytes for an odd one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    Varint(u64),
    Bytes(Bytes),
}

/// A draft-14 parameter block, in wire order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LegacyParams(pub Vec<(u64, ParamValue)>);

impl LegacyParams {
    fn decode(r: &mut &[u8]) -> Result<LegacyParams, DecodeError> {
        let count = varint::decode(r)?;
        if count > MAX_PARAMETERS {
            return Err(DecodeError::TooManyParameters);
        }
        let mut params = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let key = varint::decode(r)?;
            let value = if key % 2 == 0 {
                ParamValue::Varint(varint::decode(r)?)
            } else {
                let len = varint::decode(r)?;
                if len > MAX_SETUP_BODY as u64 {
                    return Err(DecodeError::BoundsExceeded("SETUP parameter"));
                }
                if len > r.len() as u64 {
                    return Err(DecodeError::Truncated);
                }
                let (head, rest) = r.split_at(len as usize);
                *r = rest;
                ParamValue::Bytes(Bytes::copy_from_slice(head))
            };
            params.push((key, value));
        }
        Ok(LegacyParams(params))
    }

    fn encode(&self, w: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.0.len() as u64 > MAX_PARAMETERS {
            return Err(EncodeError::TooManyParameters);
        }
        varint::encode(self.0.len() as u64, w)?;
        for (key, value) in &self.0 {
            varint::encode(*key, w)?;
            match (key % 2 == 0, value) {
                (true, ParamValue::Varint(v)) => varint::encode(*v, w)?,
                (false, ParamValue::Bytes(bytes)) => {
                    if bytes.len() > MAX_SETUP_BODY {
                        return Err(EncodeError::BoundsExceeded("SETUP parameter"));
                    }
                    varint::encode(bytes.len() as u64, w)?;
                    w.extend_from_slice(bytes);
                }
                _ => return Err(EncodeError::InvalidValue("a parameter of the wrong kind")),
            }
        }
        Ok(())
    }
}

/// CLIENT_SETUP: the versions the client offers, most preferred first, and its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSetup {
    /// Version codes (`Version::code`, or another protocol's), in the client's order.
    pub versions: Vec<u64>,
    pub params: LegacyParams,
}

/// SERVER_SETUP: the version chosen and the server's parameters (none for a lite version).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSetup {
    pub version: u64,
    pub params: LegacyParams,
}

impl ClientSetup {
    /// What a client offering `versions` sends: moq-net's parameters (the most request ids
    /// and the implementation's name).
    pub fn offering(versions: &[Version], implementation: &str) -> ClientSetup {
        ClientSetup {
            versions: versions.iter().map(|v| v.code()).collect(),
            params: LegacyParams(vec![
                (key::MAX_REQUEST_ID, ParamValue::Varint(u32::MAX as u64)),
                (
                    key::IMPLEMENTATION,
                    ParamValue::Bytes(Bytes::copy_from_slice(implementation.as_bytes())),
                ),
            ]),
        }
    }

    /// The first version of the client's list among `served` (the client's preference wins,
    /// as moq-net's server decides); `None` when they share none.
    pub fn choose(&self, served: &[Version]) -> Option<Version> {
        self.versions.iter().find_map(|&code| {
            served
                .iter()
                .copied()
                .find(|v| v.negotiates_in_band() && v.code() == code)
        })
    }
}

fn body_of(buf: &[u8], kind: u8) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    if first != kind {
        return Err(DecodeError::UnknownType(first as u64));
    }
    if buf.len() < 3 {
        return Ok(None);
    }
    let len = u16::from_be_bytes([buf[1], buf[2]]) as usize;
    let end = 3 + len;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((&buf[3..end], end)))
}

fn frame(kind: u8, body: Vec<u8>, out: &mut BytesMut) -> Result<(), EncodeError> {
    if body.len() > MAX_SETUP_BODY {
        return Err(EncodeError::TooLarge {
            len: body.len() as u64,
            max: MAX_SETUP_BODY as u64,
        });
    }
    out.put_u8(kind);
    out.put_u16(body.len() as u16);
    out.extend_from_slice(&body);
    Ok(())
}

/// Decode a CLIENT_SETUP from the front of `buf`, consuming it; `Ok(None)` (nothing consumed)
/// until all of it has arrived. The body must be used up exactly.
pub fn decode_client_setup(buf: &mut BytesMut) -> Result<Option<ClientSetup>, DecodeError> {
    let Some((body, used)) = body_of(buf, CLIENT_SETUP)? else {
        return Ok(None);
    };
    let mut r = body;
    let count = varint::decode(&mut r)?;
    if count > r.len() as u64 {
        return Err(DecodeError::Truncated);
    }
    let mut versions = Vec::with_capacity(count as usize);
    for _ in 0..count {
        versions.push(varint::decode(&mut r)?);
    }
    let params = LegacyParams::decode(&mut r)?;
    coding::finish(r)?;
    buf.advance(used);
    Ok(Some(ClientSetup { versions, params }))
}

/// Append a CLIENT_SETUP.
pub fn encode_client_setup(setup: &ClientSetup, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut body = Vec::new();
    varint::encode(setup.versions.len() as u64, &mut body)?;
    for &code in &setup.versions {
        varint::encode(code, &mut body)?;
    }
    setup.params.encode(&mut body)?;
    frame(CLIENT_SETUP, body, out)
}

/// Decode a SERVER_SETUP from the front of `buf`, consuming it; `Ok(None)` until all of it has
/// arrived.
pub fn decode_server_setup(buf: &mut BytesMut) -> Result<Option<ServerSetup>, DecodeError> {
    let Some((body, used)) = body_of(buf, SERVER_SETUP)? else {
        return Ok(None);
    };
    let mut r = body;
    let version = varint::decode(&mut r)?;
    let params = LegacyParams::decode(&mut r)?;
    coding::finish(r)?;
    buf.advance(used);
    Ok(Some(ServerSetup { version, params }))
}

/// Append a SERVER_SETUP.
pub fn encode_server_setup(setup: &ServerSetup, out: &mut BytesMut) -> Result<(), EncodeError> {
    let mut body = Vec::new();
    varint::encode(setup.version, &mut body)?;
    setup.params.encode(&mut body)?;
    frame(SERVER_SETUP, body, out)
}

/// SESSION_INFO (01/02, on the session stream): `Bitrate(i)`, 0 = unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionInfo {
    pub bitrate: Option<u64>,
}

impl Message for SessionInfo {
    fn encode_body(&self, w: &mut Vec<u8>, version: Version) -> Result<(), EncodeError> {
        if !version.has_session_stream() {
            return Err(EncodeError::Unsupported);
        }
        coding::write_varint(w, self.bitrate.unwrap_or(0), version)
    }

    fn decode_body(r: &mut &[u8], version: Version) -> Result<Self, DecodeError> {
        if !version.has_session_stream() {
            return Err(DecodeError::Unsupported);
        }
        let bitrate = coding::read_varint(r, version)?;
        Ok(SessionInfo {
            bitrate: (bitrate != 0).then_some(bitrate),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// moq-net's default client offer (lite-02, lite-01, draft-14) and the server's answer
    /// choosing lite-02.
    #[test]
    fn the_default_exchange() {
        let offer = ClientSetup {
            versions: vec![0xff0d_ad02, 0xff0d_ad01, 0xff00_000e],
            params: LegacyParams(vec![
                (key::MAX_REQUEST_ID, ParamValue::Varint(u32::MAX as u64)),
                (0x40B5A, ParamValue::Varint(1)),
                (0x40B5C, ParamValue::Varint(1)),
                (
                    key::IMPLEMENTATION,
                    ParamValue::Bytes(Bytes::from_static(b"moq-lite-rs")),
                ),
            ]),
        };
        let wire = hex(
            "20 003a 03 c0000000ff0dad02 c0000000ff0dad01 c0000000ff00000e 04
             02 c0000000ffffffff 80040b5a 01 80040b5c 01 07 0b 6d6f712d6c6974652d7273",
        );
        let mut out = BytesMut::new();
        encode_client_setup(&offer, &mut out).unwrap();
        assert_eq!(&out[..], &wire[..]);
        let mut buf = BytesMut::from(&wire[..]);
        assert_eq!(decode_client_setup(&mut buf).unwrap(), Some(offer.clone()));
        assert!(buf.is_empty());
        // The client's preference wins among what is served.
        assert_eq!(
            offer.choose(&[Version::Lite01, Version::Lite02, Version::Lite06]),
            Some(Version::Lite02)
        );
        assert_eq!(offer.choose(&[Version::Lite01]), Some(Version::Lite01));
        assert_eq!(offer.choose(&[Version::Lite06]), None);

        let answer = ServerSetup {
            version: 0xff0d_ad02,
            params: LegacyParams::default(),
        };
        let wire = hex("21 0009 c0000000ff0dad02 00");
        let mut out = BytesMut::new();
        encode_server_setup(&answer, &mut out).unwrap();
        assert_eq!(&out[..], &wire[..]);
        let mut buf = BytesMut::from(&wire[..]);
        assert_eq!(decode_server_setup(&mut buf).unwrap(), Some(answer));
    }

    #[test]
    fn partial_and_malformed_setups() {
        let wire = hex("21 0009 c0000000ff0dad02 00");
        for n in 0..wire.len() {
            let mut buf = BytesMut::from(&wire[..n]);
            assert_eq!(decode_server_setup(&mut buf), Ok(None), "prefix {n}");
            assert_eq!(buf.len(), n, "nothing consumed");
        }
        let mut buf = BytesMut::from(&hex("22 0000")[..]);
        assert_eq!(
            decode_server_setup(&mut buf),
            Err(DecodeError::UnknownType(0x22))
        );
        // Trailing bytes inside the body.
        let mut buf = BytesMut::from(&hex("21 000a c0000000ff0dad02 00 00")[..]);
        assert_eq!(decode_server_setup(&mut buf), Err(DecodeError::Long));
        // More parameters than allowed.
        let mut buf = BytesMut::from(&hex("21 0003 01 4041")[..]);
        assert_eq!(
            decode_server_setup(&mut buf),
            Err(DecodeError::TooManyParameters)
        );
        // A version count past the body.
        let mut buf = BytesMut::from(&hex("20 0002 3f 01")[..]);
        assert_eq!(decode_client_setup(&mut buf), Err(DecodeError::Truncated));
    }

    #[test]
    fn session_info() {
        let mut buf = BytesMut::new();
        crate::encode_message(&SessionInfo { bitrate: Some(1) }, Version::Lite02, &mut buf)
            .unwrap();
        assert_eq!(&buf[..], &[0x01, 0x01]);
        let mut buf = BytesMut::from(&[0x01, 0x00][..]);
        assert_eq!(
            crate::decode_message::<SessionInfo>(&mut buf, Version::Lite01),
            Ok(Some(SessionInfo { bitrate: None }))
        );
        assert!(crate::encode_message(&SessionInfo::default(), Version::Lite06, &mut buf).is_err());
    }
}
